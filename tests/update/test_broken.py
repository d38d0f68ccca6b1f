"""The ratchet over builds (update/broken.py) and the baseline's broken table (core/baseline.py): statuses
against the baseline, the update plan, the file round trip, and bad input that leaves the file as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.data import SAMPLE_ENTRY

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.errors import BaselineError
from pytest_regbudget.update import broken

A90: bl.BuildKey = ("src/a.cu", "-", "sm_90", "13.5")
B90: bl.BuildKey = ("src/b.cu", "BM=128", "sm_90", "13.5")
LOG = (
    "nvcc 13.5.37 could not compile /repo/src/a.cu for sm_90:\n/repo/src/a.cu(3): error: x\n" + "more\n" * 20
)


def test_statuses_against_the_baseline() -> None:
    old = bl.Baseline(
        {
            ("src/a.cu", "k", "-", "sm_90", "13.5"): SAMPLE_ENTRY,
            ("src/a.cu", "k", "-", "sm_80", "13.5"): SAMPLE_ENTRY,
        },
        {B90: bl.BrokenBuild("old error")},
    )
    failed = broken.note(old, A90, LOG, "nvcc")
    assert failed is not None
    assert (failed.status, failed.kernels_before) == ("failed", 1)
    recorded = broken.note(old, B90, "a new error", "nvcc")
    assert recorded is not None
    assert (recorded.status, recorded.error) == ("recorded", "a new error")
    fixed = broken.note(old, B90, None, "nvcc")
    assert fixed is not None
    assert (fixed.status, fixed.error) == ("fixed", "old error")
    assert broken.note(old, A90, None, "nvcc") is None  # a healthy build says nothing


def test_failure_text_names_file_variant_arch_release_log_and_next_step() -> None:
    note = broken.BuildNote("failed", LOG, "nvcc", 2)
    text = broken.failure_text(B90, note, updating=False)
    assert text.startswith("src/b.cu [BM=128 sm_90, CUDA 13.5] does not build with nvcc:\n")
    assert "src/a.cu(3): error: x" in text
    assert "It built before: the baseline holds 2 kernel entries of it for sm_90" in text
    assert "exclude = [...]" in text
    assert "pytest --regbudget-update" in text


def test_the_update_plan_records_failures_and_drops_what_builds_or_is_gone() -> None:
    gone: bl.BuildKey = ("src/gone.cu", "-", "sm_90", "13.5")
    other_arch: bl.BuildKey = ("src/gone.cu", "-", "sm_80", "13.5")
    elsewhere: bl.BuildKey = ("lib/x.cu", "-", "sm_90", "13.5")
    old = bl.Baseline({}, {k: bl.BrokenBuild("e") for k in (B90, gone, other_arch, elsewhere)})
    builds = {A90: broken.BuildNote("failed", LOG, "nvcc"), B90: broken.BuildNote("fixed", "e", "nvcc")}
    planned = broken.plan(
        old, builds, rootdir="/repo", prefixes=["src/"], archs=["sm_90"], releases={"13.5"}, interrupted=False
    )
    assert set(planned.record) == {A90}
    # Paths relative to the rootdir: the committed file reads the same from every checkout.
    assert planned.record[A90].error.startswith(
        "nvcc 13.5.37 could not compile src/a.cu for sm_90:\nsrc/a.cu(3)"
    )
    # The log's first lines only: enough to recognise it in review.
    assert planned.record[A90].error.count("\n") == bl.BROKEN_ERROR_LINES - 1
    # Fixed, and a file the run saw whole without the build; not another arch's, nor a file outside the run.
    assert planned.drop == {B90, gone}
    interrupted = broken.plan(
        old, builds, rootdir="/repo", prefixes=["src/"], archs=["sm_90"], releases={"13.5"}, interrupted=True
    )
    assert interrupted.drop == {B90}


def test_json_objects_round_trip() -> None:
    builds = {A90: broken.BuildNote("failed", LOG, "nvcc"), B90: broken.BuildNote("recorded", "e", "nvrtc")}
    objects = broken.json_objects(builds)
    assert [o["source"] for o in objects] == ["src/a.cu", "src/b.cu"]
    assert objects[1] == {
        "source": "src/b.cu",
        "variant": "BM=128",
        "arch": "sm_90",
        "release": "13.5",
        "status": "recorded",
        "compiler": "nvrtc",
        "error": "e",
    }
    assert broken.from_json(objects) == builds


def test_the_broken_table_round_trips_and_updates_merge_under_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "regbudget-baseline.toml"
    key = ("src/a.cu", "k", "-", "sm_90", "13.5")
    bl.update(
        path, {key: SAMPLE_ENTRY}, set(), lock_dir=tmp_path, broken={A90: bl.BrokenBuild("line 1\nline 2")}
    )
    text = path.read_text()
    assert '[broken."src/a.cu".-.sm_90."13.5"]' in text
    assert bl.load(path).broken == {A90: bl.BrokenBuild("line 1\nline 2")}
    # Another update records another build and fixes none: both stay, and the kernel entry too.
    counts = bl.update(path, {}, set(), lock_dir=tmp_path, broken={B90: bl.BrokenBuild("e")})
    assert set(bl.load(path).broken) == {A90, B90}
    assert counts.broken == 2
    counts = bl.update(path, {}, set(), lock_dir=tmp_path, fixed={A90})
    assert set(bl.load(path).broken) == {B90}
    assert (counts.broken, counts.broken_dropped) == (1, 1)
    assert "1 broken build(s) recorded, 1 broken build(s) dropped" in str(counts)
    assert key in bl.load(path).entries


@pytest.mark.parametrize(
    "table",
    [
        '[broken."src/a.cu".-.sm_90."13.5"]\nerror = 3\n',
        '[broken."src/a.cu".-.sm_90."13.5"]\nerror = "x"\nextra = 1\n',
        '[broken."src/a.cu".-.sm_90]\nerror = "x"\n',
        'broken = "x"\n',
    ],
)
def test_a_damaged_broken_table_is_refused_and_the_file_kept(tmp_path: Path, table: str) -> None:
    path = tmp_path / "regbudget-baseline.toml"
    text = "version = 3\n" + table
    path.write_text(text)
    with pytest.raises(BaselineError, match=r"broken"):
        bl.update(path, {}, set(), lock_dir=tmp_path, broken={A90: bl.BrokenBuild("e")})
    assert path.read_text() == text
