"""A prebuilt cubin, fatbin, object file or shared library, read as it is by cuobjdump: no compile."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from msgspec import Struct

from ..core import names
from ..core.errors import CompileError, KernelNotFoundError
from ..core.facts import KernelFacts, Provenance
from ..core.ptx import TmemAlloc
from ..tools import cuobjdump as binary
from ..tools.options import CompileOptions
from ..tools.units import Spec
from .protocol import BuildEnv

# A binary records that a kernel runs tcgen05 (EIATTR_TCGEN05_1CTA_USED, _2CTA_USED) but not how many tensor
# memory columns it allocates: that count is in the PTX alone, so without PTX it is unknown, never guessed.
_BINARY_TMEM = TmemAlloc(
    allocs=1,
    columns=None,
    unread="a prebuilt binary records that the kernel uses tcgen05 (EIATTR_TCGEN05_*), not the columns it "
    "allocates, and this one holds no PTX of the kernel for its arch to read them from (keep it with "
    "-gencode arch=compute_XXa,code=[sm_XXa,compute_XXa])",
)


class Binary(Struct, frozen=True):
    """Every kernel the binary holds for an arch, or only `kernel` (found by names.match, template
    arguments and all). Kernels are reported by their readable names (`MatrixMulCUDA<32>`), the mangled
    entry kept beside. Spills are known only where the binary records them (cuobjdump's SASS of a cubin
    built with them)."""

    path: Path
    kernel: str | None = None
    loadable = False  # cuobjdump gives numbers, not a loadable cubin of one kernel

    @property
    def where(self) -> Path:
        return self.path

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        return None

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        held = env.binary(self.path, arch)
        if not held.kernels:
            archs = ", ".join(binary.held_archs(self.path, env.toolkit_or_none())) or "none"
            raise CompileError(
                f"{self.path} holds no machine code for {arch} (it holds: {archs}); build it with "
                f"-gencode arch=compute_XX,code={arch} or restrict the test with archs="
            )
        mine: Sequence[binary.BinaryKernel] = held.kernels
        shown = dict(held.shown) if self.kernel is None else {}
        if self.kernel is not None:
            # A name as the listing gave it (every item of a manifest's "*"): its entry and name at once.
            entry = held.by_shown.get(self.kernel) or held.by_name.get(names.normalize(self.kernel))
            entries: list[str] = []
            if entry is not None:
                shown[entry] = held.shown[entry]
            else:
                entries = list(held.by_entry)
                entry = names.match(self.kernel, entries)
                if entry is not None:
                    shown[entry] = names.shown(self.kernel, entry)
            if entry is None:
                raise KernelNotFoundError(
                    f"kernel {self.kernel!r} not found in {self.path} [{arch}]; it contains: "
                    f"{names.candidates(self.kernel, entries)}. Name a kernel as listed, template "
                    "arguments included ('gemm<128, 64>'), an overload with its parameters ('k(float*)'), or "
                    "by its mangled name; a name held by several of its cubins, with the tag that tells them "
                    "apart ('dtrsv_init@trsv_ln_exec.b8058f', docs/sources.md)"
                )
            mine = [held.by_entry[entry]]
        made = Provenance(
            "binary", frontend="prebuilt", ptxas="prebuilt", origin=f"prebuilt {self.path.name}"
        )
        # A binary has no compile options; the digest of none keeps its entries comparable across runs.
        digest = env.options_hash(CompileOptions())
        return [self._facts(k, made, digest, shown[k.entry]) for k in mine]

    def _facts(self, k: binary.BinaryKernel, made: Provenance, digest: str, shown: str) -> KernelFacts:
        return KernelFacts(
            kernel=shown,
            entry=k.entry,
            arch=k.arch,
            source=self.path,
            resources=k.resources(),
            provenance=made,
            options_hash=digest,
            setmaxnreg=k.setmaxnreg,
            tmem=k.tmem if k.ptx is not None else _BINARY_TMEM if k.tcgen05 else None,
        )
