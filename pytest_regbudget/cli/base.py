"""What every command of `regbudget` shares: the exit statuses, the error that is one line on stderr, the
record a command registers itself with, and small helpers (comma-separated values, a plain text table,
reading a --regbudget-json report).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from msgspec import Struct

from ..core.dirs import usable_cache_dir
from ..update import shards
from ..update.shards import Report

OK, FAILED, BAD_INPUT = 0, 1, 2


class CliError(Exception):
    """Bad input: one line on stderr, exit status 2."""


class Command(Struct, frozen=True):
    """One subcommand, as commands/__init__.py registers it by name: its one-line help, what it adds to its
    parser, and what runs it (an exit status)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def cache_dir() -> Path | None:
    """The compile cache a command reads and writes: None where others could write it (core/dirs.py
    `usable_cache_dir`), said in one line on stderr, which keeps a command's --json output whole."""
    where, refused = usable_cache_dir()
    if refused:
        print(f"regbudget: {refused}", file=sys.stderr)
    return where


def csv_items(value: str | None) -> tuple[str, ...]:
    """A comma-separated option's items, blanks dropped."""
    return tuple(x.strip() for x in (value or "").split(",") if x.strip())


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain text table: the header, a rule, the rows, each column as wide as its widest cell."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, ["-" * w for w in widths], *rows]
    ]


def read_report(path: Path) -> Report:
    """A --regbudget-json report of this plugin's version, every record checked; CliError naming the file."""
    try:
        return shards.read(path)
    except shards.BadReport as exc:
        raise CliError(str(exc)) from None
