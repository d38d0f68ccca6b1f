"""Every build is made with -lineinfo (CompileOptions.with_line_info), so that one build serves a file's
listing, its kernels' numbers and their SASS. That is sound only if -lineinfo changes no number ptxas
reports: checked here on every kernel of the repository, for sm_80 and sm_90, by NVRTC and by nvcc."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_regbudget.cache.store import CompileCache
from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Nvcc, Toolkit, discover
from pytest_regbudget.tools.units import Unit

REPO = Path(__file__).resolve().parents[2]
# Every CUDA file of the repository but the one that does not compile on purpose, and the PyTorch
# extension's, which build only with their build.ninja's flags (an include dir, nvcc for host code):
# test_torch_extension.py builds them so.
SOURCES = sorted(
    p.relative_to(REPO)
    for folder in ("tests", "example_project")
    for p in (REPO / folder).rglob("*.cu")
    if p.name != "broken.cu" and "torch_ext" not in p.parts
)
OPTIONS = CompileOptions.make(defines={"NACC": 8})  # hungry.cu's and poly.cu's unroll; others ignore it
# What some files need: host code (nvcc only), template instances named for NVRTC (nvcc builds only what host
# code launches), an arch with setmaxnreg.
NVCC_ONLY = {
    "app.cu",
    "templates.cu",
    "wheel_headers.cu",
    "wgmma_assert.cu",
    "ws_gemm.cu",
}  # <cassert>: nvcc's
NVRTC_ONLY = {"softmax.cu"}  # its templates are launched from Python, never from host code
NAMES = {"softmax.cu": ("softmax<128>", "softmax<1024>")}
ARCHS = {"roles.cu": ("sm_90a",), "wgmma_assert.cu": ("sm_90a",), "ws_gemm.cu": ("sm_90a",)}
CASES = [
    pytest.param(compiler, relative, id=f"{compiler}-{relative}")
    for relative in SOURCES
    for compiler in ("nvrtc", "nvcc")
    if relative.name not in (NVCC_ONLY if compiler == "nvrtc" else NVRTC_ONLY)
]


@pytest.fixture(scope="module")
def toolkit() -> Toolkit:
    return discover()


@pytest.fixture(scope="module")
def nvcc(toolkit: Toolkit) -> Nvcc:
    try:
        return find_nvcc(toolkit)
    except CompileError as exc:
        pytest.skip(f"no nvcc: {exc}")


def numbers(unit: Unit, toolkit: Toolkit) -> dict[str, tuple[object, ...]]:
    log = CompileCache(None).unit(unit, toolkit).ptxas_log
    return {
        entry: (r.registers, r.spill_stores, r.spill_loads, r.stack_frame, r.shared_mem, r.const_mem)
        for entry, r in parse_ptxas_output(log).items()
    }


@pytest.mark.slow  # 4 builds of every file
@pytest.mark.parametrize(("compiler", "relative"), CASES)
def test_line_info_changes_no_number(
    relative: Path, compiler: str, toolkit: Toolkit, request: pytest.FixtureRequest
) -> None:
    by = request.getfixturevalue("nvcc") if compiler == "nvcc" else None
    names = NAMES.get(relative.name, ()) if by is None else ()
    for arch in ARCHS.get(relative.name, ("sm_80", "sm_90")):
        plain = numbers(Unit(REPO / relative, arch, OPTIONS, by, names), toolkit)
        lined = numbers(Unit(REPO / relative, arch, OPTIONS.with_line_info(), by, names), toolkit)
        assert plain, f"{relative} [{arch}]: no kernel built"
        assert lined == plain, f"{relative} [{arch}]"
