"""The progress line and the slowest builds (engine/progress.py), on a clock of the test's own: what the line
says, when a pipe gets a line, and that a run that built nothing says nothing. No pytest run, no compiler."""

from __future__ import annotations

import itertools
from pathlib import Path

from pytest_regbudget.engine.progress import BuildProgress, Ticker, slowest_line
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.units import Unit

ROOT = Path("/proj")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def unit(name: str, arch: str = "sm_90") -> Unit:
    return Unit(ROOT / name, arch, CompileOptions())


def progress(clock: Clock, threads: int = 2) -> BuildProgress:
    return BuildProgress(ROOT, threads, clock=clock)


def test_the_line_counts_builds_names_the_slowest_and_the_failures() -> None:
    clock = Clock()
    p = progress(clock)
    assert p.line() is None  # nothing planned, nothing built
    units = [unit(f"src/k{i}.cu") for i in range(1528)]
    p.planned(units)
    x, y = unit("src/x.cu"), unit("src/y.cu", "sm_80")
    p.planned([x, y])
    p.started(x)
    p.started(y)
    clock.now += 61.0
    p.finished(y, built=True, failed=True)
    clock.now += 34.0
    for u in units[:36]:
        p.started(u)
        p.finished(u, built=True, failed=u in units[:1])
    # The slowest is the build still running, with the time it has taken so far.
    assert p.line() == "regbudget: 37/1,530 builds (2 threads), 2 failed, slowest src/x.cu [sm_90] 95 s"
    p.finished(x, built=True, failed=False)
    assert p.slowest_line(limit=2) == (
        "slowest builds: src/x.cu [sm_90] 95.0 s, src/y.cu [sm_80] 61.0 s (failed), and 36 more"
    )
    assert not p.active() or len(units) > 36


def test_a_cache_hit_is_no_build_and_a_build_no_plan_named_counts() -> None:
    clock = Clock()
    p = progress(clock, threads=1)
    hit, extra = unit("a.cu"), unit("b.cu")
    p.planned([hit])
    p.started(hit)
    p.finished(hit, built=False, failed=False)  # another process built it: found in the cache
    assert p.slowest_line() is None
    assert not p.active()
    p.started(extra)
    clock.now += 3.0
    assert p.active()
    p.finished(extra, built=True, failed=False)
    assert p.line() == "regbudget: 2/2 builds (1 thread), slowest b.cu [sm_90] 3 s"
    assert p.slowest_line() == "slowest builds: b.cu [sm_90] 3.0 s"


def test_a_source_outside_the_rootdir_is_named_as_given() -> None:
    p = BuildProgress(ROOT, 2)
    assert p.label(Unit(Path("/elsewhere/k.cu"), "sm_80", CompileOptions())) == "/elsewhere/k.cu [sm_80]"


def test_several_toolkits_share_one_slowest_line() -> None:
    clock = Clock()
    first, second = progress(clock), progress(clock)
    for p, name, seconds in ((first, "a.cu", 2.0), (second, "b.cu", 5.0)):
        p.started(unit(name))
        clock.now += seconds
        p.finished(unit(name), built=True, failed=False)
    assert slowest_line([first, second]) == "slowest builds: b.cu [sm_90] 5.0 s, a.cu [sm_90] 2.0 s"
    assert slowest_line([progress(clock)]) is None


def ticker(
    p: BuildProgress, clock: Clock, *, live: bool = False, verbose: bool = False
) -> tuple[Ticker, list[tuple[str, bool]]]:
    written: list[tuple[str, bool]] = []
    t = Ticker(
        p, lambda line, in_place: written.append((line, in_place)), lambda: live, verbose=verbose, clock=clock
    )
    return t, written


def run_for(t: Ticker, clock: Clock, seconds: float, step: float = 0.5) -> None:
    end = clock.now + seconds
    while clock.now < end:
        clock.now += step
        t.step()


def test_a_pipe_gets_a_line_every_five_seconds_while_builds_run_and_none_after() -> None:
    clock = Clock()
    p = progress(clock)
    t, written = ticker(p, clock)
    run_for(t, clock, 20)
    assert written == []  # nothing to build: nothing said
    slow = unit("slow.cu")
    p.planned([slow])
    p.started(slow)
    t.step()  # the ticker sees the build start
    run_for(t, clock, 31)
    assert [line for line, _ in written] == [
        f"regbudget: 0/1 builds (2 threads), slowest slow.cu [sm_90] {s} s" for s in (5, 10, 15, 20, 25, 30)
    ]
    assert not any(in_place for _, in_place in written)
    p.finished(slow, built=True, failed=False)
    run_for(t, clock, 20)
    assert len(written) == 6


def test_verbose_adds_a_line_per_finished_build_but_never_two_within_two_seconds() -> None:
    clock = Clock()
    p = progress(clock)
    t, written = ticker(p, clock, verbose=True)
    units = [unit(f"k{i}.cu") for i in range(20)]
    p.planned(units)
    times = []
    for u in units:  # a build ends every 0.5 s
        p.started(u)
        clock.now += 0.5
        p.finished(u, built=True, failed=False)
        before = len(written)
        t.step()
        if len(written) > before:
            times.append(clock.now)
    assert len(times) >= 4
    assert all(b - a >= 2.0 for a, b in itertools.pairwise(times))


def test_a_terminal_rewrites_the_line_in_place_and_clears_it_when_done() -> None:
    clock = Clock()
    p = progress(clock)
    t, written = ticker(p, clock, live=True)
    k = unit("k.cu")
    p.planned([k])
    p.started(k)
    run_for(t, clock, 2)
    assert len(written) == 4
    assert all(in_place for _, in_place in written)
    p.finished(k, built=True, failed=False)
    t.step()
    assert written[-1] == ("", True)
    t.step()
    assert len(written) == 5  # cleared once


def test_a_status_line_that_pytest_wrote_over_is_not_cleared() -> None:
    clock = Clock()
    p = progress(clock)
    live = [True]
    written: list[tuple[str, bool]] = []
    t = Ticker(p, lambda line, in_place: written.append((line, in_place)), lambda: live[0], clock=clock)
    k = unit("k.cu")
    p.planned([k])
    p.started(k)
    run_for(t, clock, 1)
    live[0] = False  # pytest collected: its `collected N items` is written over the status line
    p.finished(k, built=True, failed=False)
    t.step()
    assert written
    assert ("", True) not in written
