"""cuda_occupancy.h of the CUDA 13 runtime wheel as an oracle: tests/core/occupancy_oracle.c compiled against
the header the arch table follows (core/arch.py's docstring: CUDA 13.5, nvidia/cu13/include), and asked for
many launches in one process. Shared by the occupancy unit tests and the integration tests that compare a
run's JSON with the header.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_regbudget.core.arch import ArchLimits

HARNESS = Path(__file__).parent.parent / "core" / "occupancy_oracle.c"
# CUDART_VERSION of the header the table follows; an oracle of another release would check the wrong table.
HEADER_RELEASE = 13050
FUNC_SHMEM_LIMIT_OPTIN = 1
SHAREDMEM_CARVEOUT_DEFAULT = -1


def header_include() -> Path:
    """nvidia/cu13/include of the CUDA 13 runtime wheel, holding cuda_occupancy.h of HEADER_RELEASE."""
    spec = importlib.util.find_spec("nvidia")
    roots = [] if spec is None else list(spec.submodule_search_locations or [])
    for root in roots:
        include = Path(root) / "cu13" / "include"
        if (include / "cuda_occupancy.h").is_file():
            text = (include / "cuda_runtime_api.h").read_text(errors="replace")
            version = re.search(r"#define CUDART_VERSION\s+(\d+)", text)
            found = int(version[1]) if version else None
            if found != HEADER_RELEASE:
                pytest.fail(
                    f"{include}/cuda_occupancy.h is of CUDART_VERSION {found}, the arch table follows "
                    f"{HEADER_RELEASE}: install the test extras (pip install -e .[test]) or update the table"
                )
            return include
    pytest.fail(
        "cuda_occupancy.h of CUDA 13 not found (no nvidia/cu13/include/cuda_occupancy.h under "
        f"{roots or 'nothing: the nvidia namespace package is not importable'}); install the test extras, "
        "which bring the nvidia-cuda-runtime 13.5 wheel (pip install -e .[test])"
    )


def build_oracle(where: Path) -> Path:
    """The oracle program, compiled into `where`; a skip where there is no C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler (cc or gcc) on PATH to build the cuda_occupancy.h oracle")
    exe = where / "occupancy_oracle"
    command = [
        compiler,
        "-std=c99",
        "-O2",
        "-Wall",
        "-I",
        str(header_include()),
        str(HARNESS),
        "-o",
        str(exe),
    ]
    built = subprocess.run(command, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        pytest.fail(f"{' '.join(command)} failed:\n{built.stdout}{built.stderr}")
    return exe


def device_line(limits: ArchLimits) -> str:
    """The device as the oracle reads it (cudaOccDeviceProp), from the arch table's row."""
    fields = (
        limits.major,
        limits.minor,
        limits.max_threads_per_block,
        limits.max_threads_per_sm,
        limits.max_regs_per_block,
        limits.regs_per_sm,
        limits.warp_size,
        limits.smem_per_block,
        limits.smem_per_sm,
        limits.smem_per_block_optin,
        limits.reserved_smem_per_block,
    )
    return " ".join(map(str, fields))


def launch_line(
    limits: ArchLimits,
    *,
    registers: int,
    block_size: int,
    shared_mem: int = 0,
    dynamic_shared_mem: int = 0,
    max_threads: int | None = None,
    barriers: int = 1,
    carveout: int | None = None,
) -> str:
    """One launch as occupancy.py models it: opted in to exactly the dynamic size it uses."""
    fields = (
        registers,
        limits.max_threads_per_block if max_threads is None else max_threads,
        shared_mem,
        FUNC_SHMEM_LIMIT_OPTIN,
        dynamic_shared_mem,
        barriers,
        SHAREDMEM_CARVEOUT_DEFAULT if carveout is None else carveout,
        block_size,
        dynamic_shared_mem,
    )
    return " ".join(map(str, fields))


def ask(oracle: Path, limits: ArchLimits, launches: Sequence[str]) -> list[list[int]]:
    """The header's answer per launch line: status, active blocks, limiting factors, the per-limit counts
    (registers, shared memory, warps, blocks, barriers), registers and shared memory allocated per block."""
    stdin = "\n".join([device_line(limits), *launches]) + "\n"
    ran = subprocess.run([str(oracle)], input=stdin, capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    rows = [[int(f) for f in line.split()] for line in ran.stdout.splitlines()]
    assert len(rows) == len(launches)
    return rows
