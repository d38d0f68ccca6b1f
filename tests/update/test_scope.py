"""The stale-entry rule (scope.py) on its own: no pytest run, no toolkit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from pytest_regbudget.update.scope import (
    COLLECTED,
    ERROR,
    SKIPPED,
    Key,
    Rule,
    RunScope,
    covered,
    decide,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / "tests" / name).write_text("")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text("")
    return tmp_path


T_A1 = "tests/test_a.py::test_1[sm_90]"
T_A2 = "tests/test_a.py::test_2[sm_90]"
T_B1 = "tests/test_b.py::test_1[sm_90]"
T_GONE = "tests/test_gone.py::test_1[sm_90]"  # its file does not exist

K: Key = ("kernels/k.cu", "k", "-", "sm_90", "12.9")
K8: Key = ("kernels/k.cu", "k", "NACC=8", "sm_90", "12.9")
K_80: Key = ("kernels/k.cu", "k", "-", "sm_80", "12.9")
K_GONE: Key = ("kernels/gone.cu", "k", "-", "sm_90", "12.9")  # its source file does not exist
K_STRING: Key = ("<string k>", "k", "-", "sm_90", "12.9")  # a code string: no file to look for


def full_scope() -> RunScope:
    """Both test files collected in full; test_1 of each ran to its end, test_2 of test_a.py is gone."""
    scope = RunScope()
    for file in ("tests/test_a.py", "tests/test_b.py"):
        scope.note_file(file, COLLECTED)
    scope.collected |= {T_A1, T_B1}
    scope.completed |= {T_A1, T_B1}
    return scope


def rule(
    tree: Path,
    scope: RunScope | None = None,
    *,
    archs: Sequence[str] = ("sm_90",),
    prefixes: Sequence[str] = ("",),
    selection: str | None = None,
    built: frozenset[tuple[str, str]] | None = None,
) -> Rule:
    """The rule of a run over the whole tree, for sm_90 (by default)."""
    return Rule(full_scope() if scope is None else scope, archs, prefixes, tree, selection, built)


# --- Rule.test: could the run have seen what one test measures? --------------------------------------------


def test_a_test_that_ran_or_is_gone_was_seen(tree: Path) -> None:
    r = rule(tree)
    assert r.test(T_A1, "sm_90") is None  # ran to its end
    assert r.test(T_A2, "sm_90") is None  # not collected from a file collected in full: gone
    assert r.test(T_GONE, "sm_90") is None  # its file is gone
    # A deleted test file is gone whatever the run's scope: another arch, other paths, --lf.
    assert r.test("tests/test_gone.py::test_1[sm_80]", "sm_80") is None
    assert rule(tree, prefixes=("tests/test_b.py",), selection="--lf").test(T_GONE, "sm_90") is None


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda s: s.note_file("tests/test_a.py", ERROR), "tests/test_a.py was not collected (error)"),
        (
            lambda s: s.note_file("tests/test_a.py", SKIPPED, "no cupy"),
            "tests/test_a.py was skipped at collection (no cupy)",
        ),
        (
            lambda s: s.note_file("tests/test_a.py", SKIPPED),
            "tests/test_a.py was skipped at collection",
        ),
        (lambda s: s.files.pop("tests/test_a.py"), "tests/test_a.py was not collected"),
        (lambda s: s.deselected.add(T_A2), "deselected (-k, -m or --deselect)"),
        (lambda s: s.skipped.add(T_A2), "test skipped"),
        (lambda s: s.collected.add(T_A2), "test did not run to its end"),
    ],
)
def test_each_reason_a_test_was_not_seen(
    tree: Path, setup: Callable[[RunScope], object], reason: str
) -> None:
    scope = full_scope()
    setup(scope)
    assert rule(tree, scope).test(T_A2, "sm_90") == reason


def test_reasons_of_the_run_itself(tree: Path) -> None:
    assert rule(tree).test(T_A1, "sm_80") == "sm_80 was not built (this run's archs: sm_90)"
    assert rule(tree, selection="--lf").test(T_A2, "sm_90") == "--lf collects only part of the suite"
    assert (
        rule(tree, prefixes=("tests/test_b.py",)).test(T_A2, "sm_90")
        == "not in this run's paths (or only some of its tests were named)"
    )
    interrupted = full_scope()
    interrupted.interrupted = "KeyboardInterrupt"
    # An interrupted run cannot even tell that a test file was deleted.
    for nodeid in (T_A1, T_A2, T_GONE):
        assert rule(tree, interrupted).test(nodeid, "sm_90") == "the run was interrupted (KeyboardInterrupt)"


def test_still_measuring_lists_the_tests_the_run_could_not_see(tree: Path) -> None:
    scope = full_scope()
    scope.deselected.add(T_B1)
    tests = [T_A1, T_A2, T_B1, T_GONE]
    assert rule(tree, scope).still_measuring(tests, "sm_90") == [T_B1]
    assert rule(tree, scope).still_measuring(tests, "sm_80") == [
        T_A1,
        T_A2,
        T_B1,
    ]  # not built; T_GONE is gone


# --- Rule.kernel and decide: entries per kernel -------------------------------------------------------------


def test_a_kernel_entry_is_stale_when_every_test_it_lists_was_seen_without_measuring_it(tree: Path) -> None:
    scope = full_scope()
    scope.deselected.add(T_B1)
    entries: dict[Key, Sequence[str]] = {
        K: [T_A1],  # measured this run
        K8: [T_A1, T_A2, T_GONE],  # ran without measuring it, gone, gone: stale
        ("kernels/k.cu", "k", "NACC=16", "sm_90", "12.9"): [T_A2, T_B1],  # T_B1 may still measure it
        K_80: [T_A1],
    }
    decision = decide(rule(tree, scope), entries, measured={K})
    assert decision.stale == {K8}
    assert decision.stale_entries() == {K8}
    assert dict(decision.kept) == {
        "deselected (-k, -m or --deselect)": (("kernels/k.cu", "k", "NACC=16", "sm_90", "12.9"),),
        "sm_80 was not built (this run's archs: sm_90)": (K_80,),
    }


def test_a_kernel_whose_source_file_is_gone_is_stale_whatever_its_tests(tree: Path) -> None:
    scope = full_scope()
    scope.deselected.add(T_B1)
    r = rule(tree, scope, prefixes=("tests/test_b.py",), selection="--lf")
    # Its test was not even seen, and its arch was not built: the source file alone decides.
    assert r.kernel(K_GONE, [T_B1]) is None
    assert r.kernel(("kernels/gone.cu", "k", "-", "sm_80", "12.9"), [T_B1]) is None
    assert r.kernel(K_GONE, []) is None
    assert r.kernel(K, [T_B1]) == "--lf collects only part of the suite"
    decision = decide(r, {K_GONE: [T_B1], K: [T_B1]}, measured=set())
    assert decision.stale_entries() == {K_GONE}


def test_a_code_strings_entry_has_no_file_and_is_judged_by_its_tests(tree: Path) -> None:
    scope = full_scope()
    scope.skipped.add(T_B1)
    r = rule(tree, scope)
    assert not (tree / K_STRING[0]).exists()
    assert r.kernel(K_STRING, [T_B1]) == "test skipped"
    assert r.kernel(K_STRING, [T_A2]) is None


def test_installed_codes_entry_is_judged_by_its_tests_alone(
    tree: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Keyed by its import path, which names no file under the rootdir (issue 45).
    k_pkg: Key = ("kpkg/ops/k.cu", "k", "-", "sm_90", "12.9")
    scope = full_scope()
    scope.skipped.add(T_B1)
    r = rule(tree, scope, prefixes=("tests/test_a.py",))
    assert r.kernel(k_pkg, [T_B1]) is None  # no package recorded, found nowhere: its file is gone
    assert (
        r.kernel(k_pkg, [T_B1], installed=True)
        == "not in this run's paths (or only some of its tests were named)"
    )
    assert r.kernel(k_pkg, [T_A2], installed=True) is None  # its test is gone
    decision = decide(r, {k_pkg: [T_B1]}, measured=set(), installed={k_pkg})
    assert decision.stale_entries() == set()
    # Without metadata (a folder on PYTHONPATH), the file found in an install directory is not gone.
    target = tmp_path_factory.mktemp("target")
    (target / "kpkg" / "ops").mkdir(parents=True)
    (target / "kpkg" / "ops" / "k.cu").write_text("")
    monkeypatch.syspath_prepend(str(target))
    assert r.kernel(k_pkg, [T_B1]) == "not in this run's paths (or only some of its tests were named)"


def test_a_kernel_entry_without_tests_is_kept(tree: Path) -> None:
    decision = decide(rule(tree), {K: []}, measured=set())
    assert decision.stale == frozenset()
    assert dict(decision.kept) == {"no test is recorded for it": (K,)}


def test_the_first_test_that_was_not_seen_gives_the_reason(tree: Path) -> None:
    scope = full_scope()
    scope.skipped.add(T_A2)
    scope.deselected.add(T_B1)
    assert rule(tree, scope).kernel(K, [T_GONE, T_A2, T_B1]) == "test skipped"


def test_an_interrupted_run_keeps_everything_even_a_deleted_file(tree: Path) -> None:
    scope = full_scope()
    scope.interrupted = "KeyboardInterrupt"
    decision = decide(
        rule(tree, scope),
        {K: [T_A1], K8: [T_A2], K_GONE: [T_GONE]},
        measured={K},
    )
    assert decision.stale == frozenset()
    assert decision.kept_lines() == ["2 entries kept: the run was interrupted (KeyboardInterrupt)"]


def test_files_outside_the_runs_paths_are_kept(tree: Path) -> None:
    scope = full_scope()
    scope.collected.discard(T_B1)
    scope.completed.discard(T_B1)
    decision = decide(
        rule(tree, scope, prefixes=("tests/test_b.py",)),
        {K: [T_A2], K8: [T_B1]},
        measured=set(),
    )
    assert decision.stale == {K8}
    assert list(decision.kept) == ["not in this run's paths (or only some of its tests were named)"]


# --- releases and compilers: an entry of a toolchain this run did not build with is kept ------------------

K_129: Key = ("kernels/k.cu", "k", "NACC=8", "sm_90", "12.9")
K_128: Key = ("kernels/k.cu", "k", "NACC=8", "sm_90", "12.8")
K_NVCC: Key = ("kernels/k.cu", "k", "NACC=8", "sm_90", "13.5")


def test_an_entry_of_a_release_or_compiler_not_built_is_kept(tree: Path) -> None:
    # This run built with NVRTC 12.9 only; T_A2 is gone, so its entries would be stale if judged.
    r = rule(tree, built=frozenset({("nvrtc", "12.9")}))
    assert r.kernel(K_129, [T_A2], "nvrtc") is None
    assert r.kernel(K_128, [T_A2], "nvrtc") == "nvrtc 12.8 was not built (this run built: nvrtc 12.9)"
    assert r.kernel(K_NVCC, [T_A2], "nvcc") == "nvcc 13.5 was not built (this run built: nvrtc 12.9)"
    # A gone source file is stale whatever built it; an arch not built is said first.
    assert r.kernel(("kernels/gone.cu", "k", "-", "sm_90", "12.8"), [T_A2], "nvrtc") is None
    assert r.kernel(("kernels/k.cu", "k", "-", "sm_80", "12.8"), [T_A2], "nvrtc") == (
        "sm_80 was not built (this run's archs: sm_90)"
    )
    decision = decide(
        r,
        {K_129: [T_A2], K_128: [T_A2], K_NVCC: [T_A2]},
        {K_129: "nvrtc", K_128: "nvrtc", K_NVCC: "nvcc"},
        measured=set(),
    )
    assert decision.stale_entries() == {K_129}
    assert dict(decision.kept) == {
        "nvcc 13.5 was not built (this run built: nvrtc 12.9)": (K_NVCC,),
        "nvrtc 12.8 was not built (this run built: nvrtc 12.9)": (K_128,),
    }


def test_a_run_that_built_several_toolchains_judges_each_ones_entries(tree: Path) -> None:
    built = frozenset({("nvrtc", "12.9"), ("nvcc", "13.5")})
    compilers = {K_129: "nvrtc", K_128: "nvrtc", K_NVCC: "nvcc"}
    entries: dict[Key, Sequence[str]] = {K_129: [T_A2], K_128: [T_A2], K_NVCC: [T_A2]}
    decision = decide(rule(tree, built=built), entries, compilers, measured=set())
    assert decision.stale_entries() == {K_129, K_NVCC}
    assert decision.kept_lines() == [
        "1 entry kept: nvrtc 12.8 was not built (this run built: nvcc 13.5, nvrtc 12.9)"
    ]
    # A run that built nothing keeps every entry of a source it could have built; one that does not say
    # what it built (built=None) judges every entry by its tests.
    nothing = decide(rule(tree, built=frozenset()), entries, compilers, measured=set())
    assert nothing.stale == frozenset()
    assert "nvrtc 12.9 was not built (this run built: none)" in dict(nothing.kept)
    unknown = decide(rule(tree), entries, measured=set())
    assert unknown.stale_entries() == set(entries)


# --- helpers ------------------------------------------------------------------------------------------------


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
    entries: dict[Key, Sequence[str]] = {}
    for i in range(12):
        (tmp_path / f"t{i}.py").write_text("")
        entries[(f"<string {i}>", "k", "-", "sm_90", "12.9")] = [f"t{i}.py::x"]
    decision = decide(rule(tmp_path, RunScope()), entries, measured=set())
    lines = decision.kept_lines(limit=8)
    assert len(lines) == 9
    assert lines[:2] == ["1 entry kept: t0.py was not collected", "1 entry kept: t1.py was not collected"]
    assert lines[-1] == "4 entries kept for 4 other reason(s)"
