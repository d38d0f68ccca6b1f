"""Kernels from other places: nvcc translation units with host code, code strings, prebuilt binaries,
Triton and Numba. All measured with real tools, no GPU."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.data import KERNELS
from helpers.runs import run_json

from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.tools.nvcc import find_nvcc

APP = KERNELS / "app.cu"


@pytest.fixture(scope="module")
def nvcc_path() -> Path:
    try:
        return find_nvcc(None).path
    except Exception as exc:  # CompileError: no nvcc wheel or toolkit here
        pytest.skip(f"no nvcc: {exc}")


def nvcc_report(nvcc: Path, arch: str, tmp: Path) -> dict[str, int]:
    """Registers per entry as nvcc -Xptxas -v reports them for app.cu: the reference."""
    out = subprocess.run(
        [str(nvcc), "-cubin", f"-arch={arch}", "-Xptxas", "-v", str(APP), "-o", str(tmp / "ref.cubin")],
        capture_output=True,
        text=True,
        check=True,
    )
    return {name: r.registers for name, r in parse_ptxas_output(out.stdout + out.stderr).items()}


def test_nvrtc_on_host_code_points_at_nvcc(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_k=f"""
import pytest
@pytest.mark.regbudget(source={str(APP)!r}, kernel="scale")
def test_app():
    pass
"""
    )
    result, (rec,) = run_json(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*This file has host code (main(), host API calls, <<<...>>> launches or host headers), which"
            ' NVRTC cannot compile. Use compiler="nvcc"*#ifndef __CUDACC_RTC__.',
        ]
    )
    assert rec["outcome"] == "error"


def test_nvcc_builds_a_translation_unit_with_main(
    pytester: pytest.Pytester, nvcc_path: Path, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_k=f"""
import pytest
@pytest.mark.regbudget(source={str(APP)!r}, kernel="scale", compiler="nvcc", max_regs=32, launch=(256,))
def test_scale():
    pass

@pytest.mark.regbudget(source={str(APP)!r}, kernel="transpose<32>", compiler="nvcc", smem=4096,
                       launch=(1024,))
def test_transpose():
    pass

def test_fixture(regbudget):
    r = regbudget.compile({str(APP)!r}, "scale", compiler="nvcc", options=["-O3"])
    assert r.registers > 0
"""
    )
    result, records = run_json(pytester)
    result.assert_outcomes(passed=2, failed=1)
    reference = nvcc_report(nvcc_path, "sm_90", tmp_path)
    by_test = {r["nodeid"].split("::")[1]: r for r in records}
    scale, transpose = by_test["test_scale[sm_90]"], by_test["test_transpose[sm_90]"]
    assert scale["registers"] == reference["scale"]
    assert transpose["entry"] == "_Z9transposeILi32EEvPKfPfi"
    assert transpose["registers"] == reference["_Z9transposeILi32EEvPKfPfi"]
    assert transpose["shared_mem"] == 32 * 33 * 4
    assert transpose["max_threads"] == 1024
    assert scale["ptxas_version"] == scale["nvrtc_version"].split()[-1]  # nvcc's own toolkit measured it
    # Its entry is nvcc's release's (the nvidia-cuda-nvcc 13.5 wheel), not NVRTC's (12.9).
    assert (scale["compiler"], scale["release"], scale["key"][-1]) == ("nvcc", "13.5", "13.5")
    assert scale["ptxas_version"].startswith("13.5.")
    result.stdout.fnmatch_lines(["*transpose<32> [[]sm_90[]]: static shared memory 4,224 bytes > smem 4096*"])


def test_nvcc_ini_default_and_bad_compiler(pytester: pytest.Pytester, nvcc_path: Path) -> None:
    pytester.makepyfile(
        test_k=f"""
import pytest
@pytest.mark.regbudget(source={str(APP)!r}, kernel="scale")
def test_scale():
    pass

@pytest.mark.regbudget(source={str(APP)!r}, kernel="scale", compiler="clang")
def test_bad():
    pass
"""
    )
    pytester.makeini("[pytest]\nregbudget_compiler = nvcc\n")
    result, _ = run_json(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*compiler='clang': expected one of 'nvrtc', 'nvcc'*"])


def test_code_string_like_cupy_rawkernel(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_k="""
import pytest
CODE = r'''
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''
BROKEN = 'extern "C" __global__ void k(float* x) { x[0] = undefined_thing; }'

@pytest.mark.regbudget(max_regs=16, launch=(1024,))
def test_string(regbudget):
    r = regbudget.compile_source(CODE, "axpy", name="axpy_kernel.cu")
    assert r.registers <= 16 and r.source.endswith("axpy_kernel.cu")

def test_broken(regbudget):
    from pytest_regbudget import CompileError
    with pytest.raises(CompileError, match=r"axpy_or_not.cu\\(1\\): error: identifier \\"undefined_thing\\""):
        regbudget.compile_source(BROKEN, "k", name="axpy_or_not.cu")
"""
    )
    result, records = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(passed=2)
    (axpy,) = [r for r in records if r["registers"]]
    assert (axpy["kernel"], axpy["compiler"], axpy["release"], axpy["key"][-1]) == (
        "axpy",
        "nvrtc",
        "12.9",
        "12.9",
    )
    text = (pytester.path / "regbudget-baseline.toml").read_text()
    assert '.axpy.-.sm_90."12.9"]' in text
    result, _ = run_json(pytester)
    # The string compiled before is a hit, and so is the broken one: the compiler rejected those very bytes.
    result.stdout.fnmatch_lines(["compile cache *: 2 hits, 0 misses*"])


TRITON_TESTS = """
import pytest
import triton
import triton.language as tl

@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, 8):
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :] + k)
        b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :] + k)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)

SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
MM = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}

@pytest.mark.regbudget(max_regs=64, spills=0, launch=(128,))
def test_add(regbudget):
    r = regbudget.compile_triton(add, signature=SIG, constexprs={"BLOCK": 1024}, num_warps=4)
    assert r.kernel == "add" and r.registers > 0

@pytest.mark.regbudget(spills=0, launch=(128,))
def test_matmul(regbudget):
    regbudget.compile_triton(matmul, signature=MM, constexprs={"BM": 256, "BN": 256, "BK": 64}, num_warps=4)
"""


@pytest.mark.slow
def test_triton_kernels_measured_by_our_ptxas(pytester: pytest.Pytester) -> None:
    pytest.importorskip("triton", reason="triton is in the test extra; it did not import here")
    pytester.makepyfile(test_k=TRITON_TESTS)
    result, records = run_json(pytester, "--regbudget-arch=sm_80,sm_90", "--regbudget-gpu=off")
    result.assert_outcomes(passed=2, failed=2)
    adds = [r for r in records if r["kernel"] == "add"]
    mms = [r for r in records if r["kernel"] == "matmul"]
    assert {r["arch"] for r in adds} == {"sm_80", "sm_90"}
    assert all(0 < r["registers"] <= 64 and r["spill_stores"] == 0 for r in adds)
    assert all(r["nvrtc_version"].startswith("triton ") for r in adds)
    assert all(r["spill_stores"] > 0 for r in mms)  # the true figure from ptxas, not Triton's n_spills
    assert str(pytester.path / "test_k.py") == adds[0]["source"]
    result.stdout.fnmatch_lines(["*matmul [[]sm_90[]]: spill stores * bytes > spills 0*"])


NUMBA_TESTS = """
import math
import pytest
from numba import cuda, float32

def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]

def wave(x, out):
    i = cuda.grid(1)
    tile = cuda.shared.array(256, float32)
    tile[cuda.threadIdx.x] = math.sin(x[i])
    cuda.syncthreads()
    out[i] = tile[255 - cuda.threadIdx.x]

@pytest.mark.regbudget(max_regs=32, spills=0, smem=0)
def test_axpy(regbudget):
    r = regbudget.compile_numba(axpy, "void(float32, float32[:], float32[:], float32[:])")
    assert r.kernel == "axpy" and r.registers > 0

@pytest.mark.regbudget(smem=512)
def test_wave(regbudget):
    regbudget.compile_numba(wave, "void(float32[:], float32[:])")
"""


def test_numba_kernels_measured_by_our_ptxas(pytester: pytest.Pytester) -> None:
    pytest.importorskip("numba.cuda", reason="numba-cuda is in the test extra; it did not import here")
    pytester.makepyfile(test_k=NUMBA_TESTS)
    result, records = run_json(pytester, "--regbudget-gpu=off", "--regbudget-update")
    result.assert_outcomes(passed=1, failed=1)
    axpy, wave = sorted(records, key=lambda r: r["kernel"])
    assert (axpy["kernel"], wave["kernel"]) == ("axpy", "wave")
    assert wave["shared_mem"] == 1024
    assert axpy["nvrtc_version"].startswith("numba-cuda ")
    result.stdout.fnmatch_lines(["*wave [[]sm_90[]]: static shared memory 1,024 bytes > smem 512*"])
    # Entries are keyed by the Python name, stable across processes (numba's mangled entry is not).
    text = (pytester.path / "regbudget-baseline.toml").read_text()
    assert (
        '[kernels."test_k.py".axpy."numba signature=void(float32, float32[:], float32[:], float32[:])".sm_90.'
        '"12.9"]' in text
    )


def test_prebuilt_binaries_marker_and_fixture(pytester: pytest.Pytester, nvcc_path: Path) -> None:
    """A fatbin and a shared library built by nvcc, read back per arch (ptxas >= 12.9 records spills)."""
    fatbin = pytester.path / "app.fatbin"
    lib = pytester.path / "libapp.so"
    archs = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]
    subprocess.run([str(nvcc_path), "-fatbin", *archs, str(APP), "-o", str(fatbin)], check=True)
    subprocess.run(
        [str(nvcc_path), "-shared", "-Xcompiler", "-fPIC", *archs, str(APP), "-o", str(lib)], check=True
    )
    pytester.makepyfile(
        test_k="""
import pytest

@pytest.mark.regbudget(binary="app.fatbin", kernel="scale", max_regs=32, launch=(256,))
def test_fatbin():
    pass

@pytest.mark.regbudget(binary="app.fatbin", kernel="transpose<32>", spills=0, smem=4096)
def test_transpose():
    pass

@pytest.mark.regbudget(max_regs=64)
def test_library(regbudget):
    reports = regbudget.load("libapp.so")
    assert sorted(r.kernel for r in reports) == ["scale", "transpose<32>"]  # readable names

@pytest.mark.regbudget(binary="app.fatbin", kernel="nope")
def test_unknown_kernel():
    pass
"""
    )
    result, records = run_json(pytester, "--regbudget-arch=sm_80,sm_90")
    result.assert_outcomes(passed=4, failed=4)
    fat = [r for r in records if r["nodeid"].startswith("test_k.py::test_fatbin")]
    assert {r["arch"] for r in fat} == {"sm_80", "sm_90"}
    assert all(r["registers"] > 0 and r["spill_stores"] == 0 for r in fat)
    assert all(r["ptxas_version"] == "prebuilt" and r["compiler"] == "binary" for r in fat)
    result.stdout.fnmatch_lines(
        [
            "*transpose<32> [[]sm_*[]]: static shared memory 4,224 bytes > smem 4096*",
            "*kernel 'nope' not found in *app.fatbin [[]sm_*[]]; it contains: *scale*",
        ]
    )
