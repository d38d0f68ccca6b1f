"""A kernel's numbers over the baseline file's history: the rows where they changed, and git blame for one
metric. Pure: the versions come in as parsed samples (history/ reads them out of git).

Every `--regbudget-update` a team merges is a commit of the baseline, so its history is each kernel's story:
when it started to spill, at which commit, how it moved across a CUDA upgrade.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from msgspec import Struct

from .baseline import Baseline, Key, _launch_order
from .names import normalize

# The metrics a row shows and `blame` takes, in column order.
METRICS = ("registers", "spills", "stack", "occupancy", "time_ms")


class Sample(Struct, frozen=True, array_like=True):
    """One entry of one version of the baseline, reduced to what a trend shows."""

    source: str
    kernel: str
    variant: str
    arch: str
    release: str
    registers: int
    spills: tuple[int, int] | None  # (stores, loads) in bytes; None: a prebuilt binary records none
    stack: int
    occupancy: float | None  # at its first launch (the smallest block), None when measured at none
    launch: str | None  # that launch: "256 threads"
    time_ms: float | None  # the median GPU time on the first GPU named, None when never timed
    device: str | None


def samples_of(baseline: Baseline) -> tuple[Sample, ...]:
    out = []
    for (source, kernel, variant, arch, release), e in baseline.entries.items():
        launch = min(e.occupancy, key=_launch_order) if e.occupancy else None
        device = min(e.gpu) if e.gpu else None
        out.append(
            Sample(
                source,
                kernel,
                variant,
                arch,
                release,
                e.registers,
                e.spills,
                e.stack,
                None if launch is None else e.occupancy[launch],
                launch,
                None if device is None else e.gpu_time_ms(device),
                device,
            )
        )
    return tuple(out)


class Commit(Struct, frozen=True):
    sha: str
    date: str  # the committer date, ISO 8601
    subject: str


class Version(Struct, frozen=True):
    """The baseline file as one commit left it: its samples, or why it could not be read."""

    commit: Commit
    samples: tuple[Sample, ...] | None  # None: unreadable (`error` says why); () for a deleted file
    error: str | None = None


def values(s: Sample) -> dict[str, object]:
    """The sample's metrics by METRICS name; spills as [stores, loads]."""
    spills = None if s.spills is None else list(s.spills)
    return {
        "registers": s.registers,
        "spills": spills,
        "stack": s.stack,
        "occupancy": s.occupancy,
        "time_ms": s.time_ms,
    }


def _identity(s: Sample) -> Key:
    # Keys written by older versions may spell a name another way ("f<256u>", spaces): followed as one kernel.
    return (s.source, normalize(s.kernel), s.variant, s.arch, s.release)


class Change(Struct, frozen=True):
    """One row: a kernel's numbers at a commit where they changed (or it appeared, or it went)."""

    commit: Commit
    kind: str  # "added", "changed", "removed", or "first" (seen in the first version of a cut-off history)
    values: dict[str, object]  # after the commit ({} when removed)
    before: dict[str, object]  # before it ({} when added)

    def changed(self) -> list[str]:
        """The metrics that moved, in METRICS order."""
        return [m for m in METRICS if self.values.get(m) != self.before.get(m)]


class Series(Struct, frozen=True):
    """One kernel's rows, oldest first."""

    source: str
    kernel: str
    variant: str
    arch: str
    release: str
    changes: tuple[Change, ...]

    def name(self) -> str:
        variant = "" if self.variant == "-" else f" ({self.variant})"
        return f"{self.source}::{self.kernel}{variant} [{self.arch}] {self.release}"


def matches(s: Sample, pattern: str | None, archs: Sequence[str] = (), releases: Sequence[str] = ()) -> bool:
    """A kernel pattern (fnmatch) matches its name or `source::name`; archs and releases are exact."""
    if archs and s.arch not in archs:
        return False
    if releases and s.release not in releases:
        return False
    if pattern is None:
        return True
    return any(fnmatch.fnmatchcase(text, pattern) for text in (s.kernel, f"{s.source}::{s.kernel}"))


def history(
    versions: Iterable[Version],
    pattern: str | None = None,
    archs: Sequence[str] = (),
    releases: Sequence[str] = (),
    *,
    base: Version | None = None,
    complete: bool = True,
) -> list[Series]:
    """Each matching kernel's rows over `versions` (oldest first): one where its numbers differ from the
    last readable version's, where it first appears, and where it is gone. Unreadable versions are skipped:
    a kernel's row compares with the last version that could be read. `base`: the version before the range,
    which the first rows compare with. Without it and with `complete` False (a shallow clone), a kernel of
    the first version read is "first" seen there, not "added": its history starts before."""
    last: dict[Key, tuple[Sample, dict[str, object]]] = {}
    rows: dict[Key, list[Change]] = {}
    names: dict[Key, str] = {}  # the name as the latest version spells it
    if base is not None and base.samples is not None:
        for s in base.samples:
            if matches(s, pattern, archs, releases):
                last[_identity(s)] = (s, values(s))
                names[_identity(s)] = s.kernel
    first = base is None and not complete
    for version in versions:
        if version.samples is None:
            continue
        now = {_identity(s): s for s in version.samples if matches(s, pattern, archs, releases)}
        for key, s in now.items():
            seen = last.get(key)
            if seen is not None and seen[0] == s:
                continue  # most entries of most versions: the same sample, nothing to compare
            after = values(s)
            if seen is None:
                rows.setdefault(key, []).append(
                    Change(version.commit, "first" if first else "added", after, {})
                )
            elif seen[1] != after:
                rows.setdefault(key, []).append(Change(version.commit, "changed", after, seen[1]))
            last[key] = (s, after)
            names[key] = s.kernel
        for key in [k for k in last if k not in now]:
            rows.setdefault(key, []).append(Change(version.commit, "removed", {}, last.pop(key)[1]))
        first = False
    return [Series(key[0], names[key], key[2], key[3], key[4], tuple(rows[key])) for key in sorted(rows)]


def blame(series: Series, metric: str) -> list[Change]:
    """The rows where `metric` changed, newest first: the first is where it last changed."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; one of {', '.join(METRICS)}")
    return [c for c in reversed(series.changes) if c.values.get(metric) != c.before.get(metric)]


def shown(metric: str, value: object) -> str:
    """A value as a row prints it: spills `st/ld`, occupancy `56%`, time `0.870`, absent `-`."""
    if value is None:
        return "-"
    if metric == "spills" and isinstance(value, list):
        return f"{value[0]}/{value[1]}"
    if metric == "occupancy" and isinstance(value, float):
        return f"{value:.0%}"
    if metric == "time_ms" and isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


# -- what the HTML report draws ------------------------------------------------------------------------
HISTORY_COMMITS = 50  # the last commits of the baseline a report's charts show
# Occupancy bands of the suite's picture over time, as (lowest, label): a kernel in the first that holds it.
BANDS = ((0.75, ">= 75%"), (0.5, "50-75%"), (0.25, "25-50%"), (0.0, "< 25%"))


class Point(Struct, frozen=True, array_like=True):
    """A kernel at one commit (or the run, `commit` "now"): what its chart plots."""

    commit: str
    date: str
    registers: int
    spills: int  # stores + loads, bytes


class SuitePoint(Struct, frozen=True, array_like=True):
    """The whole baseline at one commit: total spill bytes and kernels per occupancy band (BANDS' order)."""

    commit: str
    date: str
    spills: int
    bands: tuple[int, ...]


class Trails(Struct, frozen=True):
    """A report's history: each kernel's points by its identity, the suite's, and what limits them."""

    kernels: dict[str, tuple[Point, ...]]  # by trail_key
    suite: tuple[SuitePoint, ...]
    note: str | None = None  # why there is less than asked (a shallow clone, no history)


def trail_key(key: Sequence[str]) -> str:
    """A baseline key (source, kernel, variant, arch, release) as the trails are indexed by."""
    return "\x1f".join((key[0], normalize(key[1]), *key[2:5]))


def _band(occupancy: float) -> int:
    return next(n for n, (low, _) in enumerate(BANDS) if occupancy >= low)


def trails(versions: Sequence[Version], last: int = HISTORY_COMMITS, note: str | None = None) -> Trails:
    """The last `last` readable versions as chart points, per kernel and for the suite."""
    readable = [v for v in versions if v.samples is not None][-last:] if last > 0 else []
    kernels: dict[str, list[Point]] = {}
    suite = []
    for v in readable:
        assert v.samples is not None
        total = 0
        bands = [0] * len(BANDS)
        for s in v.samples:
            spills = sum(s.spills or ())
            total += spills
            if s.occupancy is not None:
                bands[_band(s.occupancy)] += 1
            point = Point(v.commit.sha[:10], v.commit.date[:10], s.registers, spills)
            kernels.setdefault(trail_key(_identity(s)), []).append(point)
        suite.append(SuitePoint(v.commit.sha[:10], v.commit.date[:10], total, tuple(bands)))
    return Trails({k: tuple(p) for k, p in kernels.items()}, tuple(suite), note)
