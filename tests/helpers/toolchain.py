"""What the machine's tools can build: the probes that decide whether a test runs or skips."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_regbudget.core.errors import CompileError, ToolchainError
from pytest_regbudget.tools import toolkit
from pytest_regbudget.tools.nvcc import find_nvcc


def nvcc_usable() -> bool:
    """Whether nvcc (the nvcc extra's, or a toolkit's) and a host C++ compiler are here: what nvcc builds
    need."""
    try:
        find_nvcc(toolkit.discover(None), None)
    except (CompileError, ToolchainError):
        return False
    return shutil.which("g++") is not None or shutil.which("c++") is not None


def nvcc_or_skip() -> Path:
    """nvcc's path, where nvcc and a host C++ compiler are both here; the test skips, saying which is
    missing, where they are not."""
    try:
        found = find_nvcc(toolkit.discover(None), None)
    except (CompileError, ToolchainError) as exc:  # the nvcc extra is not installed
        pytest.skip(f"needs nvcc: {exc}")
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("nvcc needs a host C++ compiler")
    return found.path
