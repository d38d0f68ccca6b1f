"""CUDA 13's archs (sm_88, sm_107, sm_110 and their a/f spellings) built and judged by the real NVRTC and
ptxas of the CUDA 13.5 wheels, their occupancy against the CUDA 13.5 header, and the one line a run gets for
an arch a toolkit does not build: under CUDA 12.9, under CUDA 13 (renamed, dropped), with CUDA 13.0's nvcc
pinned, in a run comparing toolkits, and where the toolkit builds an arch the table has no limits for. Then
`all` and `native`.
"""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.occupancy import ask, build_oracle, launch_line
from helpers.projects import copy_kernels, write
from helpers.runs import regbudget

from pytest_regbudget.core.arch import get_arch
from pytest_regbudget.gpu.device import Device
from pytest_regbudget.tools.toolkit import Toolkit, discover

NEW_ARCHS = ("sm_110", "sm_110a", "sm_88", "sm_107", "sm_107f")
# CUDA 13.0's nvcc, as the machine's CUDA install has it (not the wheels): the "pinned nvcc" of the tests.
SYSTEM_NVCC = Path("/usr/local/cuda/bin/nvcc")

POLY = """
import pytest

@pytest.mark.regbudget(source="kernels/hungry.cu", kernel="poly_eval", max_regs=32, launch=(256,))
def test_poly():
    pass

@pytest.mark.regbudget(source="kernels/various.cu", kernel="saxpy", max_regs=64, launch=(256,))
def test_saxpy():
    pass
"""

# Kernels whose launches are limited, on the new archs, by blocks, warps, block barriers and shared memory.
SHAPES_CU = r"""
extern "C" __global__ void tiny(float* y) { y[threadIdx.x] += 1.0f; }

extern "C" __global__ void two_barriers(float* y) {
    y[threadIdx.x] += 1.0f;
    __syncthreads();
    asm volatile("bar.sync 1;" ::: "memory");
    y[threadIdx.x] *= 2.0f;
}

extern "C" __global__ void staged(float* y) {
    __shared__ float tile[8192];
    tile[threadIdx.x] = y[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x];
}
"""
SHAPES = """
import pytest

SHAPES = "kernels/shapes.cu"

@pytest.mark.regbudget(source=SHAPES, kernel="tiny", launch=(32,))
def test_blocks():
    pass

@pytest.mark.regbudget(source=SHAPES, kernel="tiny", launch=(1024,))
def test_warps():
    pass

@pytest.mark.regbudget(source=SHAPES, kernel="two_barriers", launch=(32,))
def test_barriers():
    pass

@pytest.mark.regbudget(source=SHAPES, kernel="staged", launch=(128,))
def test_smem():
    pass
"""
NVCC_POLY = """
import pytest

@pytest.mark.regbudget(source="kernels/hungry.cu", kernel="poly_eval", compiler="nvcc", launch=(256,))
def test_poly_nvcc():
    pass
"""


@pytest.fixture(scope="module")
def cu13() -> Toolkit:
    return discover(named="cu13")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_kernels(pytester.path, "hungry.cu", "various.cu", into="kernels")
    write(pytester.path, "kernels/shapes.cu", SHAPES_CU)
    pytester.makepyfile(test_k=POLY)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, dict[str, Any]]]:
    out = pytester.path / "report.json"
    out.unlink(missing_ok=True)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-rs", "--regbudget-gpu=off", f"--regbudget-json={out}", *args
    )
    kernels = json.loads(out.read_text())["kernels"] if out.exists() else []
    return result, {r["nodeid"].split("::")[-1]: r for r in kernels}


def raw_registers(toolkit: Toolkit, source: Path, kernel: str, arch: str) -> int:
    """NVRTC and ptxas by hand, through NVRTC's C API and `ptxas -v`: what the plugin must equal."""
    lib = ctypes.CDLL(str(toolkit.nvrtc))
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.read_bytes(), b"k.cu", 0, None, None) == 0
    # The toolkit's headers (cuda_fp16.h), which bare NVRTC does not search.
    includes = [f"--include-path={d}".encode() for d in toolkit.include_dirs]
    options = [f"--gpu-architecture=compute_{arch.removeprefix('sm_')}".encode(), *includes]
    status = lib.nvrtcCompileProgram(prog, len(options), (ctypes.c_char_p * len(options))(*options))
    size = ctypes.c_size_t()
    assert lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)) == 0
    log = ctypes.create_string_buffer(size.value)
    assert lib.nvrtcGetProgramLog(prog, log) == 0
    assert status == 0, log.value.decode()
    assert lib.nvrtcGetPTXSize(prog, ctypes.byref(size)) == 0
    ptx = ctypes.create_string_buffer(size.value)
    assert lib.nvrtcGetPTX(prog, ptx) == 0
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return _ptxas_registers(toolkit.ptxas, ptx.value, kernel, arch)


def _ptxas_registers(ptxas: Path, ptx: bytes, kernel: str, arch: str) -> int:
    done = subprocess.run(
        [str(ptxas), "-v", f"-arch={arch}", "-", "-o", "/dev/null"],
        input=ptx,
        capture_output=True,
        check=True,
    )
    return _used_registers(done.stdout.decode() + done.stderr.decode(), kernel)


def _used_registers(log: str, kernel: str) -> int:
    """`Used N registers` of `kernel`'s function in a ptxas -v log."""
    blocks = log.split("Compiling entry function")
    block = next(b for b in blocks if b.lstrip(" '").startswith(kernel))
    found = re.search(r"Used (\d+) registers", block)
    assert found is not None, log
    return int(found[1])


# -- the CUDA 13 archs build, with the CUDA 13.5 header's occupancy -----------------------------------------


def test_new_archs_build_and_judge_with_the_registers_of_a_raw_13_5_build(
    project: pytest.Pytester, cu13: Toolkit
) -> None:
    result, recs = run(project, "--regbudget-toolkit=cu13", f"--regbudget-arch={','.join(NEW_ARCHS)}")
    # poly_eval (168 registers) over max_regs=32 fails on every arch; saxpy passes on every arch.
    result.assert_outcomes(failed=len(NEW_ARCHS), passed=len(NEW_ARCHS))
    for arch in NEW_ARCHS:
        poly, saxpy = recs[f"test_poly[{arch}]"], recs[f"test_saxpy[{arch}]"]
        assert (poly["arch"], poly["release"], poly["outcome"]) == (arch, cu13.release, "failed")
        assert saxpy["outcome"] == "passed"
        expected = raw_registers(cu13, project.path / "kernels" / "hungry.cu", "poly_eval", arch)
        assert poly["registers"] == expected > 32
        assert saxpy["registers"] == raw_registers(
            cu13, project.path / "kernels" / "various.cu", "saxpy", arch
        )
    # A CUDA 13 cubin: nvdisasm gives its life ranges, and the failure names the peak of live registers.
    result.stdout.fnmatch_lines(
        ["poly_eval [[]sm_107f[]]: registers * > max_regs 32; peak * live at hungry.cu:*"]
    )


def test_active_blocks_equal_the_13_5_header_for_each_limiter(
    project: pytest.Pytester, tmp_path: Path
) -> None:
    project.makepyfile(test_k=SHAPES)
    archs = ("sm_110", "sm_88", "sm_107", "sm_103")
    result, recs = run(project, "--regbudget-toolkit=cu13", f"--regbudget-arch={','.join(archs)}")
    result.assert_outcomes(passed=4 * len(archs))
    oracle = build_oracle(tmp_path)
    limiters = set()
    for name, rec in recs.items():
        limits = get_arch(rec["arch"])
        launch = launch_line(
            limits,
            registers=rec["registers"],
            block_size=rec["launch"][0],
            shared_mem=rec["shared_mem"],
            dynamic_shared_mem=rec["dynamic_smem"],
            max_threads=rec["max_threads"],
            barriers=rec["barriers"],
        )
        ((status, header_blocks, *_),) = ask(oracle, limits, [launch])
        assert (status, rec["active_blocks"]) == (0, header_blocks), name
        limiters.add(rec["limiter"])
    assert limiters == {"blocks", "warps", "barriers", "shared memory"}
    # The CUDA 13.5 header's single barrier per block slot on sm_103 (12.9 and 13.0 gave it two: 32 here).
    assert recs["test_barriers[sm_103]"]["active_blocks"] == 16
    assert (recs["test_barriers[sm_110]"]["limiter"], recs["test_barriers[sm_88]"]["limiter"]) == (
        "barriers",
        "blocks",
    )


# -- archs that a toolkit lacks give one line -------------------------------------------------------------


def _usage_lines(result: pytest.RunResult) -> list[str]:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "test_k.py" not in result.stdout.str()
    return [line for line in result.stderr.lines if line.strip()]


def test_cuda_12_names_each_cuda_13_arch_and_the_release_that_builds_it(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "-p", "no:cacheprovider", "--regbudget-toolkit=cu12", "--regbudget-arch=sm_110,sm_88,sm_107"
    )
    lines = _usage_lines(result)
    assert "unknown arch" not in result.stderr.str()
    for arch, releases in (
        ("sm_110", "13.0 and 13.5 build"),
        ("sm_88", "13.0 and 13.5 build"),
        ("sm_107", "13.5 builds"),
    ):
        (line,) = [line for line in lines if f" build {arch}:" in line]
        assert "NVRTC 12.9." in line
        assert f"CUDA {releases} it" in line
        assert "--regbudget-toolkit=cu13" in line
        assert "newer" not in line


def test_sm_101_under_cuda_13_is_its_new_name(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "-p", "no:cacheprovider", "--regbudget-toolkit=cu13", "--regbudget-arch=sm_101"
    )
    (line,) = _usage_lines(result)
    assert "does not build sm_101: CUDA 13 calls this arch sm_110. Fix: --regbudget-arch=sm_110" in line
    assert "NVRTC 13.5." in line
    assert "newer" not in line


def test_sm_70_under_cuda_13_was_dropped(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-toolkit=cu13", "--regbudget-arch=sm_70")
    (line,) = _usage_lines(result)
    assert "NVRTC 13.5." in line
    assert "does not build sm_70: its oldest target is sm_75; CUDA 13 dropped sm_70" in line
    assert "build it with CUDA 12.x: run with --regbudget-toolkit=cu12" in line
    assert "newer" not in line


def test_an_arch_only_the_toolkit_knows_is_never_built_with_guessed_limits(project: pytest.Pytester) -> None:
    """NVRTC 12.9 lists sm_60, which the arch table has no limits for: a usage error naming the toolkit."""
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-toolkit=cu12", "--regbudget-arch=sm_60")
    (line,) = _usage_lines(result)
    assert "NVRTC 12.9." in line
    assert "builds sm_60, but pytest-regbudget's arch table has no limits for it" in line
    assert "unknown arch" not in line
    # An arch no toolkit lists stays unknown, with the supported set.
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-toolkit=cu12", "--regbudget-arch=sm_91")
    (line,) = _usage_lines(result)
    assert line.startswith("ERROR: --regbudget-arch: unknown arch 'sm_91' (supported: sm_70,")


@pytest.mark.parametrize(
    ("where", "prefix"),
    [("ini", "regbudget_arch (ini): "), ("manifest", "regbudget.toml: arch: ")],
)
def test_the_line_names_where_the_arch_was_given(project: pytest.Pytester, where: str, prefix: str) -> None:
    if where == "ini":
        project.makeini("[pytest]\nregbudget_arch = sm_110\nregbudget_toolkit = cu12\n")
    else:
        project.makeini("[pytest]\nregbudget_toolkit = cu12\n")
        (project.path / "regbudget.toml").write_text('arch = ["sm_110"]\n')
    result = project.runpytest("-p", "no:cacheprovider")
    (line,) = _usage_lines(result)
    assert line.startswith(f"ERROR: {prefix}toolkit cu12 (CUDA 12.9: NVRTC 12.9.")
    assert "does not build sm_110" in line


def test_one_toolkit_fails_the_items_it_cannot_build_with_the_line(project: pytest.Pytester) -> None:
    """The default toolkit (the CUDA 12 wheels) cannot build sm_110, the CUDA 13 wheel's nvcc can: the run
    starts, the NVRTC items fail with the one line and the nvcc item builds."""
    project.makepyfile(test_k=POLY.replace("max_regs=32", "max_regs=255"), test_n=NVCC_POLY)
    result, recs = run(project, "--regbudget-arch=sm_110")
    result.assert_outcomes(failed=2, passed=1)
    assert recs["test_poly_nvcc[sm_110]"]["outcome"] == "passed"
    for name in ("test_poly[sm_110]", "test_saxpy[sm_110]"):
        error = recs[name]["error"]
        assert error.startswith("NVRTC 12.9.")
        assert "does not build sm_110: CUDA 13.0 and 13.5 build it" in error
        assert "\n" not in error


def test_several_toolkits_skip_the_items_of_the_one_that_lacks_the_arch(project: pytest.Pytester) -> None:
    project.makepyfile(test_k=POLY.replace("max_regs=32", "max_regs=255"))
    result, recs = run(project, "--regbudget-toolkit=cu12,cu13", "--regbudget-arch=sm_101,sm_110")
    result.assert_outcomes(passed=4, skipped=4)
    assert {n: r["release"] for n, r in recs.items() if n.startswith("test_poly")} == {
        "test_poly[sm_101-12.9]": "12.9",
        "test_poly[sm_110-13.5]": "13.5",
    }
    skips = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert len(skips) == 2  # one line each (pytest folds the two tests' same reason into one)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*toolkit cu13 (CUDA 13.5*) does not build sm_101: CUDA 13 calls this arch sm_110*",
            "SKIPPED*toolkit cu12 (CUDA 12.9*) does not build sm_110: CUDA 13.0 and 13.5 build*",
        ],
        consecutive=False,
    )


def test_explain_says_it_in_one_line_with_its_own_options(project: pytest.Pytester) -> None:
    target = f"{project.path / 'kernels' / 'hungry.cu'}::poly_eval"
    done = regbudget("explain", target, "--arch", "sm_110", "--toolkit", "cu12", "--bounds", "none")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "NVRTC 12.9." in line
    assert "does not build sm_110" in line
    assert "run with --toolkit cu13" in line
    # An arch the toolkit lists but the table has no limits for says so there too.
    done = regbudget("explain", target, "--arch", "sm_60", "--toolkit", "cu12", "--bounds", "none")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "NVRTC 12.9." in line
    assert "builds sm_60, but pytest-regbudget's arch table has no limits for it" in line


def _system_nvcc_13_0() -> Path:
    if not SYSTEM_NVCC.is_file():
        pytest.skip(f"no CUDA 13.0 nvcc at {SYSTEM_NVCC} (the machine's CUDA install) to pin")
    version = subprocess.run([str(SYSTEM_NVCC), "--version"], capture_output=True, text=True).stdout
    if "release 13.0," not in version:
        pytest.skip(f"{SYSTEM_NVCC} is not CUDA 13.0's nvcc: {version.strip().splitlines()[-1:]}")
    return SYSTEM_NVCC


def test_a_pinned_cuda_13_0_nvcc_builds_sm_110_and_names_13_0_for_sm_107(project: pytest.Pytester) -> None:
    nvcc = _system_nvcc_13_0()
    project.makepyfile(test_k=NVCC_POLY)
    result, recs = run(project, f"--regbudget-nvcc={nvcc}", "--regbudget-arch=sm_110")
    result.assert_outcomes(passed=1)
    rec = recs["test_poly_nvcc[sm_110]"]
    printed = subprocess.run(
        [
            str(nvcc),
            "-cubin",
            "-arch=sm_110",
            "-Xptxas",
            "-v",
            str(project.path / "kernels" / "hungry.cu"),
            "-o",
            "/dev/null",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (rec["release"], rec["registers"]) == (
        "13.0",
        _used_registers(printed.stdout + printed.stderr, "poly_eval"),
    )
    result = project.runpytest(
        "-p", "no:cacheprovider", f"--regbudget-nvcc={nvcc}", "--regbudget-arch=sm_107"
    )
    (line,) = _usage_lines(result)
    assert f"nvcc 13.0.88 ({nvcc}, from --regbudget-nvcc) does not build sm_107: CUDA 13.5 builds it" in line
    assert "newer" not in line


# -- all and native ----------------------------------------------------------------------------------------


def test_all_is_every_arch_every_toolkit_of_the_run_builds(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "-p", "no:cacheprovider", "--regbudget-arch=all", "--regbudget-toolkit=cu13", "--co", "-q"
    )
    cuda13 = [
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_87",
        "sm_88",
        "sm_89",
        "sm_90",
        "sm_100",
        "sm_103",
        "sm_107",
        "sm_110",
        "sm_120",
        "sm_121",
    ]
    ids = [
        line.split("[")[1].rstrip("]")
        for line in result.stdout.lines
        if line.startswith("test_k.py::test_poly[")
    ]
    assert ids == cuda13
    result = project.runpytest(
        "-p", "no:cacheprovider", "--regbudget-arch=all", "--regbudget-toolkit=cu12,cu13", "--co"
    )
    # What both build: CUDA 13 dropped sm_70/72 and renamed sm_101; CUDA 12.9 has no sm_88/107/110.
    both = [a for a in cuda13 if a not in ("sm_88", "sm_107", "sm_110")]
    result.stdout.fnmatch_lines([f"regbudget: *; archs {','.join(both)}; baseline *"])


def test_native_without_a_gpu_says_there_is_none(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-arch=native", "--regbudget-gpu=off")
    (line,) = _usage_lines(result)
    assert line == (
        "ERROR: --regbudget-arch: native: the GPU checks find no GPU to take the arch from "
        "(--regbudget-gpu=off). Fix: name the archs, e.g. --regbudget-arch=sm_90"
    )


@pytest.mark.gpu
def test_native_is_the_gpus_arch(project: pytest.Pytester, gpu_device: Device) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-arch=native", "--co", "-q")
    assert f"test_k.py::test_poly[{gpu_device.arch}]" in result.stdout.lines
