"""Sources the compile cache builds: a .cu file (`CompiledFile`, by NVRTC + ptxas or by nvcc) and a code
string (`CodeString`, by NVRTC + ptxas). A file is also compiled ahead of its test by the prefetch pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from msgspec import Struct
from msgspec.structs import replace

from ..core.facts import KernelFacts
from ..tools.options import CompileOptions
from ..tools.outputs import CompiledKernel
from ..tools.units import Spec
from .protocol import BuildEnv


def facts_of(
    compiled: CompiledKernel, options: CompileOptions, env: BuildEnv, *, from_file: bool = True
) -> KernelFacts:
    """A compile's facts, with the baseline's digest of `options` (the ones asked for, without the
    -lineinfo every build adds), the variant its defines select and its build settings."""
    return replace(
        compiled.facts,
        options_hash=env.options_hash(options),
        variant=options.variant(),
        legacy_variant=options.keyed_before_settings(),
        build_settings=env.build_settings(options),
        from_file=from_file,
    )


class CompiledFile(Struct, frozen=True):
    """A .cu file built by NVRTC + ptxas, or (compiler="nvcc") a whole translation unit built by nvcc and
    measured by nvcc's own ptxas; `options` are then nvcc's flags."""

    path: Path
    kernel: str
    options: CompileOptions | None = None
    compiler: Literal["nvrtc", "nvcc"] = "nvrtc"
    loadable = True

    @property
    def where(self) -> Path:
        return self.path

    def _spec(self, arch: str, env: BuildEnv) -> Spec:
        opts = (self.options or CompileOptions()).with_line_info()
        return (self.path, self.kernel, arch, opts, env.nvcc() if self.compiler == "nvcc" else None)

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        return self._spec(arch, env)

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        compiled = env.compile(self._spec(arch, env))
        return [facts_of(compiled, self.options or CompileOptions(), env)]


class CodeString(Struct, frozen=True):
    """Device code held in a string, as CuPy's RawKernel takes it; `name` is what errors call it and where
    its `#include "x.h"` lines are resolved from."""

    name: Path
    text: str
    kernel: str
    options: CompileOptions | None = None
    loadable = True

    @property
    def where(self) -> Path:
        return self.name

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        return None  # built when the test runs: the string exists only then

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        opts = self.options or CompileOptions()
        spec = (self.name, self.kernel, arch, opts.with_line_info(), None)
        return [facts_of(env.compile(spec, source_text=self.text), opts, env, from_file=False)]
