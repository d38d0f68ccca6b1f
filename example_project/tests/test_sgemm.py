"""Budgets of the tiled SGEMM in kernels/sgemm.cu, a warn-level goal, and its GPU timing."""

from __future__ import annotations

import pytest

from pytest_regbudget import RegbudgetFixture

SGEMM = {"source": "../kernels/sgemm.cu", "kernel": "sgemm_tiled"}


@pytest.mark.regbudget(
    **SGEMM,
    # __launch_bounds__(256, 2) caps ptxas at 128; these per-arch limits keep a few registers of headroom.
    max_regs={"sm_80": 124, "sm_90": 128},
    spills=0,
    smem=8192,
    launch=(256, 2),
    max_time_ratio=1.10,
)
def test_sgemm(regbudget: RegbudgetFixture) -> None:
    """Two 256-thread blocks per SM, no spills, 8 KiB of shared memory. On a GPU runner, also time the very
    cubin measured above against this GPU's baseline and check the product; on a CPU runner regbudget.gpu is
    None and the compile-time checks are the whole test."""
    dev = regbudget.gpu
    if dev is None:
        return
    import numpy as np

    cp = dev.cupy
    m = n = k = 2048
    a = cp.random.rand(m, k, dtype=cp.float32)
    b = cp.random.rand(k, n, dtype=cp.float32)
    c = cp.zeros((m, n), dtype=cp.float32)
    args = (np.int32(m), np.int32(n), np.int32(k), np.float32(1.0), a, b, np.float32(0.0), c)
    timing = regbudget.benchmark("sgemm_tiled", (n // 128, m // 128), 256, args)
    assert timing is not None
    assert timing.median_ms > 0
    # beta = 0: every timed launch wrote the same C.
    cp.testing.assert_allclose(c, a @ b, rtol=1e-3)


@pytest.mark.regbudget(**SGEMM, launch=(256,), min_occupancy=0.5, level="warn")
def test_sgemm_occupancy_goal() -> None:
    """A goal, not a gate: at about 120 registers only 2 blocks (25 % of the SM's warps) are resident. Until a
    smaller register tile or a split-K variant gets it to 50 %, this warns (RegbudgetWarning) and passes."""
