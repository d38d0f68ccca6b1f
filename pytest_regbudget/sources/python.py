"""Kernels written in Python: Triton and Numba make the PTX, this run's ptxas measures it.

Neither is cached yet (the kernel manifest issue will key them); each is built when its test runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..cache import Spec
from ..compiler import BuildOutputs, CompileOptions, interpret, run_ptxas
from ..facts import KernelFacts, Provenance
from ..frontends import FrontendPtx, numba_ptx, triton_ptx
from ..toolchain import Toolkit
from . import BuildEnv


@dataclass(frozen=True)
class FrontendKernel:
    """A Python function a front end lowers to PTX; `settings` (signature, constexprs, warps...) stand in
    for compile options in the baseline's options_hash."""

    compiler: str  # "triton" or "numba"
    name: str
    where: Path
    settings: tuple[str, ...]
    make_ptx: Callable[[str, Toolkit], FrontendPtx] = field(repr=False)
    reads_file = False
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
        # Triton writes sm_90a PTX when asked for sm_90 (wgmma exists only there): assemble what it wrote.
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
                # Each signature and setting is a build of its own, with an entry of its own.
                variant=",".join(self.settings),
                from_file=made.source is not None,
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
    return FrontendKernel(
        compiler="triton",
        name=getattr(getattr(fn, "fn", fn), "__name__", str(fn)),
        where=where,
        settings=settings,
        make_ptx=lambda arch, tk: triton_ptx(
            fn,
            arch,
            signature=signature,
            constexprs=constexprs,
            num_warps=num_warps,
            num_stages=num_stages,
            toolkit=tk,
        ),
    )


def numba_kernel(fn: Any, signature: object, where: Path) -> FrontendKernel:
    return FrontendKernel(
        compiler="numba",
        name=getattr(fn, "__name__", str(fn)),
        where=where,
        settings=(f"numba signature={signature}",),
        make_ptx=lambda arch, tk: numba_ptx(fn, signature, arch, toolkit=tk),
    )
