"""core/trend on hand-made versions: rows only where numbers change, unreadable versions skipped (the next row
compares with the last readable one), blame newest first, names normalized across versions, chart points."""

from __future__ import annotations

from pytest_regbudget.core.trend import Commit, Sample, Version, blame, history, trail_key, trails


def sample(registers: int, spills: int = 0, kernel: str = "f<256>", occupancy: float = 0.5) -> Sample:
    return Sample(
        "k.cu",
        kernel,
        "-",
        "sm_90",
        "12.9",
        registers,
        (spills, spills),
        0,
        occupancy,
        "256 threads",
        None,
        None,
    )


def version(n: int, *samples: Sample, unreadable: bool = False) -> Version:
    commit = Commit(f"{n:040x}", f"2026-01-{n + 1:02d}T00:00:00+00:00", f"commit {n}")
    return Version(commit, None if unreadable else samples, "bad" if unreadable else None)


def test_rows_only_where_numbers_change_and_unreadable_versions_are_skipped() -> None:
    versions = [
        version(0, sample(40)),
        version(1, sample(40)),  # no change: no row
        version(2, unreadable=True),
        version(3, sample(40, kernel="f<256u>")),  # an older spelling of the same name: the same kernel
        version(4, sample(48, 64)),
        version(5),  # gone
    ]
    (series,) = history(versions)
    assert [(c.commit.subject, c.kind, c.changed()) for c in series.changes] == [
        ("commit 0", "added", ["registers", "spills", "stack", "occupancy"]),
        ("commit 4", "changed", ["registers", "spills"]),
        ("commit 5", "removed", ["registers", "spills", "stack", "occupancy"]),
    ]
    rows = blame(series, "spills")
    assert [r.commit.subject for r in rows] == ["commit 5", "commit 4", "commit 0"]
    assert history(versions, pattern="g*") == []


def test_chart_points_take_the_last_readable_versions() -> None:
    versions = [version(n, sample(32 + n, 64 if n == 3 else 0, occupancy=0.2 * n)) for n in range(6)]
    drawn = trails([*versions, version(6, unreadable=True)], last=4)
    (points,) = drawn.kernels.values()
    assert [p.registers for p in points] == [34, 35, 36, 37]
    assert [p.spills for p in points] == [0, 128, 0, 0]
    assert list(drawn.kernels) == [trail_key(["k.cu", "f<256>", "-", "sm_90", "12.9"])]
    assert [s.bands for s in drawn.suite] == [(0, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 0), (1, 0, 0, 0)]


def test_a_range_compares_with_the_version_before_it_and_a_cut_history_says_so() -> None:
    versions = [version(1, sample(40)), version(2, sample(48, 64))]
    (seeded,) = history(versions, base=version(0, sample(40)))
    assert [(c.kind, c.commit.subject) for c in seeded.changes] == [("changed", "commit 2")]
    (cut,) = history(versions, complete=False)  # a shallow clone: no base to compare with
    assert [c.kind for c in cut.changes] == ["first", "changed"]
