"""What a build made: a unit's PTX, cubin and ptxas report (`UnitOutputs`), one kernel picked from it
(`BuildOutputs`), and a compile's result (`CompiledKernel`). The PTX and cubin are read from a cache entry
only when first asked for.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path

from msgspec import Struct, field

from ..core import names
from ..core.errors import KernelNotFoundError
from ..core.facts import Deferred, KernelFacts, Provenance
from ..core.metrics import KernelResources
from ..core.ptx import ptx_outline, ptx_setmaxnreg
from ..core.ptxas import parse_ptx_entries, parse_ptxas_messages
from .options import Body, CompileOptions
from .toolkit import Nvcc


class PtxModule(Struct, frozen=True):
    """What NVRTC made of a source: the PTX, its log, and the entry each name expression lowered to."""

    ptx: str
    log: str
    lowered_names: Mapping[str, str]  # name expression -> mangled entry name


class _MachineCode:
    """`ptx` and `cubin` of a build's `body`, read when first asked for."""

    body: Body

    @property
    def ptx(self) -> str:
        return self.body.get()[0]

    @property
    def cubin(self) -> bytes:
        return self.body.get()[1]


class CompiledKernel(_MachineCode, Struct, frozen=True):
    """A compile's result: the kernel's facts, and what only a compile has (its options, NVRTC log, PTX)."""

    facts: KernelFacts
    options: CompileOptions
    nvrtc_log: str
    body: Body

    @property
    def kernel(self) -> str:
        return self.facts.kernel

    @property
    def entry(self) -> str:
        return self.facts.entry

    @property
    def arch(self) -> str:
        return self.facts.arch

    @property
    def source(self) -> Path:
        return self.facts.source

    @property
    def resources(self) -> KernelResources:
        return self.facts.resources

    @property
    def provenance(self) -> Provenance:
        return self.facts.provenance

    @property
    def ptxas_log(self) -> str:
        return self.facts.ptxas_log

    @property
    def cubin(self) -> bytes:
        return self.facts.cubin

    @property
    def line(self) -> int | None:
        return self.facts.line


class BuildOutputs(_MachineCode, Struct, frozen=True):
    """What NVRTC and ptxas produced for one kernel and arch: all a cache needs to keep. `outline` is the
    PTX the report is read with (`ptxas.ptx_outline`); the whole PTX and the cubin are in `body`."""

    entry: str
    outline: str
    nvrtc_log: str
    ptxas_log: str
    body: Body
    messages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # as UnitOutputs'

    @classmethod
    def of(cls, entry: str, ptx: str, nvrtc_log: str, ptxas_log: str, cubin: bytes) -> BuildOutputs:
        outline = ptx_outline(ptx)
        messages = attribute_messages(outline, ptxas_log, None)
        return cls(entry, outline, nvrtc_log, ptxas_log, Deferred.of((ptx, cubin)), messages)


class UnitOutputs(_MachineCode, Struct, frozen=True):
    """What one compile of a translation unit for one arch produced: the PTX, ptxas's report and the cubin
    of every kernel in it, and (NVRTC) the entry each name expression it was compiled with lowered to. The
    cache keeps one per (source, options, toolkit, arch[, name expressions]); kernels are picked from it.
    As in BuildOutputs, the report is read with `outline`, and `body` is read when first needed."""

    outline: str
    nvrtc_log: str
    ptxas_log: str
    body: Body
    lowered: Mapping[str, str] = field(default_factory=dict)  # name expression -> mangled entry
    # ptxas's warnings and performance-loss notes per entry (attribute_messages), module-level ones placed.
    messages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        ptx: str,
        nvrtc_log: str,
        ptxas_log: str,
        cubin: bytes,
        lowered: Mapping[str, str] | None = None,
        one_entry: Callable[[str], str] | None = None,
    ) -> UnitOutputs:
        """A build's outputs, all in hand; `one_entry` places module-level messages (attribute_messages)."""
        outline = ptx_outline(ptx)
        placed = attribute_messages(outline, ptxas_log, one_entry)
        body = Deferred.of((ptx, cubin))
        return cls(outline, nvrtc_log, ptxas_log, body, dict(lowered or {}), dict(placed))

    @functools.cached_property
    def entries(self) -> list[str]:
        return parse_ptx_entries(self.outline)

    def entry(self, kernel: str) -> str | None:
        """The entry `kernel` names: its name expression's, else the one `names.match` finds."""
        lowered = self.lowered.get(kernel)
        if lowered is not None:
            return lowered if lowered in self.entries else None
        return names.match(kernel, self.entries)

    def pick(self, kernel: str, source: Path, arch: str, nvcc: Nvcc | None = None) -> BuildOutputs:
        """`kernel`'s outputs; KernelNotFoundError, listing the unit's kernels, when it has no such one."""
        entry = self.entry(kernel)
        if entry is None:
            raise not_found(kernel, source, arch, self.outline, self.ptxas_log if nvcc else "", nvcc=nvcc)
        return BuildOutputs(entry, self.outline, self.nvrtc_log, self.ptxas_log, self.body, self.messages)


def not_found(
    kernel: str, source: Path, arch: str, ptx: str, log: str, reason: str = "", nvcc: Nvcc | None = None
) -> KernelNotFoundError:
    listing = names.candidates(kernel, parse_ptx_entries(ptx))
    why = f" (NVRTC: {reason})" if reason else ""
    if nvcc is None:
        how = (
            'Name an extern "C" kernel by its name, a C++ kernel by its name expression '
            "(e.g. 'gemm<128, 64>'); templates must be named with their template arguments."
        )
    else:
        how = (
            f"nvcc {nvcc.version} built the kernels that the file instantiates: name one as listed, "
            "template arguments included (e.g. 'gemm<128, 64>'; whitespace and 256u/256 do not matter), an "
            "overload with its parameter list ('k(float*)'), or by its mangled name."
        )
    return KernelNotFoundError(
        f"kernel {kernel!r} not found in {source} [{arch}]{why}; the module contains: {listing}. {how}",
        log,
    )


def attribute_messages(
    outline: str, ptxas_log: str, one_entry: Callable[[str], str] | None
) -> dict[str, tuple[str, ...]]:
    """ptxas's warnings and "Potential Performance Loss" notes of a module, per entry. A module-level one
    (C7508, "'setmaxnreg' ignored", names no function) is the only entry's where the module has one; with
    several, `one_entry(entry)` (ptxas -e) tells which of the entries that use setmaxnreg it is; without it
    (nvcc's build) it goes to each entry that uses setmaxnreg, the only ones it can be about."""
    entries = parse_ptx_entries(outline)
    out: dict[str, list[str]] = {e: [] for e in entries}
    roles = ptx_setmaxnreg(outline)
    for entry, text in parse_ptxas_messages(ptxas_log):
        if entry in out:
            out[entry].append(text)
            continue
        if len(entries) == 1:
            out[entries[0]].append(text)
            continue
        candidates = [e for e in entries if roles.get(e)] or entries
        for e in candidates:
            if one_entry is None or text in one_entry(e):
                out[e].append(text)
    return {e: tuple(texts) for e, texts in out.items() if texts}
