"""Triton and Numba kernels to PTX with no GPU, measured by our own ptxas: real front ends, no mocks.

The kernels are plain module-level functions, wrapped by the front end inside the tests, so that a
missing Triton or Numba skips only its own tests (with the import error) and not the other's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from pytest_regbudget.core.errors import CompileError, FrontendError
from pytest_regbudget.core.metrics import KernelResources
from pytest_regbudget.core.ptxas import parse_ptx_entries, parse_ptxas_output
from pytest_regbudget.tools.frontends import (
    FrontendPtx,
    _require,
    max_ptx_version,
    numba_ptx,
    ptx_header,
    toolkit_nvvm,
)
from pytest_regbudget.tools.ptxas import run_ptxas
from pytest_regbudget.tools.toolkit import Toolkit, discover
from pytest_regbudget.tools.triton import triton_ptx

triton: Any
tl: Any
cuda: Any
float32: Any
try:
    import triton  # type: ignore[import-untyped,no-redef]
    import triton.language as tl  # type: ignore[import-untyped,no-redef]
except ImportError as exc:
    TRITON_MISSING = f"triton cannot be imported: {exc}"
else:
    TRITON_MISSING = ""
try:
    from numba import cuda, float32
except ImportError as exc:
    NUMBA_MISSING = f"numba-cuda cannot be imported: {exc}"
else:
    NUMBA_MISSING = ""

# Triton warns once per process that its FP-fusion default will change; it is not about these tests.
pytestmark = pytest.mark.filterwarnings("ignore:TRITON_DEFAULT_FP_FUSION:UserWarning")

ADD_SIGNATURE = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"}
MATMUL_SIGNATURE = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
MATMUL_TILES = {"BM": 128, "BN": 128, "BK": 64}
AXPY_SIGNATURE = "void(float32[:], float32, float32[:], float32[:])"


def add_kernel(x, y, out, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def scale_kernel(x, n, BLOCK: tl.constexpr = 256):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


# A 128x128 fp32 accumulator over 128 threads is 128 registers a thread before operands and addresses.
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # type: ignore[no-untyped-def]
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        av = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        bv = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(av, bv)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


def axpy(r, a, x, y):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < r.size:
        r[i] = a * x[i] + y[i]


def block_sum(out, x):  # type: ignore[no-untyped-def]
    # Shared memory, a libdevice call and an atomic: the parts of numba's IR NVVM links or rewrites.
    tile = cuda.shared.array(256, dtype=float32)
    t = cuda.threadIdx.x
    tile[t] = math.sin(x[cuda.grid(1)])
    cuda.syncthreads()
    if t == 0:
        s = 0.0
        for j in range(256):
            s += tile[j]
        cuda.atomic.add(out, 0, s)


def helper(v):  # type: ignore[no-untyped-def]
    return v * v


def calls_helper(r, x):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < r.size:
        r[i] = device_helper(x[i])


# Making the device dispatcher touches no driver; compiling a kernel that calls it does.
device_helper: Any = None if NUMBA_MISSING else cuda.jit(device=True)(helper)


def def_line(fn: Any) -> int:
    """The line of `def <name>(` in this file, found in the text rather than by `inspect`."""
    lines = Path(__file__).read_text().splitlines()
    return next(i + 1 for i, text in enumerate(lines) if text.startswith(f"def {fn.__name__}("))


@pytest.fixture(scope="module")
def toolkit() -> Toolkit:
    return discover()


@pytest.fixture(scope="module", autouse=True)
def _private_triton_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Compile for real (no hit in ~/.triton from an earlier run), and leave the user's cache alone."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
        yield


@pytest.fixture(scope="module")
def jit() -> Any:
    """triton.jit, or a skip that quotes the import error."""
    if TRITON_MISSING:
        pytest.skip(TRITON_MISSING)
    return triton.jit


@pytest.fixture
def numba_cuda() -> Any:
    if NUMBA_MISSING:
        pytest.skip(NUMBA_MISSING)
    return cuda


def measure(fp: FrontendPtx, toolkit: Toolkit) -> KernelResources:
    """Our ptxas on the front end's PTX, for the .target it was built for."""
    report, _ = run_ptxas(fp.ptx, fp.ptx_target, (), toolkit, label=fp.name)
    resources = parse_ptxas_output(report)
    assert fp.entry in resources, report
    return resources[fp.entry]


def assert_common(fp: FrontendPtx, toolkit: Toolkit, fn: Any) -> None:
    assert parse_ptx_entries(fp.ptx) == [fp.entry]
    assert f".entry {fp.entry}(" in fp.ptx
    assert fp.name == fn.__name__
    assert fp.source == Path(__file__)
    assert fp.line == def_line(fn)
    assert isinstance(fp.dynamic_smem, int)
    assert fp.tool_spills is None  # both front ends only have it from a driver
    version, target = ptx_header(fp.ptx)
    assert target == fp.ptx_target
    assert version <= max_ptx_version(toolkit, "sm_80")


# --------------------------------------------------------------------------------------------- Triton


@pytest.mark.parametrize(("arch", "target", "num_warps"), [("sm_80", "sm_80", 4), ("sm_90", "sm_90a", 8)])
def test_triton_vector_add(jit: Any, toolkit: Toolkit, arch: str, target: str, num_warps: int) -> None:
    fp = triton_ptx(
        jit(add_kernel), arch, signature=ADD_SIGNATURE, constexprs={"BLOCK": 1024}, num_warps=num_warps
    )
    assert_common(fp, toolkit, add_kernel)
    assert fp.entry == "add_kernel"
    assert fp.frontend == f"triton {triton.__version__}"
    assert fp.threads == num_warps * 32
    assert f".reqntid {num_warps * 32}" in fp.ptx  # Triton fixes the block size in the PTX too
    assert fp.dynamic_smem == 0
    # Triton builds the arch-specific target from sm_90 on; it is reported, not rewritten.
    assert fp.ptx_target == target
    assert measure(fp, toolkit).registers > 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_triton_register_hungry_kernel(jit: Any, toolkit: Toolkit, arch: str) -> None:
    hungry = triton_ptx(jit(matmul_kernel), arch, signature=MATMUL_SIGNATURE, constexprs=MATMUL_TILES)
    small = triton_ptx(jit(add_kernel), arch, signature=ADD_SIGNATURE, constexprs={"BLOCK": 1024})
    assert_common(hungry, toolkit, matmul_kernel)
    assert hungry.threads == 128
    assert hungry.dynamic_smem > 0  # pipelined tl.dot operands are staged in shared memory
    big = measure(hungry, toolkit)
    assert big.registers >= 128
    assert big.registers > measure(small, toolkit).registers


def test_triton_sm90_ptx_is_arch_specific(jit: Any, toolkit: Toolkit) -> None:
    """Why `ptx_target` exists: Hopper tl.dot is wgmma, which only sm_90a has, and ptxas says so."""
    fp = triton_ptx(jit(matmul_kernel), "sm_90", signature=MATMUL_SIGNATURE, constexprs=MATMUL_TILES)
    assert "wgmma" in fp.ptx
    with pytest.raises(CompileError, match="cannot be compiled for architecture 'sm_90'"):
        run_ptxas(fp.ptx, "sm_90", (), toolkit)


def test_triton_ptx_version_is_set_through_triton(jit: Any, toolkit: Toolkit) -> None:
    # Triton alone would write its bundled ptxas's PTX version (9.4 from 13.4 for sm_90): the option
    # makes its LLVM backend target what our ptxas takes, so nothing is rewritten in the text.
    fp = triton_ptx(jit(add_kernel), "sm_90", signature=ADD_SIGNATURE, constexprs={"BLOCK": 1024})
    version, _ = ptx_header(fp.ptx)
    limit = max_ptx_version(toolkit, "sm_90")
    assert version <= limit
    if toolkit.release == "12.9":
        assert version == limit == (8, 8)


def test_triton_constexpr_default_is_used(jit: Any, toolkit: Toolkit) -> None:
    fp = triton_ptx(jit(scale_kernel), "sm_80", signature={"x": "*fp32", "n": "i32"}, num_warps=2)
    assert fp.threads == 64
    assert measure(fp, toolkit).registers > 0


@pytest.mark.parametrize(
    ("signature", "constexprs", "message"),
    [
        ({"x": "*fp32", "y": "*fp32", "out": "*fp32"}, {"BLOCK": 64}, r"needs 'n' in signature"),
        (ADD_SIGNATURE, {}, r"needs BLOCK=<value> in constexprs"),
        (
            {**ADD_SIGNATURE, "m": "i32"},
            {"BLOCK": 64},
            r"has no parameter 'm' \(its parameters: x, y, out, n",
        ),
        ({**ADD_SIGNATURE, "x": "*float"}, {"BLOCK": 64}, r"type '\*float' of 'x' is not a Triton type"),
    ],
    ids=["missing-param", "missing-constexpr", "unknown-param", "bad-type"],
)
def test_triton_bad_signature(
    jit: Any, toolkit: Toolkit, signature: dict[str, str], constexprs: dict[str, object], message: str
) -> None:
    with pytest.raises(FrontendError, match=message):
        triton_ptx(jit(add_kernel), "sm_80", signature=signature, constexprs=constexprs, toolkit=toolkit)


def test_triton_compile_error_names_kernel(jit: Any, toolkit: Toolkit) -> None:
    with pytest.raises(FrontendError, match=r"could not compile add_kernel \[sm_80\]:(.|\n)*power of 2"):
        triton_ptx(jit(add_kernel), "sm_80", signature=ADD_SIGNATURE, constexprs={"BLOCK": 1000})


def test_triton_needs_a_jit_function(jit: Any) -> None:
    with pytest.raises(FrontendError, match=r"decorate it with @triton.jit"):
        triton_ptx(add_kernel, "sm_80", signature=ADD_SIGNATURE, constexprs={"BLOCK": 64})


def test_unknown_arch(jit: Any) -> None:
    with pytest.raises(FrontendError, match=r"unknown arch 'sm_91'"):
        triton_ptx(jit(add_kernel), "sm_91", signature=ADD_SIGNATURE, constexprs={"BLOCK": 64})


# ---------------------------------------------------------------------------------------------- Numba


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_numba_kernel(numba_cuda: Any, toolkit: Toolkit, arch: str) -> None:
    fp = numba_ptx(axpy, AXPY_SIGNATURE, arch)
    assert_common(fp, toolkit, axpy)
    assert "axpy" in fp.entry  # mangled, with numba's per-process counter
    assert fp.frontend.startswith("numba-cuda ")
    assert fp.frontend.endswith(f"(libNVVM {toolkit.release})")
    assert fp.threads is None
    assert fp.dynamic_smem == 0
    assert fp.ptx_target == arch
    assert measure(fp, toolkit).registers > 0


def test_numba_dispatcher_and_libdevice(numba_cuda: Any, toolkit: Toolkit) -> None:
    """A @cuda.jit kernel with shared memory, math.sin (libdevice) and an atomic, built by the
    toolkit's libNVVM from numba's IR."""
    fp = numba_ptx(numba_cuda.jit(block_sum), "void(float32[:], float32[:])", "sm_80")
    assert_common(fp, toolkit, block_sum)
    resources = measure(fp, toolkit)
    assert resources.registers > 0
    assert resources.shared_mem == 256 * 4


def test_numba_signature_required(numba_cuda: Any) -> None:
    with pytest.raises(FrontendError, match=r"needs the signature of axpy, e.g. 'void\(float32\[:\]"):
        numba_ptx(axpy, None, "sm_80")


def test_numba_bad_signature(numba_cuda: Any) -> None:
    with pytest.raises(
        FrontendError, match=r"could not compile axpy \[sm_80\] with signature 'void\(float32\[:\]\)'"
    ):
        numba_ptx(axpy, "void(float32[:])", "sm_80")


def test_numba_calls_to_device_functions(numba_cuda: Any, toolkit: Toolkit) -> None:
    # numba-cuda compiles a called @cuda.jit device function for the current device only.
    if numba_cuda.is_available():
        assert (
            measure(numba_ptx(calls_helper, "void(float32[:], float32[:])", "sm_80"), toolkit).registers > 0
        )
    else:
        with pytest.raises(FrontendError, match=r"needs a GPU to compile calls_helper \[sm_80\]"):
            numba_ptx(calls_helper, "void(float32[:], float32[:])", "sm_80")


def test_numba_without_toolkit_nvvm(numba_cuda: Any, toolkit: Toolkit, tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ptxas").touch()
    bare = replace(toolkit, ptxas=tmp_path / "bin" / "ptxas")
    with pytest.raises(FrontendError, match=r"no libNVVM next to ptxas(.|\n)*pip install"):
        numba_ptx(axpy, AXPY_SIGNATURE, "sm_80", toolkit=bare)


def test_numba_refuses_nvvm_of_another_release(numba_cuda: Any, toolkit: Toolkit, tmp_path: Path) -> None:
    """A home whose ptxas is ours but whose libNVVM is another release's: not one toolkit."""
    cu13 = toolkit.ptxas.parents[2] / "cu13"
    nvvm13 = sorted((cu13 / "lib").glob("libnvvm.so*"))
    if not nvvm13 or toolkit.release.startswith("13."):
        pytest.skip(f"needs the CUDA 13 libNVVM wheel next to a CUDA 12 ptxas; none in {cu13 / 'lib'}")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ptxas").symlink_to(toolkit.ptxas)
    (tmp_path / "nvvm" / "lib64").mkdir(parents=True)
    (tmp_path / "nvvm" / "lib64" / "libnvvm.so.4").symlink_to(nvvm13[0])
    (tmp_path / "nvvm" / "libdevice").symlink_to(cu13 / "nvvm" / "libdevice")
    mixed = replace(toolkit, ptxas=tmp_path / "bin" / "ptxas")
    assert toolkit_nvvm(mixed)[0].parent == tmp_path / "nvvm" / "lib64"
    with pytest.raises(FrontendError, match=rf"is from CUDA 13\.\d+, ptxas from CUDA {toolkit.release}"):
        numba_ptx(axpy, AXPY_SIGNATURE, "sm_80", toolkit=mixed)


# ------------------------------------------------------------------------------------------- Plumbing


def test_missing_frontend_names_the_pip_package() -> None:
    with pytest.raises(FrontendError, match=r"pip install no-such-frontend"):
        _require("pytest_regbudget_no_such_frontend", "no-such-frontend")


def test_max_ptx_version_from_ptxas(toolkit: Toolkit) -> None:
    major, minor = max_ptx_version(toolkit, "sm_80")
    assert major >= 7
    if toolkit.ptxas_version.startswith("12.9."):
        assert (major, minor) == (8, 8)


def test_ptx_header_of_non_ptx() -> None:
    with pytest.raises(FrontendError, match="not PTX"):
        ptx_header("hello")
