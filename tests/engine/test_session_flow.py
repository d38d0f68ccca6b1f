"""A run's flow through the engine without pytest: the session measures a kernel source that gives recorded
facts (tests/data/ptxas), judges it, finishes the test; an xdist worker's results merge into the
controller's; the summary shows them; the end of the run writes the baseline. No toolkit is needed: the
source builds nothing."""

from __future__ import annotations

from pathlib import Path

import msgspec
from msgspec.structs import replace
from test_judge import marker, recorded

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.facts import KernelFacts
from pytest_regbudget.engine import finish, summary, workers
from pytest_regbudget.engine.judge import Context, judge
from pytest_regbudget.engine.session import RegbudgetSession
from pytest_regbudget.engine.state import ItemState, Settings
from pytest_regbudget.project.markers import Budget
from pytest_regbudget.sources import BuildEnv
from pytest_regbudget.tools.units import Spec

NODEID = "tests/test_k.py::test_pressure[sm_90]"


class Recorded:
    """A kernel source whose build is a recording: what a pytest run would have built, without a toolkit."""

    def __init__(self, facts: KernelFacts) -> None:
        self.facts = facts
        self.kernel: str | None = facts.kernel
        self.loadable = False

    @property
    def where(self) -> Path:
        return self.facts.source

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        return None

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        return [replace(self.facts, arch=arch)]


def session_in(root: Path, **settings: object) -> RegbudgetSession:
    given = Settings(
        archs=("sm_90",),
        rootdir=root,
        baseline_path=root / "regbudget-baseline.toml",
        gpu_mode="off",
        cache_dir=None,
    )
    return RegbudgetSession(replace(given, **settings))


def run_test(
    session: RegbudgetSession, budget: Budget, facts: KernelFacts, nodeid: str = NODEID
) -> str | None:
    """What the runtest hooks do with one marked test: measure its kernel, then finish it."""
    source = Recorded(replace(facts, source=session.settings.rootdir / "kernels.cu"))
    state = ItemState(arch="sm_90", budget=budget, source=source, item_archs=("sm_90",))
    session.measure(state, nodeid, source)
    return session.finish_test(state, nodeid, completed=True)


def test_a_test_fails_with_the_verdict_the_judge_gives(tmp_path: Path) -> None:
    session = session_in(tmp_path)
    facts = replace(recorded("12.9_sm_90"), source=tmp_path / "kernels.cu")
    failure = run_test(session, marker(max_regs=48), facts)
    alone = judge(facts, marker(max_regs=48), Context(NODEID, "pressure"))
    assert failure == alone.failure_text()
    (record,) = session.records
    assert (record["nodeid"], record["registers"], record["outcome"]) == (NODEID, 56, "failed")
    assert record["baseline_status"] == "new"  # a baseline file in use, without its entry


def test_a_workers_results_merge_into_the_controllers(tmp_path: Path) -> None:
    worker = session_in(tmp_path)
    run_test(worker, marker(max_regs=64), recorded("12.9_sm_90"))
    worker.note_collected([NODEID])
    worker.note_unmatched("regbudget.toml, [[kernels]] table 1: 'nope' matches no kernel")
    # What xdist carries between processes is plain data: it survives JSON.
    payload = msgspec.json.decode(msgspec.json.encode(workers.payload(worker)))
    controller = session_in(tmp_path)
    workers.merge(controller, payload)
    workers.merge(controller, payload)  # every worker collects the manifest: its notes count once
    assert [r["registers"] for r in controller.records] == [56, 56]
    assert NODEID in controller.scope.collected
    assert controller.unmatched == ["regbudget.toml, [[kernels]] table 1: 'nope' matches no kernel"]


def test_the_summary_shows_the_table_and_the_end_writes_the_baseline(tmp_path: Path) -> None:
    session = session_in(tmp_path, update=True)
    assert run_test(session, marker(max_regs=64), recorded("12.9_sm_90")) is None
    assert finish.finish(session, ("",), None) is None
    assert session.finish_lines[-1].startswith("baseline regbudget-baseline.toml updated: ")
    entries = bl.load(tmp_path / "regbudget-baseline.toml").entries
    assert list(entries) == [("kernels.cu", "pressure", "-", "sm_90", "12.9")]
    assert entries["kernels.cu", "pressure", "-", "sm_90", "12.9"].registers == 56
    lines = summary.lines(session, "all", None)
    assert lines[0] == "compile cache: off (--regbudget-no-cache)"
    # The test's id without the arch that the arch column shows.
    row = next(line for line in lines if line.startswith("test_pressure "))
    assert {"pressure", "sm_90", "56"} <= set(row.split())
    scope = finish.report_scope(session, ("",), None)
    assert (scope["archs"], scope["built"], scope["update"]) == (["sm_90"], [["nvrtc", "12.9"]], True)


def test_two_tests_that_measure_one_variant_differently_conflict(tmp_path: Path) -> None:
    session = session_in(tmp_path, update=True)
    run_test(session, marker(), recorded("12.9_sm_90"), "tests/test_k.py::test_a[sm_90]")
    failure = run_test(session, marker(), recorded("12.9_sm_90_cap32"), "tests/test_k.py::test_b[sm_90]")
    assert failure is not None
    assert "tests/test_k.py::test_a[sm_90] measured this kernel variant with registers" in failure
    # An update refuses to write entries that two tests disagree on: the run's exit status says so.
    assert finish.finish(session, ("",), None) == finish.USAGE_ERROR
    assert session.finish_lines[-1].startswith("baseline NOT updated: kernels measured differently")
    assert not (tmp_path / "regbudget-baseline.toml").exists()
