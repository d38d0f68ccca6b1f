"""The stale-entry rule (scope.py) on its own: no pytest run, no toolkit."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_regbudget.scope import COLLECTED, ERROR, SKIPPED, Key, RunScope, covered, decide


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / "tests" / name).write_text("")
    return tmp_path


A1: Key = ("tests/test_a.py::test_1[sm_90]", "k", "sm_90")
A1_80: Key = ("tests/test_a.py::test_1[sm_80]", "k", "sm_80")
A2: Key = ("tests/test_a.py::test_2[sm_90]", "k", "sm_90")
B1: Key = ("tests/test_b.py::test_1[sm_90]", "k", "sm_90")
GONE: Key = ("tests/test_gone.py::test_1[sm_90]", "k", "sm_90")


def full_scope() -> RunScope:
    scope = RunScope()
    for file in ("tests/test_a.py", "tests/test_b.py"):
        scope.note_file(file, COLLECTED)
    return scope


def test_a_test_that_is_not_collected_from_a_fully_collected_file_is_stale(tree: Path) -> None:
    scope = full_scope()
    scope.collected |= {A1[0], B1[0]}
    scope.completed |= {A1[0], B1[0]}
    decision = decide(
        [A1, A1_80, A2, B1, GONE],
        scope,
        measured={A1, B1},
        missing_sources=set(),
        archs=("sm_90",),
        prefixes=("",),
        rootdir=tree,
    )
    assert decision.stale == {A2, GONE}
    assert dict(decision.kept) == {"sm_80 was not built (this run's archs: sm_90)": (A1_80,)}


def test_an_interrupted_run_keeps_everything_even_a_deleted_file(tree: Path) -> None:
    scope = full_scope()
    scope.interrupted = "KeyboardInterrupt"
    decision = decide(
        [A1, A2, GONE],
        scope,
        measured={A1},
        missing_sources={A2},
        archs=("sm_90",),
        prefixes=("",),
        rootdir=tree,
    )
    assert decision.stale == frozenset()
    assert decision.kept_lines() == ["2 entries kept: the run was interrupted (KeyboardInterrupt)"]


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda s: s.note_file("tests/test_a.py", ERROR), "tests/test_a.py was not collected (error)"),
        (
            lambda s: s.note_file("tests/test_a.py", SKIPPED, "no cupy"),
            "tests/test_a.py was skipped at collection (no cupy)",
        ),
        (lambda s: s.deselected.add(A2[0]), "deselected (-k, -m or --deselect)"),
        (lambda s: s.skipped.add(A2[0]), "test skipped"),
        (lambda s: s.collected.add(A2[0]), "test did not run to its end"),
    ],
)
def test_each_reason_to_keep(tree: Path, setup: object, reason: str) -> None:
    scope = full_scope()
    assert callable(setup)
    setup(scope)
    decision = decide(
        [A2], scope, measured=set(), missing_sources=set(), archs=("sm_90",), prefixes=("",), rootdir=tree
    )
    assert decision.stale == frozenset()
    assert dict(decision.kept) == {reason: (A2,)}


def test_files_outside_the_runs_paths_are_kept(tree: Path) -> None:
    decision = decide(
        [A2, B1],
        full_scope(),
        measured=set(),
        missing_sources=set(),
        archs=("sm_90",),
        prefixes=("tests/test_b.py",),
        rootdir=tree,
    )
    assert decision.stale == {B1}
    assert list(decision.kept) == ["not in this run's paths (or only some of its tests were named)"]


def test_covered_needs_a_directory_or_the_file_itself() -> None:
    assert covered("tests/test_a.py", ("",))
    assert covered("tests/test_a.py", ("tests/",))
    assert covered("tests/test_a.py", ("tests/test_a.py",))
    assert not covered("tests/test_a.py", ())
    assert not covered("tests/test_ab.py", ("tests/test_a.py",))
    assert not covered("tests2/test_a.py", ("tests/",))


def test_a_file_that_failed_on_one_worker_is_not_in_full() -> None:
    controller = RunScope()
    first, second = RunScope(), RunScope()
    first.note_file("t.py", COLLECTED)
    second.note_file("t.py", ERROR)
    for worker in (second, first):  # the order workers finish in does not matter
        controller.merge(worker.payload())
    assert controller.files == {"t.py": ERROR}


def test_many_reasons_are_summarized(tmp_path: Path) -> None:
    keys = []
    for i in range(12):
        (tmp_path / f"t{i}.py").write_text("")
        keys.append((f"t{i}.py::x", "k", "sm_90"))
    decision = decide(
        keys,
        RunScope(),
        measured=set(),
        missing_sources=set(),
        archs=("sm_90",),
        prefixes=("",),
        rootdir=tmp_path,
    )
    lines = decision.kept_lines(limit=8)
    assert len(lines) == 9
    assert lines[-1] == "4 entries kept for 4 other reason(s)"
