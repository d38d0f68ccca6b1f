"""The run's counts: one vocabulary for every face. Each kernel check (one record: a test, a kernel, an arch)
is counted twice, once by its verdict and once against the baseline, by `count_checks` alone; `counts_text`
says them in the one line the terminal, the Markdown comment and the HTML headline print, and the JSON report
holds them as its `summary`.

By verdict: `failed`, `errors` (did not build), `warned`, `passed`; they add up to `checks`.
Against the baseline: `changed` (at least one metric moved against its entry: a delta that is worse,
tolerated or better), split into `worse` (a metric got worse, tolerated or not) and `improved` (changed, none
worse); `new` (no entry for its release); `unchanged` (compared, nothing moved); `no_baseline` (nothing to
compare with: the run has no baseline file, or the check has no numbers because it did not build). They add
up to `checks` too. Build settings alone change no check: they have their one `build settings changed` line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from msgspec import Struct, structs

# A delta's verdicts that say a metric moved; "same" (or a verdict a report file invents) does not.
MOVED = ("worse", "tolerated", "better")
WORSE = ("worse", "tolerated")
_BY_VERDICT = {"failed": "failed", "error": "errors", "warned": "warned", "passed": "passed"}


class CheckCounts(Struct, frozen=True):
    checks: int = 0
    failed: int = 0
    errors: int = 0
    warned: int = 0
    passed: int = 0
    changed: int = 0
    worse: int = 0
    improved: int = 0
    new: int = 0
    unchanged: int = 0
    no_baseline: int = 0

    def to_json(self) -> dict[str, int]:
        return structs.asdict(self)


def verdict_of(rec: Mapping[str, object]) -> str:
    """The check's verdict count: `failed`, `errors`, `warned` or `passed`. An outcome a report file invents
    counts as failed: it did not pass."""
    return _BY_VERDICT.get(str(rec.get("outcome")), "failed")


def change_of(rec: Mapping[str, object]) -> str:
    """The check against the baseline: `worse`, `improved` (the two parts of `changed`), `new`, `unchanged`
    or `no_baseline`."""
    status = rec.get("baseline_status")
    if status in ("new", "new-release"):
        return "new"
    verdicts = [d.get("verdict") for d in _deltas(rec)]
    if any(v in WORSE for v in verdicts):
        return "worse"
    if any(v in MOVED for v in verdicts):
        return "improved"
    # Compared with an entry (of its release, or one recorded by another ptxas): nothing moved.
    return "unchanged" if status in ("compared", "toolkit-mismatch") else "no_baseline"


def _deltas(rec: Mapping[str, object]) -> list[Mapping[str, object]]:
    deltas = rec.get("deltas")
    return [d for d in deltas if isinstance(d, Mapping)] if isinstance(deltas, (list, tuple)) else []


def count_checks(records: Sequence[Mapping[str, object]]) -> CheckCounts:
    """Every check counted once by verdict and once against the baseline."""
    n = dict.fromkeys(CheckCounts.__struct_fields__, 0)
    for rec in records:
        n["checks"] += 1
        n[verdict_of(rec)] += 1
        change = change_of(rec)
        n[change] += 1
        if change in ("worse", "improved"):
            n["changed"] += 1
    return CheckCounts(**n)


def counts_text(c: CheckCounts) -> str:
    """`42 kernel checks: 10 failed, 2 warned, 30 passed; against the baseline: 12 changed (10 worse,
    2 improved), 0 new, 30 unchanged`. Checks that did not build, and those with no baseline to compare with,
    are named only when there are any; the split of `changed` only when something changed."""
    verdicts = [f"{c.failed:,} failed"]
    verdicts += [f"{c.errors:,} did not build"] if c.errors else []
    verdicts += [f"{c.warned:,} warned", f"{c.passed:,} passed"]
    split = f" ({c.worse:,} worse, {c.improved:,} improved)" if c.changed else ""
    baseline = [f"{c.changed:,} changed{split}", f"{c.new:,} new", f"{c.unchanged:,} unchanged"]
    baseline += [f"{c.no_baseline:,} with no baseline"] if c.no_baseline else []
    checks = f"{c.checks:,} kernel check{'' if c.checks == 1 else 's'}"
    return f"{checks}: {', '.join(verdicts)}; against the baseline: {', '.join(baseline)}"


def counts_line(records: Sequence[Mapping[str, object]]) -> str:
    """The records' counts as the faces print them."""
    return counts_text(count_checks(records))
