"""Tests for pytest_regbudget.core.occupancy and .arch: the header as oracle, then the sentences and names.

The oracle test compiles occupancy_oracle.c against the cuda_occupancy.h of the newest CUDA 13 runtime wheel
the test extras install (nvidia-cuda-runtime 13.5, nvidia/cu13/include: the header the arch table follows)
and compares it with `occupancy()` on random configurations for every arch of the table. Set
REGBUDGET_OCCUPANCY_SEED to replay a failing run.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.occupancy import ask, build_oracle, launch_line
from msgspec.structs import replace

from pytest_regbudget.core.arch import (
    ARCHS,
    SUPPORTED_ARCHS,
    SUPPORTED_VARIANTS,
    ArchLimits,
    compute_arch,
    get_arch,
    lineage,
    renamed,
)
from pytest_regbudget.core.errors import UnknownArchError
from pytest_regbudget.core.occupancy import Occupancy, launch_failure, occupancy

CONFIGS_PER_ARCH = 10_000
SEED = int(os.environ.get("REGBUDGET_OCCUPANCY_SEED", "1729"))
INT_MAX = 2**31 - 1


@pytest.fixture(scope="session")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_oracle(tmp_path_factory.mktemp("occupancy_oracle"))


@dataclass(frozen=True)
class Config:
    registers: int
    block_size: int
    shared_mem: int
    dynamic_shared_mem: int
    max_threads: int | None
    barriers: int
    carveout: int | None

    def ours(self, limits: ArchLimits) -> Occupancy:
        return occupancy(
            limits,
            self.registers,
            self.block_size,
            self.shared_mem,
            self.dynamic_shared_mem,
            self.max_threads,
            barriers=self.barriers,
            carveout=self.carveout,
        )

    def request(self, limits: ArchLimits) -> str:
        return launch_line(
            limits,
            registers=self.registers,
            block_size=self.block_size,
            shared_mem=self.shared_mem,
            dynamic_shared_mem=self.dynamic_shared_mem,
            max_threads=self.max_threads,
            barriers=self.barriers,
            carveout=self.carveout,
        )


def _random_config(limits: ArchLimits, rng: random.Random) -> Config:
    """Uniform draws plus the edges where the arithmetic changes (units, 48 KiB, opt-in, 1024 threads)."""
    registers = rng.choice((rng.randint(1, 255), rng.randint(1, 255), rng.choice((0, 1, 255, 256, 257))))
    if rng.random() < 0.05:
        block_size = rng.randint(limits.max_threads_per_block + 1, 2 * limits.max_threads_per_block)
    elif rng.random() < 0.3:
        block_size = 32 * rng.randint(1, limits.max_threads_per_block // 32)
    else:
        block_size = rng.randint(1, limits.max_threads_per_block)
    shared_mem = rng.choice((0, 0, rng.randint(0, 16 * 1024), rng.randint(0, 100 * 1024), 48 * 1024))
    left_default = max(limits.smem_per_block - shared_mem, 0)
    left_optin = max(limits.smem_per_block_optin - shared_mem, 0)
    dynamic = rng.choice(
        (
            0,
            rng.randint(0, 8 * 1024),
            rng.randint(0, limits.smem_per_block_optin + 8 * 1024),
            left_default,
            left_default + 1,
            max(left_default - limits.reserved_smem_per_block, 0),
            left_optin,
            left_optin + 1,
            max(left_optin - rng.randint(1, 300), 0),
        )
    )
    max_threads = None
    if rng.random() < 0.25:
        max_threads = rng.choice((rng.randint(1, 1024), 32 * rng.randint(1, 32), block_size))
    barriers = 1 if rng.random() < 0.6 else rng.randint(0, 16)
    carveout = None
    if rng.random() < 0.2:
        carveout = rng.choice((0, 25, 50, 100, rng.randint(0, 100)))
    return Config(registers, block_size, shared_mem, dynamic, max_threads, barriers, carveout)


def _header_row(limits: ArchLimits, config: Config, answer: list[int]) -> tuple[int, ...]:
    """The header's answer for `config`, in the order of `_our_row`."""
    status, active, _factors, *rest = answer
    by_regs, by_smem, by_warps, by_blocks, by_barriers, regs_per_block, smem_per_block = rest
    bound = limits.max_threads_per_block if config.max_threads is None else config.max_threads
    if config.block_size > bound:
        # The header never compares the block with the kernel's own bound; the launch would fail.
        active = 0
    return status, active, by_regs, by_smem, by_warps, by_blocks, by_barriers, regs_per_block, smem_per_block


def _our_row(ours: Occupancy) -> tuple[int, ...]:
    def header_int(count: int | None) -> int:
        return INT_MAX if count is None else count

    return (
        0,
        ours.active_blocks,
        header_int(ours.blocks_by_registers),
        header_int(ours.blocks_by_smem),
        ours.blocks_by_warps,
        ours.blocks_by_blocks,
        header_int(ours.blocks_by_barriers),
        ours.registers_per_block,
        ours.smem_per_block,
    )


ROW_FIELDS = (
    "status, active, by_regs, by_smem, by_warps, by_blocks, by_barriers, regs_per_block, smem_per_block"
)


def _barrier_grid(limits: ArchLimits) -> list[Config]:
    """Every barrier count from 0 to 16 at the block sizes where barriers, not warps, set the count: small
    blocks of few registers (sm_103 with 2 to 16 barriers is where the 12.9/13.0 and 13.5 headers differ)."""
    return [
        Config(16, block, 0, 0, None, barriers, None)
        for barriers in range(17)
        for block in (32, 64, 96, 128, 256, limits.max_threads_per_block)
    ]


def _differences(oracle: Path, limits: ArchLimits, configs: list[Config]) -> list[str]:
    """The configurations whose answer differs from the header's, each with both rows."""
    answers = ask(oracle, limits, [c.request(limits) for c in configs])
    mismatches = []
    for config, answer in zip(configs, answers, strict=True):
        want = _header_row(limits, config, answer)
        got = _our_row(config.ours(limits))
        if got != want:
            mismatches.append(f"  {config}\n    header: {want}\n    ours:   {got}")
    return mismatches


@pytest.mark.parametrize("arch", SUPPORTED_ARCHS)
def test_matches_cuda_occupancy_h(oracle: Path, arch: str) -> None:
    limits = get_arch(arch)
    rng = random.Random(f"{SEED}:{arch}")
    configs = [_random_config(limits, rng) for _ in range(CONFIGS_PER_ARCH)] + _barrier_grid(limits)
    print(f"REGBUDGET_OCCUPANCY_SEED={SEED} arch={arch} configs={len(configs)}")
    mismatches = _differences(oracle, limits, configs)
    assert not mismatches, (
        f"{len(mismatches)} of {len(configs)} configurations differ from cuda_occupancy.h on {arch} "
        f"(REGBUDGET_OCCUPANCY_SEED={SEED}; rows are {ROW_FIELDS}):\n" + "\n".join(mismatches[:10])
    )


def test_the_oracle_tells_the_13_5_header_from_the_table_it_replaced(oracle: Path) -> None:
    """Guards the oracle itself: sm_103 with the 12.9 header's 2 barriers per block slot (64 per SM) differs
    from the header compiled here, which gives it 1, on the barrier-bound configurations."""
    old = replace(get_arch("sm_103"), block_barriers_per_sm=64)
    differ = _differences(oracle, old, _barrier_grid(old))
    assert len(differ) > 10


def test_oracle_configs_reach_every_outcome() -> None:
    """Guards the generator: a mismatch can only be found where the random configs actually go."""
    limits = get_arch("sm_90")
    rng = random.Random(f"{SEED}:coverage")
    seen = {_random_config(limits, rng).ours(limits).limiter for _ in range(CONFIGS_PER_ARCH)}
    assert seen == {"warps", "registers", "shared memory", "blocks", "barriers", "launch"}


@pytest.mark.parametrize("arch", SUPPORTED_ARCHS)
def test_oracle_configs_cover_1_to_16_barriers_on_every_arch(arch: str) -> None:
    limits = get_arch(arch)
    rng = random.Random(f"{SEED}:{arch}")
    configs = [_random_config(limits, rng) for _ in range(CONFIGS_PER_ARCH)] + _barrier_grid(limits)
    assert {c.barriers for c in configs} >= set(range(1, 17))
    if limits.block_barriers_per_sm is not None:
        bound = {c.barriers for c in configs if "barriers" in c.ours(limits).limiters}
        assert bound >= set(range(2, 17))


@pytest.mark.parametrize(
    ("arch", "barriers", "blocks"),
    [
        # The 13.5 header: 1 barrier per block slot on 10.3 (the 12.9 and 13.0 headers gave 2, so 32 here).
        ("sm_103", 2, 16),
        ("sm_100", 2, 32),
        ("sm_107", 2, 8),
        ("sm_110", 2, 12),
        ("sm_88", 16, 16),  # no barrier limit before 9.0
    ],
)
def test_two_barriers_in_32_thread_blocks(arch: str, barriers: int, blocks: int) -> None:
    assert occupancy(arch, 16, 32, barriers=barriers).active_blocks == blocks


def test_register_failure_shows_the_header_arithmetic() -> None:
    # 167 x 32 = 5,344 rounds up to 5,376 (= 168 per thread): registers go to warps in units of 256.
    assert launch_failure("sm_90", 167, 512) == (
        "167 registers -> 5,376 per warp (units of 256) x 16 warps = 86,016 > 65,536 registers per block "
        "on sm_90"
    )
    assert launch_failure("sm_90", 128, 512) is None


def test_register_failure_from_sub_partition_rounding() -> None:
    # 10 warps fit the block limit (64,000) but the hardware check rounds them up to 12.
    assert launch_failure("sm_90", 200, 320) == (
        "200 registers -> 6,400 per warp (units of 256) x 12 warps (10 rounded up to a multiple of 4 "
        "sub-partitions) = 76,800 > 65,536 registers per block on sm_90"
    )


def test_registers_per_thread_beyond_what_the_header_allocates() -> None:
    assert launch_failure("sm_90", 257, 32) == (
        "257 registers per thread > 256 allocatable per thread on sm_90 (ptxas allows at most 255)"
    )


@pytest.mark.parametrize(
    ("block_size", "max_threads", "expected"),
    [
        (2048, None, "block of 2,048 threads > 1,024 max threads per block on sm_90"),
        (512, 256, "block of 512 threads > 256 max threads (__launch_bounds__/.maxntid) on sm_90"),
        (256, 256, None),
        (1024, None, None),
    ],
)
def test_block_size_limits(block_size: int, max_threads: int | None, expected: str | None) -> None:
    assert launch_failure("sm_90", 32, block_size, max_threads=max_threads) == expected


def test_launch_bounds_keep_the_header_counts_for_reference() -> None:
    result = occupancy("sm_90", 32, 512, max_threads=256)
    assert (result.active_blocks, result.limiter, result.limiters) == (0, "launch", ())
    assert result.blocks_by_warps == 4


@pytest.mark.parametrize(
    ("arch", "kwargs", "limiter", "blocks"),
    [
        ("sm_90", {"registers": 16, "block_size": 1024}, "warps", 2),
        ("sm_90", {"registers": 128, "block_size": 256}, "registers", 2),
        ("sm_90", {"registers": 32, "block_size": 128, "shared_mem": 40 * 1024}, "shared memory", 5),
        ("sm_90", {"registers": 16, "block_size": 32}, "blocks", 32),
        ("sm_90", {"registers": 16, "block_size": 32, "barriers": 16}, "barriers", 4),
        ("sm_90", {"registers": 167, "block_size": 512}, "launch", 0),
    ],
)
def test_limiter_names(arch: str, kwargs: dict[str, int], limiter: str, blocks: int) -> None:
    result = occupancy(arch, **kwargs)
    assert (result.limiter, result.active_blocks) == (limiter, blocks)
    assert (result.failure is None) == (blocks > 0)


def test_ties_name_every_limit_and_pick_the_first() -> None:
    # 32 registers x 1024 threads: 2 blocks by warps and 2 by registers.
    result = occupancy("sm_90", 32, 1024)
    assert result.limiters == ("warps", "registers")
    assert result.limiter == "warps"


def test_numbers_behind_a_register_limit() -> None:
    result = occupancy("sm_90", 128, 256)
    assert (result.warps_per_block, result.registers_per_warp, result.registers_per_block) == (8, 4096, 32768)
    assert (result.active_warps, result.occupancy) == (16, 0.25)
    assert result.summary == "2 blocks x 8 warps = 16 of 64 warps per SM (25%) on sm_90, limited by registers"
    assert result.explain() == (
        "128 registers -> 4,096 per warp (units of 256); 16,384 per sub-partition hold 4 warps x 4 = "
        "16 warps per SM / 8 per block -> 2 blocks"
    )


def test_shortfall_names_the_limit() -> None:
    result = occupancy("sm_90", 128, 256)
    assert result.shortfall(2) is None
    assert result.shortfall(3) == (
        "only 2 blocks of 256 threads fit per SM on sm_90, 3 needed (limited by registers: "
        + result.explain()
        + ")"
    )
    unlaunchable = occupancy("sm_90", 167, 512)
    expected = f"no block of 512 threads fits on sm_90, 1 needed: {unlaunchable.failure}"
    assert unlaunchable.shortfall(1) == expected


def test_48_kib_of_dynamic_shared_memory_needs_no_opt_in() -> None:
    at = occupancy("sm_90", 32, 128, dynamic_shared_mem=48 * 1024)
    over = occupancy("sm_90", 32, 128, dynamic_shared_mem=48 * 1024 + 1)
    assert (at.opted_in, at.smem_limit_per_block) == (False, 49_152)
    assert (over.opted_in, over.smem_limit_per_block) == (True, 232_448)
    # 49,152 + 1,024 reserved = 50,176 per block; 233,472 per SM holds 4 of them either way.
    assert (at.smem_per_block, at.smem_per_sm, at.active_blocks) == (50_176, 233_472, 4)
    assert (over.smem_per_block, over.active_blocks) == (50_304, 4)


def test_static_plus_dynamic_over_48_kib_counts_as_opted_in() -> None:
    assert occupancy("sm_90", 32, 128, shared_mem=40 * 1024, dynamic_shared_mem=16 * 1024).opted_in


@pytest.mark.parametrize(
    ("arch", "shared_mem", "dynamic", "expected"),
    [
        ("sm_86", 0, 101_376, None),
        (
            "sm_86",
            0,
            101_377,
            "shared memory 0 static + 101,377 dynamic = 101,377 bytes per block > 101,376 opt-in maximum "
            "on sm_86",
        ),
        (
            "sm_86",
            49_152,
            65_536,
            "shared memory 49,152 static + 65,536 dynamic = 114,688 bytes per block > 101,376 opt-in "
            "maximum on sm_86",
        ),
        ("sm_90", 49_152, 65_536, None),
        ("sm_75", 0, 65_536, None),
        (
            "sm_75",
            0,
            65_537,
            "shared memory 0 static + 65,537 dynamic = 65,537 bytes per block > 65,536 opt-in maximum "
            "on sm_75",
        ),
    ],
)
def test_opt_in_maximum(arch: str, shared_mem: int, dynamic: int, expected: str | None) -> None:
    assert launch_failure(arch, 32, 128, shared_mem, dynamic) == expected


def test_carveout_preference_grows_to_fit_one_block() -> None:
    # 0% asks for no shared memory; the SM takes the smallest step (8 KiB) that holds a 1 KiB block.
    result = occupancy("sm_90", 32, 128, carveout=0)
    assert (result.smem_per_sm, result.active_blocks, result.limiter) == (8192, 8, "shared memory")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"registers": 32, "block_size": 0}, "block of 0 threads: a block needs at least 1 thread"),
        ({"registers": -1, "block_size": 32}, "-1 registers per thread: a register count cannot be negative"),
        (
            {"registers": 32, "block_size": 32, "carveout": 101},
            "carveout 101% is not a percentage from 0 to 100",
        ),
    ],
)
def test_inputs_the_header_rejects(kwargs: dict[str, int], message: str) -> None:
    result = occupancy("sm_90", **kwargs)
    assert (result.active_blocks, result.limiter, result.failure) == (0, "launch", message)


def test_supported_archs_are_sorted_numerically() -> None:
    numeric = sorted(ARCHS.values(), key=lambda limits: (limits.major, limits.minor))
    assert tuple(limits.name for limits in numeric) == SUPPORTED_ARCHS
    assert SUPPORTED_ARCHS.index("sm_90") < SUPPORTED_ARCHS.index("sm_100")
    assert {"sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100", "sm_120"} <= set(SUPPORTED_ARCHS)


@pytest.mark.parametrize("arch", SUPPORTED_ARCHS)
def test_arch_table_is_self_consistent(arch: str) -> None:
    limits = ARCHS[arch]
    assert limits.name == f"sm_{limits.major}{limits.minor}" == limits.base_name
    assert limits.smem_per_sm // 1024 in limits.smem_configs_kib
    assert limits.smem_configs_kib == tuple(sorted(limits.smem_configs_kib))
    assert limits.smem_per_block_optin + limits.reserved_smem_per_block == limits.smem_per_sm
    assert limits.reserved_smem_per_block == (1024 if limits.major >= 8 else 0)
    assert limits.max_threads_per_sm % limits.warp_size == 0


def test_only_sm_107_has_a_carveout_step_past_its_shared_memory() -> None:
    """The 13.5 header's 328 KB step for 10.7 is above the 228 KB per SM the row follows (arch_traits.h): no
    launch reaches it, so the result is the same with the step or without it."""
    past = {a: [k for k in ARCHS[a].smem_configs_kib if k * 1024 > ARCHS[a].smem_per_sm] for a in ARCHS}
    assert {a: steps for a, steps in past.items() if steps} == {"sm_107": [328]}
    with_step = get_arch("sm_107")
    without = replace(with_step, smem_configs_kib=with_step.smem_configs_kib[:-1])
    rng = random.Random(f"{SEED}:sm_107-step")
    for _ in range(2000):
        config = _random_config(with_step, rng)
        assert _our_row(config.ours(with_step)) == _our_row(config.ours(without))


@pytest.mark.parametrize(
    ("name", "major", "expected"),
    [("sm_101", 13, "sm_110"), ("sm_101a", 13, "sm_110a"), ("sm_101f", 12, None), ("sm_90", 13, None)],
)
def test_renamed_keeps_the_suffix(name: str, major: int, expected: str | None) -> None:
    assert renamed(name, major) == expected


def test_every_arch_of_the_table_has_a_lineage() -> None:
    """The advice for an arch a toolkit does not build names a release that lists it: every row needs one."""
    for arch in SUPPORTED_ARCHS:
        found = lineage(arch)
        assert found is not None, arch
        assert found.listed_by, arch
    assert lineage("sm_130") is None


def test_unknown_arch_lists_the_supported_set() -> None:
    with pytest.raises(UnknownArchError) as caught:
        get_arch("sm_91")
    message = str(caught.value)
    assert message.startswith("unknown arch 'sm_91' (supported: sm_70, sm_72, sm_75, sm_80,")
    assert all(name in message for name in (*SUPPORTED_ARCHS, *SUPPORTED_VARIANTS))
    assert "did you mean" not in message


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("compute_90", "sm_90"),
        ("90", "sm_90"),
        ("SM_90", "sm_90"),
        ("9.0", "sm_90"),
        ("compute_90a", "sm_90a"),
        ("sm_80a", "sm_80"),
        ("sm_90f", "sm_90"),
    ],
)
def test_unknown_arch_suggests_the_sm_spelling(name: str, hint: str) -> None:
    expected = f"unknown arch '{name}' (did you mean '{hint}'? supported: "
    with pytest.raises(UnknownArchError, match=f"^{re.escape(expected)}"):
        get_arch(name)


def test_unknown_arch_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown arch"):
        get_arch("sm_35")


@pytest.mark.parametrize(
    ("variant", "base"), [("sm_90a", "sm_90"), ("sm_100a", "sm_100"), ("sm_120f", "sm_120")]
)
def test_suffixed_archs_share_their_base_limits(variant: str, base: str) -> None:
    limits = get_arch(variant)
    assert limits.name == variant
    assert limits.base_name == base
    assert replace(limits, name=base) == get_arch(base)
    assert occupancy(variant, 167, 256).active_blocks == occupancy(base, 167, 256).active_blocks


@pytest.mark.parametrize(
    ("name", "virtual"),
    [
        ("sm_90", "compute_90"),
        ("sm_90a", "compute_90a"),
        ("sm_100f", "compute_100f"),
        ("sm_121", "compute_121"),
    ],
)
def test_compute_arch(name: str, virtual: str) -> None:
    assert compute_arch(name) == virtual


def test_compute_arch_rejects_what_get_arch_rejects() -> None:
    with pytest.raises(UnknownArchError):
        compute_arch("compute_90")
