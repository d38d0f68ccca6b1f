"""`regbudget merge SHARD.json...`: one report, and one baseline update, from the --regbudget-json reports of
CI shards. The scopes merge as one run would have seen them, and the entries are made and the stale ones
removed by the code a pytest run uses (update/plan.py, update/scope.py).

With --markdown, the comment a run writes (--regbudget-markdown), made from the reports alone: a fork's pull
request gets its comment from its run's reports, by this trusted code, in a job of the base repository.
"""

from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from ..._version import __version__
from ...core import baseline as bl
from ...core.baseline_write import confine
from ...core.errors import BaselineError
from ...engine.sharding import parse_shard
from ...report.links import github_links
from ...report.record import spills
from ...report.writers import markdown_comment, report_json
from ...update import broken
from ...update import plan as update
from ...update.scope import Rule, merge_shards
from ...update.shards import Report
from ...util.files import atomic_write
from ..base import OK, CliError, Command, read_report


def _overlap(shards: Sequence[Report]) -> None:
    """Shards that ran one test (a retried job, overlapping -k selections) must agree on its numbers: the
    merge could keep only one of them. CliError naming both otherwise."""
    seen: dict[tuple[str, str, str], tuple[tuple[object, ...], str]] = {}
    for shard in shards:
        for r in shard.records:
            numbers = (r["compiler"], r["registers"], *(spills(r) or (None, None)), r["stack_frame"])
            first = seen.setdefault((r["nodeid"], r["kernel"], r["arch"]), (numbers, shard.path.name))
            if first[0] != numbers:
                raise CliError(
                    f"shards disagree: {r['nodeid']} {r['kernel']} [{r['arch']}] measured {first[0][1:]} in "
                    f"{first[1]} and {numbers[1:]} in {shard.path.name} (registers, spill stores and loads, "
                    "stack); their entries would conflict. Fix: merge the reports of one run"
                )


def _missing_shards(shards: Sequence[Report]) -> str | None:
    """What is missing from a set of --regbudget-shard reports (None when every shard 1..N is there, or
    none was sharded). A missing shard's files count as not collected: its entries would be kept, not
    judged, and the baseline would differ from a serial update's. CliError for reports that cannot be one
    run's shards."""
    named = [(s.path.name, s.scope.shard) for s in shards if s.scope.shard]
    if not named:
        return None
    try:
        parsed = [(name, parse_shard(text)) for name, text in named]
    except ValueError as exc:
        raise CliError(f"scope.shard {exc}; an edited or damaged report") from None
    counts = sorted({p.count for _, p in parsed})
    if len(counts) > 1 or len(named) < len(shards):
        given = ", ".join(
            f"{name} ({text or 'not sharded'})"
            for name, text in ((s.path.name, s.scope.shard) for s in shards)
        )
        raise CliError(
            f"the reports are not the shards of one run: {given}. Fix: merge the reports of one "
            "--regbudget-shard=K/N run, every K with the same N"
        )
    count = counts[0]
    missing = sorted(set(range(1, count + 1)) - {p.index for _, p in parsed})
    if not missing:
        return None
    return f"shard {', '.join(f'{k}/{count}' for k in missing)} missing"


def _write(path: str, option: str, text: str) -> None:
    try:
        atomic_write(Path(path), text)
    except OSError as exc:
        why = exc.strerror or exc
        raise CliError(f"{option} {path}: cannot write it: {why}; give a file path") from None


def run(args: argparse.Namespace) -> int:
    shards = [read_report(Path(p)) for p in args.reports]
    _overlap(shards)
    missing = _missing_shards(shards)
    if missing and args.update:
        raise CliError(
            f"{missing}: its files' entries could be neither written nor removed. Fix: give every shard's "
            "--regbudget-json report (or merge without --update)"
        )
    if missing:
        print(f"regbudget merge: {missing}: the merged report holds only the shards given")
    records = [r for shard in shards for r in shard.records]
    try:
        fresh = update.fresh_entries(records)
    except BaselineError as exc:
        raise CliError(str(exc)) from None
    if fresh.conflicts:
        where = {r["nodeid"]: s.path.name for s in shards for r in s.records}
        first = fresh.conflicts[0]
        named = ", ".join(sorted({v for k, v in where.items() if k in first}))
        raise CliError(f"shards disagree: {first} (in {named}); their entries would conflict")
    scopes = [s.scope for s in shards]
    builds = {k: b for s in shards for k, b in broken.from_json(s.broken_builds).items()}
    merged_scope = merge_shards(s.run.payload() for s in scopes)
    prefixes = sorted({p for s in scopes for p in s.prefixes})
    selection = next((s.selection for s in scopes if s.selection), None)
    archs = sorted({a for s in scopes for a in s.archs})
    built = frozenset((c, r) for s in scopes for c, r in s.built)
    rootdir = Path(args.rootdir or next((s.rootdir for s in scopes if s.rootdir), "."))
    scope_doc = {
        "run": merged_scope.payload(),
        "prefixes": prefixes,
        "selection": selection,
        "archs": archs,
        "toolkits": sorted({t for s in scopes for t in s.toolkits}),
        "built": [list(pair) for pair in sorted(built)],
        "rootdir": str(rootdir),
        "baseline": next((s.baseline for s in scopes if s.baseline), None),
        "update": any(s.update for s in scopes),
        "merged": [s.path.name for s in shards],
    }
    if args.output:
        # Each shard ran somewhere else: the merge says where it ran itself and keeps theirs as read.
        provenance = {
            "plugin_version": __version__,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node() or None,
            "merged": [s.provenance for s in shards],
        }
        _write(args.output, "-o", report_json(records, scope_doc, provenance, broken.json_objects(builds)))
    if args.markdown:
        # Written even when it says nothing (a run writes no file then): a workflow tests for an empty file.
        comment = markdown_comment(
            records, broken.json_objects(builds), rootdir=rootdir, links=github_links(os.environ)
        )
        _write(args.markdown, "--markdown", comment)
    entries = len(fresh.entries)
    print(f"merged {len(shards)} report(s): {len(records)} kernel records, {entries} baseline entries")
    if args.update:
        path = Path(args.update)
        try:
            # The project is the one named here or the working directory: never the reports' rootdir, which
            # is data of the runs that wrote them.
            confine(path, Path(args.rootdir or "."), chosen=True, option="--update ")
        except BaselineError as exc:
            raise CliError(f"baseline NOT updated: {exc}") from None
        if not path.parent.is_dir():
            raise CliError(
                f"--update {path}: no directory {path.parent}. Fix: give the path of the project's baseline "
                "(a new one is created in an existing directory)"
            )
        if not path.exists():
            print(f"baseline {path} does not exist: creating it")
        try:
            old = bl.load(path)
        except BaselineError as exc:
            raise CliError(str(exc)) from None
        # Each toolkit's entries are judged by the shards that built that toolkit (Rule.release_scopes).
        by_release = {
            pair: merge_shards(s.run.payload() for s in scopes if pair in {tuple(b) for b in s.built})
            for pair in built
        }
        rule = Rule(
            merged_scope,
            archs,
            prefixes,
            rootdir,
            selection,
            built,
            by_release,
            broken=broken.protected(builds),
        )
        planned = update.plan(old, records, fresh.entries, rule)
        failed = broken.plan(
            old,
            builds,
            rootdir=str(rootdir),
            prefixes=prefixes,
            archs=archs,
            releases={r for _, r in built} | {key[3] for key in builds},
            interrupted=bool(merged_scope.interrupted),
        )
        try:
            counts = bl.update(
                path,
                planned.write,
                planned.stale,
                moved=planned.moved,
                broken=failed.record,
                fixed=failed.drop,
            )
        except BaselineError as exc:
            raise CliError(f"baseline NOT updated: {exc}") from None
        print(f"baseline {path} updated: {counts}")
        for line in planned.decision.kept_lines():
            print(line)
    return OK


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="SHARD.json")
    p.add_argument("-o", "--output", metavar="MERGED.json", help="write the merged report")
    p.add_argument(
        "--markdown",
        metavar="COMMENT.md",
        help="write the Markdown comment a run writes with --regbudget-markdown, from the reports alone",
    )
    p.add_argument("--update", metavar="BASELINE", help="apply the shards' entries to this baseline file")
    p.add_argument("--rootdir", help="the project's rootdir (default: the one the shards ran in)")


COMMAND = Command(
    "merge", "one report and one baseline update from the reports of CI shards", add_arguments, run
)
