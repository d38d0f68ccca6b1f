"""Budgets of the row-wise softmax template in kernels/softmax.cu."""

from __future__ import annotations

import pytest

from pytest_regbudget import RegbudgetFixture


@pytest.mark.regbudget(
    source="../kernels/softmax.cu",
    kernel="softmax<256>",
    max_regs=32,
    spills=0,
    smem=32,
    launch=(256, 8),
    min_occupancy=1.0,
)
def test_softmax() -> None:
    """A memory-bound kernel must keep the SM full: eight 256-thread blocks, so at most 32 registers.
    Its register count is also held to the baseline, which is what catches a larger UNROLL (README.md)."""


@pytest.mark.parametrize("block", [128, 512, 1024])
@pytest.mark.regbudget(max_regs=32, spills=0)
def test_softmax_blocks(regbudget: RegbudgetFixture, block: int) -> None:
    """Other block sizes of the same template, compiled through the fixture: a name expression per size."""
    report = regbudget.compile("../kernels/softmax.cu", f"softmax<{block}>")
    # One float of scratch per warp.
    assert report.shared_mem == block // 32 * 4
