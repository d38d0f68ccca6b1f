"""Kernels written in Python: Triton builds and assembles its kernels with its own ptxas (measured as it ships
them); Numba makes PTX that this run's ptxas measures.

A Triton build is cached by Triton's own cache key (frontends.triton_key). A Numba build is not: nothing
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
from ..tools.frontends import FrontendPtx, TritonJob, numba_ptx
from ..tools.options import CompileOptions
from ..tools.outputs import BuildOutputs
from ..tools.ptxas import run_ptxas
from ..tools.toolkit import Toolkit, discover
from ..tools.units import Spec
from .protocol import BuildEnv


class FrontendKernel(Struct, frozen=True):
    """A Python function a front end lowers to PTX; `settings` (signature, constexprs, warps...) stand in
    for compile options in the baseline's options_hash."""

    compiler: str  # "triton" or "numba"
    name: str
    where: Path
    settings: tuple[str, ...]
    make_ptx: Callable[[str, Toolkit | None], FrontendPtx] = field()
    native: bool = False  # the front end assembles with its own ptxas (Triton): no toolkit is needed
    # The front end's own cache key of a build for an arch (Triton's): cached by it; None: built every time.
    cache_key: Callable[[str], str | None] = field(default=lambda arch: None)
    loadable = True

    @property
    def kernel(self) -> str:
        return self.name

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        return None

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        tk = None if self.native else env.toolkit()
        if self.native:
            # Triton's own cache key covers its code, the function and what it calls, the options and its
            # ptxas: a build it would reuse is one we may reuse.
            made = env.frontend(self.cache_key(arch), lambda: self.make_ptx(arch, None))
        else:
            made = self.make_ptx(arch, tk)
        label = f"{made.name} [{arch}]"
        if made.cubin is not None:
            # Triton assembled it with its own ptxas and options: its cubin and log are what ships.
            outputs = BuildOutputs.of(made.entry, made.ptx, "", made.ptxas_log, made.cubin)
            ptxas, origin = made.ptxas_version, made.ptxas_origin
        else:
            assert tk is not None
            # Triton writes sm_90a PTX when asked for sm_90 (wgmma exists only there): assemble what it wrote.
            log, cubin = run_ptxas(made.ptx, made.ptx_target, (), tk, env.ptxas_timeout, label)
            outputs = BuildOutputs.of(made.entry, made.ptx, "", log, cubin)
            ptxas, origin = tk.ptxas_version, tk.origin
        options = CompileOptions(options=self.settings)
        # The report names the compiler that wrote the PTX, and the ptxas that measured it.
        made_by = Provenance(self.compiler, frontend=made.frontend, ptxas=ptxas, origin=origin)
        compiled = interpret(outputs, made.source or Path(made.name), "", made.name, arch, options, made_by)
        return [
            replace(
                compiled.facts,
                line=made.line,
                options_hash=env.options_hash(options),
                # Each signature and setting is a build of its own, with an entry of its own.
                variant=",".join(self.settings),
                from_file=made.source is not None,
                # What the build fixes about its launch (Triton: num_warps * 32 threads, and the dynamic
                # shared memory its pipeline needs): the launch the verdict assumes unless the marker
                # gives one.
                block=made.threads,
                dynamic_smem=made.dynamic_smem,
            )
        ]


def triton_kernel(
    fn: Any,
    where: Path,
    *,
    signature: dict[str, str],
    constexprs: dict[str, object] | None,
    num_warps: int,
    num_stages: int,
) -> FrontendKernel:
    settings = (
        f"triton signature={sorted(signature.items())}",
        f"constexprs={sorted((constexprs or {}).items())}",
        f"num_warps={num_warps}",
        f"num_stages={num_stages}",
    )
    job = TritonJob(fn, signature, constexprs, num_warps, num_stages)
    return FrontendKernel(
        compiler="triton",
        name=getattr(getattr(fn, "fn", fn), "__name__", str(fn)),
        where=where,
        settings=settings,
        make_ptx=lambda arch, tk: job.ptx(arch, native=True),
        native=True,
        cache_key=job.key,
    )


def numba_kernel(fn: Any, signature: object, where: Path) -> FrontendKernel:
    return FrontendKernel(
        compiler="numba",
        name=getattr(fn, "__name__", str(fn)),
        where=where,
        settings=(f"numba signature={signature}",),
        make_ptx=lambda arch, tk: numba_ptx(fn, signature, arch, toolkit=tk or discover()),
    )
