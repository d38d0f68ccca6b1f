"""register_cliff finds its steps by bisection: it must agree with a scan of every register count."""

from __future__ import annotations

import pytest

from pytest_regbudget.core.arch import ARCHS
from pytest_regbudget.core.occupancy import Cliff, occupancy, register_cliff


def scanned(arch: str, registers: int, block: int, smem: int, bound: int | None, barriers: int) -> Cliff:
    """The cliff as one occupancy per register count finds it (what register_cliff did before)."""

    def blocks(regs: int) -> int:
        return occupancy(arch, regs, block, smem, 0, bound, barriers=barriers).active_blocks

    now = blocks(registers)
    grow = next((r - 1 - registers for r in range(registers + 1, 256) if blocks(r) < now), 255 - registers)
    lower = next((r for r in range(registers - 1, 0, -1) if blocks(r) > now), None)
    return Cliff(
        registers=registers,
        blocks=now,
        grow=grow,
        shed=None if lower is None else registers - lower,
        blocks_if_shed=None if lower is None else blocks(lower),
    )


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_bisection_agrees_with_a_scan(arch: str) -> None:
    cases = [
        (registers, block, smem, bound, barriers)
        for registers in (0, 1, 16, 31, 32, 33, 40, 64, 65, 72, 96, 128, 129, 168, 200, 254, 255)
        for block in (32, 96, 128, 256, 384, 1024)
        for smem in (0, 20_000)
        for bound, barriers in ((None, 1), (256, 2))
    ]
    for case in cases:
        assert register_cliff(arch, *case[:3], 0, case[3], barriers=case[4]) == scanned(arch, *case), case
