"""A translation unit built for one arch (`Unit`), the key of a build: every kernel of a file is picked from
one build per (source, options, toolkit, arch) (`pick`), plus, for NVRTC, the name expressions of the
template instances compiled with it. The compile cache stores units; the pool (cache/prefetch.py) builds
them ahead of the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from . import compiler
from .options import CompileOptions
from .outputs import CompiledKernel, UnitOutputs
from .toolkit import Nvcc, Toolkit

# -- translation units, and their sharing within a run ----------------------------------------------------
Spec = tuple[Path, str, str, CompileOptions, Nvcc | None]  # (source, kernel, arch, options, nvcc or NVRTC)


class Unit(Struct, frozen=True):
    """One translation unit to build for one arch: what a build, a cache entry and the run's sharing are
    keyed on. `names`: the NVRTC name expressions it is compiled with (none for nvcc, which builds every
    kernel the file instantiates, and for NVRTC's plain compile: every extern "C" and non-template kernel)."""

    source: Path
    arch: str
    options: CompileOptions
    nvcc: Nvcc | None = None
    names: tuple[str, ...] = ()

    @classmethod
    def of(cls, spec: Spec) -> Unit:
        source, _, arch, options, nvcc = spec
        return cls(source, arch, options, nvcc)

    def first(self, kernel: str, group: Sequence[str] | None) -> Unit:
        """The unit `pick` looks for `kernel` in first."""
        if self.nvcc is not None:
            return self
        return replace(self, names=compiler.nvrtc_name_sets(kernel, group)[0])


def build_kernel(
    kernel: str,
    base: Unit,
    source_text: str,
    toolkit: Toolkit,
    build: Callable[[Unit], UnitOutputs],
    group: Sequence[str] | None = None,
) -> CompiledKernel:
    """The one way a kernel is built, by the plugin, `compile_kernel` and `regbudget explain` alike: picked
    from the units of its file that `build` makes (or a cache finds), `group` being the template names planned
    together, and read as ptxas reported it."""
    if base.nvcc is not None:
        outputs = build(base).pick(kernel, base.source, base.arch, base.nvcc)
        provenance = base.nvcc.provenance()
    else:

        def unit(names: tuple[str, ...]) -> UnitOutputs:
            return build(replace(base, names=names))

        outputs = compiler.pick_nvrtc(kernel, base.source, base.arch, unit, group)
        provenance = compiler.nvrtc_provenance(toolkit)
    return compiler.interpret(outputs, base.source, source_text, kernel, base.arch, base.options, provenance)
