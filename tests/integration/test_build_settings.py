"""Build settings are recorded, not keyed: a manifest table's `defines`, `include_dirs` and options are
written with each entry, and a change in them is one line per run while every entry stays held to its
numbers. A baseline that keyed the table's defines (before 0.2) is read, and an update moves its entries.
Real NVRTC and ptxas from the wheels."""

from __future__ import annotations

import pytest
from helpers.projects import write_tree
from helpers.runs import run_json
from msgspec.structs import replace

from pytest_regbudget.core import baseline as bl

# `k` needs more registers under HEAVY: a build-wide define that changes code is still caught.
KERNELS = """
#include "cfg.h"
extern "C" __global__ void k(float* x) {
#ifdef HEAVY
    float a[24];
#pragma unroll
    for (int i = 0; i < 24; ++i) a[i] = x[i * blockDim.x + threadIdx.x];
    float s = 0;
#pragma unroll
    for (int i = 0; i < 24; ++i) s += a[i] * a[(i * 7 + 3) % 24];
    x[threadIdx.x] = s;
#else
    x[threadIdx.x] *= TILE * SCALE;
#endif
}
extern "C" __global__ void k2(float* x) { x[threadIdx.x] += TILE; }
"""
TABLE = """
arch = ["sm_90"]
[[kernels]]
source = "kernels/a.cu"
include_dirs = ["inc"]
defines = {defines}
variants = [{{}}, {{V = 2}}]
"""
ARGS = ("--regbudget-gpu=off", "--regbudget-strict")


def manifest(pytester: pytest.Pytester, defines: str) -> None:
    (pytester.path / "regbudget.toml").write_text(TABLE.format(defines=defines))


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_tree(pytester.path, {"kernels/a.cu": KERNELS, "inc/cfg.h": "#define SCALE 2\n"})
    pytester.makeini("[pytest]\nregbudget_baseline = regbudget-baseline.toml\n")
    manifest(pytester, '["TILE=16"]')
    return pytester


def entries(pytester: pytest.Pytester) -> dict[bl.Key, bl.BaselineEntry]:
    return dict(bl.load(pytester.path / "regbudget-baseline.toml").entries)


def test_a_build_wide_define_is_recorded_not_keyed(project: pytest.Pytester) -> None:
    updated, records = run_json(project, *ARGS, "--regbudget-update")
    assert updated.ret == 0, updated.stdout.str()
    recorded = entries(project)
    # Four entries (two kernels, two variants), keyed by the variant's defines only.
    assert sorted((k[1], k[2]) for k in recorded) == [("k", "-"), ("k", "V=2"), ("k2", "-"), ("k2", "V=2")]
    assert {e.build_settings for e in recorded.values()} == {("-DTILE=16", "-Iinc")}
    assert sorted(r["nodeid"] for r in records) == [
        "kernels/a.cu::k2[V_2-sm_90]",
        "kernels/a.cu::k2[sm_90]",
        "kernels/a.cu::k[V_2-sm_90]",
        "kernels/a.cu::k[sm_90]",
    ]

    # A define that changes no code: strict still passes, every entry compared, the change said once.
    manifest(project, '["TILE=16", "UNUSED_FLAG"]')
    added, records = run_json(project, *ARGS)
    assert added.ret == 0, added.stdout.str()
    assert {r["baseline_status"] for r in records} == {"compared"}
    assert {r["settings_change"] for r in records} == {"added -DUNUSED_FLAG"}
    said = "build settings changed for 4 entries: added -DUNUSED_FLAG (each entry is still held to its*"
    added.stdout.fnmatch_lines([said])
    assert added.stdout.str().count("build settings changed") == 1
    added.stdout.no_fnmatch_line("*stale*")

    # The update records them; the next run has nothing to say.
    recorded_again, _ = run_json(project, *ARGS, "--regbudget-update")
    assert recorded_again.ret == 0, recorded_again.stdout.str()
    recorded_again.stdout.fnmatch_lines(["*0 added, 4 updated, 0 unchanged, 0 stale*"])
    assert sorted(entries(project)) == sorted(recorded)
    assert {e.build_settings for e in entries(project).values()} == {("-DTILE=16", "-DUNUSED_FLAG", "-Iinc")}
    quiet, _ = run_json(project, *ARGS)
    assert quiet.ret == 0
    quiet.stdout.no_fnmatch_line("*build settings*")

    # A define that does change code: reported, and the kernel's numbers still fail it.
    manifest(project, '["TILE=16", "HEAVY"]')
    heavy, records = run_json(project, *ARGS)
    assert heavy.ret == 1
    worse = {(r["kernel"], r["key"][2]) for r in records if r["outcome"] == "failed"}
    assert worse == {("k", "-"), ("k", "V=2")}, heavy.stdout.str()
    heavy.stdout.fnmatch_lines(["*registers * is worse than the baseline*"])
    heavy.stdout.fnmatch_lines(
        ["build settings changed for 4 entries: added -DHEAVY; removed -DUNUSED_FLAG*"]
    )


def test_a_baseline_that_keyed_the_tables_defines_is_read_and_moved(project: pytest.Pytester) -> None:
    """A file written before 0.2 put the table's defines in the variant and recorded no settings."""
    assert run_json(project, *ARGS, "--regbudget-update")[0].ret == 0
    path = project.path / "regbudget-baseline.toml"
    old_style = {}
    for key, entry in entries(project).items():
        variant = "TILE=16" if key[2] == "-" else "TILE=16,V=2"
        entry = replace(entry, build_settings=())
        if key[1] == "k" and key[2] == "-":  # a GPU runner's figures, which the move must keep
            entry = replace(entry, gpu={"NVIDIA H200": {"time_ms": 0.5}})
        old_style[(key[0], key[1], variant, key[3], key[4])] = entry
    path.write_text(bl.dumps(bl.Baseline(old_style)))
    before = path.read_text()

    strict, records = run_json(project, *ARGS)
    assert strict.ret == 0, strict.stdout.str()
    assert {r["baseline_status"] for r in records} == {"compared"}
    assert {r["settings_change"] for r in records} == {None}  # the same flags: the same options_hash
    strict.stdout.fnmatch_lines(["4 entries read under the key an older pytest-regbudget gave them*"])
    strict.stdout.no_fnmatch_line("*stale*")
    assert path.read_text() == before  # a run without --regbudget-update writes nothing

    moved, _ = run_json(project, *ARGS, "--regbudget-update")
    assert moved.ret == 0, moved.stdout.str()
    moved.stdout.fnmatch_lines(["*0 stale, 4 re-keyed*"])
    now = entries(project)
    assert sorted(k[2] for k in now) == ["-", "-", "V=2", "V=2"]
    assert now[("kernels/a.cu", "k", "-", "sm_90", next(iter(now))[4])].gpu == {
        "NVIDIA H200": {"time_ms": 0.5}
    }
    assert {e.build_settings for e in now.values()} == {("-DTILE=16", "-Iinc")}
    again, _ = run_json(project, *ARGS)
    assert again.ret == 0
    again.stdout.no_fnmatch_line("*older pytest-regbudget*")


MARKED = """
import pytest

@pytest.mark.regbudget(source="../kernels/a.cu", kernel="k", defines=["TILE=16"], include_dirs=["../inc"])
def test_k():
    pass
"""


def test_an_old_key_a_marker_still_uses_is_kept(project: pytest.Pytester) -> None:
    """In 0.1 a manifest kernel with the table's `defines = ["TILE=16"]` and a test marked with
    `defines=["TILE=16"]` shared one entry. Now the first is keyed `-`: the update writes it there and keeps
    the marked test's entry, rather than move that entry away from the test still using it."""
    (project.path / "tests").mkdir()
    (project.path / "tests" / "test_k.py").write_text(MARKED)
    assert run_json(project, *ARGS, "--regbudget-update")[0].ret == 0
    path = project.path / "regbudget-baseline.toml"
    now = entries(project)
    shared = {k: e for k, e in now.items() if k[1] == "k" and k[2] in ("-", "TILE=16")}
    assert len(shared) == 2
    # As 0.1 wrote it: one entry for both, under the marker's variant.
    old_style = {k: e for k, e in now.items() if k not in shared or k[2] == "TILE=16"}
    (marked_key,) = [k for k in old_style if k[1] == "k" and k[2] == "TILE=16"]
    old_style[marked_key] = replace(
        old_style[marked_key],
        tests=("kernels/a.cu::k[sm_90]", "tests/test_k.py::test_k[sm_90]"),
        build_settings=(),
    )
    path.write_text(bl.dumps(bl.Baseline(old_style)))

    strict, _ = run_json(project, *ARGS)
    assert strict.ret == 0, strict.stdout.str()
    strict.stdout.fnmatch_lines(["1 entry read under the key an older pytest-regbudget gave them*"])
    updated, _ = run_json(project, *ARGS, "--regbudget-update")
    assert updated.ret == 0, updated.stdout.str()
    updated.stdout.fnmatch_lines(["*updated: 1 added, 1 updated, 3 unchanged, 0 stale"])  # none re-keyed
    after = entries(project)
    assert sorted(after) == sorted(now)
    assert after[marked_key].tests == ("tests/test_k.py::test_k[sm_90]",)
