"""An edit costs the builds it can change, and no more: a build is keyed by the files it read and the paths
it probed for a header, not by whole directories. Each edit is checked twice: by the number of builds it
costs, and by the numbers the cached run reports, which must equal a --regbudget-no-cache run's. Real NVRTC
and ptxas, and real nvcc, from the wheels."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers.runs import run_json

from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.tools.nvcc import find_nvcc

# Six kernels, each reading the shared header and a config header of its own, found through include_dirs
# inc1 then inc2; N sets the registers (2 and 9 differ).
KERNEL = (Path(__file__).parents[1] / "data" / "edits" / "kernel.cu.in").read_text()  # str.format: {i}
MANIFEST = """
arch = ["sm_80", "sm_90"]
[[kernels]]
source = ["kernels/*.cu"]
include_dirs = ["inc1", "inc2"]
compiler = "{compiler}"
"""


def six_kernels(root: Path, compiler: str) -> None:
    (root / "kernels").mkdir()
    (root / "inc1").mkdir()
    (root / "inc2").mkdir()
    for i in range(1, 7):
        (root / "kernels" / f"k{i}.cu").write_text(KERNEL.format(i=i))
        (root / "inc2" / f"cfg{i}.h").write_text("#define N 2\n")
    (root / "inc2" / "shared.h").write_text("#define SCALE 1.0f\n")
    (root / "regbudget.toml").write_text(MANIFEST.format(compiler=compiler))


def misses(result: pytest.RunResult) -> int:
    match = re.search(r"compile cache .*: (\d+) hits, (\d+) misses", result.stdout.str())
    assert match, result.stdout.str()
    return int(match.group(2))


def registers(records: list[dict[str, object]]) -> dict[str, object]:
    return {f"{r['kernel']}[{r['arch']}]": r["registers"] for r in records}


def edit_costs(pytester: pytest.Pytester, edit: dict[str, str], *args: str) -> tuple[int, dict[str, object]]:
    """Apply `edit` (path -> text), run cached and afresh: the builds it cost, and the registers (equal)."""
    for name, text in edit.items():
        (pytester.path / name).write_text(text)
    cached, records = run_json(pytester, "--regbudget-gpu=off", *args)
    assert cached.ret == 0, cached.stdout.str()
    _, fresh = run_json(pytester, "--regbudget-gpu=off", "--regbudget-no-cache", *args)
    assert registers(records) == registers(fresh)
    return misses(cached), registers(records)


@pytest.mark.parametrize("compiler", ["nvrtc", pytest.param("nvcc", marks=pytest.mark.slow)])
def test_each_edit_rebuilds_the_builds_it_can_change(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, compiler: str
) -> None:
    if compiler == "nvcc":
        try:
            find_nvcc(None)
        except CompileError as exc:
            pytest.skip(f"no nvcc: {exc}")
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(pytester.path / "cache"))
    six_kernels(pytester.path, compiler)
    built, before = edit_costs(pytester, {})
    assert built == 12
    assert edit_costs(pytester, {})[0] == 0

    # A comment in one kernel: its two builds (sm_80, sm_90).
    comment = {"kernels/k1.cu": "// a comment\n" + KERNEL.format(i=1)}
    assert edit_costs(pytester, comment)[0] == 2
    # A header that nothing includes: none.
    assert edit_costs(pytester, {"inc1/unused.h": "#define UNUSED 1\n"})[0] == 0
    # A header that shadows k4's cfg4.h (inc1 is searched before inc2): k4's two builds, with its new number.
    built, after = edit_costs(pytester, {"inc1/cfg4.h": "#define N 9\n"})
    assert built == 2
    changed = {k for k in after if after[k] != before[k]}
    assert changed == {"k4[sm_80]", "k4[sm_90]"}
    # The shared header: all twelve.
    assert edit_costs(pytester, {"inc2/shared.h": "#define SCALE 2.0f\n"})[0] == 12


@pytest.mark.slow  # forty nvcc builds
def test_a_new_file_in_an_include_dir_rebuilds_nothing_and_a_renamed_file_only_itself(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        find_nvcc(None)
    except CompileError as exc:
        pytest.skip(f"no nvcc: {exc}")
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(pytester.path / "cache"))
    (pytester.path / "src" / "backend").mkdir(parents=True)
    (pytester.path / "src" / "common.h").write_text("#define SCALE 2.0f\n")
    for i in range(40):
        (pytester.path / "src" / "backend" / f"op{i}.cu").write_text(
            f'#include "common.h"\n__global__ void op{i}(float* x) {{ x[threadIdx.x] *= SCALE + {i}; }}\n'
        )
    (pytester.path / "regbudget.toml").write_text(
        'arch = ["sm_90"]\n[[kernels]]\nsource = ["src/**/*.cu"]\ninclude_dirs = ["src"]\ncompiler = "nvcc"\n'
    )
    assert edit_costs(pytester, {})[0] == 40
    assert edit_costs(pytester, {"src/new_backend.h": "#define NEW 1\n"})[0] == 0
    (pytester.path / "src" / "backend" / "op7.cu").rename(pytester.path / "src" / "backend" / "op7b.cu")
    assert edit_costs(pytester, {})[0] == 1


@pytest.mark.slow  # the example project's 40 builds, then one edit per file
def test_in_the_example_project_a_comment_rebuilds_only_its_files_builds(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every build belongs to one file: so if each edit costs exactly its file's builds, the edits' costs
    add up to a cold run's, and none is 0."""
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(pytester.path / "cache"))
    example = Path(__file__).resolve().parents[2] / "example_project"
    project = pytester.path / "ex"
    shutil.copytree(example, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    monkeypatch.chdir(project)
    args = ("-p", "no:cacheprovider", "-o", "regbudget_strict=false")
    report = pytester.path / "cold.json"
    cold = misses(pytester.runpytest_subprocess(*args, f"--regbudget-json={report}"))
    # A code string's builds (test_reduce's compile_source) depend on no file: no edit here rebuilds them.
    strings = {
        (r["key"][0], r["arch"]) for r in json.loads(report.read_text())["kernels"] if r["key"][0][0] == "<"
    }
    costs = {}
    for source in sorted((project / "kernels").glob("*.cu")):
        source.write_text("// a comment\n" + source.read_text())
        costs[source.name] = misses(pytester.runpytest_subprocess(*args))
    assert all(costs.values()), costs
    assert strings
    assert sum(costs.values()) == cold - len(strings), costs
    # And what the cache gave is what a build from scratch gives.
    cached, fresh = pytester.path / "cached.json", pytester.path / "fresh.json"
    pytester.runpytest_subprocess(*args, f"--regbudget-json={cached}")
    pytester.runpytest_subprocess(*args, "--regbudget-no-cache", f"--regbudget-json={fresh}")

    def numbers(report: Path) -> list[tuple[object, ...]]:
        keys = ("nodeid", "kernel", "arch", "registers", "spill_stores", "stack_frame", "shared_mem")
        return sorted(tuple(r[k] for k in keys) for r in json.loads(report.read_text())["kernels"])

    assert numbers(cached) == numbers(fresh)
