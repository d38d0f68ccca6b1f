"""Triton kernels for issue 45's launch checks, used by tests/integration/test_triton_as_launched.py (which
writes this file into its scratch projects) and by benchmarks/triton_launch_check.py (which launches them on
a GPU): the forward kernel of Triton's layer-norm tutorial (python/tutorials/05-layer-norm.py), an RMS norm
with a weight stride and an optional residual, and an autotuned kernel with a heuristic, with stand-in
arguments."""

# mypy: ignore-errors
# Triton's kernels take untyped tensors; Triton reads their source, so they stay as written.
import triton
import triton.language as tl
from triton.runtime.jit import MockTensor


@triton.jit
def layer_norm(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def rms_norm(Y, X, W, R, stride, stride_w, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    if R is not None:
        x += tl.load(R + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / N
    w = tl.load(W + cols * stride_w, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * tl.rsqrt(var + eps) * w).to(tl.float16), mask=mask)


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 512}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK": 2048}, num_warps=8),
    ],
    key=["N"],
)
@triton.heuristics({"EVEN": lambda a: a["N"] % a["BLOCK"] == 0})
@triton.jit
def scale_rows(X, Y, N, scale, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(X + cols).to(tl.float32)
        tl.store(Y + cols, tl.exp(x * scale).to(tl.float16))
    else:
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(Y + cols, tl.exp(x * scale).to(tl.float16), mask=cols < N)


h, f = MockTensor(tl.float16), MockTensor(tl.float32)
LN_4096 = (h, h, h, h, f, f, 4096, 4096, 1e-5)
LN_4004 = (h, h, h, h, f, f, 4004, 4004, 1e-5)
RMS = (h, h, h, None, 4096, 1, 4096, 1e-6)
