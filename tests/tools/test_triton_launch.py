"""What a launch of a Triton kernel compiles, worked out by Triton's own binder without a GPU, and the
errors of a call that names no launch (each lists the kernel's parameters). Real Triton, no compile."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_regbudget.core.errors import FrontendError
from pytest_regbudget.tools.triton import TritonJob, tritons_ptxas
from pytest_regbudget.tools.triton_launch import TritonArgumentError, kernel_name

triton: Any = pytest.importorskip("triton", reason="triton is in the test extra; it did not import here")
tl: Any = pytest.importorskip("triton.language")
MockTensor: Any = pytest.importorskip("triton.runtime.jit").MockTensor


def row_kernel(X, Y, stride, N, eps, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + tl.program_id(0) * stride + cols, mask=cols < N)
    tl.store(Y + tl.program_id(0) * stride + cols, x * eps, mask=cols < N)


class Pointer:
    """A tensor stand-in: anything with dtype and data_ptr()."""

    def __init__(self, dtype: Any, address: int) -> None:
        self.dtype = dtype
        self.address = address

    def data_ptr(self) -> int:
        return self.address


PARAMS = "X, Y, stride, N, eps, BLOCK (constexpr)"


def aot(job: TritonJob, arch: str = "sm_80") -> dict[str, str]:
    return dict(job.launch(arch).aot())


def test_the_binder_specializes_as_a_launch() -> None:
    fn = triton.jit(row_kernel)
    h = MockTensor(tl.float16)
    job = TritonJob(fn, args=(h, h, 4096, 4096, 1e-5), constexprs={"BLOCK": 1024}, num_warps=8)
    assert aot(job) == {
        "X": "*fp16:16",
        "Y": "*fp16:16",
        "stride": "i32:16",
        "N": "i32:16",
        "eps": "fp32",
        "BLOCK": "constexpr 1024",
    }
    launch = job.launch("sm_90")
    assert launch.variant() == "X=*fp16:16,Y=*fp16:16,stride=i32:16,N=i32:16,eps=fp32,BLOCK=1024"
    assert launch.settings() == ("num_warps=8", "num_stages=3", "num_ctas=1")
    assert launch.legacy is None  # args= had no key before


def test_misaligned_pointer_ones_and_a_mapping() -> None:
    fn = triton.jit(row_kernel)
    args = {"X": Pointer(tl.float16, 8), "Y": MockTensor(tl.float32), "stride": 1, "N": 4004, "eps": 0.5}
    assert aot(TritonJob(fn, args=args, constexprs={"BLOCK": 64})) == {
        "X": "*fp16",
        "Y": "*fp32:16",
        "stride": "constexpr 1",
        "N": "i32",
        "eps": "fp32",
        "BLOCK": "constexpr 64",
    }


def test_do_not_specialize_is_followed() -> None:
    fn = triton.jit(row_kernel, do_not_specialize=["stride"], do_not_specialize_on_alignment=["X"])
    h = MockTensor(tl.float16)
    got = aot(TritonJob(fn, args=(h, h, 1, 4096, 1.0), constexprs={"BLOCK": 64}))
    assert (got["X"], got["stride"], got["N"]) == ("*fp16", "i32", "i32:16")


def test_aot_hints_are_read_as_tritons_compile_tool_reads_them() -> None:
    fn = triton.jit(row_kernel)
    sig = {"X": "*fp16:16", "Y": "*fp16", "stride": "i32:1", "N": "i32:16", "eps": "fp32"}
    launch = TritonJob(fn, signature=sig, constexprs={"BLOCK": 64}).launch("sm_80")
    assert dict(launch.aot()) == {**sig, "stride": "constexpr 1", "BLOCK": "constexpr 64"}
    assert launch.legacy is None  # hints were refused before: no older key to look under
    plain = {k: v.partition(":")[0] for k, v in sig.items()}
    written = TritonJob(fn, signature=plain, constexprs={"BLOCK": 64}, num_warps=2).launch("sm_80")
    assert dict(written.aot()) == {**plain, "BLOCK": "constexpr 64"}
    # The key pytest-regbudget gave this call before num_warps left the variant.
    assert written.legacy == (
        f"triton signature={sorted(plain.items())},constexprs=[('BLOCK', 64)],num_warps=2,num_stages=3"
    )


H = MockTensor(tl.float16)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            {"args": (H, H, 16, 16, 1.0), "signature": {"X": "*fp16"}},
            r"give args= \(.*\) or signature= \(.*\), not both",
        ),
        ({}, r"give args= \(the launch's arguments"),
        (
            {"signature": {"X": "*fp16:8", "Y": "*fp16", "stride": "i32", "N": "i32", "eps": "fp32"}},
            r"has the hint '8'; Triton's AOT hints are 16 .* and 1",
        ),
        ({"args": (H, H, 16)}, r"needs 'N' in args, 'eps' in args"),
        ({"args": {"X": H, "Z": H}}, r"has no parameter 'Z'"),
        ({"args": (H, H, 16, 16, 1.0, 64, 3)}, r"7 args for 6 parameters"),
        ({"args": (H, H, 16, 16, 1.0, 64), "constexprs": {"BLOCK": 64}}, r"gets BLOCK in both"),
    ],
    ids=["both", "neither", "bad-hint", "missing", "unknown", "too-many", "twice"],
)
def test_a_call_that_names_no_launch(call: dict[str, Any], message: str) -> None:
    fn = triton.jit(row_kernel)
    if call and "BLOCK" not in str(call):
        call = {"constexprs": {"BLOCK": 64}, **call}
    with pytest.raises(TritonArgumentError, match=message) as raised:
        TritonJob(fn, **call).launch("sm_80")
    assert f"(its parameters: {PARAMS})" in str(raised.value)


def scale_rows(X, N, BLOCK: tl.constexpr, EVEN: tl.constexpr):  # type: ignore[no-untyped-def]
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + i, tl.load(X + i) * 2)


def tuned() -> Any:
    jit = triton.jit(scale_rows)
    heur = triton.heuristics({"EVEN": lambda a: a["N"] % a["BLOCK"] == 0})(jit)
    configs = [triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 96}, num_warps=4)]
    return triton.autotune(configs=configs, key=["N"])(heur)


def test_autotune_config_and_heuristic() -> None:
    fn = tuned()
    assert kernel_name(fn) == "scale_rows"
    first, second = fn.configs
    launch = TritonJob(fn, args=(H, 4096), config=first).launch("sm_80")
    assert dict(launch.aot())["EVEN"] == "constexpr True"
    assert launch.settings() == ("num_warps=2", "num_stages=3", "num_ctas=1")
    assert launch.config == str(first)
    assert f"config={first}" in launch.variant()
    assert (
        dict(TritonJob(fn, args=(H, 4096), config=second).launch("sm_80").aot())["EVEN"] == "constexpr False"
    )
    # A heuristic value given by the call is the call's.
    given = TritonJob(fn, args=(H, 4096), constexprs={"EVEN": False}, config=first).launch("sm_80")
    assert dict(given.aot())["EVEN"] == "constexpr False"
    with pytest.raises(TritonArgumentError, match=r"the config sets num_warps"):
        TritonJob(fn, args=(H, 4096), config=first, num_warps=8).launch("sm_80")
    with pytest.raises(TritonArgumentError, match=r"BLOCK given both by the config"):
        TritonJob(fn, args=(H, 4096), constexprs={"BLOCK": 64}, config=first).launch("sm_80")
    message = (
        r"scale_rows is @triton.autotune'd and its tuned constexprs BLOCK come from a config: measure every "
        r"config with regbudget.compile_triton_configs\(scale_rows, args=...\), or one with "
        r"compile_triton\(..., config=cfg\)"
    )
    with pytest.raises(TritonArgumentError, match=message):
        TritonJob(fn, args=(H, 4096)).launch("sm_80")
    with pytest.raises(TritonArgumentError, match=r"not @triton.autotune'd"):
        TritonJob(triton.jit(scale_rows), args=(H, 4096), config=first).launch("sm_80")


def test_a_heuristic_without_args_says_so() -> None:
    heur = triton.heuristics({"EVEN": lambda a: a["N"] % a["BLOCK"] == 0})(triton.jit(scale_rows))
    with pytest.raises(TritonArgumentError, match=r"value EVEN could not be computed .* give args="):
        TritonJob(heur, signature={"X": "*fp16", "N": "i32"}, constexprs={"BLOCK": 64}).launch("sm_80")


def test_a_triton_without_the_binder_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = pytest.importorskip("triton.runtime.jit")
    monkeypatch.delattr(runtime, "create_function_from_signature")
    with pytest.raises(
        FrontendError, match=rf"triton {re.escape(triton.__version__)} has no launcher binder"
    ):
        TritonJob(triton.jit(row_kernel), args=(H, H, 16, 16, 1.0), constexprs={"BLOCK": 64}).launch("sm_80")


def test_tritons_ptxas_is_the_one_triton_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    nvidia = pytest.importorskip("triton.backends.nvidia.compiler")
    knobs = pytest.importorskip("triton.knobs")
    for cc in (80, 90, 100):
        assert tritons_ptxas(cc, "") == type(tritons_ptxas(cc, ""))(nvidia.get_ptxas(cc).path)
    # A Triton without get_ptxas: its log's prefix names the tool it ran.
    monkeypatch.delattr(nvidia, "get_ptxas")
    blackwell = knobs.nvidia.ptxas_blackwell.path
    assert str(tritons_ptxas(90, "ptxas-blackwell info    : 0 bytes gmem\n")) == blackwell
    assert str(tritons_ptxas(90, "ptxas info    : 0 bytes gmem\n")) == knobs.nvidia.ptxas.path
