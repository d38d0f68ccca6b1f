"""Variants of the register-hungry polynomial kernel in kernels/poly.cu (NACC accumulators per thread) that a
test adds to the manifest's NACC = 32 (pyproject.toml): a budget of their own, the fixture, GPU timing."""

from __future__ import annotations

import pytest

from pytest_regbudget import RegbudgetFixture

POLY = "../kernels/poly.cu"


@pytest.mark.regbudget(
    source=POLY,
    kernel="poly_eval",
    defines={"NACC": 64, "BOUNDS": "__launch_bounds__(512)"},
    max_regs=128,
    spill_stores=128,
    spill_loads=128,
    launch=(512,),
)
def test_poly_eval_64_accumulators_bounded() -> None:
    """64 accumulators need ~168 registers, too many for a 512-thread block; __launch_bounds__(512) caps them
    at 128 and accepts a small spill, which this budget bounds so that a compiler change that spills more
    fails."""


@pytest.mark.parametrize("nacc", [8, 16])
@pytest.mark.regbudget(max_regs=64, spills=0, launch=(256, 4))
def test_poly_eval_small(regbudget: RegbudgetFixture, nacc: int) -> None:
    """The fixture compiles variants inside the test; the marker's budgets judge each one."""
    report = regbudget.compile(POLY, "poly_eval", defines={"NACC": nacc})
    assert report.arch == regbudget.arch


@pytest.mark.regbudget(
    source=POLY,
    kernel="poly_eval",
    defines={"NACC": 32},
    max_regs=112,
    spills=0,
    launch=(256,),
    max_time_ratio=1.10,
)
def test_poly_eval_timed(regbudget: RegbudgetFixture) -> None:
    """On a GPU runner, time the very cubin checked above against its baseline (occupancy beside it).
    On a CPU runner regbudget.gpu is None and the compile-time checks are the whole test."""
    dev = regbudget.gpu
    if dev is None:
        return
    import numpy as np

    cp = dev.cupy
    n, degree, block = 1 << 22, 64, 256
    x = cp.random.rand(n, dtype=cp.float32)
    coef = cp.random.rand(degree, dtype=cp.float32)
    y = cp.empty(n, dtype=cp.float32)
    timing = regbudget.benchmark("poly_eval", n // block, block, (x, coef, y, np.int32(n), np.int32(degree)))
    assert timing is not None
    assert timing.median_ms > 0
