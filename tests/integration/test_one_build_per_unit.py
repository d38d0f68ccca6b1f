"""One build per translation unit, per arch, for the whole run: every kernel of a file shares it, across
tests, compile threads and pytest-xdist workers (through the cache and its per-key locks).

The toolkit is the wheels' real one, seen through a CUDA home whose `ptxas` and `nvcc` are scripts that log
each call and exec the real tool: the log counts the builds.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from helpers.runs import run_json

from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.toolkit import discover

ARCHS = ("sm_80", "sm_90")

# Kernels of every kind in one translation unit with host code: extern "C", a C++ kernel, and two
# instances of a template that only host code instantiates (nvcc builds both).
NVCC_SOURCE = r"""
#include <cstdio>

extern "C" __global__ void scale(float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}

extern "C" __global__ void shift(float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a;
}

__global__ void square(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] * y[i];
}

template <int B>
__global__ void tile_sum(const float* x, float* y) {
    __shared__ float t[B];
    t[threadIdx.x] = x[blockIdx.x * B + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (int k = 0; k < B; ++k) s += t[k] * (k + 1);
        y[blockIdx.x] = s;
    }
}

int main() {
    tile_sum<64><<<1, 64>>>(nullptr, nullptr);
    tile_sum<128><<<1, 128>>>(nullptr, nullptr);
    std::printf("done\n");
    return 0;
}
"""

# The same kernels for NVRTC (device code only): the template's instances come from name expressions.
NVRTC_SOURCE = NVCC_SOURCE.split("int main()")[0].replace("#include <cstdio>\n", "")

KERNELS = ("scale", "shift", "square", "tile_sum<64>", "tile_sum<128>")


def wrapped_home(root: Path, log: Path) -> Path:
    """A CUDA home with the wheels' NVRTC, and ptxas and nvcc scripts that log each call to `log`."""
    real = discover()
    nvcc = find_nvcc(real).path
    home = root / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    for tool, target in (("ptxas", real.ptxas), ("nvcc", nvcc)):
        script = home / "bin" / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\nexec "{target}" "$@"\n')
        script.chmod(0o755)
    for lib in [real.require_nvrtc(), *real.require_nvrtc().parent.glob("libnvrtc-builtins.so.*")]:
        (home / "lib" / lib.name).symlink_to(lib)
    return home


def builds(log: Path, tool: str) -> Counter[str]:
    """The builds `tool` ran, per arch (its --version calls are not builds)."""
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(
        m.group(1)
        for line in lines
        if line.startswith(f"{tool} ") and (m := re.search(r"-arch=(sm_\d+)", line)) is not None
    )


def marked_tests(pytester: pytest.Pytester, source: str, compiler: str) -> None:
    body = "".join(
        f"""
@pytest.mark.regbudget(source="{source}", kernel="{kernel}", compiler="{compiler}", launch=(64,))
def test_{i}():
    pass
"""
        for i, kernel in enumerate(KERNELS)
    )
    pytester.makepyfile(test_kernels="import pytest\n" + body)


RUNS = {
    "serial": ["-n", "0", "--regbudget-jobs=1"],
    "pool": ["-n", "0", "--regbudget-jobs=2"],
    "xdist": ["-n", "2"],
    "no-cache": ["-n", "0", "--regbudget-jobs=2", "--regbudget-no-cache"],
}


@pytest.mark.parametrize("compiler", ["nvcc", "nvrtc"])
@pytest.mark.parametrize("run", RUNS)
def test_every_kernel_of_a_file_shares_one_build_per_arch(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, compiler: str, run: str
) -> None:
    if compiler == "nvcc":
        try:
            find_nvcc(discover())
        except Exception as exc:  # CompileError: no nvcc wheel or toolkit here
            pytest.skip(f"no nvcc: {exc}")
    cache = pytester.path / "cache"
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(cache))
    log = pytester.path / "tools.log"
    home = wrapped_home(pytester.path, log)
    name = "kernels.cu"
    (pytester.path / name).write_text(NVCC_SOURCE if compiler == "nvcc" else NVRTC_SOURCE)
    marked_tests(pytester, name, compiler)
    args = [f"--regbudget-cuda-home={home}", f"--regbudget-arch={','.join(ARCHS)}", "--regbudget-gpu=off"]
    # ptxas measures NVRTC's builds; nvcc runs its own ptxas, which the log does not see.
    tool = "nvcc" if compiler == "nvcc" else "ptxas"

    result, records = run_json(pytester, *args, *RUNS[run])
    result.assert_outcomes(passed=len(KERNELS) * len(ARCHS))
    assert builds(log, tool) == dict.fromkeys(ARCHS, 1), log.read_text()
    measured = {(r["kernel"], r["arch"]): r for r in records}
    assert sorted(measured) == sorted((k, a) for k in KERNELS for a in ARCHS)
    assert all(r["registers"] > 0 for r in records)
    # Two instances of one template: two kernels, not one found twice.
    assert measured["tile_sum<64>", "sm_90"]["entry"] != measured["tile_sum<128>", "sm_90"]["entry"]
    if run == "no-cache":
        result.stdout.fnmatch_lines(["compile cache: off (--regbudget-no-cache)"])
        return
    # The cache counts builds, not kernels: one miss per arch, summed over xdist's workers; a worker that
    # waited for another's build finds it (a hit).
    summary = re.search(r"compile cache .*: (\d+) hits, (\d+) misses", result.stdout.str())
    assert summary is not None, result.stdout.str()
    assert int(summary.group(2)) == len(ARCHS), result.stdout.str()

    log.unlink()
    result, again = run_json(pytester, *args, *RUNS[run])
    result.assert_outcomes(passed=len(KERNELS) * len(ARCHS))
    assert builds(log, tool) == {}
    assert sorted(again, key=lambda r: (r["kernel"], r["arch"])) == sorted(
        records, key=lambda r: (r["kernel"], r["arch"])
    )


def test_a_bad_name_in_a_group_fails_its_own_test_only(pytester: pytest.Pytester) -> None:
    """The template names of one file are compiled together; one bad name sends each kernel to a build
    of its own, where only the bad one fails, with NVRTC's reason."""
    (pytester.path / "kernels.cu").write_text(NVRTC_SOURCE)
    pytester.makepyfile(
        test_kernels="""
import pytest

@pytest.mark.regbudget(source="kernels.cu", kernel="tile_sum<64>")
def test_good():
    pass

@pytest.mark.regbudget(source="kernels.cu", kernel="tile_sum<nope>")
def test_bad():
    pass

@pytest.mark.regbudget(source="kernels.cu", kernel="scale")
def test_plain():
    pass
"""
    )
    result, records = run_json(pytester, "--regbudget-gpu=off", "--regbudget-no-cache")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*kernel 'tile_sum<nope>' not found in *kernels.cu [[]sm_90[]] (NVRTC: *"])
    assert sorted(r["kernel"] for r in records if r["registers"]) == ["scale", "tile_sum<64>"]


@pytest.mark.parametrize("compiler", ["nvcc", "nvrtc"])
def test_a_listed_file_is_built_once_when_its_sass_is_read(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, compiler: str
) -> None:
    """A manifest's `kernels = ["*"]` lists the file's kernels with a build; with --regbudget-sass the same
    build (every build has -lineinfo) gives the numbers and the SASS: one build per arch, not two."""
    if compiler == "nvcc":
        try:
            find_nvcc(discover())
        except Exception as exc:  # CompileError: no nvcc wheel or toolkit here
            pytest.skip(f"no nvcc: {exc}")
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(pytester.path / "cache"))
    log = pytester.path / "tools.log"
    home = wrapped_home(pytester.path, log)
    (pytester.path / "kernels.cu").write_text(NVCC_SOURCE if compiler == "nvcc" else NVRTC_SOURCE)
    (pytester.path / "regbudget.toml").write_text(
        f'[[kernels]]\nsource = "kernels.cu"\nkernels = ["*"]\ncompiler = "{compiler}"\n'
    )
    args = [f"--regbudget-cuda-home={home}", f"--regbudget-arch={','.join(ARCHS)}", "--regbudget-gpu=off"]
    result, records = run_json(pytester, *args, "--regbudget-sass", "-n", "0")
    assert result.ret == 0, result.stdout.str()
    assert records
    assert all(r["spill_instructions"] is not None for r in records)
    assert builds(log, "nvcc" if compiler == "nvcc" else "ptxas") == dict.fromkeys(ARCHS, 1), log.read_text()
