"""What was measured about a kernel, as plain frozen data: no pytest, no CuPy, no NVRTC.

Kernel sources (sources/) produce `KernelFacts`; the GPU runner produces the GPU data classes of gpu_facts.py
(apart, so that a run without a GPU never defines them); the verdict (verdict.py) reads them all. Nothing here
does work.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from msgspec import Struct

from .metrics import KernelResources
from .ptx import TmemAlloc

T = TypeVar("T")


class Deferred(Generic[T]):
    """A value made when first asked for, once: a cache hit reads a build's numbers, and only a GPU run or
    a SASS read needs its cubin and PTX (which are most of an entry's bytes)."""

    __slots__ = ("_load", "_lock", "_value")

    def __init__(self, load: Callable[[], T]) -> None:
        self._load: Callable[[], T] | None = load
        self._value: T | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, value: T) -> Deferred[T]:
        """A value that is there already."""
        made: Deferred[T] = cls(lambda: value)
        made.get()
        return made

    def get(self) -> T:
        with self._lock:
            if self._load is not None:
                self._value = self._load()
                self._load = None  # a failed load raises again next time, it is not remembered
            return self._value  # type: ignore[return-value]  # set above, possibly to a None T


class Provenance(Struct, frozen=True):
    """Which tools made (or read) a kernel's numbers, for the report and the baseline.

    `compiler` is the source kind (nvrtc, nvcc, string, binary, triton, numba); `frontend` what wrote the PTX
    ("12.9.86" for NVRTC, "nvcc 13.5.37", "triton 3.5.0"); `ptxas` the assembler whose numbers these are
    ("12.9.86", or "prebuilt" for a binary read as it is); `origin` where the toolkit was found.
    """

    compiler: str
    frontend: str
    ptxas: str
    origin: str = ""

    @property
    def release(self) -> str:
        """The toolkit release whose numbers these are: major.minor of the ptxas ("12.9"), see release_of."""
        return release_of(self.ptxas)


def release_of(ptxas: str) -> str:
    """major.minor of a ptxas version ("12.9.86" -> "12.9"): what a baseline entry is kept per, since a
    release's patch versions do not change code generation the way a new release does. A version that is
    not one ("prebuilt", for a binary read as it is) is its own release."""
    parts = ptxas.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and parts[0].isdigit() else ptxas


class KernelFacts(Struct, frozen=True):
    """One kernel built (or read) for one arch: everything the verdict needs, nothing it must work out."""

    kernel: str  # as the user named it ("gemm<128, 64>")
    entry: str  # as it is in the PTX/cubin ("_Z4gemmILi128ELi64EEvPf")
    arch: str
    source: Path  # the file it came from (a code string's name; a Python function's file)
    resources: KernelResources
    provenance: Provenance
    # A digest of what the build depended on (compile options, or a front end's signature and settings),
    # stored with the baseline entry to tell when a kernel's build changed.
    options_hash: str = ""
    line: int | None = None  # 1-based line of the kernel's definition in `source`
    # The defines that select this build of the kernel ("NACC=8,TILE=16"; "-" for none): part of its
    # baseline key, so that each variant has its own entry.
    variant: str = "-"
    # The variant as versions before 0.2 keyed it (with the build-wide defines too), when it differs: the
    # key a baseline they wrote holds this kernel under, read until an update re-keys it.
    legacy_variant: str | None = None
    # The build's flags but the variant's defines ("-DGGML_CUDA_F16", "-Iinclude"): recorded with the
    # entry, so that a change is reported by name.
    build_settings: tuple[str, ...] = ()
    from_file: bool = True  # False: `source` only names it (a code string)
    ptxas_options: tuple[str, ...] = ()  # for the diagnosis (-maxrregcount and friends)
    ptxas_log: str = ""
    # What the build fixes about its launch (a Triton kernel's num_warps * 32 threads and the dynamic shared
    # memory its pipeline needs): assumed where the budget names no launch or dynamic_smem.
    block: int | None = None
    dynamic_smem: int = 0
    # ptxas's warnings and performance-loss notes for this kernel ("(C7508) Potential Performance Loss: ...").
    messages: tuple[str, ...] = ()
    # Its warpgroups' register targets, by direction: (("inc", 232), ("dec", 40)); () for none.
    setmaxnreg: tuple[tuple[str, int], ...] = ()
    # The tensor memory one block allocates (its PTX's tcgen05.alloc); None without one, or without PTX.
    tmem: TmemAlloc | None = None
    # A Triton kernel's parameters as compiled, in Triton's AOT syntax ((name, "*fp16:16"), (name, "constexpr
    # 1")), and the autotune config it was built with (Triton's str(config)); () and None for other kernels.
    triton_signature: tuple[tuple[str, str], ...] = ()
    triton_config: str | None = None
    # The cubin, read when first needed (empty when the machine code cannot be loaded).
    code: bytes | Deferred[bytes] = b""

    @property
    def cubin(self) -> bytes:
        return self.code if isinstance(self.code, bytes) else self.code.get()
