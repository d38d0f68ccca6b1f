"""The kernel manifest end to end, with the real NVRTC, ptxas, nvcc and cuobjdump from the wheels: items per
(kernel, variant, arch) wherever the manifest points, refinement, selection by node id, -k and --deselect,
bad manifests, a compile error in one file, xdist, --regbudget-update, and a multi-kernel nvcc file with
templates adopted with no kernel named."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import projects
from helpers.data import KERNELS
from helpers.runs import run_json

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.tools import ptxas as assembler
from pytest_regbudget.tools import running
from pytest_regbudget.tools.nvcc import find_nvcc

HUNGRY = (KERNELS / "hungry.cu").read_text()
# Two extern "C" kernels (a listing finds them), a template and a namespaced template (named by name
# expression: NVRTC builds a template instance only when told to).
ELEMENTWISE = """
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
extern "C" __global__ void add(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}
template <int N>
__global__ void acc(const float* x, float* y) {
    float s = 0;
#pragma unroll
    for (int k = 0; k < N; ++k) s += x[threadIdx.x + k * 32] * k;
    y[threadIdx.x] = s;
}
namespace ns {
template <int N>
__global__ void tile(float* y) {
    __shared__ float t[N * 32];
    t[threadIdx.x] = threadIdx.x;
    __syncthreads();
    y[threadIdx.x] = t[(threadIdx.x + 1) % (N * 32)];
}
}  // namespace ns
"""
TEST_MODULE = "def test_plain():\n    pass\n"
PYPROJECT = """
[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.regbudget]
arch = ["sm_80", "sm_90"]

[[tool.regbudget.kernels]]        # every kernel of every file: no spills, no shared memory
source = ["kernels/**/*.cu"]
spills = 0
smem = 0

[[tool.regbudget.kernels]]        # refines scale, and adds two template instances
source = "kernels/ew.cu"
kernels = ["sc*", "acc<4>", "ns::tile<8>"]
max_regs = 32
launch = [256]
smem = 1024

[[tool.regbudget.kernels]]
source = "kernels/more/hungry.cu"
kernels = ["poly_eval"]
variants = [{NACC = 4}, {NACC = 8}]
max_regs = {sm_80 = 96, sm_90 = 96}
"""
ITEMS = [
    "kernels/ew.cu::scale[sm_80]",
    "kernels/ew.cu::scale[sm_90]",
    "kernels/ew.cu::add[sm_80]",
    "kernels/ew.cu::add[sm_90]",
    "kernels/ew.cu::acc<4>[sm_80]",
    "kernels/ew.cu::acc<4>[sm_90]",
    "kernels/ew.cu::ns.tile<8>[sm_80]",
    "kernels/ew.cu::ns.tile<8>[sm_90]",
    "kernels/more/hungry.cu::poly_eval[NACC_4-sm_80]",
    "kernels/more/hungry.cu::poly_eval[NACC_4-sm_90]",
    "kernels/more/hungry.cu::poly_eval[NACC_8-sm_80]",
    "kernels/more/hungry.cu::poly_eval[NACC_8-sm_90]",
]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """Kernels in kernels/ (outside testpaths), one plain test in tests/, the manifest in pyproject.toml."""
    write(pytester, "kernels/ew.cu", ELEMENTWISE)
    write(pytester, "kernels/more/hungry.cu", HUNGRY)
    write(pytester, "tests/test_plain.py", TEST_MODULE)
    write(pytester, "pyproject.toml", PYPROJECT)
    return pytester


def write(pytester: pytest.Pytester, name: str, text: str) -> Path:
    return projects.write(pytester.path, name, textwrap.dedent(text))


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("-p", "no:cacheprovider", "--co", "-q", *args)
    return [line for line in result.stdout.lines if "::" in line and " " not in line.strip()]


def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["nodeid"]: r for r in records}


def test_manifest_items_for_files_globs_variants_and_refinements(project: pytest.Pytester) -> None:
    assert collected(project) == ["tests/test_plain.py::test_plain", *ITEMS]
    result, records = run_json(project)
    result.assert_outcomes(passed=13)
    rec = by_id(records)
    assert set(rec) == set(ITEMS)
    scale = rec["kernels/ew.cu::scale[sm_90]"]
    assert (scale["kernel"], scale["launch"], scale["key"][0]) == ("scale", [256], "kernels/ew.cu")
    assert scale["occupancy"] is not None
    assert rec["kernels/ew.cu::add[sm_90]"]["launch"] is None  # table 1 only
    tile = rec["kernels/ew.cu::ns.tile<8>[sm_90]"]
    assert (tile["kernel"], tile["shared_mem"], tile["outcome"]) == ("ns::tile<8>", 8 * 32 * 4, "passed")
    # Variants: one item each, with its own defines (and so its own registers).
    small = rec["kernels/more/hungry.cu::poly_eval[NACC_4-sm_90]"]
    large = rec["kernels/more/hungry.cu::poly_eval[NACC_8-sm_90]"]
    assert small["registers"] < large["registers"]
    assert small["key"][2:] == ["NACC=4", "sm_90", "12.9"]


def test_a_later_table_refines_what_an_earlier_one_set(project: pytest.Pytester) -> None:
    # Without table 2's smem, table 1's smem = 0 holds for the shared-memory tile, and fails it.
    write(project, "pyproject.toml", PYPROJECT.replace("smem = 1024\n", ""))
    result, records = run_json(project, "kernels/ew.cu")
    result.assert_outcomes(passed=6, failed=2)
    result.stdout.fnmatch_lines(["*ns::tile<8> [[]sm_90[]]: static shared memory 1,024 bytes > smem 0*"])
    # A later max_regs below what scale needs fails scale alone; its launch stays table 2's.
    write(
        project,
        "pyproject.toml",
        PYPROJECT + '[[tool.regbudget.kernels]]\nsource = "kernels/ew.cu"\n'
        'kernels = ["scale"]\nmax_regs = 1\n',
    )
    result, records = run_json(project, "kernels/ew.cu")
    result.assert_outcomes(passed=6, failed=2)
    result.stdout.fnmatch_lines(["*scale [[]sm_90[]]: registers * > max_regs 1*"])
    assert by_id(records)["kernels/ew.cu::scale[sm_90]"]["launch"] == [256]


def test_what_each_kind_of_run_collects(project: pytest.Pytester) -> None:
    # A test file: that file only. A kernel file: its items only. A directory: the manifest files below it.
    assert collected(project, "tests/test_plain.py") == ["tests/test_plain.py::test_plain"]
    assert collected(project, "kernels/more/hungry.cu") == ITEMS[8:]
    assert collected(project, "kernels/more") == ITEMS[8:]
    assert collected(project, "kernels") == ITEMS
    # A CUDA file the manifest does not name, given as an argument, says so.
    write(project, "src/other.cu", 'extern "C" __global__ void k() {}\n')
    result = project.runpytest("-p", "no:cacheprovider", "src/other.cu")
    result.stdout.fnmatch_lines(["*src/other.cu is not in pyproject.toml *tool.regbudget*: add it*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_selection_by_node_id_k_words_and_deselect(project: pytest.Pytester) -> None:
    assert collected(project, "kernels/ew.cu::acc<4>[sm_90]") == ["kernels/ew.cu::acc<4>[sm_90]"]
    assert collected(project, "kernels/ew.cu::ns.tile<8>") == ITEMS[6:8]
    assert collected(project, "kernels/more/hungry.cu::poly_eval[NACC_8-sm_80]") == [ITEMS[10]]
    assert collected(project, "-k", "acc and 4 and sm_90 and not NACC") == ["kernels/ew.cu::acc<4>[sm_90]"]
    assert collected(project, "-k", "tile and 8") == ITEMS[6:8]
    assert collected(project, "-k", "poly_eval and NACC_8") == ITEMS[10:12]
    assert collected(project, "-k", "not plain and not ew.cu") == ITEMS[8:]
    deselected = collected(
        project, "--deselect", "kernels/ew.cu::acc<4>[sm_80]", "--deselect", "kernels/more"
    )
    assert deselected == ["tests/test_plain.py::test_plain", *ITEMS[:4], *ITEMS[5:8]]
    # The reason an id is made this way: "<" is not a -k word.
    result = project.runpytest("-p", "no:cacheprovider", "--co", "-k", "acc<4>")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_bad_manifest_is_a_usage_error_before_anything_runs(project: pytest.Pytester) -> None:
    write(project, "pyproject.toml", PYPROJECT + "max_reg = 3\n")
    result = project.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: regbudget manifest: pyproject.toml, *tool.regbudget.kernels* table 3, key 'max_reg': "
            "unknown key (did you mean 'max_regs'?)*"
        ]
    )
    write(project, "pyproject.toml", PYPROJECT.replace("kernels/more/hungry.cu", "kernels/gone/*.cu"))
    result = project.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*table 3, key 'source': 'kernels/gone/[*].cu' matches no file*"])
    write(
        project,
        "pyproject.toml",
        PYPROJECT + '\n[[tool.regbudget.kernels]]\nsource = "kernels/ew.cu"\ncompiler = "nvcc"\n'
        '[[tool.regbudget.kernels]]\nsource = "kernels/*.cu"\ncompiler = "nvrtc"\n',
    )
    result = project.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*table 5, key 'compiler': kernels/ew.cu is compiled by 'nvcc' in table 4*"])
    # The ini and the manifest may not disagree on the archs.
    write(project, "pyproject.toml", PYPROJECT.replace('testpaths = ["tests"]', 'regbudget_arch = "sm_90"'))
    result = project.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*arch = *sm_80*sm_90* and ini regbudget_arch = sm_90 disagree*"])


def test_a_pattern_that_matches_nothing_warns_with_the_kernels_there_are(project: pytest.Pytester) -> None:
    write(
        project,
        "pyproject.toml",
        PYPROJECT + '\n[[tool.regbudget.kernels]]\nsource = "kernels/ew.cu"\nkernels = ["scal?", "mul*"]\n',
    )
    result = project.runpytest("-p", "no:cacheprovider", "kernels/ew.cu")
    result.assert_outcomes(passed=8, warnings=1)
    result.stdout.fnmatch_lines(
        ["*table 4: kernels pattern 'mul[*]' matches no kernel of kernels/ew.cu (it holds: *add*"]
    )


def test_archs_narrow_items_and_merged_keys_are_checked_per_kernel(project: pytest.Pytester) -> None:
    extra = """
[[tool.regbudget.kernels]]
source = "kernels/ew.cu"
kernels = ["add"]
archs = ["sm_100"]

[[tool.regbudget.kernels]]
source = "kernels/more/hungry.cu"
min_occupancy = 0.5
"""
    write(project, "pyproject.toml", PYPROJECT + extra)
    result = project.runpytest("-p", "no:cacheprovider", "-rs", "--continue-on-collection-errors")
    # add is built for sm_100 only: skipped, saying why. poly_eval has a min_occupancy and no launch from any
    # table: its file is a collection error, naming the kernel and its tables.
    result.assert_outcomes(passed=7, skipped=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*kernel poly_eval of kernels/more/hungry.cu (tables 1, 3, 5): min_occupancy needs a block size*",
            "SKIPPED*regbudget archs=sm_100 not among this run's archs sm_80,sm_90",
        ]
    )


def test_a_file_that_does_not_build_is_its_own_item_and_the_baseline_records_it(
    project: pytest.Pytester,
) -> None:
    broken = write(project, "kernels/broken.cu", 'extern "C" __global__ void b(float* x) { undefined(x); }\n')
    baseline = project.path / "regbudget-baseline.toml"
    # New: one failed item per arch, with the compiler's log; every other kernel is checked.
    result, records = run_json(project)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=13, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*kernels/broken.cu [[]sm_80, CUDA 12.9[]] does not build with nvrtc:*",
            '*broken.cu(1): error: identifier "undefined" is undefined*',
            "*exclude = [[]...[]]*--regbudget-update*",
        ]
    )
    assert "ERROR collecting" not in result.stdout.str()
    assert len(records) == 12
    # The update records it, and passes.
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-update")
    assert result.ret == pytest.ExitCode.OK
    recorded = bl.load(baseline).broken
    assert set(recorded) == {("kernels/broken.cu", "-", arch, "12.9") for arch in ("sm_80", "sm_90")}
    assert 'identifier "undefined" is undefined' in recorded["kernels/broken.cu", "-", "sm_90", "12.9"].error
    # Recorded, still failing (with another error): it passes, all of them named in one line.
    broken.write_text('extern "C" __global__ void b(float* x) { other(x); }\n')
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-strict")
    result.assert_outcomes(passed=15)
    result.stdout.fnmatch_lines(
        ["*2 build(s) fail as the baseline records (kernels/broken.cu [[]sm_80, CUDA 12.9[]], *"]
    )
    # Fixed: reported; the update records its kernel and drops the broken entries.
    broken.write_text('extern "C" __global__ void b(float* x) { x[0] = 1; }\n')
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=15)
    result.stdout.fnmatch_lines(["*2 build(s) recorded as broken build again (kernels/broken.cu*"])
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-update")
    assert result.ret == pytest.ExitCode.OK
    after = bl.load(baseline)
    assert not after.broken
    assert ("kernels/broken.cu", "b", "-", "sm_90", "12.9") in after.entries


def test_a_build_no_compiler_judged_fails_and_is_never_recorded_as_broken(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ptxas that runs out of time says nothing of the file: its item fails, an update records nothing in
    the broken table, and the next run with time enough builds it."""
    # A cache of its own: the suite's shared one may hold ew.cu's builds from another test's copy of the
    # project (keys hold no checkout path), and a hit runs no ptxas to time out.
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(project.path / "cache"))
    pyproject = project.path / "pyproject.toml"
    fast = pyproject.read_text().replace(
        'testpaths = ["tests"]', 'testpaths = ["tests"]\nregbudget_ptxas_timeout = 0.001'
    )
    pyproject.write_text(fast)
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-update", "kernels/ew.cu")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Either arch's build may be the one that times out: under load one was seen to finish (issue 43's note).
    result.stdout.fnmatch_lines(["*kernels/ew.cu [[]sm_[89]0[]]: *did not finish within 0.001 s*"])
    baseline = project.path / "regbudget-baseline.toml"
    assert not baseline.exists() or not bl.load(baseline).broken
    pyproject.write_text(PYPROJECT)
    project.runpytest("-p", "no:cacheprovider", "kernels/ew.cu").assert_outcomes(passed=8)


def test_update_writes_the_manifest_kernels_the_ratchet_holds_and_stale_entries_go(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-update")
    result.assert_outcomes(passed=13)
    baseline = project.path / "regbudget-baseline.toml"
    entries = bl.load(baseline).entries
    assert ("kernels/more/hungry.cu", "poly_eval", "NACC=8", "sm_90", "12.9") in entries
    assert entries["kernels/ew.cu", "ns::tile<8>", "-", "sm_80", "12.9"].tests == (
        "kernels/ew.cu::ns.tile<8>[sm_80]",
    )
    # The ratchet: a kernel that gets worse fails its items.
    hungry = project.path / "kernels" / "more" / "hungry.cu"
    worse = "acc[k] = fmaf(acc[k], v[k], c + k * acc[(k + 3) % NACC]);"
    hungry.write_text(HUNGRY.replace("acc[k] = fmaf(acc[k], v[k], c + k);", worse))
    result = project.runpytest("-p", "no:cacheprovider", "kernels/more")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*poly_eval [[]sm_*[]]: registers * is worse than the baseline*"])
    hungry.write_text(HUNGRY)
    # A variant the manifest no longer has: kept by an update that did not collect its file in full...
    write(
        project,
        "pyproject.toml",
        PYPROJECT.replace("variants = [{NACC = 4}, {NACC = 8}]", "variants = [{NACC = 8}]"),
    )
    for partial in ("tests/test_plain.py", "kernels/more/hungry.cu::poly_eval"):
        project.runpytest("-p", "no:cacheprovider", "--regbudget-update", partial)
        assert ("kernels/more/hungry.cu", "poly_eval", "NACC=4", "sm_90", "12.9") in bl.load(baseline).entries
    # ... and removed by one that did: a plain run collects every file of the manifest.
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-update")
    result.assert_outcomes(passed=11)
    left = bl.load(baseline).entries
    assert not [key for key in left if key[2] == "NACC=4"]
    assert len(left) == 10
    # A file the manifest no longer names at all (it still exists): its entries go too.
    write(project, "pyproject.toml", PYPROJECT.split('[[tool.regbudget.kernels]]\nsource = "kernels/more')[0])
    write(project, "pyproject.toml", (project.path / "pyproject.toml").read_text().replace("**/*.cu", "*.cu"))
    result = project.runpytest("-p", "no:cacheprovider", "--regbudget-update")
    result.assert_outcomes(passed=9)
    assert {key[0] for key in bl.load(baseline).entries} == {"kernels/ew.cu"}


def test_xdist_runs_and_updates_manifest_items(project: pytest.Pytester) -> None:
    result, records = run_json(project, "-n", "2", "--regbudget-update")
    result.assert_outcomes(passed=13)
    assert {r["nodeid"] for r in records} == set(ITEMS)
    entries = bl.load(project.path / "regbudget-baseline.toml").entries
    expected = {("kernels/ew.cu", k) for k in ("scale", "add", "acc<4>", "ns::tile<8>")}
    expected.add(("kernels/more/hungry.cu", "poly_eval"))
    assert {(source, kernel) for source, kernel, _, _, _ in entries} == expected
    assert len(entries) == len(ITEMS)
    result = project.runpytest("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=13)
    # A broken file under xdist: its workers' notes reach the controller, which records it and reports it.
    write(project, "kernels/broken.cu", 'extern "C" __global__ void b(float* x) { undefined(x); }\n')
    result, _ = run_json(project, "-n", "2", "--regbudget-update")
    result.assert_outcomes(passed=15)
    assert len(bl.load(project.path / "regbudget-baseline.toml").broken) == 2
    result = project.runpytest("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=15)
    result.stdout.fnmatch_lines(["*2 build(s) fail as the baseline records (kernels/broken.cu*"])


# -- binaries and nvcc ------------------------------------------------------------------------------------
TEMPLATES = """
#include <cstdio>
#include <cuda_runtime.h>

template <int BLOCK_SIZE>
__global__ void MatrixMulCUDA(float* C, const float* A, const float* B, int wA, int wB) {
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = threadIdx.x, ty = threadIdx.y;
    float sum = 0;
    for (int a = 0; a < wA; a += BLOCK_SIZE) {
        As[ty][tx] = A[a + wA * ty + tx];
        Bs[ty][tx] = B[a * wB + wB * ty + tx];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK_SIZE; ++k) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[wB * ty + tx] = sum;
}

namespace lib {
template <typename T, unsigned int BLOCK, bool POW2>
__global__ void reduce6(const T* in, T* out, unsigned int n) {
    __shared__ T partial[BLOCK];
    T sum = 0;
    for (unsigned int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += BLOCK * gridDim.x) sum += in[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int s = POW2 ? BLOCK / 2 : (BLOCK + 1) / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
}  // namespace lib

extern "C" __global__ void plain_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

int main() {
    float *a = nullptr, *b = nullptr, *c = nullptr;
    cudaMalloc(&a, 1 << 20);
    cudaMalloc(&b, 1 << 20);
    cudaMalloc(&c, 1 << 20);
    MatrixMulCUDA<16><<<1, dim3(16, 16)>>>(c, a, b, 64, 64);
    MatrixMulCUDA<32><<<1, dim3(32, 32)>>>(c, a, b, 64, 64);
    lib::reduce6<float, 256, true><<<64, 256>>>(a, b, 4096);
    lib::reduce6<double, 192, false><<<64, 192>>>((double*)a, (double*)b, 4096);
    plain_scale<<<16, 256>>>(c, 2.0f, 4096);
    std::printf("%s\\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
"""
READABLE = [
    "MatrixMulCUDA<16>",
    "MatrixMulCUDA<32>",
    "lib::reduce6<float, 256, true>",
    "lib::reduce6<double, 192, false>",
    "plain_scale",
]


@pytest.fixture(scope="module")
def nvcc_path() -> Path:
    try:
        return find_nvcc(None).path
    except Exception as exc:  # CompileError: no nvcc wheel or toolkit here
        pytest.skip(f"no nvcc: {exc}")


def reference(nvcc: Path, source: Path, arch: str, tmp: Path) -> dict[str, int]:
    """Registers per entry as a separate `nvcc -Xptxas -v` run of the same nvcc reports them."""
    out = subprocess.run(
        [
            str(nvcc),
            "-cubin",
            f"-arch={arch}",
            "-Xptxas",
            "-v",
            str(source),
            "-o",
            str(tmp / f"{arch}.cubin"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return {name: r.registers for name, r in parse_ptxas_output(out.stdout + out.stderr).items()}


@pytest.fixture
def nvcc_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every nvcc command the plugin runs in this process (pytester runs pytest in-process)."""
    runs: list[list[str]] = []
    real = running.run_tool  # assembler.run_compiler runs every compile through its import of it

    def counting(cmd: Any, timeout: float) -> Any:
        if Path(str(cmd[0])).name.startswith("nvcc"):
            runs.append([str(c) for c in cmd])
        return real(cmd, timeout)

    monkeypatch.setattr(assembler, "run_tool", counting)
    return runs


def test_nvcc_file_with_templates_adopted_with_no_kernel_named(
    pytester: pytest.Pytester, nvcc_path: Path, nvcc_runs: list[list[str]], tmp_path: Path
) -> None:
    source = write(pytester, "samples/matrixMul/matrixMul.cu", TEMPLATES)
    write(
        pytester,
        "regbudget.toml",
        """
        arch = ["sm_80", "sm_90"]
        [[kernels]]
        source = ["samples/**/*.cu"]
        compiler = "nvcc"
        """,
    )
    # Every instantiation, by its readable name.
    ids = collected(pytester)
    assert sorted(ids) == sorted(
        [
            f"samples/matrixMul/matrixMul.cu::{name}[{arch}]"
            for name in [
                "MatrixMulCUDA<16>",
                "MatrixMulCUDA<32>",
                "lib.reduce6<float,256,true>",
                "lib.reduce6<double,192,false>",
                "plain_scale",
            ]
            for arch in ("sm_80", "sm_90")
        ]
    )
    nvcc_runs.clear()
    result, records = run_json(pytester, "--regbudget-no-cache", "--regbudget-jobs=1")
    result.assert_outcomes(passed=10)
    # One nvcc run per arch, for the listing and all five kernels.
    builds = [cmd for cmd in nvcc_runs if "-cubin" in cmd]
    assert sorted(next(a for a in cmd if a.startswith("-arch=")) for cmd in builds) == [
        "-arch=sm_80",
        "-arch=sm_90",
    ]
    for arch in ("sm_80", "sm_90"):
        expected = reference(nvcc_path, source, arch, tmp_path)
        mine = {r["entry"]: r for r in records if r["arch"] == arch}
        assert sorted(r["kernel"] for r in mine.values()) == sorted(READABLE)
        assert {entry: r["registers"] for entry, r in mine.items()} == expected
    # Warm: collecting reads every listing from the compile cache, and runs no nvcc.
    pytester.runpytest("-p", "no:cacheprovider")
    nvcc_runs.clear()
    assert sorted(collected(pytester)) == sorted(ids)
    assert not [cmd for cmd in nvcc_runs if "-cubin" in cmd]
    # Selected like any item: a template instance by its words.
    assert collected(pytester, "-k", "reduce6 and double") == [
        "samples/matrixMul/matrixMul.cu::lib.reduce6<double,192,false>[sm_80]",
        "samples/matrixMul/matrixMul.cu::lib.reduce6<double,192,false>[sm_90]",
    ]


def test_binaries_under_build_are_collected_whatever_norecursedirs_says(
    pytester: pytest.Pytester, nvcc_path: Path
) -> None:
    lib = pytester.path / "build" / "lib" / "libsamples.so"
    lib.parent.mkdir(parents=True)
    source = write(pytester, "src/samples.cu", TEMPLATES.split("int main()")[0])
    gencode = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]
    instantiate = (
        "template __global__ void MatrixMulCUDA<16>(float*, const float*, const float*, int, int);\n"
    )
    source.write_text(source.read_text() + instantiate)
    subprocess.run(
        [str(nvcc_path), "-shared", "-Xcompiler", "-fPIC", *gencode, str(source), "-o", str(lib)], check=True
    )
    write(pytester, "tests/test_plain.py", TEST_MODULE)
    write(
        pytester,
        "pyproject.toml",
        """
        [tool.pytest.ini_options]
        testpaths = ["tests"]
        [tool.regbudget]
        arch = "sm_80,sm_90"
        [[tool.regbudget.kernels]]
        binary = ["build/**/*.so"]
        [[tool.regbudget.kernels]]
        binary = ["build/**/*.so"]
        kernels = ["MatrixMulCUDA<16>"]
        max_regs = 1
        """,
    )
    expected = [
        f"build/lib/libsamples.so::{name}[{arch}]"
        for name in ["MatrixMulCUDA<16>", "plain_scale"]
        for arch in ("sm_80", "sm_90")
    ]
    assert collected(pytester) == ["tests/test_plain.py::test_plain", *expected]
    assert collected(pytester, "build/lib/libsamples.so") == expected
    result, records = run_json(pytester)
    result.assert_outcomes(passed=3, failed=2)  # the refined one: max_regs = 1
    result.stdout.fnmatch_lines(["*MatrixMulCUDA<16> [[]sm_90[]]: registers * > max_regs 1*"])
    mm = by_id(records)["build/lib/libsamples.so::MatrixMulCUDA<16>[sm_90]"]
    assert (mm["kernel"], mm["ptxas_version"]) == ("MatrixMulCUDA<16>", "prebuilt")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_listings_are_built_once_per_file_and_arch_on_the_pool(pytester: pytest.Pytester, jobs: str) -> None:
    """A manifest with no kernel named lists each file's kernels at collection: those builds start together on
    the compile pool, and each (file, arch) is still built exactly once, shared with its kernels' items."""
    (pytester.path / "kernels").mkdir()
    for f in range(3):
        body = "".join(
            # The constant differs per parameter: the session shares one compile cache.
            f'extern "C" __global__ void k{f}_{j}(float* y) '
            f"{{ y[threadIdx.x] = {j}.{jobs}f * threadIdx.x; }}\n"
            for j in range(4)
        )
        (pytester.path / "kernels" / f"k{f}.cu").write_text(body)
    (pytester.path / "regbudget.toml").write_text('[[kernels]]\nsource = ["kernels/*.cu"]\nspills = 0\n')
    result, records = run_json(pytester, "--regbudget-arch=sm_80,sm_90", f"--regbudget-jobs={jobs}")
    result.assert_outcomes(passed=24)
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 6 misses*"])
    kernels = sorted(f"k{f}_{j}" for f in range(3) for j in range(4) for _ in ("sm_80", "sm_90"))
    assert sorted(r["kernel"] for r in records) == kernels


def test_a_warm_manifest_run_reads_each_listing_once(pytester: pytest.Pytester) -> None:
    """The units read at collection to list the files' kernels are held until the items that want them are
    planned: more files than a run keeps around after use (pool._RECENT_UNITS) are each read once."""
    (pytester.path / "kernels").mkdir()
    files = 12  # x 2 archs: 24 units, more than the 16 kept after use
    for f in range(files):
        body = "".join(
            f'extern "C" __global__ void k{f}_{j}(float* y) {{ y[threadIdx.x] = {j}.5f * threadIdx.x; }}\n'
            for j in range(2)
        )
        (pytester.path / "kernels" / f"k{f}.cu").write_text(body)
    (pytester.path / "regbudget.toml").write_text('[[kernels]]\nsource = ["kernels/*.cu"]\nspills = 0\n')
    pytester.runpytest("--regbudget-arch=sm_80,sm_90").assert_outcomes(passed=files * 4)
    result = pytester.runpytest("--regbudget-arch=sm_80,sm_90", "--regbudget-jobs=1")
    result.assert_outcomes(passed=files * 4)
    result.stdout.fnmatch_lines([f"compile cache *: {files * 2} hits, 0 misses*"])


def test_a_kernel_that_exists_on_one_arch_is_collected_for_that_arch_only(pytester: pytest.Pytester) -> None:
    # NVRTC compiles device code alone: a kernel guarded by __CUDA_ARCH__ is in the sm_90 build only.
    write(
        pytester,
        "kernels/k.cu",
        """
        extern "C" __global__ void everywhere(float* x) { x[threadIdx.x] += 1.0f; }
        #if __CUDA_ARCH__ >= 900
        extern "C" __global__ void hopper_only(float* x) { x[threadIdx.x] *= 2.0f; }
        #endif
        """,
    )
    write(pytester, "regbudget.toml", 'arch = ["sm_80", "sm_90"]\n[[kernels]]\nsource = ["kernels/*.cu"]\n')
    assert sorted(collected(pytester)) == [
        "kernels/k.cu::everywhere[sm_80]",
        "kernels/k.cu::everywhere[sm_90]",
        "kernels/k.cu::hopper_only[sm_90]",
    ]
    result, records = run_json(pytester)
    result.assert_outcomes(passed=3)
    assert sorted((r["kernel"], r["arch"]) for r in records) == [
        ("everywhere", "sm_80"),
        ("everywhere", "sm_90"),
        ("hopper_only", "sm_90"),
    ]


def test_a_checkout_linked_from_outside_the_rootdir_is_read_through_its_link(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A performance-CI repository that links the code it checks: the manifest's glob and a marker reach the
    files through the link, and both key them by the link's path under the rootdir; `**` does not enter the
    link (it would walk whatever it points at), so a pattern names it."""
    outside = pytester.path.parent / f"{pytester.path.name}-checkout"
    (outside / "lib" / "sub").mkdir(parents=True)
    (outside / "lib" / "poly.cu").write_text(HUNGRY.replace("#define NACC 64", "#define NACC 8"))
    (outside / "lib" / "sub" / "deep.cu").write_text(HUNGRY.replace("#define NACC 64", "#define NACC 16"))
    project = pytester.path / "perf"
    project.mkdir()
    (project / "vendor").symlink_to(outside / "lib", target_is_directory=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "regbudget.toml").write_text('arch = ["sm_90"]\n[[kernels]]\nsource = ["vendor/**/*.cu"]\n')
    (project / "tests").mkdir()
    (project / "tests" / "test_linked.py").write_text(
        "import pytest\n"
        '@pytest.mark.regbudget(source="../vendor/poly.cu", kernel="poly_eval")\n'
        "def test_linked():\n    pass\n"
    )
    monkeypatch.chdir(project)
    result, records = run_json(pytester, "--rootdir", str(project), "--regbudget-update")
    result.assert_outcomes(passed=3)
    keys = sorted({tuple(r["key"][:2]) for r in records})
    assert keys == [("vendor/poly.cu", "poly_eval"), ("vendor/sub/deep.cu", "poly_eval")]
    baseline = bl.load(project / "regbudget-baseline.toml")
    assert sorted({key[0] for key in baseline.entries}) == ["vendor/poly.cu", "vendor/sub/deep.cu"]
    # The rerun from another checkout of the same repository (the link elsewhere) finds every entry.
    moved = pytester.path / "perf2"
    project.rename(moved)
    monkeypatch.chdir(moved)
    result, records = run_json(pytester, "--rootdir", str(moved), "--regbudget-strict")
    result.assert_outcomes(passed=3)
    assert {r["baseline_status"] for r in records} == {"compared"}
    # At the top, `**` does not follow the link: the pattern matches nothing, and says where it looked.
    (moved / "regbudget.toml").write_text('arch = ["sm_90"]\n[[kernels]]\nsource = ["**/*.cu"]\n')
    result, _ = run_json(pytester, "--rootdir", str(moved))
    result.stderr.fnmatch_lines(["*'**/*.cu' matches no file*"])


def test_a_file_whose_kernels_are_only_named_template_instances_is_not_called_host_code(
    pytester: pytest.Pytester,
) -> None:
    """NVRTC's plain build of a file of templates holds no kernel; the instances a table names are its
    kernels, so the file is not among those that hold none."""
    write(pytester, "kernels/t.cu", "template <int N> __global__ void t(float* x) { x[threadIdx.x] *= N; }\n")
    write(pytester, "kernels/host.cu", "__device__ float twice(float x) { return 2.0f * x; }\n")
    write(
        pytester,
        "pyproject.toml",
        '[tool.regbudget]\narch = ["sm_90"]\n[[tool.regbudget.kernels]]\nsource = ["kernels/*.cu"]\n'
        '[[tool.regbudget.kernels]]\nsource = ["kernels/t.cu"]\nkernels = ["t<4>"]\n',
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["1 source file(s) (kernels/host.cu) hold no kernel for sm_90 *"])
