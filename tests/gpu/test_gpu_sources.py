"""GPU checks for kernels from every source: the driver loads each cubin our ptxas measured and agrees."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from helpers.runs import run_json

from pytest_regbudget.gpu.device import Device

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu_device")]

APP = Path(__file__).parent.parent / "kernels" / "app.cu"

TESTS = f"""
import pytest

CODE = (
    'extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {{'
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }}"
)

@pytest.mark.regbudget(launch=(256,))
def test_string(regbudget):
    regbudget.compile_source(CODE, "axpy")

@pytest.mark.regbudget(source={str(APP)!r}, kernel="transpose<32>", compiler="nvcc", launch=(1024,))
def test_nvcc():
    pass
"""

TRITON = """
import triton
import triton.language as tl

@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

@pytest.mark.regbudget(launch=(128,))
def test_triton(regbudget):
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    regbudget.compile_triton(add, signature=sig, constexprs={"BLOCK": 1024}, num_warps=4)
"""

NUMBA = """
from numba import cuda

def axpy_nb(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]

@pytest.mark.regbudget(launch=(256,))
def test_numba(regbudget):
    regbudget.compile_numba(axpy_nb, "void(float32, float32[:], float32[:], float32[:])")
"""


def _numba_works(arch: str) -> bool:
    """numba-cuda can be broken by its environment (a NumPy it does not support); say so and go on."""
    if importlib.util.find_spec("numba") is None:
        return False
    from pytest_regbudget.core.errors import FrontendError
    from pytest_regbudget.tools.frontends import numba_ptx

    def probe(x):  # type: ignore[no-untyped-def]
        pass

    try:
        numba_ptx(probe, "void(float32[:])", arch)
    except FrontendError as exc:
        print(f"numba left out of this run: {exc}")
        return False
    return True


def test_driver_agrees_for_every_source(pytester: pytest.Pytester, gpu_device: Device) -> None:
    body = TESTS
    expected = {"test_string", "test_nvcc"}
    if importlib.util.find_spec("triton") is not None:
        body += TRITON
        expected.add("test_triton")
    if _numba_works(gpu_device.arch):
        body += NUMBA
        expected.add("test_numba")
    pytester.makepyfile(test_k=body)
    result, records = run_json(pytester, f"--regbudget-arch={gpu_device.arch}", "--regbudget-gpu=require")
    print("\n".join(line for line in result.stdout.lines if "sm_" in line or "GPU" in line))
    result.assert_outcomes(passed=len(expected))
    assert {r["nodeid"].split("::")[1].split("[")[0] for r in records} == expected
    for rec in records:
        assert rec["gpu_device"] == gpu_device.name, rec
        assert rec["driver_registers"] == rec["registers"], rec
        assert rec["driver_local_bytes"] == rec["stack_frame"], rec
        assert rec["driver_blocks"] == rec["active_blocks"], rec
        assert rec["model_defects"] == [], rec
