"""pytest-regbudget: catch register, spill and occupancy regressions in CUDA kernels, in pytest.

The public API is re-exported here; the pytest hooks live in `pytest_regbudget.plugin`. Every
`import pytest_regbudget.x` runs this file first, so what needs pytest (the fixture) or the toolkit side (the
compiler and discovery, with NVRTC's ctypes binding) is imported when first named: the pure core
(`import pytest_regbudget.core.ptxas`, `.verdict`, `.occupancy`) loads neither pytest nor NVRTC.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__
from .core.arch import SUPPORTED_ARCHS, ArchLimits, get_arch
from .core.errors import CompileError, KernelNotFoundError, RegbudgetWarning, ToolchainError, UnknownArchError
from .core.kernel_report import KernelReport
from .core.metrics import KernelResources
from .core.occupancy import Occupancy, launch_failure, occupancy
from .core.ptxas import parse_ptxas_output

if TYPE_CHECKING:
    from .cache.store import compile_kernel
    from .plugin import RegbudgetFixture
    from .tools.options import CompileOptions
    from .tools.outputs import CompiledKernel
    from .tools.toolkit import Toolkit, discover


# Public names whose modules are imported on first use: name -> module.
_LAZY = {
    "CompileOptions": "tools.options",
    "CompiledKernel": "tools.outputs",
    "compile_kernel": "cache.store",
    "RegbudgetFixture": "plugin",
    "Toolkit": "tools.toolkit",
    "discover": "tools.toolkit",
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
]
