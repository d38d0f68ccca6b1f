"""Per-compute-capability limits: the one table every other module reads arch facts from.

Owns `ArchLimits`, the table of supported architectures, arch-name parsing (`get_arch`, `compute_arch`), and
what CUDA releases did to arch names (`Lineage`: renamed, dropped, which release lists it), which only the
advice for an arch that a toolkit does not build reads. Each number cites where it comes from:

- "header" is cuda_occupancy.h of CUDA 13.5 (the nvidia-cuda-runtime 13.5 wheel, CUDART_VERSION 13050): the
  newest CUDA 13 header the test extras install. The whole table follows it: allocation granularities,
  sub-partition counts, blocks per SM, block barriers per block slot and the shared-memory carveout steps.
  tests/core/test_occupancy.py compiles that header and checks that `occupancy()` gives its block counts for
  every arch of this table. The header takes threads and shared memory per SM from the device.
- "traits" is CCCL 3.5.0's `cuda/__device/arch_traits.h` (nvidia-cuda-cccl in the same 13.5 wheels): threads,
  blocks and shared memory per SM and per block, one specialization per arch.
- "Guide" is the CUDA C++ Programming Guide, appendix "Compute Capabilities": the tables "Device and
  Streaming Multiprocessor (SM) Information per Compute Capability", "Memory Information per Compute
  Capability" and "Shared Memory Capacity per Compute Capability" (CUDA 13.x numbering: tables 30-32;
  in CUDA 12.x one table, "Technical Specifications per Compute Capability"). The 13.x guide dropped
  7.0/7.2; their numbers are from the 12.x table.

Names are the spellings of the toolkit that builds them: CUDA 12.x calls Thor sm_101, CUDA 13 calls it sm_110
(the same chip, the same row numbers); both are here because each release builds only its own spelling.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from msgspec import Struct
from msgspec.structs import replace

from .arch_names import ARCH_NAMES, NAME, VARIANT_NAMES, known_base, unknown_message
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

# Carveout steps (KiB) from the header (cudaOccAlignUpShmemSizeVoltaPlus); the Guide's "SMEM Capacity Sizes"
# column matches.
_VOLTA_CONFIGS = (0, 8, 16, 32, 64, 96)
_TURING_CONFIGS = (32, 64)
_SMALL_CONFIGS = (0, 8, 16, 32, 64, 100)
_MID_CONFIGS = (0, 8, 16, 32, 64, 100, 132, 164)
_LARGE_CONFIGS = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
# The header's steps for 10.7 go one past the others', to 328 KiB.
_SM107_CONFIGS = (*_LARGE_CONFIGS, 328)


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
        # driver reserves per block (cudaDeviceProp::reservedSharedMemPerBlock; traits: 1024 from 8.0).
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


# Every row: threads, blocks and shared memory per SM and per block from the Guide or traits (which agree
# wherever both have the arch); blocks, smem unit, carveout steps and barriers per block slot from the header
# (cudaOccMaxBlocksPerMultiprocessor, cudaOccSMemAllocationGranularity, cudaOccAlignUpShmemSizeVoltaPlus,
# cudaOccMaxBlocksPerSMBlockBarrierLimit). The header applies the barrier limit from 9.0 on only.
# fmt: off
_TABLE: tuple[ArchLimits, ...] = (
    # Volta (12.x Guide, columns 7.0 and 7.2; traits sm_70): 64 warps, 32 blocks, 96 KB per SM and per block.
    # Header: 256-byte smem units.
    _arch(7, 0, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=96, smem_optin_kib=96,
          smem_alloc_unit=256, smem_configs_kib=_VOLTA_CONFIGS, block_barriers_per_sm=None),
    _arch(7, 2, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=96, smem_optin_kib=96,
          smem_alloc_unit=256, smem_configs_kib=_VOLTA_CONFIGS, block_barriers_per_sm=None),
    # Turing (Guide 7.5, traits sm_75): 32 warps, 16 blocks, 64 KB per SM and per block.
    _arch(7, 5, threads_per_sm=1024, blocks_per_sm=16, smem_per_sm_kib=64, smem_optin_kib=64,
          smem_alloc_unit=256, smem_configs_kib=_TURING_CONFIGS, block_barriers_per_sm=None),
    # Ampere A100 (Guide 8.0, traits sm_80): 64 warps, 32 blocks, 164 KB per SM, 163 KB per block. Header:
    # 128-byte smem units from 8.0 on.
    _arch(8, 0, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=164, smem_optin_kib=163,
          smem_alloc_unit=128, smem_configs_kib=_MID_CONFIGS, block_barriers_per_sm=None),
    # Ampere GA10x (Guide 8.6, traits sm_86): 48 warps, 16 blocks, 100 KB per SM, 99 KB per block.
    _arch(8, 6, threads_per_sm=1536, blocks_per_sm=16, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=None),
    # Orin (Guide 8.7, traits sm_87): 48 warps, 16 blocks, 164 KB per SM, 163 KB per block.
    _arch(8, 7, threads_per_sm=1536, blocks_per_sm=16, smem_per_sm_kib=164, smem_optin_kib=163,
          smem_alloc_unit=128, smem_configs_kib=_MID_CONFIGS, block_barriers_per_sm=None),
    # 8.8 (new in CUDA 13.0): traits sm_88 is sm_86's specialization renamed: 48 warps, 100 KB per SM, 99 KB
    # per block. Header: 16 blocks (every 8.x but 8.0 and 8.9) and 8.6's carveout steps, up to 100 KB.
    _arch(8, 8, threads_per_sm=1536, blocks_per_sm=16, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=None),
    # Ada (Guide 8.9, traits sm_89): 48 warps, 24 blocks, 100 KB per SM, 99 KB per block.
    _arch(8, 9, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=None),
    # Hopper (Guide 9.0, traits sm_90): 64 warps, 32 blocks, 228 KB per SM, 227 KB per block. Header: 2
    # barriers per block slot.
    _arch(9, 0, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=64),
    # Blackwell B200 (Guide 10.0, traits sm_100): as Hopper; header: 2 barriers per block slot.
    _arch(10, 0, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=64),
    # Thor, CUDA 12.x's spelling (12.x Guide 10.1; the 13.x Guide and traits know it only as 11.0, below):
    # 48 warps, 228/227 KB. Header: 24 blocks for 10.1 and 1 barrier per block slot.
    _arch(10, 1, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=24),
    # Blackwell B300 (Guide 10.3, traits sm_103 = sm_100): 64 warps, 32 blocks, 228/227 KB. Header 13.5: 1
    # barrier per block slot (every 10.x but 10.0). The 12.9 and 13.0 headers gave it 2; this row follows the
    # newest, as the whole table does.
    _arch(10, 3, threads_per_sm=2048, blocks_per_sm=32, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=32),
    # 10.7 (new in the CUDA 13.5 tools; not in CUDA 13.0's): traits sm_107: 32 warps (1,024 threads), 16
    # blocks, and sm_100's 228 KB per SM, 227 KB per block. Header 13.5: 16 blocks, 1 barrier per block slot,
    # and carveout steps up to 328 KB. The sources disagree on the shared memory: this row follows traits'
    # 228 KB because it is the only source that states the SM's size (the header takes it from the device
    # and only rounds a request up to its steps), and a smaller SM never grants a block a larger one would
    # refuse. It keeps the header's steps; with 228 KB per SM the 328 KB step is never reached.
    _arch(10, 7, threads_per_sm=1024, blocks_per_sm=16, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_SM107_CONFIGS, block_barriers_per_sm=16),
    # Thor, CUDA 13's spelling (13.x Guide 11.0, traits sm_110): 48 warps, 24 blocks, 228 KB per SM, 227 KB
    # per block: sm_101's numbers. Header 13.5: 24 blocks, 1 barrier per block slot, 10.0's carveout steps.
    _arch(11, 0, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=228, smem_optin_kib=227,
          smem_alloc_unit=128, smem_configs_kib=_LARGE_CONFIGS, block_barriers_per_sm=24),
    # Blackwell GB20x and GB10 (Guide 12.x, traits sm_120 and sm_121): 48 warps, 24 blocks, 100 KB per SM,
    # 99 KB per block. Header: 1 barrier per block slot.
    _arch(12, 0, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=24),
    _arch(12, 1, threads_per_sm=1536, blocks_per_sm=24, smem_per_sm_kib=100, smem_optin_kib=99,
          smem_alloc_unit=128, smem_configs_kib=_SMALL_CONFIGS, block_barriers_per_sm=24),
)
# fmt: on

ARCHS: Mapping[str, ArchLimits] = MappingProxyType({a.name: a for a in _TABLE})

SUPPORTED_ARCHS: tuple[str, ...] = tuple(a.name for a in sorted(_TABLE, key=lambda a: (a.major, a.minor)))

if SUPPORTED_ARCHS != ARCH_NAMES:  # arch_names.py lists the names for readers without this table
    raise ImportError(f"core/arch_names.py's ARCH_NAMES differ from the arch table's: {SUPPORTED_ARCHS}")
SUPPORTED_VARIANTS: tuple[str, ...] = VARIANT_NAMES

# `--regbudget-arch` words that stand for a set of archs, resolved when the run knows its toolkits and GPU.
ALL = "all"  # every real arch of this table that every compiler of the run builds
NATIVE = "native"  # the arch of the GPU the run's GPU checks find
KEYWORDS = (ALL, NATIVE)


class Lineage(Struct, frozen=True):
    """What CUDA releases did to one arch name: only the advice for a toolkit that does not build it reads
    this. What a toolkit builds is always asked of the toolkit."""

    # CUDA releases whose own tools were read listing it (`ptxas --help`'s --gpu-name values, `nvcc
    # --list-gpu-code`): the nvidia-cuda-nvcc-cu12 12.9.86 wheel, CUDA 13.0.88's nvcc and ptxas, the
    # nvidia-cuda-nvcc 13.5.37 wheel. Not a claim that no other release builds it.
    listed_by: tuple[str, ...]
    # The name the next major release gives the same chip, and that release's major.
    renamed_to: str | None = None
    renamed_in: int | None = None
    # The first major release whose tools no longer list it.
    dropped_in: int | None = None


_EVERY = ("12.9", "13.0", "13.5")
# fmt: off
_LINEAGE: Mapping[str, Lineage] = MappingProxyType({
    # CUDA 13.0 dropped Volta (13.0 release notes; its ptxas and 13.5's list nothing below sm_75).
    "sm_70": Lineage(("12.9",), dropped_in=13),
    "sm_72": Lineage(("12.9",), dropped_in=13),
    **{name: Lineage(_EVERY) for name in ("sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100",
                                          "sm_103", "sm_120", "sm_121")},
    "sm_88": Lineage(("13.0", "13.5")),
    # CUDA 13.0 renamed Thor's sm_101 to sm_110 (13.0 release notes; 13.0's tools list sm_110, not sm_101).
    "sm_101": Lineage(("12.9",), renamed_to="sm_110", renamed_in=13),
    "sm_107": Lineage(("13.5",)),
    "sm_110": Lineage(("13.0", "13.5")),
})
# fmt: on
_NAME = NAME


@functools.lru_cache(maxsize=64)  # every occupancy asks; the limits are frozen
def get_arch(name: str) -> ArchLimits:
    """Limits for `sm_XX`, `sm_XXa` or `sm_XXf`; a suffixed name keeps its spelling in `.name`."""
    base = known_base(name)
    if base is None:
        raise UnknownArchError(unknown_message(name))
    limits = ARCHS[base]
    return limits if name == base else replace(limits, name=name)


def runs_on(arch: str, device_arch: str) -> bool:
    """Whether a cubin built for `arch` loads on a device of `device_arch`: its own arch, and the
    arch-specific variant of it (an sm_90a cubin runs on an H100 or H200, which report sm_90)."""
    match = _NAME.fullmatch(arch)
    return arch == device_arch or (match is not None and bool(match[2]) and f"sm_{match[1]}" == device_arch)


def compute_arch(name: str) -> str:
    """The NVRTC/PTX virtual arch for a real one: `compute_90a` for `sm_90a`."""
    return "compute_" + get_arch(name).name.removeprefix("sm_")


def is_arch_name(name: str) -> bool:
    """Whether `name` is spelt as a real arch is (`sm_130`, `sm_90a`), known to this table or not."""
    return _NAME.fullmatch(name) is not None


def arch_number(name: str) -> int:
    """90 for `sm_90` and `sm_90a`; ValueError for a name not spelt as a real arch."""
    match = _NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r} is not spelt sm_XX")
    return int(match[1])


def lineage(name: str) -> Lineage | None:
    """What CUDA releases did to the base arch of `name` (`sm_101a`: sm_101's); None where unknown."""
    match = _NAME.fullmatch(name)
    return None if match is None else _LINEAGE.get(f"sm_{match[1]}")


def renamed(name: str, major: int) -> str | None:
    """The spelling release `major` gives `name` where it renamed the arch (`sm_101a` -> `sm_110a` in 13),
    else None."""
    found = lineage(name)
    if found is None or found.renamed_to is None or found.renamed_in is None or major < found.renamed_in:
        return None
    match = _NAME.fullmatch(name)
    return found.renamed_to + (match[2] if match is not None else "")


def unknown_arch(name: str) -> UnknownArchError:
    """The error for a name this table has no limits for, listing the supported set."""
    return UnknownArchError(unknown_message(name))


def parse_archs(values: Sequence[str]) -> list[str]:
    """Flatten repeated, comma-separated arch values, keeping the first of duplicates. A name may be one the
    arch table knows, `all`, `native`, or one spelt as an arch that only the run's toolkits can judge
    (sm_130 of a later release: engine/state.py's `resolve_archs`); anything else is UnknownArchError, with
    the spelling it resembles."""
    out: list[str] = []
    for value in values:
        for name in (v.strip() for v in value.replace("\n", ",").split(",")):
            if name and name not in out:
                if name not in KEYWORDS and not is_arch_name(name):
                    get_arch(name)
                out.append(name)
    return out
