"""`regbudget history [KERNEL-PATTERN]`: each matching kernel's rows over the baseline file's git history,
one per commit where its numbers changed. What `blame` shares with it is here too: the options of a range
of history, the versions read (history/git.py) and the kernels' series (core/trend.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec

from ...core import trend
from ...core.text import json_text, one_line
from ...history import git as history_git
from ..base import OK, CliError, Command, aligned, cache_dir, csv_items


def read_versions(args: argparse.Namespace) -> history_git.Versions:
    if not Path(args.baseline).is_file():
        raise CliError(
            f"{args.baseline}: no such file. Fix: name the baseline with --baseline (a renamed file is read "
            "by its name today; its history is followed through the rename)"
        )
    for flag in ("since", "until"):
        # argparse gives `--since=--` as [] (it drops the `--`), never as text.
        if getattr(args, flag) is not None and not isinstance(getattr(args, flag), str):
            raise CliError(
                f"--{flag} needs a revision or a date (a commit, a tag, HEAD~10, :/message; "
                f"{history_git.DATE_FORMS})"
            )
    cache = None if args.no_cache else cache_dir()
    try:
        return history_git.versions(Path(args.baseline), since=args.since, until=args.until, cache_dir=cache)
    except history_git.GitError as exc:
        raise CliError(str(exc)) from None


def history_notes(found: history_git.Versions) -> list[str]:
    """What the rows cannot show: unreadable versions, a shallow clone, no version at all."""
    notes = []
    for v in found.versions:
        if v.samples is None:
            notes.append(
                f"unreadable, skipped: {v.commit.sha[:10]} {v.commit.date[:10]} {v.commit.subject}: {v.error}"
            )
    if found.shallow:
        notes.append(f"shallow clone: {history_git.SHALLOW_FIX}")
    if not found.versions:
        notes.append(f"no commit of {found.path} in this range")
    return notes


def row_of(change: trend.Change) -> dict[str, object]:
    """One row of `history`, as the terminal prints it and the JSON holds it."""
    return {
        "commit": change.commit.sha,
        "date": change.commit.date,
        "subject": change.commit.subject,
        "kind": change.kind,
        "changed": change.changed(),
        **{m: change.values.get(m) for m in trend.METRICS},
        "before": {m: change.before.get(m) for m in trend.METRICS},
    }


def matching_series(
    args: argparse.Namespace, found: history_git.Versions, pattern: str | None
) -> list[trend.Series]:
    """The matching kernels' rows; a pattern that matches no kernel of any version is an error (exit 2)."""
    archs, releases = csv_items(args.arch), csv_items(args.release)
    series = trend.history(
        found.versions, pattern, archs, releases, base=found.base, complete=not found.shallow
    )
    if not series and pattern is not None and found.versions:
        raise CliError(
            f"no kernel matching {pattern!r} in any version of {found.path}"
            + (f" for {', '.join(archs + releases)}" if archs or releases else "")
            + "; regbudget history lists the kernels it holds"
        )
    return series


def run(args: argparse.Namespace) -> int:
    found = read_versions(args)
    series = matching_series(args, found, args.pattern)
    notes = history_notes(found)
    if args.json:
        doc = {
            "baseline": found.path,
            "shallow": found.shallow,
            "unreadable": [
                {"commit": v.commit.sha, "date": v.commit.date, "subject": v.commit.subject, "error": v.error}
                for v in found.versions
                if v.samples is None
            ],
            "kernels": [
                {
                    "source": s.source,
                    "kernel": s.kernel,
                    "variant": s.variant,
                    "arch": s.arch,
                    "release": s.release,
                    "rows": [row_of(c) for c in s.changes],
                }
                for s in series
            ],
        }
        print(json_text(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode()))
        return OK
    readable = sum(1 for v in found.versions if v.samples is not None)
    print(
        f"{found.path}: {len(found.versions)} version(s) on this branch, {readable} readable; "
        f"{len(series)} kernel(s) match"
    )
    for s in series:
        print(f"\n{s.name()}")
        rows = [
            [
                c.commit.sha[:10],
                c.commit.date[:10],
                _cut(one_line(c.commit.subject), 40),  # escaped before it is measured
                *(trend.shown(m, c.values.get(m)) if c.kind != "removed" else "-" for m in trend.METRICS),
                _what(c),
            ]
            for c in s.changes
        ]
        header = ["commit", "date", "subject", "regs", "spills", "stack", "occupancy", "time ms", "change"]
        print("\n".join(aligned(header, rows)))
    for note in notes:
        print(note)
    return OK


def _what(change: trend.Change) -> str:
    if change.kind == "first":
        return "first seen (the history read starts here)"
    if change.kind != "changed":
        return change.kind
    return ", ".join(
        f"{m} {trend.shown(m, change.before.get(m))} -> {trend.shown(m, change.values.get(m))}"
        for m in change.changed()
    )


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def add_range_arguments(h: argparse.ArgumentParser) -> None:
    """The options `history` and `blame` share: the file, the range of its history, the filters."""
    h.add_argument("--json", action="store_true", help="write the rows as JSON")
    h.add_argument(
        "--baseline",
        default="regbudget-baseline.toml",
        help="the baseline file (default regbudget-baseline.toml)",
    )
    h.add_argument(
        "--since",
        help="a revision (the range starts after it) or a date: 2026-01-31, an ISO time, '2 weeks ago'",
    )
    h.add_argument("--until", help="a revision (the range ends at it) or a date")
    h.add_argument("--arch", help="only these archs, comma-separated")
    h.add_argument("--release", help="only these CUDA releases, comma-separated (12.9,13.0)")
    h.add_argument("--no-cache", action="store_true", help="parse every version again (not from the cache)")


def add_arguments(h: argparse.ArgumentParser) -> None:
    h.add_argument(
        "pattern",
        nargs="?",
        metavar="KERNEL-PATTERN",
        help="fnmatch pattern of kernel names or SOURCE::KERNEL",
    )
    add_range_arguments(h)


COMMAND = Command(
    "history",
    "each kernel's numbers over the baseline file's git history, one row per change",
    add_arguments,
    run,
)
