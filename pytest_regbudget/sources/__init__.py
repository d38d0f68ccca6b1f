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
from typing import Literal

from ..core.facts import KernelFacts
from .nvrtc import CompiledFile
from .protocol import BuildEnv, KernelSource, SourceSpec

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


def _compiled_file(compiler: Literal["nvrtc", "nvcc"]) -> SourceFactory:
    """The factory of a .cu file built by `compiler` (NVRTC + ptxas, or nvcc over the whole file)."""

    def factory(spec: SourceSpec) -> KernelSource:
        if spec.kernel is None:
            raise ValueError(f"{spec.path}: name the kernel to compile (kernel=...)")
        return CompiledFile(spec.path, spec.kernel, spec.options, compiler)

    return factory


register("nvrtc", _compiled_file("nvrtc"))
register("nvcc", _compiled_file("nvcc"))

__all__ = ["BuildEnv", "KernelFacts", "KernelSource", "SourceSpec", "make", "names", "register", "unregister"]
