"""pytest-regbudget: catch register, spill and occupancy regressions in CUDA kernels, in pytest.

The public API is re-exported here; the pytest hooks live in `pytest_regbudget.plugin`.
"""

from __future__ import annotations

from .arch import SUPPORTED_ARCHS, ArchLimits, UnknownArchError, get_arch
from .budget import KernelReport
from .compiler import CompiledKernel, CompileError, CompileOptions, KernelNotFoundError, compile_kernel
from .occupancy import Occupancy, launch_failure, occupancy
from .plugin import RegbudgetFixture
from .ptxas import KernelResources, parse_ptxas_output
from .toolchain import ToolchainError, Toolkit, discover

__version__ = "0.1.0"

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
