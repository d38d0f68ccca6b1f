"""The include scanner finds the project files a build reads exactly as the compiler does: for every .cu of
this repository (tests/ and example_project/) and every include form of the stale-hit cases, the project
files the scanner reaches equal those `nvcc -M` lists. nvcc also lists the toolkit's and the host
compiler's headers, which are keyed by the toolkit and the compiler (cache/keys.py) and left out here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import test_cache_stale as stale
from helpers.projects import write_tree

from pytest_regbudget.cache.fingerprint import StatCache, inside
from pytest_regbudget.cache.keys import _reach
from pytest_regbudget.cache.nvcc_deps import parse_depfile
from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Nvcc, discover

REPO = Path(__file__).resolve().parents[2]
# The PyTorch extension's files need their build.ninja's include dir: test_torch_extension.py builds them.
SOURCES = sorted(
    p.relative_to(REPO)
    for folder in ("tests", "example_project")
    for p in (REPO / folder).rglob("*.cu")
    if "torch_ext" not in p.parts
)
# The stale-hit cases whose includes are literal (a computed include has no list to compare).
CASES = {
    name: case
    for name, case in {**stale.NVRTC_CASES, **stale.NVCC_CASES}.items()
    if "CFG" not in str(case.files) and "pre-include" not in name
}


@pytest.fixture(scope="module")
def nvcc() -> Nvcc:
    try:
        return find_nvcc(None)
    except CompileError as exc:
        pytest.skip(f"no nvcc: {exc}")


def project_files(paths: list[str], root: Path, nvcc: Nvcc) -> set[str]:
    """The paths under `root` that are not the toolkit's (a virtualenv inside the checkout holds wheels)."""
    real = os.path.realpath(root)
    toolkit = [os.path.realpath(d) for d in (nvcc.path.parent.parent, *nvcc.include_dirs)]
    return {
        p
        for p in map(os.path.realpath, paths)
        if p.startswith(real + os.sep) and not inside(p, toolkit) and "site-packages" not in p
    }


def compare(source: Path, options: CompileOptions, nvcc: Nvcc, root: Path) -> None:
    flags = options.flags("nvcc", "sm_90", source.parent, nvcc.include_dirs)
    done = subprocess.run(
        [str(nvcc.path), "-M", *flags, str(source)], capture_output=True, text=True, timeout=300, cwd=root
    )
    assert done.returncode == 0, done.stderr
    listed = project_files(parse_depfile(done.stdout, str(root)), root, nvcc)
    toolkit = discover()
    reach = _reach(source, source.read_text(), options, toolkit.include_dirs, StatCache(None))
    assert not reach.unresolved
    scanned = project_files([str(source), *reach.found], root, nvcc)
    assert scanned == listed


@pytest.mark.slow  # one nvcc -M per file
@pytest.mark.parametrize("relative", SOURCES, ids=str)
def test_the_scanner_reads_what_nvcc_reads_in_this_repository(relative: Path, nvcc: Nvcc) -> None:
    compare(REPO / relative, CompileOptions(), nvcc, REPO)


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_the_scanner_reads_what_nvcc_reads_for_each_include_form(
    name: str, nvcc: Nvcc, tmp_path: Path
) -> None:
    case = CASES[name]
    write_tree(tmp_path, case.files)
    dirs = [d for d in ("inc", "inc1", "inc2") if f'"{d}"' in case.marker]
    options = CompileOptions(include_dirs=tuple(str(tmp_path / d) for d in dirs))
    compare(tmp_path / case.source, options, nvcc, tmp_path)
    # And after the edit (a header that appeared, or one that now shadows another).
    write_tree(tmp_path, case.edit)
    compare(tmp_path / case.source, options, nvcc, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("directive", ['#include "params.h"', "#include <params.h>"])
def test_the_scanner_resolves_a_name_in_each_compilers_order(
    directive: str, nvcc: Nvcc, tmp_path: Path
) -> None:
    """params.h beside the kernel (N 2) and in an include dir (N 9): a quoted name finds the first, an
    angled one the second, for NVRTC and for nvcc, and the scanner follows the same one."""
    write_tree(tmp_path, {"kernels/params.h": stale.SMALL, "inc/params.h": stale.BIG})
    source = tmp_path / "kernels" / "acc.cu"
    source.write_text(stale.include(directive))
    options = CompileOptions(include_dirs=(str(tmp_path / "inc"),))
    toolkit = discover()
    built = {
        compile_kernel(source, "acc", "sm_90", options, toolkit, nvcc=by).resources.registers
        for by in (None, nvcc)
    }
    (found,) = _reach(source, source.read_text(), options, toolkit.include_dirs, StatCache(None)).found
    alone = tmp_path / "alone.cu"
    alone.write_text(Path(found).read_text() + stale.BODY)
    assert built == {compile_kernel(alone, "acc", "sm_90", CompileOptions(), toolkit).resources.registers}
    assert found.endswith("kernels/params.h" if '"' in directive else "inc/params.h")
