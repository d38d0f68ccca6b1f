"""`regbudget blame KERNEL [--metric spills]`: git blame for one number, the commits where a metric of the
matching kernels changed, the last first. It reads history as `history` does (history.py).
"""

from __future__ import annotations

import argparse

import msgspec

from ...core import trend
from ...core.text import json_text
from ..base import OK, CliError, Command
from .history import add_range_arguments, history_notes, matching_series, read_versions, row_of


def run(args: argparse.Namespace) -> int:
    found = read_versions(args)
    series = matching_series(args, found, args.kernel)
    if not series:
        raise CliError(
            f"no kernel matching {args.kernel!r}: {found.path} has no readable version in this range"
        )
    if args.json:
        doc = [{"kernel": s.name(), "rows": [row_of(c) for c in trend.blame(s, args.metric)]} for s in series]
        print(json_text(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode()))
        return OK
    for s in series:
        rows = trend.blame(s, args.metric)
        print(s.name())
        if not rows:
            print(f"  {args.metric}: never changed")
        for n, c in enumerate(rows):
            label = "last changed" if n == 0 else "changed"
            before = {"added": "(new)", "first": "(history starts)"}.get(
                c.kind, trend.shown(args.metric, c.before.get(args.metric))
            )
            after = "(gone)" if c.kind == "removed" else trend.shown(args.metric, c.values.get(args.metric))
            print(
                f"  {label}: {args.metric} {before} -> {after} in {c.commit.sha[:10]} {c.commit.date[:10]} "
                f"{c.commit.subject}"
            )
    for note in history_notes(found):
        print(note)
    return OK


def add_arguments(h: argparse.ArgumentParser) -> None:
    h.add_argument("kernel", metavar="KERNEL", help="a kernel name or fnmatch pattern (or SOURCE::KERNEL)")
    h.add_argument("--metric", default="spills", choices=trend.METRICS, help="the metric (default spills)")
    add_range_arguments(h)


COMMAND = Command(
    "blame",
    "the commits where one metric of a kernel changed, the last first: git blame for numbers",
    add_arguments,
    run,
)
