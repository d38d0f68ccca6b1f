from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.errors import CompileError, GpuUnavailable, ToolchainError
from pytest_regbudget.gpu.device import Device, device
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.nvcc import find_nvcc

KERNELS = Path(__file__).parent / "kernels"
# A kernel whose register count follows the macro N (which the including test defines somewhere).
ACC_KERNEL = """
extern "C" __global__ void acc(const float* x, float* y) {
    float v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = x[threadIdx.x + k * 32];
    float s = 0;
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int k = 0; k < N; ++k) s += v[k] * v[(k + r) % N];
    y[threadIdx.x] = s;
}
"""
# A baseline entry for tests of the file format and its writers.
SAMPLE_ENTRY = bl.BaselineEntry(
    registers=72,
    spill_stores=0,
    spill_loads=0,
    stack=16,
    smem=4096,
    const_mem=380,
    ptxas="12.9.86",
    nvrtc="12.9.86",
    compiler="nvrtc",
    options_hash="abc",
    tests=("tests/test_kernels.py::test_k[sm_90]",),
)


@pytest.fixture
def kernels() -> Path:
    """The directory of the CUDA sources the tests compile."""
    return KERNELS


@pytest.fixture(scope="session")
def gpu_device() -> Device:
    """The CUDA device, or a skip that says why there is none (a skip is not a pass)."""
    try:
        return device()
    except GpuUnavailable as exc:
        pytest.skip(f"no GPU: {exc}")


def run_json(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[dict[str, Any]]]:
    """Run pytest in `pytester` with a JSON report; return the result and the report's kernel records."""
    out = pytester.path / "report.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={out}", *args)
    records = json.loads(out.read_text())["kernels"] if out.exists() else []
    out.unlink(missing_ok=True)
    return result, records


@pytest.fixture(scope="session", autouse=True)
def _private_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the suite's compile cache out of the user's ~/.cache (shared by this session's pytester runs)."""
    old = os.environ.get("REGBUDGET_CACHE_DIR")
    os.environ["REGBUDGET_CACHE_DIR"] = str(tmp_path_factory.mktemp("regbudget-cache"))
    yield
    if old is None:
        os.environ.pop("REGBUDGET_CACHE_DIR", None)
    else:
        os.environ["REGBUDGET_CACHE_DIR"] = old


def fake_home(tmp: Path, ptxas_body: str) -> Path:
    """A CUDA home with the wheels' real NVRTC and a ptxas script; the script gets the real ptxas as $REAL."""
    real = toolchain.discover()
    home = tmp / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    ptxas = home / "bin" / "ptxas"
    ptxas.write_text(f'#!/bin/sh\nREAL="{real.ptxas}"\n' + textwrap.dedent(ptxas_body))
    ptxas.chmod(0o755)
    for lib in [real.require_nvrtc(), *real.require_nvrtc().parent.glob("libnvrtc-builtins.so.*")]:
        (home / "lib" / lib.name).symlink_to(lib)
    return home


def regbudget(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The `regbudget` command, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_regbudget", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def bad_input(done: subprocess.CompletedProcess[str], pattern: str) -> None:
    """Exit status 2 and one line on stderr matching `pattern`, no traceback."""
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert re.search(pattern, lines[0]), lines[0]


def verbose_outcomes(result: pytest.RunResult) -> dict[str, str]:
    """nodeid -> PASSED/FAILED/ERROR/SKIPPED, from a -v run's progress lines."""
    found: dict[str, str] = {}
    for line in result.stdout.lines:
        match = re.match(r"(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED)\b", line)
        if match:
            found[match[1]] = match[2]
    return found


def nvcc_usable() -> bool:
    """Whether nvcc (the nvcc extra's, or a toolkit's) and a host C++ compiler are here: what nvcc builds
    need."""

    try:
        find_nvcc(toolchain.discover(None), None)
    except (CompileError, ToolchainError):
        return False
    return shutil.which("g++") is not None or shutil.which("c++") is not None


@pytest.fixture
def fresh_discovery() -> Iterator[None]:
    """Toolkit discovery and ptxas versions found anew: the test changes what the environment holds."""
    toolchain._discover_cached.cache_clear()
    toolchain.ptxas_version.cache_clear()
    yield
    toolchain._discover_cached.cache_clear()
    toolchain.ptxas_version.cache_clear()
