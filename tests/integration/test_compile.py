"""compile_kernel with the real NVRTC and ptxas from the pip wheels."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.core.errors import CompileError, KernelNotFoundError
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.nvrtc import compile_ptx
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Toolkit, discover


@pytest.fixture(scope="module")
def toolkit() -> Toolkit:
    return discover()


def ptxas_used_line(toolkit: Toolkit, ptx: str, arch: str, tmp_path: Path) -> str:
    """ptxas's own "Used N registers" line, read straight from a separate ptxas run."""
    path = tmp_path / "k.ptx"
    path.write_text(ptx)
    out = subprocess.run(
        [str(toolkit.ptxas), "-v", f"-arch={arch}", str(path), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
        check=True,
    )
    (line,) = [ln for ln in (out.stdout + out.stderr).splitlines() if "Used" in ln]
    return line


BOUNDS = [
    "",
    "__launch_bounds__(1024)",
    "__launch_bounds__(512)",
    "__launch_bounds__(256, 4)",
    "__launch_bounds__(1024, 2)",
]


@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_hungry_kernel_reports_ptxas_numbers_exactly(
    toolkit: Toolkit, kernels: Path, tmp_path: Path, bounds: str, arch: str
) -> None:
    opts = CompileOptions.make(defines={"BOUNDS": bounds} if bounds else None)
    k = compile_kernel(kernels / "hungry.cu", "poly_eval", arch, opts, toolkit)
    line = ptxas_used_line(toolkit, k.ptx, arch, tmp_path)
    regs = int(re.search(r"Used (\d+) registers", line).group(1))  # type: ignore[union-attr]
    assert k.resources.registers == regs
    assert k.resources.ptxas_line in line
    # The cubin handed to later stages is the one ptxas built for this arch (an ELF file).
    assert k.cubin[:4] == b"\x7fELF"


def test_launch_bounds_change_registers_as_ptxas_promises(toolkit: Toolkit, kernels: Path) -> None:
    """__launch_bounds__(T, B) caps registers at 64K / (B x round_up(T, warp) ), in units of 8."""

    def regs(bounds: str) -> tuple[int, int, int | None]:
        opts = CompileOptions.make(defines={"BOUNDS": bounds} if bounds else None)
        r = compile_kernel(kernels / "hungry.cu", "poly_eval", "sm_90", opts, toolkit).resources
        return r.registers, r.spill_stores, r.max_threads

    free, free_spill, free_max = regs("")
    assert free > 128
    assert free_spill == 0
    assert free_max is None
    for bounds, cap, max_threads in [
        ("__launch_bounds__(1024)", 64, 1024),
        ("__launch_bounds__(512)", 128, 512),
        ("__launch_bounds__(256, 4)", 64, 256),
        ("__launch_bounds__(1024, 2)", 32, 1024),
    ]:
        capped, spill, mt = regs(bounds)
        assert capped <= cap, bounds
        assert spill > 0, bounds
        assert mt == max_threads


def test_template_kernel_by_name_expression(toolkit: Toolkit, kernels: Path) -> None:
    small = compile_kernel(kernels / "various.cu", "gemm<32, 32>", "sm_90", CompileOptions(), toolkit)
    big = compile_kernel(kernels / "various.cu", "gemm<128, 64>", "sm_90", CompileOptions(), toolkit)
    assert small.entry == "_Z4gemmILi32ELi32EEvPKfS1_Pfi"
    assert big.entry.startswith("_Z4gemmILi128ELi64EE")
    assert big.resources.registers > small.resources.registers


def test_toolkit_headers_are_on_the_include_path(toolkit: Toolkit, kernels: Path) -> None:
    # cuda_fp16.h, cooperative_groups.h and CUB all come from the runtime and CCCL wheels.
    k = compile_kernel(kernels / "various.cu", "block_sum", "sm_90", CompileOptions(), toolkit)
    assert k.entry == "_Z9block_sumPK6__halfPf"
    assert k.resources.shared_mem > 0


def test_static_shared_memory_and_stack(toolkit: Toolkit, kernels: Path) -> None:
    t = compile_kernel(kernels / "various.cu", "transpose", "sm_90", CompileOptions(), toolkit)
    assert t.resources.shared_mem == 32 * 33 * 4
    local = compile_kernel(kernels / "various.cu", "local_lookup", "sm_90", CompileOptions(), toolkit)
    assert local.resources.stack_frame >= 256 * 4


def test_unknown_kernel_lists_the_module_kernels(toolkit: Toolkit, kernels: Path) -> None:
    with pytest.raises(KernelNotFoundError) as info:
        compile_kernel(kernels / "various.cu", "saxpi", "sm_90", CompileOptions(), toolkit)
    msg = str(info.value)
    assert "'saxpi' not found" in msg
    assert "saxpy" in msg
    assert "transpose" in msg
    assert "sm_90" in msg


def test_device_function_is_not_a_kernel(toolkit: Toolkit, kernels: Path) -> None:
    with pytest.raises(KernelNotFoundError, match="not_a_kernel"):
        compile_kernel(kernels / "various.cu", "not_a_kernel", "sm_90", CompileOptions(), toolkit)


def test_uninstantiable_template_is_reported_with_nvrtc_reason(toolkit: Toolkit, kernels: Path) -> None:
    with pytest.raises(KernelNotFoundError, match="cannot determine which instance"):
        compile_kernel(kernels / "various.cu", "gemm<32>", "sm_90", CompileOptions(), toolkit)


def test_compile_error_names_the_real_file_and_line(toolkit: Toolkit, kernels: Path) -> None:
    with pytest.raises(CompileError) as info:
        compile_kernel(kernels / "broken.cu", "broken", "sm_90", CompileOptions(), toolkit)
    msg = str(info.value)
    assert f"{kernels / 'broken.cu'}(5): error" in msg
    assert "undefined_function" in msg
    assert not isinstance(info.value, KernelNotFoundError)


def test_defines_and_options_reach_nvrtc(toolkit: Toolkit, kernels: Path) -> None:
    few = compile_kernel(
        kernels / "hungry.cu", "poly_eval", "sm_90", CompileOptions.make(defines={"NACC": 8}), toolkit
    )
    many = compile_kernel(kernels / "hungry.cu", "poly_eval", "sm_90", CompileOptions(), toolkit)
    assert few.resources.registers < many.resources.registers
    with pytest.raises(CompileError, match="--no-such-flag"):
        compile_ptx("", "x.cu", "sm_90", CompileOptions(options=("--no-such-flag",)), toolkit)


def test_ptxas_options_reach_ptxas(toolkit: Toolkit, kernels: Path) -> None:
    capped = compile_kernel(
        kernels / "hungry.cu",
        "poly_eval",
        "sm_90",
        CompileOptions(ptxas_options=("-maxrregcount=40",)),
        toolkit,
    )
    assert capped.resources.registers <= 40
    assert capped.resources.spill_stores > 0
    with pytest.raises(CompileError, match=r"ptxas .* failed"):
        compile_kernel(
            kernels / "various.cu", "saxpy", "sm_90", CompileOptions(ptxas_options=("--bogus",)), toolkit
        )


def test_missing_source_is_a_clear_error(toolkit: Toolkit, tmp_path: Path) -> None:
    with pytest.raises(CompileError, match=r"cannot read CUDA source .*nope\.cu"):
        compile_kernel(tmp_path / "nope.cu", "k", "sm_90", CompileOptions(), toolkit)


def test_ptxas_timeout_is_enforced(toolkit: Toolkit, kernels: Path) -> None:
    with pytest.raises(CompileError, match=r"ptxas .* on poly_eval \[sm_90\] did not finish within 1e-06 s"):
        compile_kernel(kernels / "hungry.cu", "poly_eval", "sm_90", CompileOptions(), toolkit, 1e-6)


def test_nvcc_has_a_timeout_of_its_own_that_says_how_to_raise_it(toolkit: Toolkit, kernels: Path) -> None:
    """A whole translation unit under nvcc takes longer than one ptxas run: its limit is its own key's."""
    try:
        nvcc = find_nvcc(None)
    except CompileError as exc:
        pytest.skip(f"no nvcc: {exc}")
    with pytest.raises(CompileError) as caught:
        compile_kernel(
            kernels / "hungry.cu",
            "poly_eval",
            "sm_90",
            CompileOptions(),
            toolkit,
            nvcc=nvcc,
            nvcc_timeout=1e-6,
        )
    assert f"nvcc {nvcc.version} on poly_eval [sm_90] did not finish within 1e-06 s" in str(caught.value)
    assert "raise the limit in your ini file, e.g. regbudget_nvcc_timeout = 2e-06" in str(caught.value)


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"])
def test_every_supported_arch_compiles(toolkit: Toolkit, kernels: Path, arch: str) -> None:
    k = compile_kernel(kernels / "various.cu", "saxpy", arch, CompileOptions(), toolkit)
    assert k.resources.arch == arch
    assert 0 < k.resources.registers < 64
