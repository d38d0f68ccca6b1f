"""Kernels written in Python: Triton builds and assembles its kernels with its own ptxas (measured as it ships
them); Numba makes PTX that this run's ptxas measures.

A Triton build is cached by Triton's own cache key (TritonJob.key) and the function's file: Triton's key
hashes the function's text, and a cached build never decides the file or line (both come from the function
measured). A Numba build is not: nothing
fingerprints the device functions and globals a Numba kernel reaches in other modules, so a cached result
could be stale; its ptxas run is quick next to numba-cuda's lowering, which would have to run anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from ..core.facts import KernelFacts, Provenance
from ..tools.compiler import interpret
from ..tools.frontends import FrontendPtx, numba_ptx
from ..tools.options import CompileOptions
from ..tools.outputs import BuildOutputs
from ..tools.ptxas import run_ptxas
from ..tools.toolkit import Toolkit, discover
from ..tools.triton import TritonJob
from ..tools.units import Spec
from .protocol import BuildEnv


class FrontendKernel(Struct, frozen=True):
    """A Python function a front end lowers to PTX that this run's ptxas measures (Numba); `settings` (the
    signature) stand in for compile options in the baseline's options_hash."""

    compiler: str  # "numba"
    name: str
    where: Path
    settings: tuple[str, ...]
    make_ptx: Callable[[str, Toolkit | None], FrontendPtx] = field()
    loadable = True

    @property
    def kernel(self) -> str:
        return self.name

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        return None

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        tk = env.toolkit()
        made = self.make_ptx(arch, tk)
        label = f"{made.name} [{arch}]"
        log, cubin = run_ptxas(made.ptx, made.ptx_target, (), tk, env.ptxas_timeout, label)
        outputs = BuildOutputs.of(made.entry, made.ptx, "", log, cubin)
        options = CompileOptions(options=self.settings)
        # The report names the compiler that wrote the PTX, and the ptxas that measured it.
        made_by = Provenance(self.compiler, frontend=made.frontend, ptxas=tk.ptxas_version, origin=tk.origin)
        compiled = interpret(outputs, made.source or Path(made.name), "", made.name, arch, options, made_by)
        return [
            replace(
                compiled.facts,
                line=made.line,
                options_hash=env.options_hash(options),
                # Each signature is a build of its own, with an entry of its own.
                variant=",".join(self.settings),
                from_file=made.source is not None,
            )
        ]


class TritonKernel(Struct, frozen=True):
    """A `@triton.jit` function built as a launch builds it (TritonJob), with Triton's own ptxas.

    Its baseline variant is what the kernel computes (the parameters' types as specialized, the constexprs,
    an autotune config); num_warps, num_stages, num_ctas and maxnreg are build settings: in the options
    hash, named when they change, and the entry still enforced."""

    job: TritonJob
    where: Path
    loadable = True

    @property
    def kernel(self) -> str:
        return self.job.name

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        return None

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        launch = self.job.launch(arch)
        source, line = self.job.place()
        key = self.job.key(arch, launch)
        if key is not None:
            # Triton's key hashes the function's text, not its file: the same text in two files is two
            # builds, so that each cubin's line table names its own file.
            key = f"{key}\n{source}"
        made = env.frontend(key, lambda: self.job.ptx(arch, native=True, launch=launch))
        made = replace(made, source=source, line=line)
        label = f"{made.name} [{arch}]"
        assert made.cubin is not None, label  # native: Triton assembled it with its own ptxas
        outputs = BuildOutputs.of(made.entry, made.ptx, "", made.ptxas_log, made.cubin)
        settings = launch.settings()
        options = CompileOptions(options=settings)
        made_by = Provenance(
            "triton", frontend=made.frontend, ptxas=made.ptxas_version, origin=made.ptxas_origin
        )
        compiled = interpret(outputs, source or Path(made.name), "", made.name, arch, options, made_by)
        return [
            replace(
                compiled.facts,
                line=line,
                options_hash=env.options_hash(options),
                variant=launch.variant(self.job.label),
                legacy_variant=launch.legacy,
                build_settings=settings,
                from_file=source is not None,
                # What the build fixes about its launch (num_warps * 32 threads, and the dynamic shared memory
                # its pipeline needs): the launch the verdict assumes unless the marker gives one.
                block=made.threads,
                dynamic_smem=made.dynamic_smem,
                triton_signature=launch.aot(),
                triton_config=launch.config,
            )
        ]


def numba_kernel(fn: Any, signature: object, where: Path) -> FrontendKernel:
    return FrontendKernel(
        compiler="numba",
        name=getattr(fn, "__name__", str(fn)),
        where=where,
        settings=(f"numba signature={signature}",),
        make_ptx=lambda arch, tk: numba_ptx(fn, signature, arch, toolkit=tk or discover()),
    )
