"""A kernel keeps its baseline key wherever the project is checked out and for whichever arch it is built:
nvcc's path hashes (anonymous namespaces, `static` device functions as template arguments) and CUB's
versioned, per-arch namespaces are left out of kernel names (names.stable). Real nvcc builds for sm_80 and
sm_90."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers.projects import write_tree
from helpers.runs import pytest_argv

from pytest_regbudget.project.manifest import kernel_id

KERNELS = """
#include <cub/device/device_reduce.cuh>
namespace {
template <int N> __global__ void anon_scale(float* x) { x[threadIdx.x] *= N; }
}
static __device__ float twice(float v) { return 2 * v; }
template <float (*F)(float)> __global__ void apply(float* x) { x[threadIdx.x] = F(x[threadIdx.x]); }
void launch(float* x, float* out, void* tmp, size_t bytes, int n) {
  anon_scale<4><<<1, 32>>>(x);
  apply<twice><<<1, 32>>>(x);
  cub::DeviceReduce::Sum(tmp, bytes, x, out, n);
}
"""
MANIFEST = """
arch = ["sm_80", "sm_90"]
[[kernels]]
source = ["kernels/*.cu"]
compiler = "nvcc"
"""
ARGS = ("-p", "no:cacheprovider", "--regbudget-gpu=off", "--regbudget-strict")


def project(root: Path) -> None:
    write_tree(
        root,
        {
            "kernels/lib.cu": KERNELS,
            "regbudget.toml": MANIFEST,
            "pytest.ini": "[pytest]\nregbudget_baseline = regbudget-baseline.toml\n",
        },
    )


def run(pytester: pytest.Pytester, cwd: Path, *args: str) -> tuple[pytest.RunResult, list[dict[str, object]]]:
    """pytest in `cwd` (a fresh process: nvcc's path hashes are made from where the project is)."""
    out = cwd / "r.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        result = pytester.run(*pytest_argv(*ARGS, f"--regbudget-json={out}", *args), timeout=600)
    return result, json.loads(out.read_text())["kernels"]


@pytest.mark.slow  # four nvcc builds of a CUB reduction
def test_keys_do_not_change_with_the_checkout_path_or_the_arch(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(pytester.path / "cache"))
    first = pytester.path / "laptop" / "project"
    project(first)
    updated, records = run(pytester, first, "--regbudget-update")
    assert updated.ret == 0, updated.stdout.str()
    kernels = {r["kernel"] for r in records}
    # Each node id is the reported name (as an id spells it: manifest.kernel_id) and the arch.
    assert {r["nodeid"] for r in records} == {
        f"kernels/lib.cu::{kernel_id(str(r['kernel']))}[{r['arch']}]" for r in records
    }
    assert len({r["nodeid"] for r in records}) == len(records)
    assert "(anonymous namespace)::anon_scale<4>" in kernels
    assert "apply<&twice>" in kernels  # not apply<&_INTERNAL_<path hash>_..._lib_cu_<hash>::twice>
    cub = sorted(k for k in map(str, kernels) if k.startswith("cub::"))
    assert cub
    assert not [k for k in cub if re.search(r"_V_\d|_SM_\d|::__\d+::", k)]
    # Each CUB kernel is found on both archs: its name no longer says which.
    for name in cub:
        assert {r["arch"] for r in records if r["kernel"] == name} == {"sm_80", "sm_90"}, name
    assert {str(r["entry"]) for r in records if r["kernel"] == "apply<&twice>"} != {"apply<&twice>"}
    again, _ = run(pytester, first)
    assert again.ret == 0, again.stdout.str()

    # The same project and baseline in another directory: the mangled names differ, the keys do not.
    second = pytester.path / "ci" / "checkout" / "project"
    shutil.copytree(first, second, ignore=shutil.ignore_patterns("r.json", "__pycache__"))
    moved, moved_records = run(pytester, second)
    assert moved.ret == 0, moved.stdout.str()
    assert {r["baseline_status"] for r in moved_records} == {"compared"}
    # nvcc is given the file's name relative to the rootdir (issue 42), so the path hash in the mangled
    # names of its internal kernels is the same in both checkouts, as the keys are.
    assert any("_INTERNAL_" in str(r["entry"]) for r in moved_records)
    assert {str(r["entry"]) for r in records} == {str(r["entry"]) for r in moved_records}
    moved.stdout.no_fnmatch_line("*stale*")

    # A table-wide define that changes no code: recorded, not keyed; every entry still compared.
    (second / "regbudget.toml").write_text(MANIFEST + 'defines = ["UNUSED_FLAG"]\n')
    flagged, flagged_records = run(pytester, second)
    assert flagged.ret == 0, flagged.stdout.str()
    assert {r["baseline_status"] for r in flagged_records} == {"compared"}
    keys = {str(r["key"]) for r in flagged_records}
    flagged.stdout.fnmatch_lines([f"build settings changed for {len(keys)} entries: added -DUNUSED_FLAG (*"])
    flagged.stdout.no_fnmatch_line("*stale*")
