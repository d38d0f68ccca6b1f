"""Kernel sources: one small interface for every way a kernel reaches the plugin.

A `KernelSource` builds (or reads) its kernels for one arch and returns `KernelFacts`: the resources ptxas
reported, the cubin, where the kernel is defined and which tools made the numbers (`Provenance`). The
session judges facts the same way whatever made them. The sources that ship:

- nvrtc (nvrtc.py): a .cu file, NVRTC + ptxas. The marker's default, and the fixture's `compile()`.
- string (nvrtc.py): a code string, NVRTC + ptxas: `compile_source()`.
- nvcc (nvrtc.py): a translation unit with host code, `nvcc -cubin`: `compiler="nvcc"`.
- binary (prebuilt.py): a cubin, fatbin, object or library, read by cuobjdump: `binary=`, `load()`.
- triton, numba (python.py): a Python function; the front end's PTX, our ptxas: `compile_triton()`,
  `compile_numba()`.

Sources that compile a file are registered by name (`register`), which is what `compiler=` picks (marker
key, ini `regbudget_compiler`, the fixture's `compile()`); a conftest can register its own. The fixture's
`measure()` takes any object that implements the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from ..facts import KernelFacts

if TYPE_CHECKING:
    from ..cache import Spec
    from ..compiler import CompiledKernel, CompileOptions, Nvcc
    from ..frontends import FrontendPtx
    from ..toolchain import Toolkit


class BuildEnv(Protocol):
    """What a source may use to build: the run's toolkit, nvcc, the compile cache and its settings.

    The session gives each test its own (line info follows that test's budgets).
    """

    ptxas_timeout: float

    def toolkit(self) -> Toolkit: ...

    def toolkit_or_none(self) -> Toolkit | None: ...

    def nvcc(self) -> Nvcc: ...

    def line_info(self, arch: str) -> bool:
        """Whether this arch's SASS will be read: build with -lineinfo (code generation is unchanged)."""
        ...

    def compile(self, spec: Spec, source_text: str | None = None) -> CompiledKernel:
        """NVRTC or nvcc through the compile cache (and the prefetch pool, for files)."""
        ...

    def options_hash(self, options: CompileOptions) -> str:
        """The baseline's digest of `options` (paths relative to the rootdir)."""
        ...

    def frontend(self, key: str | None, make: Callable[[], FrontendPtx]) -> FrontendPtx:
        """A Python front end's build through the compile cache, by the front end's own key (None: not
        cached)."""
        ...


class KernelSource(Protocol):
    """One way to get kernels: build (or read) them for an arch and say what was measured."""

    @property
    def where(self) -> Path:
        """The file errors and annotations name (a code string's name, a Python function's file)."""
        ...

    @property
    def kernel(self) -> str | None:
        """The kernel asked for, as the user wrote it; None for every kernel the source holds."""
        ...

    @property
    def reads_file(self) -> bool:
        """Whether `where` is read: when it is gone, the baseline entries of its kernels are stale."""
        ...

    @property
    def loadable(self) -> bool:
        """Whether its cubins can be loaded on a GPU for the driver checks and timing."""
        ...

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        """What the compile cache keys this build on, to start it ahead of the test; None when the source
        is not cached (it is built when the test runs)."""
        ...

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        """The kernels for `arch`; raises CompileError (or a subclass) with the tool's log."""
        ...


@dataclass(frozen=True)
class SourceSpec:
    """What a marker or a fixture call names: a file, a kernel and how to compile it."""

    path: Path
    kernel: str | None
    options: CompileOptions | None = None


SourceFactory = Callable[[SourceSpec], KernelSource]
_REGISTRY: dict[str, SourceFactory] = {}


def register(name: str, factory: SourceFactory) -> None:
    """Make `compiler=name` (marker key, ini regbudget_compiler, the fixture's compile()) build with
    `factory(spec)`. Registering a name again replaces it."""
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Forget a registered source (a test's own, say); unknown names are ignored."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def make(name: str, spec: SourceSpec) -> KernelSource:
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"compiler={name!r}: expected one of {', '.join(map(repr, _REGISTRY))}") from None
    return factory(spec)


# The built-in sources import their tools only when used: collection and --help stay free of them.
def _compiled_file(compiler: Literal["nvrtc", "nvcc"]) -> SourceFactory:
    """The factory of a .cu file built by `compiler` (NVRTC + ptxas, or nvcc over the whole file)."""

    def factory(spec: SourceSpec) -> KernelSource:
        from .nvrtc import CompiledFile

        if spec.kernel is None:
            raise ValueError(f"{spec.path}: name the kernel to compile (kernel=...)")
        return CompiledFile(spec.path, spec.kernel, spec.options, compiler)

    return factory


register("nvrtc", _compiled_file("nvrtc"))
register("nvcc", _compiled_file("nvcc"))

__all__ = ["BuildEnv", "KernelFacts", "KernelSource", "SourceSpec", "make", "names", "register", "unregister"]
