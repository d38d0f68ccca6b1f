"""Every error pytest-regbudget raises, in one place, so that any module can raise or catch one without
importing the module that does the work (a parser need not import the compiler to raise a CompileError).

Each message says what went wrong and how to fix it. All derive from `RegbudgetError`; those that are
also a built-in error (ValueError, RuntimeError) stay so, so that existing `except` clauses still match.
"""

from __future__ import annotations

from .text import safe_block


class RegbudgetError(Exception):
    """The base of every error of this package."""


class CompileError(RegbudgetError):
    """NVRTC or ptxas rejected the kernel; the message carries the compiler's own log."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class Rejected(CompileError):
    """The compiler ran to its end and rejected the source (NVRTC's or nvcc's errors, ptxas's exit code):
    the same inputs fail the same way, so the compile cache keeps the failure. Not a timeout, a missing tool
    or a broken install, which may pass on the next run."""


class KernelNotFoundError(CompileError):
    """The module compiled, but holds no kernel of the requested name."""


class FrontendError(CompileError):
    """A front end is missing, rejected the kernel, or made PTX our ptxas cannot take; says how to fix it."""


class BinaryError(CompileError):
    """cuobjdump is missing, cannot read the file, or printed something this package cannot read."""


class ToolTimeout(CompileError):
    """A compiler or tool ran past its time limit (an ini `regbudget_*_timeout` key, which the message names)
    and was killed: no verdict on the source, never cached. It fails what it built for, as a failed build does
    (a manifest file's listing: its item), and the run goes on."""


class BinaryTimeout(BinaryError, ToolTimeout):
    """cuobjdump ran past `regbudget_cuobjdump_timeout`."""


class SassError(CompileError):
    """nvdisasm is missing or failed; the message says how to get it."""


class ToolchainError(RegbudgetError, RuntimeError):
    """No usable toolkit, or NVRTC and ptxas that do not belong together."""


class Unbuildable(CompileError):
    """This toolkit cannot build this kernel at all (no nvcc in the CUDA 12 wheels, an arch a release
    dropped): the item is skipped with the reason, not failed."""


class MarkerError(RegbudgetError, ValueError):
    """A regbudget marker that cannot be understood; the message says which key and how to fix it."""


class ManifestError(RegbudgetError, ValueError):
    """A kernel manifest that cannot be used; the message names the file, the table and the key."""


class UnknownArchError(RegbudgetError, ValueError):
    """An arch name arch.py has no limits for; the message lists the supported names."""


class BaselineError(RegbudgetError):
    """The baseline file cannot be used; the message names the file, the place and the problem."""


class ParseError(RegbudgetError, ValueError):
    """Tool output (ptxas, PTX, cuobjdump) that cannot be read; the message quotes the offending line."""

    def __init__(self, message: str, line: str | None = None, lineno: int | None = None) -> None:
        self.line = line
        self.lineno = lineno
        if line is not None:
            where = f"line {lineno}: " if lineno is not None else ""
            message = f"{message}\n  {where}{line.strip()!r}"
        super().__init__(message)


class GpuUnavailable(RegbudgetError, RuntimeError):
    """No CuPy or no device; the message says which and how to get one."""


class LaunchError(RegbudgetError, RuntimeError):
    """The driver refused to launch the kernel."""


class RegbudgetWarning(UserWarning):
    """A budget exceeded by a kernel whose marker says level="warn", or a baseline that cannot be compared.
    Public (`pytest_regbudget.RegbudgetWarning`), so that `-W` and `filterwarnings` can name it.

    Its message is guarded here (core/text.py), the one place every warning of the plugin is made: pytest
    prints it as it is, and it quotes names, patterns and compiler lines."""

    def __init__(self, message: str) -> None:
        super().__init__(safe_block(message))
