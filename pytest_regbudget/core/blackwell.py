"""Tensor memory (TMEM) and thread block clusters against a kernel's budgets.

Owns the arithmetic of both: how many blocks of a kernel hold their tensor memory on one SM at once, which
cluster a launch runs with (the compiled `__cluster_dims__`, or the marker's `cluster=`), and the sentences
that say what breaks, with the numbers. Pure: facts in, sentences out; checks.py calls it, and `active_blocks`
(the header's count, which the driver's is compared with) is never changed here.
"""

from __future__ import annotations

import math
from typing import Literal

from msgspec import Struct

from .gpu_facts import GpuFacts
from .limits import Launch, Limits
from .metrics import KernelResources
from .occupancy import Occupancy
from .ptx import TmemAlloc

# One SM's tensor memory: 128 lanes x 512 columns of 32-bit cells (PTX ISA 8.6+, "Tensor Memory"). Blocks
# resident on one SM share it: tcgen05.alloc takes a power of 2 from 32 to 512 columns ("tcgen05.alloc"), and
# an allocation the free columns cannot satisfy blocks until another block frees its columns.
TMEM_COLUMNS_PER_SM = 512
TMEM_MIN_COLUMNS = 32
# The largest cluster every GPU that has clusters launches: 8 blocks, the portable cluster size (CUDA C++
# Programming Guide, "Thread Block Clusters"). More needs the kernel attribute
# cudaFuncAttributeNonPortableClusterSizeAllowed, on a GPU that allows it
# (cudaOccupancyMaxPotentialClusterSize says how many).
PORTABLE_CLUSTER_BLOCKS = 8
# Clusters start with compute capability 9.0 (Programming Guide, "Thread Block Clusters").
CLUSTER_MAJOR = 9

# Where a kernel's TMEM count comes from: its PTX, the budget's tmem_cols (the PTX's cannot be read), or
# nowhere (unknown: the launch is judged without TMEM, never on a guess).
TmemSource = Literal["ptx", "stated", "unknown"]


class TmemUse(Struct, frozen=True):
    """The tensor memory one block of a kernel holds, and where that count comes from."""

    source: TmemSource
    columns: int | None  # per block; None when unknown
    allocs: int  # tcgen05.alloc instructions (and calls into functions that run one)
    unread: str = ""  # why the PTX's count cannot be read

    @property
    def blocks(self) -> int | None:
        """Blocks of the kernel that hold their tensor memory on one SM at once; None when unknown."""
        return None if self.columns is None else TMEM_COLUMNS_PER_SM // self.columns

    def arithmetic(self) -> str:
        """`512 TMEM columns per block into 512 per SM -> 1 block holds its tensor memory at a time; the next
        waits in tcgen05.alloc`, with where the count comes from."""
        cols, blocks = self.columns, self.blocks
        if cols is None or blocks is None:
            return f"TMEM columns per block unknown: {self.unread}"
        head = f"{cols} TMEM columns per block into {TMEM_COLUMNS_PER_SM} per SM"
        if self.source == "stated":
            head += " (stated with tmem_cols: the PTX's count cannot be read)"
        if blocks == 0:
            return (
                f"{head} -> no block holds all of them: its last tcgen05.alloc waits forever unless it frees "
                "columns before it"
            )
        if blocks == 1:
            return f"{head} -> 1 block holds its tensor memory at a time; the next waits in tcgen05.alloc"
        return (
            f"{head} -> {blocks} blocks hold their tensor memory at once; block {blocks + 1} waits in "
            "tcgen05.alloc"
        )


def tmem_use(alloc: TmemAlloc | None, stated: int | None) -> TmemUse | None:
    """The TMEM a kernel's blocks hold: the PTX's count; where it cannot be read, the budget's tmem_cols
    ("stated") or unknown. None for a kernel without tcgen05.alloc."""
    if alloc is None:
        return None
    if alloc.columns is not None:
        return TmemUse("ptx", alloc.columns, alloc.allocs)
    if stated is not None:
        return TmemUse("stated", stated, alloc.allocs, alloc.unread)
    return TmemUse("unknown", None, alloc.allocs, alloc.unread)


def tmem_bound(blocks: int, tmem: TmemUse | None) -> int:
    """Of `blocks` resident blocks per SM (the header's or the driver's count), those that work at once: no
    more than hold their tensor memory at once."""
    held = None if tmem is None else tmem.blocks
    return blocks if held is None else min(blocks, held)


def tmem_budget(tmem: TmemUse | None, limits: Limits) -> list[str]:
    """tmem_cols against the PTX's count (a stated count is the budget's own)."""
    if tmem is None or limits.tmem_cols is None or tmem.source != "ptx" or tmem.columns is None:
        return []
    if tmem.columns <= limits.tmem_cols:
        return []
    return [
        f"TMEM columns {tmem.columns} per block > tmem_cols {limits.tmem_cols} (the sum of its "
        f"{_allocs(tmem.allocs)}). Fix: allocate fewer columns, or raise tmem_cols"
    ]


def tmem_launch(tmem: TmemUse | None, launch: Launch) -> str | None:
    """The launch's blocks per SM against the blocks that hold their TMEM at once."""
    held = None if tmem is None else tmem.blocks
    need = launch.blocks or 1
    if tmem is None or held is None or held >= need:
        return None
    return f"launch={launch}: {tmem.arithmetic()}. Fix: {_tmem_fix(tmem, launch, need)}"


def _allocs(n: int) -> str:
    return "tcgen05.alloc" if n == 1 else f"{n} tcgen05.alloc instructions"


def _tmem_fix(tmem: TmemUse, launch: Launch, need: int) -> str:
    room = TMEM_COLUMNS_PER_SM // need
    # tcgen05.alloc takes powers of 2 only: the most a block can ask for is the power of 2 at or below room.
    most = 1 << int(math.log2(room)) if room >= TMEM_MIN_COLUMNS else 0
    held = tmem.blocks or 0
    fewer = f"launch=({launch.threads}, {held})" if held else "a block that frees columns before it allocates"
    if not most:
        return f"{fewer}: {need} blocks cannot each hold {TMEM_MIN_COLUMNS} TMEM columns on one SM"
    return f"at most {most} TMEM columns per block for {need} blocks per SM, or {fewer}"


def tmem_note(tmem: TmemUse | None, limits: Limits) -> list[str]:
    """What the report says of a TMEM count it could not read and no budget states."""
    if tmem is None or tmem.source != "unknown":
        return []
    judged = f"; launch={limits.launch} is judged without TMEM" if limits.launch is not None else ""
    return [
        f"TMEM columns per block unknown: {tmem.unread}{judged}. State the count with tmem_cols=N on the "
        "marker (a power of 2 from 32 to 512) to have the launch judged with it"
    ]


# -- clusters ------------------------------------------------------------------------------------------
def cluster_text(dims: tuple[int, int, int]) -> str:
    return "x".join(map(str, dims))


def launch_cluster(res: KernelResources, limits: Limits) -> tuple[int, int, int] | None:
    """The cluster the kernel runs with: its compiled __cluster_dims__, else the marker's cluster=."""
    return res.cluster_dims if res.cluster_dims is not None else limits.cluster


def cluster_violations(arch: str, major: int, res: KernelResources, limits: Limits) -> list[str]:
    """cluster= against the compiled dims and the arch, and min_active_clusters against a kernel without a
    cluster: wrong markers, known before any GPU."""
    out = []
    compiled, stated = res.cluster_dims, limits.cluster
    if stated is not None and compiled is not None and stated != compiled:
        out.append(
            f"cluster={stated} contradicts the kernel's compiled __cluster_dims__{compiled} "
            f"(.reqnctapercluster {', '.join(map(str, compiled))}): a launch that sets another cluster shape "
            "fails. Fix: drop cluster= (the compiled dims are used), or change __cluster_dims__"
        )
    if limits.min_active_clusters is not None and compiled is None and stated is None:
        out.append(
            f"min_active_clusters={limits.min_active_clusters}, but the kernel runs with no cluster: it has "
            "no __cluster_dims__ and the marker no cluster=. Fix: add cluster=(x, y, z), the cluster it is "
            "launched with"
        )
    if stated is not None and major < CLUSTER_MAJOR:
        out.append(
            f"cluster={stated} on {arch}: thread block clusters need compute capability 9.0 or newer. Fix: "
            f'limit the cluster to those archs, cluster={{"sm_90": {stated}}}'
        )
    return out


def cluster_notes(res: KernelResources, limits: Limits) -> list[str]:
    """A cluster over the portable size: it launches only with the non-portable attribute set."""
    dims = launch_cluster(res, limits)
    if dims is None or math.prod(dims) <= PORTABLE_CLUSTER_BLOCKS:
        return []
    return [
        f"a cluster of {cluster_text(dims)} = {math.prod(dims)} blocks is over the portable "
        f"{PORTABLE_CLUSTER_BLOCKS}: set cudaFuncAttributeNonPortableClusterSizeAllowed to 1 "
        "(cudaFuncSetAttribute) before the launch, on a GPU that allows it "
        "(cudaOccupancyMaxPotentialClusterSize)"
    ]


def driver_cluster_violations(
    res: KernelResources, limits: Limits, gpu: GpuFacts | None, occ: Occupancy | None
) -> list[str]:
    """cuOccupancyMaxActiveClusters' answer: 0 (or a refusal) means the launch cannot run;
    min_active_clusters is a floor."""
    dims = launch_cluster(res, limits)
    if gpu is None or dims is None or limits.launch is None:
        return []
    size = math.prod(dims)
    threads = limits.launch.threads
    smem = res.smem + limits.dynamic_smem
    per_sm = "" if occ is None else f"; one SM holds {occ.active_blocks} of these blocks ({occ.summary})"
    shape = (
        f"clusters of {cluster_text(dims)} = {size} blocks of {threads} threads and {smem:,} bytes of shared "
        "memory"
    )
    if gpu.cluster_error is not None:
        return [f"the driver of {gpu.device} counts no {shape}: {gpu.cluster_error}{per_sm}"]
    n = gpu.driver_active_clusters
    if n is None:
        return []
    if n == 0:
        return [
            f"the driver of {gpu.device} fits 0 {shape} (cuOccupancyMaxActiveClusters): a cluster's "
            f"{size} blocks must be resident at once on the SMs of one GPC{per_sm}, so the launch cannot "
            "run. Fix: a smaller cluster, or blocks with fewer registers, threads or shared memory"
        ]
    if limits.min_active_clusters is not None and n < limits.min_active_clusters:
        return [
            f"active clusters {n} < min_active_clusters {limits.min_active_clusters}: the driver of "
            f"{gpu.device} fits {n} {shape} at once (cuOccupancyMaxActiveClusters){per_sm}"
        ]
    return []
