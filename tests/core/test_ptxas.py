"""Golden tests of pytest_regbudget.core.ptxas over real `ptxas -v` outputs of CUDA 11.8 to 13.0.

The recordings (tests/data/ptxas, made by record.py there from kernels.cu) are ptxas's own
words; GOLDEN below holds the numbers read off those texts, so a pass means the parser reproduces
exactly what ptxas printed, for every kernel, arch, toolkit and variant (plain, -maxrregcount=32, -c).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from pytest_regbudget.core.elf import call_tree
from pytest_regbudget.core.errors import ParseError
from pytest_regbudget.core.metrics import KernelResources
from pytest_regbudget.core.ptx import ptx_outline, ptx_setmaxnreg
from pytest_regbudget.core.ptxas import (
    PtxDirectives,
    combine,
    parse_functions,
    parse_ptx_directives,
    parse_ptx_entries,
    parse_ptxas_output,
    parse_ptxas_version,
    with_callees,
)
from pytest_regbudget.core.ptxas import read as read_report

DATA = Path(__file__).parents[1] / "data" / "ptxas"
VERSIONS = {
    "11.8": "11.8.89",
    "12.0": "12.0.140",
    "12.4": "12.4.99",
    "12.9": "12.9.86",
    "13.0": "13.0.88",
}
HELPER = "_Z6helperPKfi"  # the __noinline__ __device__ function: never a kernel
SCALE_F4 = "_Z5scaleIfLi4EEvPT_S0_"  # scale<float, 4>
SCALE_D2 = "_Z5scaleIdLi2EEvPT_S0_"  # scale<double, 2>
KERNELS = {
    SCALE_F4,
    SCALE_D2,
    "calls_helper",
    "capped_regs",
    "bounded",
    "poly_eval",
    "named_barrier",
    "shared_reverse",
    "stack_frame",
    "pressure",
    "spill_heavy",
    "simple_add",
}


def recordings() -> list[str]:
    """Stems of every recorded `ptxas -v` output, e.g. "12.9_sm_90_cap32"."""
    return sorted(p.stem for p in DATA.glob("*.txt") if not p.stem.endswith(("_version", "_lowered")))


def ptx_files() -> list[str]:
    return sorted(p.stem for p in DATA.glob("*.ptx"))


def read(stem: str, suffix: str = ".txt") -> str:
    return (DATA / f"{stem}{suffix}").read_text()


def version_of(stem: str) -> tuple[int, int]:
    major, minor = stem.split("_", 1)[0].split(".")
    return int(major), int(minor)


def arch_of(stem: str) -> str:
    return "_".join(stem.split("_")[1:3])


class G(NamedTuple):
    """Expected numbers for one kernel, in the order they are read off the ptxas text."""

    registers: int
    stack_frame: int
    spill_stores: int
    spill_loads: int
    shared_mem: int
    barriers: int
    const_banks: tuple[tuple[int, int], ...]
    cumulative_stack: int | None


GOLDEN: dict[str, dict[str, G]] = {
    "11.8_sm_75": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(25, 64, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "11.8_sm_75_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(32, 320, 616, 620, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "11.8_sm_75_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "11.8_sm_80": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "11.8_sm_80_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(32, 304, 596, 600, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "11.8_sm_80_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "11.8_sm_90": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "11.8_sm_90_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(32, 344, 660, 664, 0, 0, (), None),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "11.8_sm_90_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.0_sm_75": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(25, 64, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.0_sm_75_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(32, 320, 616, 620, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.0_sm_75_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.0_sm_80": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.0_sm_80_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(32, 304, 596, 600, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.0_sm_80_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.0_sm_90": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.0_sm_90_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(32, 344, 660, 664, 0, 0, (), None),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.0_sm_90_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.4_sm_75": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(25, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), 8),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.4_sm_75_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(32, 320, 616, 620, 0, 0, ((0, 372),), 320),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), 8),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.4_sm_75_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.4_sm_80": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), 472),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.4_sm_80_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(32, 304, 596, 600, 0, 0, ((0, 372),), 304),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), 472),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.4_sm_80_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 472, 924, 924, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.4_sm_90": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), 496),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.4_sm_90_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(32, 344, 660, 664, 0, 0, (), 344),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), 496),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.4_sm_90_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 0, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 0, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 496, 944, 944, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_75": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(25, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), 8),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.9_sm_75_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(32, 328, 632, 636, 0, 0, ((0, 372),), 328),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), 8),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.9_sm_75_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.9_sm_80": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 496, 972, 972, 0, 0, ((0, 372),), 496),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.9_sm_80_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(32, 312, 612, 616, 0, 0, ((0, 372),), 312),
        "spill_heavy": G(32, 496, 972, 972, 0, 0, ((0, 372),), 496),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.9_sm_80_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 496, 972, 972, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "12.9_sm_90": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 520, 992, 992, 0, 0, (), 520),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_90_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(32, 344, 668, 672, 0, 0, (), 344),
        "spill_heavy": G(32, 520, 992, 992, 0, 0, (), 520),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_90_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 520, 992, 992, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_100": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(48, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 512, 976, 976, 0, 0, (), 512),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_100_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(32, 328, 620, 624, 0, 0, (), 328),
        "spill_heavy": G(32, 512, 976, 976, 0, 0, (), 512),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_100_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(48, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 512, 976, 976, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_120": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(27, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(22, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(48, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(64, 0, 0, 0, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_120_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(27, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(22, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(32, 328, 620, 624, 0, 0, (), 328),
        "spill_heavy": G(64, 0, 0, 0, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "12.9_sm_120_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(22, 256, 0, 0, 0, 0, (), None),
        "pressure": G(48, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(64, 0, 0, 0, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_75": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(25, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), 8),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "13.0_sm_75_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(32, 328, 632, 636, 0, 0, ((0, 372),), 328),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), 8),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "13.0_sm_75_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(10, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(72, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(64, 8, 4, 4, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "13.0_sm_80": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 496, 972, 972, 0, 0, ((0, 372),), 496),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "13.0_sm_80_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, ((0, 376),), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), 256),
        "pressure": G(32, 312, 612, 616, 0, 0, ((0, 372),), 312),
        "spill_heavy": G(32, 496, 972, 972, 0, 0, ((0, 372),), 496),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "13.0_sm_80_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, ((0, 364),), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, ((0, 368),), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, ((0, 376),), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "bounded": G(8, 0, 0, 0, 0, 0, ((0, 360),), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, ((0, 372),), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, ((0, 360),), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, ((0, 360),), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, ((0, 376),), None),
        "pressure": G(64, 0, 0, 0, 0, 0, ((0, 372),), None),
        "spill_heavy": G(32, 496, 972, 972, 0, 0, ((0, 372),), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, ((0, 380),), None),
    },
    "13.0_sm_90": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 520, 992, 992, 0, 0, (), 520),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_90_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(32, 344, 668, 672, 0, 0, (), 344),
        "spill_heavy": G(32, 520, 992, 992, 0, 0, (), 520),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_90_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(10, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(56, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 520, 992, 992, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_100": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(48, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 512, 976, 976, 0, 0, (), 512),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_100_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(14, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(32, 328, 620, 624, 0, 0, (), 328),
        "spill_heavy": G(32, 512, 976, 976, 0, 0, (), 512),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_100_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(20, 256, 0, 0, 0, 0, (), None),
        "pressure": G(48, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(32, 512, 976, 976, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_120": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(25, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(18, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(48, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(64, 0, 0, 0, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_120_cap32": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 64, 0, 0, 0, 0, (), 64),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(18, 256, 0, 0, 0, 0, (), 256),
        "pressure": G(32, 328, 620, 624, 0, 0, (), 328),
        "spill_heavy": G(64, 0, 0, 0, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
    "13.0_sm_120_rdc": {
        "_Z5scaleIfLi4EEvPT_S0_": G(14, 0, 0, 0, 0, 0, (), None),
        "_Z5scaleIdLi2EEvPT_S0_": G(12, 0, 0, 0, 0, 0, (), None),
        "calls_helper": G(24, 0, 0, 0, 0, 0, (), None),
        "capped_regs": G(8, 0, 0, 0, 0, 0, (), None),
        "bounded": G(8, 0, 0, 0, 0, 0, (), None),
        "poly_eval": G(12, 0, 0, 0, 0, 0, (), None),
        "named_barrier": G(10, 0, 0, 0, 512, 2, (), None),
        "shared_reverse": G(10, 0, 0, 0, 1024, 1, (), None),
        "stack_frame": G(18, 256, 0, 0, 0, 0, (), None),
        "pressure": G(48, 0, 0, 0, 0, 0, (), None),
        "spill_heavy": G(64, 0, 0, 0, 0, 0, (), None),
        "simple_add": G(12, 0, 0, 0, 0, 0, (), None),
    },
}


def as_golden(r: KernelResources) -> G:
    return G(
        r.registers,
        r.stack_frame,
        r.spill_stores,
        r.spill_loads,
        r.shared_mem,
        r.barriers,
        r.const_banks,
        r.cumulative_stack,
    )


# --- golden numbers over every recording --------------------------------------------------------


def test_golden_table_covers_every_recording() -> None:
    assert sorted(GOLDEN) == recordings()
    assert len(recordings()) == 57  # 19 (toolkit, arch) pairs x plain / cap32 / rdc


@pytest.mark.parametrize("stem", recordings())
def test_golden_numbers(stem: str) -> None:
    parsed = parse_ptxas_output(read(stem))
    assert {name: as_golden(r) for name, r in parsed.items()} == GOLDEN[stem]
    assert all(r.arch == arch_of(stem) for r in parsed.values())
    assert all(r.const_mem == sum(size for _, size in r.const_banks) for r in parsed.values())


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_every_version_parses_every_kernel(version: str) -> None:
    stems = [s for s in recordings() if s.startswith(f"{version}_")]
    archs = {arch_of(s) for s in stems}
    expected = {"sm_75", "sm_80", "sm_90"} | (
        {"sm_100", "sm_120"} if version_of(version) >= (12, 9) else set()
    )
    assert archs == expected
    for stem in stems:
        assert set(parse_ptxas_output(read(stem))) == KERNELS, stem


def test_keys_follow_ptxas_order() -> None:
    text = read("12.9_sm_90")
    compiled = [line.split("'")[1] for line in text.splitlines() if "Compiling entry function" in line]
    assert list(parse_ptxas_output(text)) == compiled


# --- what the formats mean ----------------------------------------------------------------------


@pytest.mark.parametrize("stem", recordings())
def test_device_function_is_not_a_kernel(stem: str) -> None:
    text = read(stem)
    assert f"Function properties for {HELPER}" in text
    assert HELPER not in parse_ptxas_output(text)


def test_rdc_prints_device_function_first_without_confusing_the_entries() -> None:
    text = read("12.9_sm_90_rdc")
    lines = text.splitlines()
    helper_at = next(i for i, line in enumerate(lines) if HELPER in line)
    first_entry_at = next(i for i, line in enumerate(lines) if "Compiling entry function" in line)
    assert helper_at < first_entry_at
    # The helper's 72-byte frame is its own; in -c mode the caller's is 0, and nothing leaks across.
    assert "72 bytes stack frame" in lines[helper_at + 1]
    assert parse_ptxas_output(text)["calls_helper"].stack_frame == 0
    assert parse_ptxas_output(read("12.9_sm_90"))["calls_helper"].stack_frame == 64


@pytest.mark.parametrize("stem", [s for s in recordings() if s.endswith("_cap32")])
def test_cap32_makes_pressure_spill(stem: str) -> None:
    capped = parse_ptxas_output(read(stem))["pressure"]
    plain = parse_ptxas_output(read(stem.removesuffix("_cap32")))["pressure"]
    assert plain.spill_stores == plain.spill_loads == 0
    assert plain.registers > 32
    assert capped.registers <= 32
    assert capped.spill_stores > 0
    assert capped.spill_loads > 0
    assert capped.stack_frame > 0


@pytest.mark.parametrize("stem", [s for s in recordings() if s.endswith("_cap32")])
def test_cap32_file_info_lines_are_not_resources(stem: str) -> None:
    # 12.4+ prints "Overriding maximum register limit 256 for 'simple_add' ..." before the entries:
    # a quoted kernel name in a line that is not a resource line.
    parsed = parse_ptxas_output(read(stem))
    assert set(parsed) == KERNELS
    assert parsed["simple_add"].ptxas_line.startswith("Used ")


def test_launch_bounds_spill_without_any_cap() -> None:
    # 65536 / (1024 * 2) = 32 registers: ptxas spills spill_heavy in the plain run...
    for stem in recordings():
        text = read(stem)
        r = parse_ptxas_output(text)["spill_heavy"]
        if arch_of(stem) in ("sm_75", "sm_120"):
            # ...except where an SM holds fewer than 2048 threads (sm_75: 1024, sm_120: 1536):
            # there ptxas warns, ignores .minnctapersm 2 and only keeps 1024 threads' worth.
            assert "Value of threads per SM for entry spill_heavy is out of range" in text
            assert r.registers == 64
        else:
            assert "out of range" not in text
            assert r.registers == 32
            assert r.spill_stores > 0


def test_template_names_are_the_lowered_names() -> None:
    for version in VERSIONS:
        lowered = dict(line.split("\t") for line in read(f"{version}_lowered").splitlines())
        assert lowered == {"scale<float, 4>": SCALE_F4, "scale<double, 2>": SCALE_D2}
        parsed = parse_ptxas_output(read(f"{version}_sm_80"))
        assert parsed[SCALE_F4].name == SCALE_F4
        assert parsed[SCALE_D2].registers == 10


def test_ptxas_line_and_properties_line_quote_ptxas() -> None:
    r = parse_ptxas_output(read("12.9_sm_90"))["spill_heavy"]
    assert r.ptxas_line == "Used 32 registers, used 0 barriers, 520 bytes cumulative stack size"
    assert r.properties_line == "520 bytes stack frame, 992 bytes spill stores, 992 bytes spill loads"
    assert parse_ptxas_output(read("11.8_sm_75"))["named_barrier"].ptxas_line == (
        "Used 10 registers, 512 bytes smem, 360 bytes cmem[0]"
    )


def test_barriers_printed_from_12_9() -> None:
    for stem in recordings():
        parsed = parse_ptxas_output(read(stem))
        prints_barriers = "used 0 barriers" in read(stem)
        assert prints_barriers == (version_of(stem) >= (12, 9)), stem
        expected = (2, 1) if prints_barriers else (0, 0)
        assert (parsed["named_barrier"].barriers, parsed["shared_reverse"].barriers) == expected


def test_cmem_is_per_kernel_only_before_sm_90() -> None:
    for stem in recordings():
        banks = parse_ptxas_output(read(stem))["poly_eval"].const_banks
        if arch_of(stem) in ("sm_75", "sm_80"):
            assert [bank for bank, _ in banks] == [0], stem
        else:
            assert banks == (), stem


# --- PTX directives and entries -----------------------------------------------------------------


@pytest.mark.parametrize("stem", ptx_files())
def test_ptx_entries_match_ptxas_kernels(stem: str) -> None:
    entries = parse_ptx_entries(read(stem, ".ptx"))
    assert len(entries) == len(set(entries))
    assert set(entries) == set(parse_ptxas_output(read(stem))) == KERNELS
    assert HELPER not in entries  # a .func, not an .entry


@pytest.mark.parametrize("stem", ptx_files())
def test_ptx_directives_golden(stem: str) -> None:
    directives = parse_ptx_directives(read(stem, ".ptx"))
    # __maxnreg__ exists from CUDA 12.4; kernels.cu compiles capped_regs without it before that.
    maxnreg = 40 if version_of(stem) >= (12, 4) else None
    expected = {name: PtxDirectives() for name in KERNELS}
    expected["spill_heavy"] = PtxDirectives(maxntid=(1024, 1, 1), minnctapersm=2)
    expected["bounded"] = PtxDirectives(maxntid=(256, 1, 1), minnctapersm=2)
    expected["capped_regs"] = PtxDirectives(maxnreg=maxnreg)
    assert directives == expected


@pytest.mark.parametrize("stem", ptx_files())
def test_combine_attaches_directives(stem: str) -> None:
    kernels = combine(parse_ptxas_output(read(stem)), parse_ptx_directives(read(stem, ".ptx")))
    bounded = kernels["bounded"]
    assert (bounded.maxntid, bounded.max_threads, bounded.min_blocks_per_sm) == ((256, 1, 1), 256, 2)
    assert bounded.reqntid is None
    assert kernels["spill_heavy"].max_threads == 1024
    assert kernels["capped_regs"].max_regs == (40 if version_of(stem) >= (12, 4) else None)
    simple = kernels["simple_add"]
    assert (simple.max_threads, simple.maxntid, simple.min_blocks_per_sm, simple.max_regs) == (None,) * 4
    # The ptxas numbers pass through untouched.
    assert as_golden(kernels["spill_heavy"]) == GOLDEN[stem]["spill_heavy"]


@pytest.mark.parametrize("stem", ptx_files())
def test_read_is_parse_and_combine_in_one_step(stem: str) -> None:
    # read() is what a warm run uses: every field of every kernel as combine's, on every recorded toolkit.
    log, ptx = read(stem), read(stem, ".ptx")
    combined = combine(parse_ptxas_output(log), parse_ptx_directives(ptx))
    assert read_report(log, ptx) == combined
    assert read_report(log, ptx_outline(ptx)) == combined


def test_read_reports_a_truncated_log_before_a_foreign_ptx() -> None:
    # As parse then combine: the log's own defect is the one named.
    log = read("12.9_sm_90")
    truncated = log[: log.rindex("Used")]
    directives_of_another = ".entry other()\n{\n}\n"
    with pytest.raises(ParseError, match="no 'Used N registers' line"):
        read_report(truncated, directives_of_another)
    with pytest.raises(ValueError, match="different modules"):
        read_report(log, directives_of_another)


def test_combine_rejects_ptx_from_another_module() -> None:
    resources = parse_ptxas_output(read("12.9_sm_90"))
    directives = parse_ptx_directives(read("12.9_sm_90", ".ptx"))
    del directives["pressure"]
    with pytest.raises(ValueError, match="pressure"):
        combine(resources, directives)


def test_combine_ignores_ptx_entries_ptxas_did_not_report() -> None:
    resources = parse_ptxas_output(read("12.9_sm_90"))
    directives = {**parse_ptx_directives(read("12.9_sm_90", ".ptx")), "extra": PtxDirectives(maxnreg=8)}
    assert set(combine(resources, directives)) == KERNELS


def test_ptx_directives_inline_variants() -> None:
    ptx = """
.version 8.0
.target sm_90
// .entry commented_out(    <- a comment, not an entry
/* .visible .entry also_commented() { } */
.entry no_params()
.reqntid 128, 2
.maxnreg 0x20
{
	ret;
}
.visible .entry one_dim(
	.param .u64 one_dim_param_0
)
.maxntid 64
.minnctapersm 010
{
	ret;
}
.func helper()
{
	ret;
}
"""
    assert parse_ptx_entries(ptx) == ["no_params", "one_dim"]
    directives = parse_ptx_directives(ptx)
    assert directives["no_params"] == PtxDirectives(reqntid=(128, 2, 1), maxnreg=32)
    assert directives["no_params"].max_threads == 256
    assert directives["one_dim"] == PtxDirectives(maxntid=(64, 1, 1), minnctapersm=8)
    assert directives["one_dim"].max_threads == 64
    assert PtxDirectives().max_threads is None


def test_empty_inputs() -> None:
    assert parse_ptxas_output("") == {}
    assert parse_ptx_entries("") == []
    assert parse_ptx_directives("// no entries\n.version 8.0\n") == {}


# --- versions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "full"), sorted(VERSIONS.items()))
def test_recorded_versions(version: str, full: str) -> None:
    assert parse_ptxas_version(read(f"{version}_version")) == full


def test_version_falls_back_to_release_and_rejects_garbage() -> None:
    assert parse_ptxas_version("Cuda compilation tools, release 12.9\r\n") == "12.9"
    with pytest.raises(ParseError, match="ptxas: command not found"):
        parse_ptxas_version("\nptxas: command not found\n")


# --- robustness ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", ["11.8_sm_75", "12.4_sm_90_cap32", "13.0_sm_120_rdc"])
def test_crlf_parses_the_same(stem: str) -> None:
    text = read(stem)
    crlf = text.replace("\n", "\r\n")
    assert "\r\n" in crlf
    assert parse_ptxas_output(crlf) == parse_ptxas_output(text)
    ptx = read(f"{stem.split('_')[0]}_{arch_of(stem)}", ".ptx")
    assert parse_ptx_directives(ptx.replace("\n", "\r\n")) == parse_ptx_directives(ptx)


def test_truncated_after_compiling_entry_raises_quoting_the_line() -> None:
    lines = read("12.9_sm_90").splitlines()
    cut = next(i for i, line in enumerate(lines) if "Compiling entry function 'spill_heavy'" in line)
    with pytest.raises(ParseError, match="spill_heavy") as info:
        parse_ptxas_output("\n".join(lines[: cut + 1]))
    assert "ptxas info    : Compiling entry function 'spill_heavy' for 'sm_90'" in str(info.value)
    assert info.value.lineno == cut + 1
    assert "no 'Used N registers' line" in str(info.value)


def test_truncated_after_function_properties_raises_quoting_the_line() -> None:
    lines = read("11.8_sm_80").splitlines()
    cut = next(i for i, line in enumerate(lines) if line.endswith("Function properties for stack_frame"))
    with pytest.raises(ParseError, match="Function properties for stack_frame") as info:
        parse_ptxas_output("\n".join(lines[: cut + 1]))
    assert info.value.line is not None
    assert info.value.line.endswith("Function properties for stack_frame")


def test_entry_without_function_properties_raises() -> None:
    text = "ptxas info    : Compiling entry function 'k' for 'sm_80'\nptxas info    : Used 8 registers\n"
    with pytest.raises(ParseError, match="no 'Function properties'"):
        parse_ptxas_output(text)


def test_ptxas_error_raises() -> None:
    text = (
        "ptxas info    : Compiling entry function 'big' for 'sm_80'\n"
        "ptxas error   : Entry function 'big' uses too much shared data (0x10000 bytes, 0xc000 max)\n"
    )
    with pytest.raises(ParseError, match="uses too much shared data"):
        parse_ptxas_output(text)
    with pytest.raises(ParseError, match="Unknown symbol"):
        parse_ptxas_output("ptxas kernels.ptx, line 12; error   : Unknown symbol 'x'\n")


def test_two_archs_in_one_text_is_ambiguous() -> None:
    with pytest.raises(ParseError, match="compiled twice"):
        parse_ptxas_output(read("12.9_sm_80") + read("12.9_sm_90"))


def test_second_used_line_for_one_entry_raises() -> None:
    text = (
        "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
        "ptxas info    : Used 8 registers\n"
        "ptxas info    : Used 9 registers\n"
    )
    with pytest.raises(ParseError, match="second resource line"):
        parse_ptxas_output(text)


SNIPPET = (
    (
        # From ptxas -warn-spills: it quotes a kernel and spill sizes, yet is no resource line.
        "ptxas warning : Registers are spilled to local memory in function 'k', "
        "8 bytes spill stores, 8 bytes spill loads\n"
    )
    + """\
ptxas info    : 0 bytes gmem, 24 bytes cmem[3]
ptxas info    : Compiling entry function 'k' for 'sm_86'
ptxas info    : Function properties for k
    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used {fields}
ptxas info    : Compile time = 1.000 ms
"""
)


def test_inline_multiple_cmem_banks_are_summed() -> None:
    r = parse_ptxas_output(SNIPPET.format(fields="32 registers, 344 bytes cmem[0], 4 bytes cmem[2]"))["k"]
    assert r.const_banks == ((0, 344), (2, 4))
    assert r.const_mem == 348
    assert (r.registers, r.stack_frame, r.spill_stores, r.spill_loads, r.shared_mem) == (32, 16, 8, 8, 0)
    assert r.barriers == 0
    assert r.cumulative_stack is None
    assert r.arch == "sm_86"


def test_inline_field_order_does_not_matter() -> None:
    r = parse_ptxas_output(SNIPPET.format(fields="1 registers, 16 bytes smem, used 3 barriers"))["k"]
    assert (r.registers, r.shared_mem, r.barriers) == (1, 16, 3)


def test_inline_unknown_field_is_skipped_but_unreadable_known_field_raises() -> None:
    assert parse_ptxas_output(SNIPPET.format(fields="8 registers, 7 bytes tmem"))["k"].registers == 8
    with pytest.raises(ParseError, match=r"48\+16 bytes smem") as info:
        parse_ptxas_output(SNIPPET.format(fields="8 registers, 48+16 bytes smem"))
    assert info.value.lineno == 6


def test_inline_without_ptxas_prefix() -> None:
    text = (
        "Compiling entry function 'k' for 'sm_90a'\n"
        "Function properties for k\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "Used 40 registers, used 1 barriers, 4096 bytes smem\n"
    )
    r = parse_ptxas_output(text)["k"]
    assert (r.arch, r.registers, r.barriers, r.shared_mem) == ("sm_90a", 40, 1, 4096)


def test_parse_error_is_a_value_error() -> None:
    assert issubclass(ParseError, ValueError)
    err = ParseError("bad", "  Used x registers  ", 3)
    assert str(err) == "bad\n  line 3: 'Used x registers'"


@pytest.mark.parametrize(
    "ptx_file", sorted(Path(__file__).parent.parent.rglob("*.ptx")), ids=lambda p: p.name
)
def test_ptx_outline_reads_as_the_whole_module(ptx_file: Path) -> None:
    """A cache entry keeps the outline instead of the PTX: the parsers must read the same from both, on
    every recorded module (several toolkits, NVRTC, nvcc, Triton; comments, directives, templates)."""
    ptx = ptx_file.read_text(errors="replace")
    outline = ptx_outline(ptx)
    assert parse_ptx_entries(outline) == parse_ptx_entries(ptx)
    assert parse_ptx_directives(outline) == parse_ptx_directives(ptx)
    assert ptx_setmaxnreg(outline) == ptx_setmaxnreg(ptx)
    assert len(outline) <= len(ptx)


def test_each_entry_gets_its_own_body_in_one_walk() -> None:
    # Nested blocks, a declaration without a body, and an entry whose name prefixes another's: each
    # entry's setmaxnreg is read from its own body only.
    ptx = (
        ".visible .entry k_decl(.param .u32 p);\n"
        ".visible .entry k(.param .u32 k_param_0)\n.maxntid 256, 1, 1\n{\n"
        "  { setmaxnreg.dec.sync.aligned.u32 40; }\n  setmaxnreg.inc.sync.aligned.u32 232;\n}\n"
        ".visible .entry k2(.param .u32 k2_param_0)\n{\n  setmaxnreg.inc.sync.aligned.u32 240;\n"
        "  // setmaxnreg.inc.sync.aligned.u32 8; in a comment\n}\n"
    )
    assert dict(ptx_setmaxnreg(ptx)) == {
        "k_decl": (),
        "k": (("dec", 40), ("inc", 232)),
        "k2": (("inc", 240),),
    }
    assert dict(ptx_setmaxnreg(ptx_outline(ptx))) == dict(ptx_setmaxnreg(ptx))


# Triton 3.9's bundled ptxas for sm_90+ names itself "ptxas-blackwell" (recorded with
# knobs.nvidia.dump_ptxas_log = True, Triton 3.9.0, its ptxas 13.4.59, a vector add for sm_90a).
TRITON_BLACKWELL_LOG = """\
ptxas-blackwell info    : 0 bytes gmem
ptxas-blackwell info    : Compiling entry function 'add' for 'sm_90a'
ptxas-blackwell info    : Function properties for add
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas-blackwell info    : Used 30 registers, used 0 barriers
ptxas-blackwell info    : Compile time = 14.542 ms
"""


def test_tritons_ptxas_blackwell_log_is_read() -> None:
    (res,) = parse_ptxas_output(TRITON_BLACKWELL_LOG).values()
    assert (res.name, res.arch, res.registers, res.barriers) == ("add", "sm_90a", 30, 0)
    assert (res.stack_frame, res.spill_stores, res.spill_loads) == (0, 0, 0)
    with pytest.raises(ParseError, match="error"):
        parse_ptxas_output("ptxas-blackwell error   : Unknown symbol 'x'\n")


# --- the functions a kernel calls (tests/data/callees: tests/kernels/callees.cu, by record_callees.py) -----

CALLEES = Path(__file__).parents[1] / "data" / "callees"
WHOLE = "nvrtc_12.9.86_sm_90"  # whole-program: each kernel's copies of its callees follow its lines
RDC = "nvcc_rdc_13.5.37_sm_90"  # relocatable: each function once, before or between the entries


def callee_log(stem: str) -> str:
    return (CALLEES / f"{stem}.txt").read_text()


def counted(stem: str, elf: bool = True) -> dict[str, KernelResources]:
    """Every kernel of a recording with its callees' spills counted in, by the call tree of its cubin (or,
    with `elf` False, by the blocks that follow each kernel's)."""
    text = callee_log(stem)
    cubin = (CALLEES / f"{stem}.cubin").read_bytes()
    functions = parse_functions(text)
    return {
        name: with_callees(res, functions, call_tree(cubin, name) if elf else None)
        for name, res in parse_ptxas_output(text).items()
    }


def spill_figures(res: KernelResources) -> tuple[int, int, int, int, tuple[str, ...]]:
    return (
        res.spill_stores,
        res.spill_loads,
        res.spill_stores_callees,
        res.spill_loads_callees,
        tuple(c.name for c in res.spilling_callees),
    )


def test_the_functions_blocks_are_kept_with_the_entry_they_follow() -> None:
    functions = parse_functions(callee_log(WHOLE))
    # heavy is printed three times, a copy for each kernel that calls it, each with its own figures.
    heavy = [(f.after, f.spill_stores, f.spill_loads) for f in functions if f.name == "_Z5heavyPKfiii"]
    assert heavy == [("second", 256, 288), ("first", 256, 288), ("only_callee", 68, 80)]
    assert [f.name for f in functions if f.after == "only_callee"] == [
        "_Z10heavy_intoPKfPfii",
        "_Z5heavyPKfiii",
    ]
    # The entries' own blocks are not functions, and an entry's figures stay its own.
    assert not {f.name for f in functions} & set(parse_ptxas_output(callee_log(WHOLE)))
    assert parse_ptxas_output(callee_log(WHOLE))["only_callee"].spills == (0, 0)


@pytest.mark.parametrize("stem", recordings())
def test_every_recording_keeps_its_helper(stem: str) -> None:
    (helper,) = [f for f in parse_functions(read(stem)) if f.name == HELPER]
    # -c prints a function before the entries; a whole-program build after the kernel that calls it.
    assert helper.after == (None if stem.endswith("_rdc") else "calls_helper")


def test_a_kernel_counts_the_spills_of_the_copies_it_calls() -> None:
    kernels = counted(WHOLE)
    # only_callee spills nothing itself (0/0): heavy_into's 4/4 and heavy's 68/80 are its callees'.
    assert spill_figures(kernels["only_callee"]) == (
        72,
        84,
        72,
        84,
        ("_Z10heavy_intoPKfPfii", "_Z5heavyPKfiii"),
    )
    # first and second each count their own copy of heavy, and second heavy once though it calls it twice.
    assert spill_figures(kernels["first"]) == (20 + 256, 12 + 288, 256, 288, ("_Z5heavyPKfiii",))
    second = spill_figures(kernels["second"])
    assert second == (12 + 256 + 8, 12 + 288 + 4, 264, 292, ("_Z5heavyPKfiii", "_Z6middlePKfiii"))
    assert spill_figures(kernels["recursive"]) == (24, 24, 24, 24, ("_Z3oddi", "_Z4eveni"))
    # A callee that does not spill changes nothing.
    assert kernels["calls_light"] == parse_ptxas_output(callee_log(WHOLE))["calls_light"]
    # The stack frame stays the kernel's: its copies print 0, and its own frame holds them.
    assert kernels["only_callee"].stack == 64


def test_without_the_elf_a_whole_program_kernel_counts_the_blocks_after_it() -> None:
    assert counted(WHOLE, elf=False) == counted(WHOLE)


def test_a_relocatable_kernel_counts_what_its_call_graph_reaches_not_what_follows_it() -> None:
    kernels = counted(RDC)
    # Each function is printed once; middle's and heavy_into's originals follow only_callee's lines, but it
    # calls heavy_into's clone "$6" (20/20), which calls heavy (352/396).
    assert spill_figures(kernels["only_callee"]) == (
        372,
        416,
        372,
        416,
        ("_Z10heavy_intoPKfPfii$6", "_Z5heavyPKfiii"),
    )
    assert spill_figures(kernels["first"]) == (352, 396, 352, 396, ("_Z5heavyPKfiii",))
    assert spill_figures(kernels["second"])[:2] == (24 + 352, 24 + 396)
    by_position = counted(RDC, elf=False)["only_callee"]
    assert [c.name for c in by_position.spilling_callees] == ["_Z6middlePKfiii", "_Z10heavy_intoPKfPfii"]
