"""Occupancy: how many blocks of a kernel stay resident on one SM, and the arithmetic behind it.

Owns a pure-Python port of `cudaOccMaxActiveBlocksPerMultiprocessor` from cuda_occupancy.h (CUDA 13.5, the
header `pytest_regbudget.core.arch` follows) that gives the same block counts for every arch of that table
(tests/core/test_occupancy.py checks this against the compiled header), plus the sentences that explain a
result. It needs no GPU and no toolkit; every per-arch number comes from `ArchLimits`.

The launch is modelled the way the runtime describes a kernel to the header (`cudaOccFuncAttributes`
built from `cudaFuncGetAttributes`): the shared-memory limit is "opt-in", and the kernel's maximum
dynamic shared memory equals what this launch asks for, as if the program had called
`cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_shared_mem)`.
Partitioned global caching is off: the header only turns it on for sm_5x/sm_6x. The 13.5 header's limit on
"virtual resources" (128 per SM from 10.0) is left out: the runtime's conversion from `cudaFuncAttributes`
sets a kernel's count to 0, which the header reads as no limit.

Where this module says no and the header says yes: a block larger than the kernel's own
`__launch_bounds__`/`.maxntid`. The header never compares the two (it only checks the attribute is
positive), but such a launch fails, so `occupancy` reports 0 blocks and keeps the header's per-limit
counts for reference.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from msgspec import Struct

from .arch import ArchLimits, get_arch

WARPS = "warps"
REGISTERS = "registers"
SHARED_MEMORY = "shared memory"
BLOCKS = "blocks"
BARRIERS = "barriers"
LAUNCH = "launch"

# The header's cudaOccLimitingFactor bit order. When limits tie, `Occupancy.limiter` names the first,
# so a block-size-bound kernel reads "warps" rather than blaming a resource that is not the only cap.
LIMITERS: tuple[str, ...] = (WARPS, REGISTERS, SHARED_MEMORY, BLOCKS, BARRIERS)


class Occupancy(Struct, frozen=True):
    """One kernel launch on one SM: the result, the per-limit block counts and what they came from.

    A `blocks_by_*` count of None means that resource puts no cap on the block count (the header's
    INT_MAX): no registers, no shared memory at all, or no barrier limit on this arch.
    """

    limits: ArchLimits
    registers: int
    block_size: int
    shared_mem: int
    dynamic_shared_mem: int
    max_threads: int
    barriers: int
    carveout: int | None
    active_blocks: int
    active_warps: int
    # "launch" when no block fits; otherwise the first of LIMITERS whose count equals active_blocks.
    limiter: str
    # Every factor whose count equals active_blocks. Unlike the header's limitingFactors, a barrier cap
    # below all others does not also keep the bits of the pre-barrier minimum.
    limiters: tuple[str, ...]
    # One sentence with the arithmetic, when active_blocks is 0.
    failure: str | None
    blocks_by_warps: int
    blocks_by_registers: int | None
    blocks_by_smem: int | None
    blocks_by_blocks: int
    blocks_by_barriers: int | None
    warps_per_block: int
    # Registers per warp after rounding up to the allocation unit, and that times warps_per_block.
    registers_per_warp: int
    registers_per_block: int
    # static + dynamic + reserved, rounded up to the allocation unit.
    smem_per_block: int
    # Shared memory the SM is configured with for this launch (carveout preference, raised to fit one
    # block if needed); 0 if the block does not fit at all.
    smem_per_sm: int
    # Static + dynamic bytes allowed per block: 48 KB, or the opt-in maximum when the block needs more.
    smem_limit_per_block: int
    opted_in: bool

    @property
    def arch(self) -> str:
        return self.limits.name

    @property
    def max_warps_per_sm(self) -> int:
        return self.limits.max_warps_per_sm

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's warp slots, 0..1."""
        return self.active_warps / self.max_warps_per_sm

    def of_blocks(self, blocks: int) -> float:
        """The occupancy of `blocks` resident blocks of this size (e.g. what a driver grants), 0..1."""
        return blocks * self.warps_per_block / self.max_warps_per_sm

    @property
    def summary(self) -> str:
        """`2 blocks x 16 warps = 32 of 64 warps per SM (50%) on sm_90, limited by registers`."""
        if self.failure is not None:
            return self.failure
        return (
            f"{_blocks(self.active_blocks)} x {self.warps_per_block} warps = {self.active_warps} of "
            f"{self.max_warps_per_sm} warps per SM ({self.occupancy:.0%}) on {self.arch}, "
            f"limited by {self.limiter}"
        )

    def explain(self) -> str:
        """The arithmetic of the limiting factor, e.g. why registers allow exactly 2 blocks."""
        if self.failure is not None:
            return self.failure
        lim = self.limits
        if self.limiter == WARPS:
            return (
                f"{self.warps_per_block} warps per block into {lim.max_warps_per_sm} warps per SM "
                f"-> {_blocks(self.blocks_by_warps)}"
            )
        if self.limiter == REGISTERS:
            per_partition = lim.regs_per_sm // lim.sub_partitions
            warps_per_partition = per_partition // self.registers_per_warp
            return (
                f"{self.registers} registers -> {self.registers_per_warp:,} per warp (units of "
                f"{lim.reg_alloc_unit}); {per_partition:,} per sub-partition hold {warps_per_partition} "
                f"warps x {lim.sub_partitions} = {warps_per_partition * lim.sub_partitions} warps per SM "
                f"/ {self.warps_per_block} per block -> {_blocks(self.active_blocks)}"
            )
        if self.limiter == SHARED_MEMORY:
            return (
                f"{self.smem_per_block:,} bytes of shared memory per block (incl. "
                f"{lim.reserved_smem_per_block:,} reserved, units of {lim.smem_alloc_unit}) into "
                f"{self.smem_per_sm:,} per SM -> {_blocks(self.active_blocks)}"
            )
        if self.limiter == BARRIERS:
            return (
                f"{self.barriers} barriers per block into {lim.block_barriers_per_sm} per SM "
                f"-> {_blocks(self.active_blocks)}"
            )
        return f"{lim.max_blocks_per_sm} resident blocks per SM at most on {self.arch}"

    def short_of(self, blocks: int) -> tuple[str, ...]:
        """Every limit that alone keeps fewer than `blocks` blocks resident, in LIMITERS order, after LAUNCH
        when the block is larger than the kernel's own bound (__launch_bounds__/.maxntid).

        A launch needs each of them fixed: easing the first limiter alone may only expose the next.
        """
        counts = (
            self.blocks_by_warps,
            self.blocks_by_registers,
            self.blocks_by_smem,
            self.blocks_by_blocks,
            self.blocks_by_barriers,
        )
        short = tuple(name for name, n in zip(LIMITERS, counts, strict=True) if n is not None and n < blocks)
        return (LAUNCH, *short) if self.block_size > self.max_threads else short

    def shortfall(self, blocks: int) -> str | None:
        """None when at least `blocks` blocks fit per SM, else a sentence saying what limits them."""
        if self.active_blocks >= blocks:
            return None
        if self.failure is not None:
            return (
                f"no block of {self.block_size} threads fits on {self.arch}, {blocks} needed: " + self.failure
            )
        fits = "fits" if self.active_blocks == 1 else "fit"
        return (
            f"only {_blocks(self.active_blocks)} of {self.block_size} threads {fits} per SM on "
            f"{self.arch}, {blocks} needed (limited by {self.limiter}: {self.explain()})"
        )


def occupancy(
    arch: str | ArchLimits,
    registers: int,
    block_size: int,
    shared_mem: int = 0,
    dynamic_shared_mem: int = 0,
    max_threads: int | None = None,
    *,
    barriers: int = 1,
    carveout: int | None = None,
) -> Occupancy:
    """Resident blocks per SM for a kernel, as `cudaOccMaxActiveBlocksPerMultiprocessor` computes them.

    `shared_mem` is the kernel's static shared memory (ptxas "smem"), `dynamic_shared_mem` the launch's,
    `max_threads` its `__launch_bounds__`/`.maxntid` (None: the arch maximum), `barriers` the block
    barriers it uses (ptxas "used N barriers"), `carveout` the preferred shared-memory carveout in percent
    (None: no preference). Inputs the header rejects give 0 blocks and a `failure` sentence, not an error.
    """
    lim = arch if isinstance(arch, ArchLimits) else get_arch(arch)
    bound = lim.max_threads_per_block if max_threads is None else max_threads
    base = _Inputs(lim, registers, block_size, shared_mem, dynamic_shared_mem, bound, barriers, carveout)
    invalid = _invalid_input(base)
    if invalid is not None:
        return _rejected(base, invalid)

    ws = lim.warp_size
    warps = _ceil_div(block_size, ws)

    # Warps: the header checks the block against the device limit only, never the kernel's own bound.
    by_warps = 0 if block_size > lim.max_threads_per_block else lim.max_warps_per_sm // warps

    # Registers go to whole warps, each rounded up to the allocation unit; the register file is split
    # evenly across sub-partitions and a warp lives in one of them.
    per_warp = _round_up(registers * ws, lim.reg_alloc_unit)
    per_block = per_warp * warps
    # Hardware checks the per-block limit as if warps were spread over all sub-partitions at once.
    assumed_per_block = per_warp * _round_up(warps, lim.sub_partitions)
    by_regs: int | None
    if (
        assumed_per_block > lim.max_regs_per_block
        or per_block > lim.max_regs_per_block
        or registers > lim.reg_alloc_max_per_thread
    ):
        by_regs = 0
    elif per_warp > 0:
        warps_per_partition = (lim.regs_per_sm // lim.sub_partitions) // per_warp
        by_regs = warps_per_partition * lim.sub_partitions // warps
    else:
        by_regs = None

    by_blocks = lim.max_blocks_per_sm

    # Shared memory. The carveout preference is honoured only while one block fits in it; past that the
    # SM is configured with the smallest carveout step that holds one block.
    preferred = _carveout_bytes(lim, carveout)
    if preferred is None:
        return _rejected(base, f"carveout {carveout}% leaves no valid shared memory size on {lim.name}")
    static = shared_mem + lim.reserved_smem_per_block
    smem_per_block = _round_up(static + dynamic_shared_mem, lim.smem_alloc_unit)
    # The header picks the opt-in limit when the kernel's maximum usage, reserved bytes included,
    # exceeds the default; the reserved bytes are then added back onto the limit (8.0+).
    header_limit = (
        lim.smem_per_block_optin if static + dynamic_shared_mem > lim.smem_per_block else lim.smem_per_block
    )
    if lim.major >= 8:
        header_limit += lim.reserved_smem_per_block
    smem_per_sm = 0
    by_smem: int | None = 0
    if smem_per_block <= header_limit:
        # The fallback step cannot miss: smem_per_block <= header_limit <= every arch's largest step.
        fits_preferred = preferred >= smem_per_block
        smem_per_sm = preferred if fits_preferred else _carveout_step(lim, smem_per_block) or 0
        by_smem = smem_per_sm // smem_per_block if smem_per_block > 0 else None

    resident = min(by_warps, by_blocks, *(n for n in (by_regs, by_smem) if n is not None))

    by_barriers: int | None = None
    if lim.block_barriers_per_sm is not None and barriers > 0:
        by_barriers = lim.block_barriers_per_sm // barriers
        resident = min(resident, by_barriers)

    if block_size > bound:
        resident = 0

    counts = {
        WARPS: by_warps,
        REGISTERS: by_regs,
        SHARED_MEMORY: by_smem,
        BLOCKS: by_blocks,
        BARRIERS: by_barriers,
    }
    limiters = tuple(name for name in LIMITERS if counts[name] == resident)
    opted_in = shared_mem + dynamic_shared_mem > lim.smem_per_block
    failure = None
    if resident == 0:
        failure = _failure_sentence(
            base,
            warps=warps,
            per_warp=per_warp,
            per_block=per_block,
            assumed_per_block=assumed_per_block,
            smem_fits=smem_per_block <= header_limit,
            smem_per_block=smem_per_block,
            header_limit=header_limit,
            opted_in=opted_in,
        )
    return Occupancy(
        limits=lim,
        registers=registers,
        block_size=block_size,
        shared_mem=shared_mem,
        dynamic_shared_mem=dynamic_shared_mem,
        max_threads=bound,
        barriers=barriers,
        carveout=carveout,
        active_blocks=resident,
        active_warps=resident * warps,
        limiter=LAUNCH if resident == 0 else limiters[0],
        limiters=limiters,
        failure=failure,
        blocks_by_warps=by_warps,
        blocks_by_registers=by_regs,
        blocks_by_smem=by_smem,
        blocks_by_blocks=by_blocks,
        blocks_by_barriers=by_barriers,
        warps_per_block=warps,
        registers_per_warp=per_warp,
        registers_per_block=per_block,
        smem_per_block=smem_per_block,
        smem_per_sm=smem_per_sm,
        smem_limit_per_block=lim.smem_per_block_optin if opted_in else lim.smem_per_block,
        opted_in=opted_in,
    )


def launch_failure(
    arch: str | ArchLimits,
    registers: int,
    block_size: int,
    shared_mem: int = 0,
    dynamic_shared_mem: int = 0,
    max_threads: int | None = None,
    *,
    barriers: int = 1,
    carveout: int | None = None,
) -> str | None:
    """None when at least one block of `block_size` threads fits on an SM, else why not, in one sentence.

    sm_90, 167 registers, 512 threads: `167 registers -> 5,376 per warp (units of 256) x 16 warps =
    86,016 > 65,536 registers per block on sm_90`.
    """
    return occupancy(
        arch,
        registers,
        block_size,
        shared_mem,
        dynamic_shared_mem,
        max_threads,
        barriers=barriers,
        carveout=carveout,
    ).failure


class _Inputs(Struct, frozen=True):
    """One question to the calculator."""

    limits: ArchLimits
    registers: int
    block_size: int
    shared_mem: int
    dynamic_shared_mem: int
    max_threads: int
    barriers: int
    carveout: int | None


def _invalid_input(i: _Inputs) -> str | None:
    """The inputs cudaOccMaxActiveBlocksPerMultiprocessor answers with CUDA_OCC_ERROR_INVALID_INPUT."""
    if i.block_size <= 0:
        return f"block of {i.block_size} threads: a block needs at least 1 thread"
    if i.max_threads <= 0:
        return f"max threads {i.max_threads} (__launch_bounds__/.maxntid) must be at least 1"
    if i.registers < 0:
        return f"{i.registers} registers per thread: a register count cannot be negative"
    # The header takes sizes and the barrier count as given; negative ones are caller mistakes that it
    # would turn into nonsense (size_t wrap-around, a negative block count).
    if i.shared_mem < 0 or i.dynamic_shared_mem < 0:
        return (
            f"shared memory {i.shared_mem:,} static + {i.dynamic_shared_mem:,} dynamic: "
            "sizes cannot be negative"
        )
    if i.barriers < 0:
        return f"{i.barriers} barriers per block: a barrier count cannot be negative"
    if i.carveout is not None and not 0 <= i.carveout <= 100:
        return f"carveout {i.carveout}% is not a percentage from 0 to 100"
    return None


def _rejected(i: _Inputs, reason: str) -> Occupancy:
    return Occupancy(
        limits=i.limits,
        registers=i.registers,
        block_size=i.block_size,
        shared_mem=i.shared_mem,
        dynamic_shared_mem=i.dynamic_shared_mem,
        max_threads=i.max_threads,
        barriers=i.barriers,
        carveout=i.carveout,
        active_blocks=0,
        active_warps=0,
        limiter=LAUNCH,
        limiters=(),
        failure=reason,
        blocks_by_warps=0,
        blocks_by_registers=0,
        blocks_by_smem=0,
        blocks_by_blocks=0,
        blocks_by_barriers=None,
        warps_per_block=0,
        registers_per_warp=0,
        registers_per_block=0,
        smem_per_block=0,
        smem_per_sm=0,
        smem_limit_per_block=0,
        opted_in=False,
    )


def _failure_sentence(
    i: _Inputs,
    *,
    warps: int,
    per_warp: int,
    per_block: int,
    assumed_per_block: int,
    smem_fits: bool,
    smem_per_block: int,
    header_limit: int,
    opted_in: bool,
) -> str:
    """Why not even one block fits, checked in the order a reader can act on, first cause only."""
    lim = i.limits
    on = f"on {lim.name}"
    if i.block_size > lim.max_threads_per_block:
        return f"block of {i.block_size:,} threads > {lim.max_threads_per_block:,} max threads per block {on}"
    if i.block_size > i.max_threads:
        return (
            f"block of {i.block_size:,} threads > {i.max_threads:,} max threads "
            f"(__launch_bounds__/.maxntid) {on}"
        )
    if i.registers > lim.reg_alloc_max_per_thread:
        return (
            f"{i.registers} registers per thread > {lim.reg_alloc_max_per_thread} allocatable per thread "
            f"{on} (ptxas allows at most {lim.max_regs_per_thread})"
        )
    regs_per_block = f"{lim.max_regs_per_block:,} registers per block {on}"
    if per_block > lim.max_regs_per_block:
        return (
            f"{i.registers} registers -> {per_warp:,} per warp (units of {lim.reg_alloc_unit}) "
            f"x {warps} warps = {per_block:,} > {regs_per_block}"
        )
    if assumed_per_block > lim.max_regs_per_block:
        rounded = assumed_per_block // per_warp
        return (
            f"{i.registers} registers -> {per_warp:,} per warp (units of {lim.reg_alloc_unit}) "
            f"x {rounded} warps ({warps} rounded up to a multiple of {lim.sub_partitions} sub-partitions) = "
            f"{assumed_per_block:,} > {regs_per_block}"
        )
    if not smem_fits:
        return _smem_sentence(i, smem_per_block=smem_per_block, header_limit=header_limit, opted_in=opted_in)
    if per_warp > 0:
        per_partition = lim.regs_per_sm // lim.sub_partitions
        per_sm = per_partition // per_warp * lim.sub_partitions
        if per_sm < warps:
            return (
                f"{i.registers} registers -> {per_warp:,} per warp (units of {lim.reg_alloc_unit}): "
                f"{per_sm} warps per SM ({per_partition:,} registers per sub-partition x "
                f"{lim.sub_partitions}) < {warps} warps per block {on}"
            )
    # Only a barrier-hungry kernel is left: not even one block's barriers fit on the SM.
    return f"{i.barriers} barriers per block > {lim.block_barriers_per_sm} block barriers per SM {on}"


def _smem_sentence(i: _Inputs, *, smem_per_block: int, header_limit: int, opted_in: bool) -> str:
    lim = i.limits
    total = i.shared_mem + i.dynamic_shared_mem
    limit = lim.smem_per_block_optin if opted_in else lim.smem_per_block
    kind = "opt-in maximum" if opted_in else "default maximum"
    head = f"shared memory {i.shared_mem:,} static + {i.dynamic_shared_mem:,} dynamic"
    if total > limit:
        return f"{head} = {total:,} bytes per block > {limit:,} {kind} on {lim.name}"
    # Only rounding to the allocation unit pushed it over; show the header's own numbers.
    return (
        f"{head} + {lim.reserved_smem_per_block:,} reserved = {smem_per_block:,} bytes per block after "
        f"rounding to units of {lim.smem_alloc_unit} > {header_limit:,} on {lim.name}"
    )


def _carveout_bytes(lim: ArchLimits, carveout: int | None) -> int | None:
    """Shared memory per SM under a carveout preference (None: the header's default, all of it)."""
    wanted = lim.smem_per_sm if carveout is None else carveout * lim.smem_per_sm // 100
    return _carveout_step(lim, wanted)


def _carveout_step(lim: ArchLimits, size: int) -> int | None:
    """The smallest configurable carveout that holds `size` bytes, None past the largest (as the header)."""
    for kib in lim.smem_configs_kib:
        if size <= kib * 1024:
            return kib * 1024
    return None


def _blocks(n: int) -> str:
    return f"{n} block" if n == 1 else f"{n} blocks"


def _ceil_div(x: int, y: int) -> int:
    return -(-x // y)


def _round_up(x: int, unit: int) -> int:
    return _ceil_div(x, unit) * unit


@functools.lru_cache(maxsize=4096)
def _resident(
    arch: str | ArchLimits,
    registers: int,
    block_size: int,
    shared_mem: int,
    dynamic_shared_mem: int,
    max_threads: int | None,
    barriers: int,
) -> int:
    """Resident blocks per SM, remembered: the kernels of a run share a few launch shapes, so their cliffs
    ask the same questions."""
    return occupancy(
        arch, registers, block_size, shared_mem, dynamic_shared_mem, max_threads, barriers=barriers
    ).active_blocks


def _first(lo: int, hi: int, pred: Callable[[int], bool]) -> int | None:
    """The least n in [lo, hi] with pred(n), for a pred that stays true once true; None if there is none."""
    if lo > hi or not pred(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


class Cliff(Struct, frozen=True):
    """Where the kernel stands on the register staircase at one launch size."""

    registers: int
    blocks: int  # resident blocks per SM now
    grow: int  # registers it can add before it loses a block (to 255 if it never does)
    shed: int | None  # registers it must drop to gain a block; None if no count below gains one
    blocks_if_shed: int | None


def register_cliff(
    arch: str | ArchLimits,
    registers: int,
    block_size: int,
    shared_mem: int = 0,
    dynamic_shared_mem: int = 0,
    max_threads: int | None = None,
    *,
    barriers: int = 1,
) -> Cliff:
    """How far `registers` is from the occupancy steps on either side, at this launch size."""

    def blocks(regs: int) -> int:
        return _resident(arch, regs, block_size, shared_mem, dynamic_shared_mem, max_threads, barriers)

    now = blocks(registers)
    # Blocks never grow with registers (only the register limit depends on them), so each step is found
    # by bisection: a handful of evaluations instead of one per register count, for every kernel a run
    # reports.
    lost = _first(registers + 1, 255, lambda r: blocks(r) < now)
    grow = 255 - registers if lost is None else lost - 1 - registers
    gained = _first(-(registers - 1), -1, lambda n: blocks(-n) > now)  # n = -count: counting down
    lower = None if gained is None else -gained
    return Cliff(
        registers=registers,
        blocks=now,
        grow=grow,
        shed=None if lower is None else registers - lower,
        blocks_if_shed=None if lower is None else blocks(lower),
    )
