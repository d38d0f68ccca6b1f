"""More of kernels/reduce.cu than the manifest in pyproject.toml checks (block_sum<256> and dot): other
instantiations through the fixture, and a kernel given as a string."""

from __future__ import annotations

import pytest

from pytest_regbudget import RegbudgetFixture

# Code that lives in a Python string, as with cupy.RawKernel, is measured the same way as a .cu file.
SAXPY_SOURCE = r"""
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


@pytest.mark.parametrize("block", [128, 512, 1024])
@pytest.mark.regbudget(max_regs=32, spills=0)
def test_block_sum_sizes(regbudget: RegbudgetFixture, block: int) -> None:
    """The fixture compiles more instantiations inside a test; the marker's budgets judge each one."""
    report = regbudget.compile("../kernels/reduce.cu", f"block_sum<{block}>")
    # CUB's shared storage grows with the warp count; more than 1 KiB would mean a different algorithm.
    assert report.shared_mem is not None
    assert report.shared_mem <= 1024


@pytest.mark.regbudget(max_regs=32, spills=0, launch=(1024, 2))
def test_saxpy(regbudget: RegbudgetFixture) -> None:
    """A streaming kernel from a string: two full 1,024-thread blocks per SM."""
    report = regbudget.compile_source(SAXPY_SOURCE, "saxpy", name="saxpy.cu")
    assert report.arch == regbudget.arch
