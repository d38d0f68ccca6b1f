"""Sample records and sources the tests share: the suite's kernel sources, a kernel whose register count a
macro sets, and a baseline entry."""

from __future__ import annotations

from pathlib import Path

from pytest_regbudget.core import baseline as bl

# The CUDA sources the tests compile (tests/kernels).
KERNELS = Path(__file__).parent.parent / "kernels"
# A kernel whose register count follows the macro N (which the including test defines somewhere).
ACC_KERNEL = """
extern "C" __global__ void acc(const float* x, float* y) {
    float v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = x[threadIdx.x + k * 32];
    float s = 0;
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int k = 0; k < N; ++k) s += v[k] * v[(k + r) % N];
    y[threadIdx.x] = s;
}
"""
# A baseline entry for tests of the file format and its writers.
SAMPLE_ENTRY = bl.BaselineEntry(
    registers=72,
    spill_stores=0,
    spill_loads=0,
    stack=16,
    smem=4096,
    const_mem=380,
    ptxas="12.9.86",
    nvrtc="12.9.86",
    compiler="nvrtc",
    options_hash="abc",
    tests=("tests/test_kernels.py::test_k[sm_90]",),
)
