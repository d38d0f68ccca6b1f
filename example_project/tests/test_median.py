"""A kernel that spills on purpose (kernels/median.cu): the baseline, not an absolute budget, guards it."""

from __future__ import annotations

import pytest


@pytest.mark.regbudget(
    source="../kernels/median.cu",
    kernel="median7x7",
    # No spills= budget: today's spill bytes are in regbudget-baseline.toml, and any increase fails.
    max_regs=40,
    launch=(256, 6),
)
def test_median7x7() -> None:
    """__launch_bounds__(256, 6) holds the kernel to 40 registers and six resident blocks (75 % occupancy);
    the 7x7 window does not fit, so it spills. Run with --regbudget-sass to see where."""
