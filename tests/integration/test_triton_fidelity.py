"""A Triton kernel is measured as Triton itself builds it: the plugin's numbers are those of the cubin Triton
produces (its bundled ptxas, its options), read back independently with cuobjdump, on sm_80 and sm_90; and
Triton's dynamic shared memory feeds the launch the verdict assumes. Real Triton, no GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_regbudget.tools.cuobjdump import read_binary

pytest.importorskip("triton", reason="triton is in the test extra; it did not import here")

KERNELS = """
import triton
import triton.language as tl

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

MM = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}
SIZES = {"BM": 128, "BN": 128, "BK": 64}
"""

TESTS = """
import pytest
from kernels_py import matmul, MM, SIZES

@pytest.mark.regbudget()
def test_matmul(regbudget):
    regbudget.compile_triton(matmul, signature=MM, constexprs=SIZES, num_warps=4, num_stages=3)
"""


def triton_own(module: Any, cc: int) -> tuple[bytes, int]:
    """Triton's cubin for the kernel, and its dynamic shared memory: built here, as a user's program would."""
    import importlib

    triton: Any = importlib.import_module("triton")
    tc: Any = importlib.import_module("triton.compiler")
    GPUTarget = importlib.import_module("triton.backends.compiler").GPUTarget  # Triton's name

    source = tc.ASTSource(fn=module.matmul, signature=module.MM, constexprs=module.SIZES)
    compiled = triton.compile(
        source, target=GPUTarget("cuda", cc, 32), options={"num_warps": 4, "num_stages": 3}
    )
    return bytes(compiled.asm["cubin"]), int(compiled.metadata.shared)


@pytest.mark.slow  # Triton's compile and ours, or every kernel with two toolkits: 20 s or more
def test_triton_numbers_are_those_of_tritons_own_cubin(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(kernels_py=KERNELS, test_k=TESTS)
    out = pytester.path / "report.json"
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--regbudget-arch=sm_80,sm_90",
        "--regbudget-gpu=off",
        f"--regbudget-json={out}",
    )
    result.assert_outcomes(passed=2)
    records = {r["arch"]: r for r in json.loads(out.read_text())["kernels"]}
    assert set(records) == {"sm_80", "sm_90"}
    import importlib.util

    spec = importlib.util.spec_from_file_location("kernels_py", pytester.path / "kernels_py.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for arch, cc in (("sm_80", 80), ("sm_90", 90)):
        cubin, shared = triton_own(module, cc)
        path = tmp_path / f"matmul_{arch}.cubin"
        path.write_bytes(cubin)
        (own,) = [k for k in read_binary(path) if k.name == "matmul"]
        rec = records[arch]
        assert (rec["registers"], rec["stack_frame"]) == (own.registers, own.stack), arch
        if own.spill_stores is not None:  # cuobjdump 12.9+ reads spills from the cubin
            assert (rec["spill_stores"], rec["spill_loads"]) == (own.spill_stores, own.spill_loads), arch
        # Measured by Triton's ptxas, named as such; its dynamic shared memory and block are the launch's.
        assert rec["compiler"] == "triton"
        assert rec["nvrtc_version"].startswith("triton ")
        assert rec["launch"] == [128]
        assert shared > 0
        assert rec["dynamic_smem"] == shared


HELPER = """
import triton
import triton.language as tl

@triton.jit
def scale(x):
    return x * SCALE
"""

CALLER = """
import triton
import triton.language as tl
from helper_py import scale

@triton.jit
def k(x_ptr, o_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o_ptr + i, scale(tl.load(x_ptr + i)))

SIG = {"x_ptr": "*fp32", "o_ptr": "*fp32"}
"""

CALLER_TEST = """
import pytest
from caller_py import k, SIG

@pytest.mark.regbudget()
def test_k(regbudget):
    regbudget.compile_triton(k, signature=SIG, constexprs={"BLOCK": 256}, num_warps=2)
"""


def test_triton_builds_are_cached_by_tritons_key_and_never_stale(pytester: pytest.Pytester) -> None:
    """A hit only when Triton's own cache key says the build is the same: a called @jit helper in another
    module whose body changes is a miss, and the result equals a build without the cache."""
    pytester.makepyfile(
        helper_py=HELPER.replace("x * SCALE", "x * 2.0"), caller_py=CALLER, test_k=CALLER_TEST
    )
    out = pytester.path / "report.json"

    def run(*args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--regbudget-arch=sm_90", f"--regbudget-json={out}", *args
        )
        result.assert_outcomes(passed=1)
        (rec,) = json.loads(out.read_text())["kernels"]
        return result, rec

    result, first = run()
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses*"])
    result, again = run()
    result.stdout.fnmatch_lines(["compile cache *: 1 hits, 0 misses*"])
    assert again["registers"] == first["registers"]
    # The helper, in another file, now does more work: Triton's key changes, so the cache misses.
    (pytester.path / "helper_py.py").write_text(
        HELPER.replace("x * SCALE", "tl.exp(tl.sin(x) * tl.cos(x * 3.0)) / (x + 1.0)")
    )
    result, edited = run()
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses*"])
    _, fresh = run("--regbudget-no-cache")
    assert edited["registers"] == fresh["registers"]
    assert edited == fresh
