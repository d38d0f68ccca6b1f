"""pytest-regbudget: catch register, spill and occupancy regressions in CUDA kernels, in pytest.

The public API is re-exported here; the pytest hooks live in `pytest_regbudget.plugin`. What needs pytest
(the fixture) or a toolkit (the compiler, discovery) is imported on first use, so that the pure core
(`import pytest_regbudget.ptxas`, `.budget`, `.occupancy`, `.report`) loads neither pytest nor CUDA.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .arch import SUPPORTED_ARCHS, ArchLimits, get_arch
from .budget import KernelReport
from .errors import CompileError, KernelNotFoundError, ToolchainError, UnknownArchError
from .occupancy import Occupancy, launch_failure, occupancy
from .ptxas import KernelResources, parse_ptxas_output

if TYPE_CHECKING:
    from .compiler import CompiledKernel, CompileOptions, compile_kernel
    from .plugin import RegbudgetFixture
    from .toolchain import Toolkit, discover

# The one place the version is written: pyproject.toml reads it (tool.setuptools.dynamic),
# `regbudget --version` prints it, and the release workflow refuses a tag that differs from it.
__version__ = "0.1.0"

# Public names whose modules are imported on first use: name -> module.
_LAZY = {
    "CompileOptions": "compiler",
    "CompiledKernel": "compiler",
    "compile_kernel": "compiler",
    "RegbudgetFixture": "plugin",
    "Toolkit": "toolchain",
    "discover": "toolchain",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "SUPPORTED_ARCHS",
    "ArchLimits",
    "CompileError",
    "CompileOptions",
    "CompiledKernel",
    "KernelNotFoundError",
    "KernelReport",
    "KernelResources",
    "Occupancy",
    "RegbudgetFixture",
    "ToolchainError",
    "Toolkit",
    "UnknownArchError",
    "__version__",
    "compile_kernel",
    "discover",
    "get_arch",
    "launch_failure",
    "occupancy",
    "parse_ptxas_output",
]
