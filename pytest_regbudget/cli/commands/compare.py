"""`regbudget compare A.json B.json`: the kernels that differ between two --regbudget-json reports, and with
--fail-on, exit status 1 when one got worse in a named metric by more than its tolerance. The comparison is
report/compare.py's, which a run of several toolkits uses too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...core.metrics import COMPARED, key_fields
from ...core.text import close_key_hint
from ...report import compare
from ...update.shards import Report
from ..base import FAILED, OK, CliError, Command, read_report

# --fail-on metric names -> the compared fields they cover: the metrics table's tolerance keys of what a
# comparison shows (a group's key, `spills`, covers its metrics), whether the launch fits, and the GPU time.
_FAIL_METRICS = {**key_fields(COMPARED), "launchable": ("launchable",), "time": ("time_ms",)}


def parse_fail_on(text: str) -> dict[str, float]:
    """`registers,spills:16,occupancy:0.05` -> {compared metric: tolerance}."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, tol = part.partition(":")
        if name not in _FAIL_METRICS:
            hint = close_key_hint(name, list(_FAIL_METRICS))
            raise CliError(f"--fail-on {part!r}: unknown metric{hint}; use {', '.join(_FAIL_METRICS)}")
        try:
            amount = float(tol) if tol else 0.0
        except ValueError:
            amount = float("nan")
        if not 0 <= amount < float("inf"):  # nan compares false: it would never fail
            raise CliError(f"--fail-on {part!r}: the tolerance must be a number >= 0 (e.g. registers:4)")
        for metric in _FAIL_METRICS[name]:
            out[metric] = amount
    return out


def _worse(change: compare.Change, tolerance: float) -> bool:
    old, new = change.old, change.new
    if change.metric == "launchable":
        return old is True and new is False
    if not isinstance(old, (int, float)) or not isinstance(new, (int, float)):
        return new is None and old is not None  # it stopped building or lost the figure
    if change.metric == "occupancy":
        return old - new > tolerance + 1e-9
    if change.metric == "time_ms":
        return new > old * (1 + tolerance) if old else False
    return new - old > tolerance


def compare_reports(a: Report, b: Report) -> compare.Comparison:
    return compare.between(a.records, b.records, a.path.name, b.path.name)


def run(args: argparse.Namespace) -> int:
    fail_on = parse_fail_on(args.fail_on) if args.fail_on else {}  # a misspelt metric before any file is read
    a, b = read_report(Path(args.a)), read_report(Path(args.b))
    result = compare_reports(a, b)
    if args.markdown:
        print(compare.markdown([result]), end="")
    else:
        print("\n".join(result.lines()))
    worse = [
        (d, c)
        for d in result.diffs
        for c in d.changes
        if c.metric in fail_on and _worse(c, fail_on[c.metric])
    ]
    for d, c in worse:
        print(f"worse: {d.label()}: {c.text()}", file=sys.stderr)
    return FAILED if worse else OK


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A.json")
    p.add_argument("b", metavar="B.json")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument(
        "--fail-on",
        metavar="METRICS",
        help="exit 1 when a kernel got worse in one of these: registers,spills:16,occupancy:0.05,time:0.1 "
        f"(metrics: {', '.join(_FAIL_METRICS)}; a tolerance after ':')",
    )


COMMAND = Command(
    "compare", "the kernels that differ between two --regbudget-json reports", add_arguments, run
)
