"""Per-compute-capability limits: the one table every other module reads arch facts from.

Owns `ArchLimits`, the table of supported architectures, and arch-name parsing (`get_arch`,
`compute_arch`). Each number cites where it comes from:

- "Guide" is the CUDA C++ Programming Guide, appendix "Compute Capabilities": the tables "Device and
  Streaming Multiprocessor (SM) Information per Compute Capability", "Memory Information per Compute
  Capability" and "Shared Memory Capacity per Compute Capability" (CUDA 13.x numbering: tables 30-32;
  in CUDA 12.x one table, "Technical Specifications per Compute Capability"). The 13.x guide dropped
  7.0/7.2; their numbers are from the 12.x table. The 13.x guide calls sm_101 "11.0" (CUDA 13 renamed
  it sm_110); this table keeps the CUDA 12.9 spelling because that is what the wheels' ptxas accepts.
- "header" is cuda_occupancy.h from the nvidia-cuda-runtime-cu12 12.9 wheel, which hard-codes the
  allocation granularities, sub-partition counts and shared-memory carveout steps. Where it hard-codes a
  number that the Guide also gives (blocks per SM), the two agree, and tests/core/test_occupancy.py
  checks that this table and the header give the same occupancy for every supported arch.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from types import MappingProxyType

from msgspec import Struct
from msgspec.structs import replace

from .errors import UnknownArchError

KIB = 1024


class ArchLimits(Struct, frozen=True):
    """Limits of one compute capability, in the units `cudaDeviceProp` uses (threads, registers, bytes)."""

    name: str
    major: int
    minor: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    warp_size: int
    regs_per_sm: int
    max_regs_per_block: int
    # What ptxas may give one thread (Guide); the header's allocator accepts one more, see below.
    max_regs_per_thread: int
    # Registers are allocated per warp in units of this many (header: cudaOccRegAllocationGranularity).
    reg_alloc_unit: int
    # Per-thread count the header still allocates (cudaOccRegAllocationMaxPerThread): 256 from sm_70.
    reg_alloc_max_per_thread: int
    # The register file is split evenly between these (header: cudaOccSubPartitionsPerMultiprocessor).
    sub_partitions: int
    smem_per_sm: int
    # Static + dynamic limit without cudaFuncSetAttribute(MaxDynamicSharedMemorySize) (48 KB on all).
    smem_per_block: int
    smem_per_block_optin: int
    reserved_smem_per_block: int
    # Shared memory is allocated per block in units of this many bytes (cudaOccSMemAllocationGranularity).
    smem_alloc_unit: int
    # Carveout sizes, in KiB, the SM can configure (header: cudaOccAlignUpShmemSizeVoltaPlus; the Guide
    # lists the same sizes in "Shared Memory Capacity per Compute Capability").
    smem_configs_kib: tuple[int, ...]
    # Block barriers one SM holds (header: cudaOccMaxBlocksPerSMBlockBarrierLimit, 1 or 2 per resident
    # block slot). None where the header does not apply that limit (before sm_90).
    block_barriers_per_sm: int | None

    @property
    def base_name(self) -> str:
        """`sm_90` for `sm_90a`: the arch whose limits these are."""
        return f"sm_{self.major}{self.minor}"

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


# Shared by every supported arch. Guide: 1024 threads per block, 32-thread warps, 64 K 32-bit registers
# per SM and per block, 255 registers per thread, 48 KB of shared memory per block without opt-in.
# Header: registers allocated per warp in units of 256, 256 allocatable per thread, 4 sub-partitions.
_MAX_THREADS_PER_BLOCK = 1024
_WARP_SIZE = 32
_REGS = 64 * KIB
_MAX_REGS_PER_THREAD = 255
_REG_ALLOC_UNIT = 256
_REG_ALLOC_MAX_PER_THREAD = 256
_SUB_PARTITIONS = 4
_SMEM_PER_BLOCK = 48 * KIB

# Carveout steps (KiB) from the header; the Guide's "SMEM Capacity Sizes" column matches.
_VOLTA_CONFIGS = (0, 8, 16, 32, 64, 96)
_TURING_CONFIGS = (32, 64)
_SMALL_CONFIGS = (0, 8, 16, 32, 64, 100)
_MID_CONFIGS = (0, 8, 16, 32, 64, 100, 132, 164)
_LARGE_CONFIGS = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


def _arch(
    major: int,
    minor: int,
    *,
    threads_per_sm: int,
    blocks_per_sm: int,
    smem_per_sm_kib: int,
    smem_optin_kib: int,
    smem_alloc_unit: int,
    smem_configs_kib: tuple[int, ...],
    block_barriers_per_sm: int | None,
) -> ArchLimits:
    return ArchLimits(
        name=f"sm_{major}{minor}",
        major=major,
        minor=minor,
        max_threads_per_sm=threads_per_sm,
        max_blocks_per_sm=blocks_per_sm,
        smem_per_sm=smem_per_sm_kib * KIB,
        smem_per_block_optin=smem_optin_kib * KIB,
        # The Guide gives per-SM and per-block maxima; from 8.0 on the difference (1 KB) is what the
        # driver reserves per block (cudaDeviceProp::reservedSharedMemPerBlock). Before 8.0 they match.
        reserved_smem_per_block=(smem_per_sm_kib - smem_optin_kib) * KIB,
        smem_alloc_unit=smem_alloc_unit,
        smem_configs_kib=smem_configs_kib,
        block_barriers_per_sm=block_barriers_per_sm,
        max_threads_per_block=_MAX_THREADS_PER_BLOCK,
        warp_size=_WARP_SIZE,
        regs_per_sm=_REGS,
        max_regs_per_block=_REGS,
        max_regs_per_thread=_MAX_REGS_PER_THREAD,
        reg_alloc_unit=_REG_ALLOC_UNIT,
        reg_alloc_max_per_thread=_REG_ALLOC_MAX_PER_THREAD,
        sub_partitions=_SUB_PARTITIONS,
        smem_per_block=_SMEM_PER_BLOCK,
    )


# fmt: off
_TABLE: tuple[ArchLimits, ...] = (
    # Volta (12.x Guide, columns 7.0 and 7.2): 64 warps, 32 blocks, 96 KB per SM and per block.
    # Header: 256-byte smem units; no barrier limit before 9.0.
    _arch(7, 0, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=96, smem_optin_kib=96,
          smem_alloc_unit=256, smem_configs_kib=_VOLTA_CONFIGS, block_barriers_per_sm=None),
    _arch(7, 2, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=96, smem_optin_kib=96,
          smem_alloc_unit=256, smem_configs_kib=_VOLTA_CONFIGS, block_barriers_per_sm=None),
    # Turing (Guide 7.5): 32 warps, 16 blocks, 64 KB per SM and per block.
    _arch(7, 5, threads_per_sm=1024, blocks_per_sm=16, smem_per_sm_kib=64, smem_optin_kib=64,
          smem_alloc_unit=256, smem_configs_kib=_TURING_CONFIGS, block_barriers_per_sm=None),
    # Ampere A100 (Guide 8.0): 64 warps, 32 blocks, 164 KB per SM, 163 KB per block. Header: 128-byte
    # smem units from 8.0 on.
    _arch(8, 0, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=164, smem_optin_kib=163,
          smem_alloc_unit=128, smem_configs_kib=_MID_CONFIGS, block_barriers_per_sm=None),
    # Ampere GA10x (Guide 8.6): 48 warps, 16 blocks, 100 KB per SM, 99 KB per block.
    _arch(8, 6, threads_per_sm=1536, blocks_per_sm=16, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=None),
    # Orin (Guide 8.7): 48 warps, 16 blocks, 164 KB per SM, 163 KB per block.
    _arch(8, 7, threads_per_sm=1536, blocks_per_sm=16, smem_per_sm_kib=164, smem_optin_kib=163,
          smem_alloc_unit=128, smem_configs_kib=_MID_CONFIGS, block_barriers_per_sm=None),
    # Ada (Guide 8.9): 48 warps, 24 blocks, 100 KB per SM, 99 KB per block.
    _arch(8, 9, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=None),
    # Hopper (Guide 9.0): 64 warps, 32 blocks, 228 KB per SM, 227 KB per block. Header: 2 barriers
    # per block slot.
    _arch(9, 0, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=64),
    # Blackwell B200 (Guide 10.0): as Hopper.
    _arch(10, 0, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=64),
    # Thor (13.x Guide column 11.0, which is CUDA 12.9's 10.1): 48 warps, 24 blocks, 228/227 KB.
    # Header: 24 blocks for 10.1 and 1 barrier per block slot.
    _arch(10, 1, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=24),
    # Blackwell B300 (Guide 10.3): as 10.0.
    _arch(10, 3, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=64),
    # Blackwell GB20x and GB10 (Guide 12.x): 48 warps, 24 blocks, 100 KB per SM, 99 KB per block.
    # Header: 1 barrier per block slot.
    _arch(12, 0, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=24),
    _arch(12, 1, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=24),
)
# fmt: on

ARCHS: Mapping[str, ArchLimits] = MappingProxyType({a.name: a for a in _TABLE})

SUPPORTED_ARCHS: tuple[str, ...] = tuple(a.name for a in sorted(_TABLE, key=lambda a: (a.major, a.minor)))

# The arch-specific ("a") and family ("f") spellings that the CUDA 12.9 ptxas accepts (`ptxas --help`,
# --gpu-name). They compile for the same hardware, so they share their base arch's limits.
_SUFFIXES: Mapping[str, str] = MappingProxyType(
    {
        "sm_90": "a",
        "sm_100": "af",
        "sm_101": "af",
        "sm_103": "af",
        "sm_120": "af",
        "sm_121": "af",
    }
)

SUPPORTED_VARIANTS: tuple[str, ...] = tuple(
    base + suffix for base in SUPPORTED_ARCHS for suffix in _SUFFIXES.get(base, "")
)

_NAME = re.compile(r"sm_(\d+)([af]?)")
# Spellings people reach for instead of sm_XX: compute_90, lto_90a, SM90, 90, 9.0.
_ALMOST = re.compile(r"(?:sm|compute|lto)?_?(\d+)([af]?)")
_DOTTED = re.compile(r"(\d+)\.(\d)")


@functools.lru_cache(maxsize=64)  # every occupancy asks; the limits are frozen
def get_arch(name: str) -> ArchLimits:
    """Limits for `sm_XX`, `sm_XXa` or `sm_XXf`; a suffixed name keeps its spelling in `.name`."""
    match = _NAME.fullmatch(name)
    if match is not None:
        base = ARCHS.get(f"sm_{match[1]}")
        if base is not None and match[2] in _SUFFIXES.get(base.name, ""):
            return base if not match[2] else replace(base, name=name)
    raise UnknownArchError(_unknown_message(name))


def runs_on(arch: str, device_arch: str) -> bool:
    """Whether a cubin built for `arch` loads on a device of `device_arch`: its own arch, and the
    arch-specific variant of it (an sm_90a cubin runs on an H100 or H200, which report sm_90)."""
    match = _NAME.fullmatch(arch)
    return arch == device_arch or (match is not None and bool(match[2]) and f"sm_{match[1]}" == device_arch)


def compute_arch(name: str) -> str:
    """The NVRTC/PTX virtual arch for a real one: `compute_90a` for `sm_90a`."""
    return "compute_" + get_arch(name).name.removeprefix("sm_")


def _unknown_message(name: str) -> str:
    supported = ", ".join(SUPPORTED_ARCHS)
    variants = ", ".join(SUPPORTED_VARIANTS)
    hint = _suggestion(name)
    did_you_mean = f"did you mean {hint!r}? " if hint is not None else ""
    return f"unknown arch {name!r} ({did_you_mean}supported: {supported}; arch-specific: {variants})"


def _suggestion(name: str) -> str | None:
    text = name.strip().lower()
    dotted = _DOTTED.fullmatch(text)
    if dotted is not None:
        text = dotted[1] + dotted[2]
    almost = _ALMOST.fullmatch(text)
    if almost is None:
        return None
    for candidate in (f"sm_{almost[1]}{almost[2]}", f"sm_{almost[1]}"):
        if candidate == name:
            continue
        try:
            get_arch(candidate)
        except UnknownArchError:
            continue
        return candidate
    return None
