"""pytest-regbudget: catch register, spill and occupancy regressions in CUDA kernels, in pytest.

The public API is re-exported here; the pytest hooks live in `pytest_regbudget.plugin`. Every
`import pytest_regbudget.x` runs this file first, pytest's import of the entry point on every run included, so
each name is imported when first named: a run without kernels loads none of them, and the pure core
(`import pytest_regbudget.core.ptxas`, `.verdict`, `.occupancy`) loads neither pytest nor NVRTC.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:
    from .cache.store import compile_kernel
    from .core.arch import SUPPORTED_ARCHS, ArchLimits, get_arch
    from .core.errors import (
        CompileError,
        KernelNotFoundError,
        RegbudgetWarning,
        ToolchainError,
        UnknownArchError,
    )
    from .core.kernel_report import KernelReport
    from .core.metrics import KernelResources
    from .core.occupancy import Occupancy, launch_failure, occupancy
    from .core.ptxas import parse_ptxas_output
    from .plugin import RegbudgetFixture
    from .tools.options import CompileOptions
    from .tools.outputs import CompiledKernel
    from .tools.toolkit import Toolkit, discover
    from .tools.triton import triton_ptx


# Public names whose modules are imported on first use: name -> module.
_LAZY = {
    "SUPPORTED_ARCHS": "core.arch",
    "ArchLimits": "core.arch",
    "get_arch": "core.arch",
    "CompileError": "core.errors",
    "KernelNotFoundError": "core.errors",
    "RegbudgetWarning": "core.errors",
    "ToolchainError": "core.errors",
    "UnknownArchError": "core.errors",
    "KernelReport": "core.kernel_report",
    "KernelResources": "core.metrics",
    "Occupancy": "core.occupancy",
    "launch_failure": "core.occupancy",
    "occupancy": "core.occupancy",
    "parse_ptxas_output": "core.ptxas",
    "CompileOptions": "tools.options",
    "CompiledKernel": "tools.outputs",
    "compile_kernel": "cache.store",
    "RegbudgetFixture": "plugin",
    "Toolkit": "tools.toolkit",
    "discover": "tools.toolkit",
    "triton_ptx": "tools.triton",
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
    "RegbudgetWarning",
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
    "triton_ptx",
]
