"""A translation unit built for one arch (`Unit`), the key of a build: every kernel of a file is picked from
one build per (source, options, toolkit, arch) (`pick`), plus, for NVRTC, the name expressions of the
template instances compiled with it. The compile cache stores units; the pool (pool.py) builds them ahead of
the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from . import compiler
from .options import CompileOptions
from .outputs import BuildOutputs, UnitOutputs
from .toolchain import Nvcc

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


def pick(
    kernel: str, base: Unit, build: Callable[[Unit], UnitOutputs], group: Sequence[str] | None = None
) -> BuildOutputs:
    """`kernel`'s outputs, from the units of `base`'s file that `build` gives: nvcc's one, or the NVRTC
    units that may hold it (`compiler.pick_nvrtc`), `group` being the template names planned together."""
    if base.nvcc is not None:
        return build(base).pick(kernel, base.source, base.arch, base.nvcc)

    def unit(names: tuple[str, ...]) -> UnitOutputs:
        return build(replace(base, names=names))

    return compiler.pick_nvrtc(kernel, base.source, base.arch, unit, group)
