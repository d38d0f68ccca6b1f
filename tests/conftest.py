"""The suite's fixtures. What the test files share besides fixtures (sample records, scratch projects, runs of
pytest and `regbudget`) is in tests/helpers, imported as `helpers.<module>`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.data import KERNELS

from pytest_regbudget.core.errors import CompileError, GpuUnavailable, ToolchainError
from pytest_regbudget.gpu.device import Device, device
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.nvcc import find_nvcc


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


@pytest.fixture(scope="session", autouse=True)
def _wide_terminal() -> Iterator[None]:
    """pytest's width for the runs the tests start (pytester's and subprocesses'): 400 columns, so that a
    test that reads a line of the `regbudget` section reads it whole. The section wraps its prose and fits
    its table to the width (report/layout.py); tests/report/test_layout.py and
    integration/test_terminal_width.py (at COLUMNS=80, as in CI) check that, and the docs' runs use 80."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "400"
    yield
    if old is None:
        os.environ.pop("COLUMNS", None)
    else:
        os.environ["COLUMNS"] = old


@pytest.fixture(scope="session")
def nvcc_found() -> None:
    """Skips a test that builds with nvcc where there is none (no nvcc wheel, no toolkit)."""
    try:
        find_nvcc(None)
    except (CompileError, ToolchainError) as exc:
        pytest.skip(f"no nvcc: {exc}")


@pytest.fixture
def fresh_discovery() -> Iterator[None]:
    """Toolkit discovery and ptxas versions found anew: the test changes what the environment holds."""
    toolchain._discover_cached.cache_clear()
    toolchain.ptxas_version.cache_clear()
    yield
    toolchain._discover_cached.cache_clear()
    toolchain.ptxas_version.cache_clear()
