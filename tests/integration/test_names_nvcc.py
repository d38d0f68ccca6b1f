"""Template kernels by their readable names, with the real nvcc 13.5 wheel: nvcc builds, binaries read by
cuobjdump, NVRTC's plain compile; and the nvcc extra's headers (CCCL, the profiler API) and a .cuh file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.data import KERNELS
from helpers.runs import run_json

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.core import names
from pytest_regbudget.core.ptxas import parse_ptx_entries, parse_ptxas_output
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.nvrtc import compile_ptx
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Toolkit, discover, nvidia_roots

TEMPLATES = KERNELS / "templates.cu"
MATMUL16 = "_Z13MatrixMulCUDAILi16EEvPfS0_S0_ii"
MATMUL32 = "_Z13MatrixMulCUDAILi32EEvPfS0_S0_ii"
KERNEL2 = "_ZN3lib7Kernel2INS_3FooEEEvT_Pf"
REDUCE = "_Z7reduce6IfLj256ELb1EEvPKT_PS0_j"
# Every kernel templates.cu instantiates, by its readable name.
READABLE = [
    "MatrixMulCUDA<16>",
    "MatrixMulCUDA<32>",
    "lib::Kernel2<lib::Foo>",
    "plain_scale",
    "reduce6<float, 192, false>",
    "reduce6<float, 256, true>",
]


@pytest.fixture(scope="module")
def nvcc() -> Path:
    """The CUDA 13 wheel's nvcc (never a system toolkit's)."""
    try:
        found = find_nvcc(None).path
    except Exception as exc:  # CompileError: no nvcc wheel
        pytest.skip(f"no nvcc: {exc}")
    if not any(root in found.parents for root in nvidia_roots()):
        pytest.skip(f"the nvcc found is not the pip wheel's: {found}")
    return found


def nvcc_registers(nvcc: Path, source: Path, out: Path) -> dict[str, int]:
    """Registers per entry, from a separate `nvcc -cubin -Xptxas -v` run: the reference."""
    done = subprocess.run(
        [str(nvcc), "-cubin", "-arch=sm_90", "-Xptxas", "-v", str(source), "-o", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {name: r.registers for name, r in parse_ptxas_output(done.stdout + done.stderr).items()}


def test_nvcc_finds_template_instances_by_readable_name(
    pytester: pytest.Pytester, nvcc: Path, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_k=f"""
import pytest
SRC = {str(TEMPLATES)!r}

@pytest.mark.regbudget(source=SRC, kernel="MatrixMulCUDA<32>", compiler="nvcc", smem=4096)
def test_matmul32():
    pass

@pytest.mark.regbudget(source=SRC, kernel="MatrixMulCUDA < 16 >", compiler="nvcc", max_regs=255)
def test_matmul16():
    pass

@pytest.mark.regbudget(source=SRC, kernel="lib::Kernel2<lib::Foo>", compiler="nvcc", max_regs=255)
def test_kernel2():
    pass

@pytest.mark.regbudget(source=SRC, kernel="reduce6<float, 256, true>", compiler="nvcc", max_regs=255)
def test_reduce():
    pass

@pytest.mark.regbudget(source=SRC, kernel="plain_scale", compiler="nvcc", max_regs=255)
def test_plain():
    pass

@pytest.mark.regbudget(source=SRC, kernel="MatrixMulCUDA<64>", compiler="nvcc")
def test_missing():
    pass
"""
    )
    result, records = run_json(pytester, "--regbudget-arch=sm_90")
    result.assert_outcomes(passed=4, failed=2)
    reference = nvcc_registers(nvcc, TEMPLATES, tmp_path / "ref.cubin")
    by_test = {r["nodeid"].split("::")[1].split("[")[0]: r for r in records}
    expected = {
        "test_matmul32": ("MatrixMulCUDA<32>", MATMUL32),
        "test_matmul16": ("MatrixMulCUDA<16>", MATMUL16),
        "test_kernel2": ("lib::Kernel2<lib::Foo>", KERNEL2),
        "test_reduce": ("reduce6<float, 256, true>", REDUCE),  # one spelling of the literal: 256, not 256u
        "test_plain": ("plain_scale", "plain_scale"),
    }
    lines = TEMPLATES.read_text().splitlines()
    for test, (kernel, entry) in expected.items():
        record = by_test[test]
        assert (record["kernel"], record["entry"]) == (kernel, entry)
        assert record["registers"] == reference[entry]
        defined = next(i for i, text in enumerate(lines, 1) if f" {names.base_name(kernel)}(" in text)
        assert record["line"] == defined, kernel  # the annotation's line
    assert by_test["test_matmul32"]["shared_mem"] == 2 * 32 * 32 * 4
    result.stdout.fnmatch_lines(
        [
            "*MatrixMulCUDA<32> [[]sm_90[]]: static shared memory 8,192 bytes > smem 4096*",
            "*kernel 'MatrixMulCUDA<64>' not found in *templates.cu [[]sm_90[]]; the module contains: "
            "MatrixMulCUDA<16>, MatrixMulCUDA<32>, *nvcc 13.5.* built the kernels*",
            # the summary names the nvcc, its version and where it came from
            "*nvcc 13.5.* (*cu13/bin/nvcc, from *) built 5 kernel(s)*",
        ]
    )
    missing = by_test["test_missing"]["error"]
    assert "_Z" not in missing
    assert all(name in missing for name in READABLE)


def test_binary_kernels_by_readable_name(pytester: pytest.Pytester, nvcc: Path) -> None:
    """A cubin built by the nvcc wheel, read by cuobjdump: kernels named and reported readably."""
    cubin = pytester.path / "templates.cubin"
    subprocess.run([str(nvcc), "-cubin", "-arch=sm_90", str(TEMPLATES), "-o", str(cubin)], check=True)
    pytester.makepyfile(
        test_k=f"""
import pytest

@pytest.mark.regbudget(binary="templates.cubin", kernel="MatrixMulCUDA<16>", smem=1024)
def test_marker():
    pass

@pytest.mark.regbudget(max_regs=255)
def test_every_kernel(regbudget):
    reports = regbudget.load("templates.cubin")
    assert sorted(r.kernel for r in reports) == {READABLE!r}

@pytest.mark.regbudget(max_regs=255)
def test_one_kernel(regbudget):
    (one,) = regbudget.load("templates.cubin", kernel="Kernel2<lib::Foo>")
    assert one.kernel == "lib::Kernel2<lib::Foo>"
    (mangled,) = regbudget.load("templates.cubin", kernel={MATMUL32!r})
    assert mangled.kernel == "MatrixMulCUDA<32>"

@pytest.mark.regbudget(binary="templates.cubin", kernel="reduce6<double, 256, true>")
def test_missing():
    pass
"""
    )
    result, records = run_json(pytester, "--regbudget-arch=sm_90")
    result.assert_outcomes(passed=2, failed=2)
    marker = next(r for r in records if "test_marker" in r["nodeid"])
    assert (marker["kernel"], marker["entry"]) == ("MatrixMulCUDA<16>", MATMUL16)
    every = {r["kernel"]: r["entry"] for r in records if "test_every_kernel" in r["nodeid"]}
    assert every["MatrixMulCUDA<32>"] == MATMUL32  # the JSON keeps the mangled entry
    assert every["lib::Kernel2<lib::Foo>"] == KERNEL2
    result.stdout.fnmatch_lines(
        [
            "*MatrixMulCUDA<16> [[]sm_90[]]: static shared memory 2,048 bytes > smem 1024*",
            "*kernel 'reduce6<double, 256, true>' not found in *templates.cubin [[]sm_90[]]; it contains: "
            "reduce6<float, 256, true>, *",
        ]
    )


@pytest.mark.slow
def test_nvcc_extra_builds_real_programs(pytester: pytest.Pytester, nvcc: Path) -> None:
    """<cuda_fp16.h> (which needs CCCL's <nv/target>), <cuda_profiler_api.h> and <cub/cub.cuh> come from the
    nvcc extra's wheels; a .cuh compiles with -x cu, and without it the error says so."""
    pytester.makepyfile(
        test_k=f"""
import pytest

@pytest.mark.regbudget(source={str(KERNELS / "wheel_headers.cu")!r}, kernel="half_sum<128>", compiler="nvcc",
                       max_regs=64, launch=(128,))
def test_headers():
    pass

@pytest.mark.regbudget(source={str(KERNELS / "header_only.cuh")!r}, kernel="header_axpy", compiler="nvcc",
                       options=["-x", "cu"], max_regs=32)
def test_cuh():
    pass

@pytest.mark.regbudget(source={str(KERNELS / "header_only.cuh")!r}, kernel="header_axpy", compiler="nvcc")
def test_cuh_without_x_cu():
    pass
"""
    )
    result, records = run_json(pytester, "--regbudget-arch=sm_90")
    result.assert_outcomes(passed=2, failed=1)
    headers = next(r for r in records if "test_headers" in r["nodeid"])
    assert headers["kernel"] == "half_sum<128>"
    assert headers["entry"].startswith("_Z8half_sumILi128EE")
    assert headers["registers"] > 0
    assert headers["nvrtc_version"].startswith("nvcc 13.5.")
    result.stdout.fnmatch_lines(['*for a header (.cuh) or another name, add options=["-x", "cu"]*'])


@pytest.fixture(scope="module")
def toolkit() -> Toolkit:
    return discover()


def test_nvrtc_plain_compile_lists_its_kernels(toolkit: Toolkit) -> None:
    """NVRTC without name expressions: extern "C" and non-template kernels, no template instance."""
    source = KERNELS / "various.cu"
    module = compile_ptx(source.read_text(), str(source), "sm_90", CompileOptions(), toolkit)
    found = list(names.display_names(parse_ptx_entries(module.ptx)).values())
    assert {"saxpy", "transpose", "local_lookup", "block_sum"} <= set(found)
    assert not [k for k in found if k.startswith("gemm")]
    assert "_Z" not in " ".join(found)


def test_nvrtc_finds_a_kernel_by_its_entry_or_readable_name(toolkit: Toolkit, tmp_path: Path) -> None:
    """A name NVRTC cannot take as a name expression (a mangled entry, an anonymous namespace's kernel)
    is looked up among the plain compile's kernels, and reported by its readable name."""
    source = tmp_path / "anon.cu"
    source.write_text(
        "namespace {\n__global__ void hidden(float* x) { x[threadIdx.x] *= 2.0f; }\n}\n"
        "__global__ void visible(float* x) { x[threadIdx.x] += 1.0f; }\n"
    )
    by_entry = compile_kernel(source, "_Z7visiblePf", "sm_90", CompileOptions(), toolkit)
    assert (by_entry.kernel, by_entry.entry, by_entry.line) == ("visible", "_Z7visiblePf", 4)
    hidden = compile_kernel(source, "(anonymous namespace)::hidden", "sm_90", CompileOptions(), toolkit)
    assert hidden.kernel == "(anonymous namespace)::hidden"
    assert hidden.line == 2
    assert hidden.resources.registers > 0
