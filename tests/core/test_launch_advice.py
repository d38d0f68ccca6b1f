"""The fix a failed `launch=` budget suggests follows what limits the launch, and never breaks a limit."""

from __future__ import annotations

import re

import pytest
from msgspec.structs import replace

from pytest_regbudget.core.arch import get_arch
from pytest_regbudget.core.checks import check
from pytest_regbudget.core.limits import Launch, Limits
from pytest_regbudget.core.metrics import KernelResources
from pytest_regbudget.core.occupancy import (
    BARRIERS,
    BLOCKS,
    LAUNCH,
    REGISTERS,
    SHARED_MEMORY,
    WARPS,
    occupancy,
)
from pytest_regbudget.core.ptxas import parse_ptxas_output

PTXAS = """\
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem
"""
LEAN = parse_ptxas_output(PTXAS)["k"]
HUNGRY = replace(LEAN, registers=167)
REGISTER_FIXES = ("__launch_bounds__", "maxrregcount", "fewer live values")


def advice(res: KernelResources, launch: Launch, dynamic_smem: int = 0, arch: str = "sm_90") -> str:
    (msg,) = check("t", "k", arch, "k.cu", res, Limits(launch=launch, dynamic_smem=dynamic_smem)).violations
    return msg


def fix(msg: str) -> str:
    return msg[msg.index("Fix: ") :]


def test_a_block_over_the_arch_maximum_is_told_to_shrink_not_to_bound() -> None:
    msg = advice(LEAN, Launch(2048))
    assert msg.startswith(
        "launch=(2048,) cannot launch on sm_90: block of 2,048 threads > 1,024 max threads per block on "
        "sm_90; at run time this is cudaErrorInvalidConfiguration."
    )
    assert fix(msg) == (
        "Fix: a block of at most 1,024 threads, the most sm_90 allows (launch more blocks to cover the same "
        "work)."
    )
    assert "__launch_bounds__(2048" not in msg
    assert get_arch("sm_90").max_threads_per_block == 1024


def test_registers_get_launch_bounds_maxrregcount_and_live_values() -> None:
    msg = advice(HUNGRY, Launch(512))
    assert "cudaErrorLaunchOutOfResources" in msg
    assert fix(msg) == (
        "Fix: a smaller block, __launch_bounds__(512) (ptxas then keeps it to 128 registers), or fewer live "
        "values (less unrolling, smaller per-thread arrays); -maxrregcount=128 in ptxas_options caps every "
        "kernel of the file the same way."
    )
    # The cap it names is right: at 128 registers the block launches, at 129 it does not.
    assert occupancy("sm_90", 128, 512).active_blocks == 1
    assert occupancy("sm_90", 129, 512).active_blocks == 0


def test_kernel_with_launch_bounds_is_not_told_about_maxrregcount() -> None:
    bounded = replace(HUNGRY, max_threads=128)
    msg = advice(bounded, Launch(128, 4))
    assert "__launch_bounds__(128, 4) (ptxas then keeps it to 128 registers)" in msg
    assert "maxrregcount" not in msg


def test_blocks_per_sm_from_registers() -> None:
    msg = advice(HUNGRY, Launch(128, 4))
    assert "(limited by registers:" in msg
    assert "__launch_bounds__(128, 4) (ptxas then keeps it to 128 registers)" in msg


def test_warps_limited_launch_gets_a_block_size_not_register_advice() -> None:
    msg = advice(LEAN, Launch(1024, 3))
    assert "(limited by warps: 32 warps per block into 64 warps per SM -> 2 blocks)" in msg
    assert fix(msg) == (
        "Fix: a block of at most 672 threads for 3 blocks per SM (64 warps per SM on sm_90), or fewer blocks "
        "per SM in launch=."
    )
    assert not any(word in msg for word in REGISTER_FIXES)
    assert occupancy("sm_90", 32, 672, 4096).blocks_by_warps >= 3


def test_block_count_limit_gets_fewer_blocks() -> None:
    msg = advice(replace(LEAN, smem=0), Launch(32, 40))
    assert "(limited by blocks:" in msg
    assert fix(msg) == (
        "Fix: at most 32 blocks per SM in launch=, the most sm_90 keeps resident whatever their size (bigger "
        "blocks reach the same threads per SM)."
    )


def test_shared_memory_limited_launch_gets_a_shared_memory_size() -> None:
    msg = advice(LEAN, Launch(256, 2), dynamic_smem=150 * 1024)
    assert "(limited by shared memory:" in msg
    assert not any(word in msg for word in REGISTER_FIXES)
    room = int(re.search(r"at most ([\d,]+) bytes of shared memory per block", msg)[1].replace(",", ""))  # type: ignore[index]
    assert "for 2 blocks per SM (now 4,096 static + 153,600 dynamic)" in msg
    assert "less static or dynamic shared memory, or a smaller block" in msg
    # The figure is the exact edge: one byte more and the second block no longer fits.
    assert occupancy("sm_90", 32, 256, room).active_blocks == 2
    assert occupancy("sm_90", 32, 256, room + 1).active_blocks == 1


def test_shared_memory_over_the_opt_in_maximum_cannot_launch() -> None:
    msg = advice(LEAN, Launch(256), dynamic_smem=250 * 1024)
    assert "cannot launch on sm_90: shared memory 4,096 static + 256,000 dynamic" in msg
    assert "cudaErrorLaunchOutOfResources" not in msg
    lim = get_arch("sm_90")
    assert f"at most {lim.smem_per_block_optin:,} bytes of shared memory per block for one block" in msg
    assert not any(word in msg for word in REGISTER_FIXES)


def test_barrier_limited_launch_gets_fewer_named_barriers() -> None:
    msg = advice(replace(LEAN, barriers=16, smem=0), Launch(64, 5))
    assert "(limited by barriers:" in msg
    assert fix(msg) == (
        "Fix: at most 12 barriers per block for 5 blocks per SM (now 16; 64 per SM on sm_90): fewer named "
        "barriers (bar.sync ids)."
    )


def test_a_block_over_the_kernels_own_bound() -> None:
    msg = advice(replace(LEAN, max_threads=256), Launch(512))
    assert "block of 512 threads > 256 max threads (__launch_bounds__/.maxntid)" in msg
    assert fix(msg) == (
        "Fix: a block of at most 256 threads, the kernel's own bound (__launch_bounds__/.maxntid), or "
        "__launch_bounds__(512) in the kernel."
    )


def test_every_limit_that_falls_short_gets_its_fix() -> None:
    # 40 KB of shared memory and 167 registers: at 256 threads each allows only one of the two blocks.
    msg = advice(replace(HUNGRY, smem=40 * 1024), Launch(256, 2), dynamic_smem=80 * 1024)
    assert "__launch_bounds__(256, 2)" in msg
    assert "bytes of shared memory per block for 2 blocks per SM" in msg
    assert "; and " in msg


@pytest.mark.parametrize(
    ("registers", "threads", "blocks", "smem", "barriers", "expected"),
    [
        (32, 1024, 3, 0, 1, (WARPS, REGISTERS)),
        (167, 512, 1, 0, 1, (REGISTERS,)),
        (32, 32, 40, 0, 1, (BLOCKS,)),
        (32, 64, 5, 0, 16, (BARRIERS,)),
        (32, 256, 2, 150 * 1024, 1, (SHARED_MEMORY,)),
        (32, 128, 2, 0, 1, ()),
    ],
)
def test_short_of_names_each_limit_below_the_need(
    registers: int, threads: int, blocks: int, smem: int, barriers: int, expected: tuple[str, ...]
) -> None:
    occ = occupancy("sm_90", registers, threads, smem, barriers=barriers)
    assert occ.short_of(blocks) == expected


def test_short_of_names_the_kernels_own_bound_first() -> None:
    assert occupancy("sm_90", 32, 512, max_threads=256).short_of(1) == (LAUNCH,)
