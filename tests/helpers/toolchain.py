"""What the machine's tools can build: the probes that decide whether a test runs or skips."""

from __future__ import annotations

import shutil

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
