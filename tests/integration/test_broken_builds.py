"""A manifest over a repository-sized tree where some files do not build (issue 39), end to end with the real
nvcc and ptxas from the wheels: a file that breaks costs its own item, never the run; the baseline's broken
table makes builds a ratchet; failed builds are cached; `exclude`, Latin-1 sources, host-only files, a narrow
table's include_dirs after a broad table, and a compile_commands.json all work in one run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.projects import write
from helpers.toolchain import nvcc_usable

from pytest_regbudget.core import baseline as bl

pytestmark = pytest.mark.skipif(
    not nvcc_usable(), reason="needs nvcc (the nvcc extra) and a host C++ compiler"
)

KERNEL = """
extern "C" __global__ void {name}(const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * {scale} + 1.0f;
}}
"""
PYPROJECT = """
[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.regbudget]
arch = ["sm_90"]

[[tool.regbudget.kernels]]             # every file of the tree, as a 500-program suite adopts it
source = ["src/**/*.cu"]
exclude = [{ glob = "src/*_impl.cu", reason = "#included by its sibling, never built alone" }]
compiler = "nvcc"
options = "-std=c++17 -O3"
spills = 0

[[tool.regbudget.kernels]]             # a narrow table after the broad one: its include_dirs build the file
source = ["src/narrow/*.cu"]
include_dirs = ["inc"]

[[tool.regbudget.kernels]]             # the files a build system lists, with its flags
compile_commands = "db/compile_commands.json"
compiler = "nvcc"
"""


@pytest.fixture
def tree(pytester: pytest.Pytester) -> Path:
    root = pytester.path
    for i in range(1, 5):
        write(root, f"src/ok{i}.cu", KERNEL.format(name=f"ok{i}", scale=f"{i}.0f"))
    write(root, "src/third.cu", KERNEL.format(name="third", scale="3.5f"))
    latin1 = "// \u00a9 2019, saved as Latin-1\n" + KERNEL.format(name="latin", scale="2.0f")
    write(root, "src/latin1.cu", latin1.encode("latin-1"))
    write(root, "src/missing_header.cu", '#include "gone.h"\n' + KERNEL.format(name="mh", scale="GONE"))
    write(root, "src/syntax.cu", KERNEL.format(name="syn", scale="2.0f").replace("+ 1.0f;", "+ 1.0f"))
    write(root, "src/host1.cu", '#include <cstdio>\nint main() { std::printf("host\\n"); return 0; }\n')
    write(root, "src/host2.cu", "__device__ float twice(float x) { return 2.0f * x; }\n")
    write(root, "src/narrow/needs_inc.cu", '#include "shr.h"\n' + KERNEL.format(name="narrow", scale="SHR"))
    write(root, "inc/shr.h", "#define SHR 4.0f\n")
    # Not built alone: it uses what its sibling defines before including it.
    write(root, "src/table_impl.cu", "__global__ void impl(float* y) { y[0] = NTAB; }\n")
    for name, scale in (("x", "SCALE"), ("y", "SCALE * 2")):
        write(root, f"db/{name}.cu", '#include "db.h"\n' + KERNEL.format(name=f"db_{name}", scale=scale))
    write(root, "db/inc/db.h", "#define DB_H 1\n")
    entries = [
        {
            "directory": str(root / "build"),
            "command": f"/usr/bin/nvcc -DSCALE=3.0f -I{root / 'db' / 'inc'} -std=c++17 -O3 "
            f"--generate-code=arch=compute_90,code=[compute_90,sm_90] -x cu -c {root / 'db' / name}.cu "
            f"-o CMakeFiles/k.dir/{name}.cu.o",
            "file": str(root / "db" / f"{name}.cu"),
        }
        for name in ("x", "y")
    ]
    write(root, "db/compile_commands.json", json.dumps(entries, indent=2))
    write(root, "tests/test_plain.py", "def test_plain():\n    pass\n")
    write(root, "pyproject.toml", PYPROJECT)
    return root


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "report.json"
    out.unlink(missing_ok=True)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={out}", *args)
    return result, json.loads(out.read_text()) if out.exists() else {}


def misses(result: pytest.RunResult) -> tuple[int, int]:
    found = re.search(r"compile cache .*: (\d+) hits, (\d+) misses", result.stdout.str())
    assert found is not None, result.stdout.str()
    return int(found.group(1)), int(found.group(2))


def builds(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {b["source"]: (b["status"], b["error"]) for b in report["broken_builds"]}


OK_KERNELS = {"ok1", "ok2", "ok3", "ok4", "third", "latin", "narrow", "db_x", "db_y"}


def test_a_repository_with_broken_files_is_a_required_check(pytester: pytest.Pytester, tree: Path) -> None:
    baseline = tree / "regbudget-baseline.toml"
    files = 13  # 11 under src/ (the excluded one is not built) and the database's 2

    # A cold update: every file built once; the two broken files recorded, and nothing else.
    result, report = run(pytester, "--regbudget-update")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert misses(result) == (0, files)
    recorded = bl.load(baseline)
    release = next(iter(recorded.entries))[4]  # the wheel nvcc's, "13.5"
    assert set(recorded.broken) == {
        ("src/missing_header.cu", "-", "sm_90", release),
        ("src/syntax.cu", "-", "sm_90", release),
    }
    assert "gone.h" in recorded.broken["src/missing_header.cu", "-", "sm_90", release].error
    # The committed file names no path of this checkout: it reads the same from every runner.
    assert str(tree) not in baseline.read_text()
    # The update's own report says what the baseline now holds.
    assert {b["status"] for b in report["broken_builds"]} == {"recorded"}
    assert {k[1] for k in recorded.entries} == OK_KERNELS

    # Strict and warm: no compiler run; every kernel passed and compared; the broken two recorded.
    result, report = run(pytester, "--regbudget-strict", "-v")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert misses(result) == (files, 0)
    kernels = {r["kernel"]: r for r in report["kernels"]}
    assert set(kernels) == OK_KERNELS
    assert all(r["outcome"] == "passed" and r["baseline_status"] == "compared" for r in kernels.values())
    assert report["scope"]["run"]["collection_errors"] == 0
    assert {s: b[0] for s, b in builds(report).items()} == {
        "src/missing_header.cu": "recorded",
        "src/syntax.cu": "recorded",
    }
    text = result.stdout.str()
    assert "table_impl" not in json.dumps(report)
    result.stdout.fnmatch_lines(
        [
            "regbudget: excluded src/table_impl.cu (#included by its sibling, never built alone)",
            "2 build(s) fail as the baseline records (src/missing_header.cu [[]sm_90, CUDA *[]], "
            "src/syntax.cu*",
            "2 source file(s) (src/host1.cu, src/host2.cu) hold no kernel for sm_90 (host code or device "
            "functions only): nothing to check there",
        ]
    )
    assert text.count("table_impl") == 1  # the -v line only
    assert "RegbudgetWarning" not in text
    # The database's flags built its files (-DSCALE, its include dir), and are recorded, not keyed.
    assert "-DSCALE=3.0f" in recorded.entries["db/x.cu", "db_x", "-", "sm_90", release].build_settings

    # A third file breaks: its own item fails with nvcc's log; every other kernel still passes.
    third = tree / "src" / "third.cu"
    good_third = third.read_text()
    third.write_text(good_third.replace("n) y[i]", "n) y[i] = undefined_thing;\n y[i]"))
    comment = tree / "comment.md"
    result, report = run(pytester, f"--regbudget-markdown={comment}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1 + 2 + len(OK_KERNELS) - 1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ <build>[[]sm_90[]] in src/third.cu _*",
            "*src/third.cu [[]sm_90, CUDA *[]] does not build with nvcc:*",
            '*identifier "undefined_thing" is undefined*',
            "*It built before: the baseline holds 1 kernel entry of it for sm_90*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "1 build(s) fail and are not recorded as broken (src/third.cu [[]sm_90, CUDA *[]]): "
            "their items fail*"
        ]
    )
    assert builds(report)["src/third.cu"][0] == "failed"
    # The pull request's comment names it, with the compiler's first error, and counts the recorded ones.
    markdown = comment.read_text()
    assert "| **FAILED** | `src/third.cu` | sm_90 | `" in markdown
    assert 'error: identifier "undefined_thing" is undefined` |' in markdown
    assert "2 build(s) fail as the baseline records" in markdown
    assert {r["kernel"] for r in report["kernels"] if r["outcome"] == "passed"} == OK_KERNELS - {"third"}
    assert misses(result) == (files - 1, 1)

    # The missing header appears (and the file still fails, on another line): rebuilt, with the new error.
    write(tree, "src/gone.h", "#define GONE still_undefined\n")
    result, report = run(pytester)
    assert misses(result) == (files - 1, 1)  # third.cu's failure is cached; missing_header.cu is rebuilt
    status, error = builds(report)["src/missing_header.cu"]
    assert status == "recorded"
    assert "still_undefined" in error
    assert "cannot open source file" not in error

    # An update while third.cu is broken: it joins the broken table; its kernel entry stays.
    result, report = run(pytester, "--regbudget-update")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    after = bl.load(baseline)
    assert {k[0] for k in after.broken} == {"src/missing_header.cu", "src/syntax.cu", "src/third.cu"}
    assert "still_undefined" in after.broken["src/missing_header.cu", "-", "sm_90", release].error
    assert ("src/third.cu", "third", "-", "sm_90", release) in after.entries

    # Both fixed: reported as fixed; the update records their kernels and drops their broken entries.
    third.write_text(good_third)
    write(tree, "src/gone.h", "#define GONE 5.0f\n")
    result, report = run(pytester)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert {s: b[0] for s, b in builds(report).items()} == {
        "src/missing_header.cu": "fixed",
        "src/third.cu": "fixed",
        "src/syntax.cu": "recorded",
    }
    third_record = next(r for r in report["kernels"] if r["kernel"] == "third")
    assert third_record["baseline_status"] == "compared"
    result, report = run(pytester, "--regbudget-update")
    assert result.ret == pytest.ExitCode.OK
    final = bl.load(baseline)
    assert set(final.broken) == {("src/syntax.cu", "-", "sm_90", release)}
    assert {k[1] for k in final.entries} == OK_KERNELS | {"mh"}


TEMPLATE = """
template <int BM, int BN>
__global__ void gemm_impl(const float* a, float* c) {
    extern __shared__ float tile[];
    tile[threadIdx.x] = a[threadIdx.x] * BM + BN;
    __syncthreads();
    c[threadIdx.x] = tile[(threadIdx.x + 1) % (BM + BN)];
}
template __global__ void gemm_impl<BM_, BN_>(const float*, float*);
"""
VARIANTS = """
[tool.regbudget]
arch = ["sm_90"]

[[tool.regbudget.kernels]]
source = ["kernels/gemm.cu"]
compiler = "nvcc"
kernels = ["*gemm_impl*"]
launch = [256]
variants = [
    { defines = {BM_ = 128, BN_ = 128}, dynamic_smem = 65536, min_occupancy = 0.25 },
    { defines = {BM_ = 128, BN_ = 192}, dynamic_smem = 240000 },
]
"""


def test_a_template_table_lists_and_enforces_each_variant_with_its_own_dynamic_smem(
    pytester: pytest.Pytester,
) -> None:
    write(pytester.path, "kernels/gemm.cu", TEMPLATE)
    write(pytester.path, "pyproject.toml", VARIANTS)
    result, report = run(pytester)
    records = {r["nodeid"]: r for r in report["kernels"]}
    assert set(records) == {
        "kernels/gemm.cu::gemm_impl<128,128>[BM__128-BN__128-sm_90]",
        "kernels/gemm.cu::gemm_impl<128,192>[BM__128-BN__192-sm_90]",
    }, result.stdout.str()
    small = records["kernels/gemm.cu::gemm_impl<128,128>[BM__128-BN__128-sm_90]"]
    large = records["kernels/gemm.cu::gemm_impl<128,192>[BM__128-BN__192-sm_90]"]
    assert (small["dynamic_smem"], large["dynamic_smem"]) == (65536, 240000)
    assert small["outcome"] == "passed"
    # 240,000 B is more dynamic shared memory than an sm_90 block may have (227 KB): only that variant's
    # launch cannot fit.
    assert large["outcome"] == "failed"
    assert any("shared memory" in v for v in large["violations"]), large["violations"]
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_under_xdist_the_report_names_the_nvcc_the_workers_built_with(
    pytester: pytest.Pytester, tree: Path
) -> None:
    """The controller builds nothing: the nvcc its workers found reaches its summary and JSON provenance. -q
    leaves out the header, where the controller would otherwise have looked for an nvcc itself."""
    result, report = run(pytester, "-n", "2", "-q")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the two broken files, not recorded here
    assert str(report["provenance"]["nvcc"]).startswith("nvcc 13.")
    result.stdout.fnmatch_lines(["nvcc 13.* built 9 kernel(s)*"])
