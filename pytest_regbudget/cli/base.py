"""What every command of `regbudget` shares: the exit statuses, the error that is one line on stderr, the
record a command registers itself with, the guard on what it prints, and small helpers (comma-separated
values, a plain text table, reading a --regbudget-json report).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from msgspec import Struct

from ..core.dirs import usable_cache_dir
from ..core.text import safe_block
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


class GuardedLines(io.TextIOBase):
    """A text stream that passes each whole line on to `out` guarded (core/text.py's safe_block): what a
    command prints quotes kernel names, baseline keys, commit subjects, paths and reports' text, and a
    trusted job's log must obey none of it. A line is held until it ends, so that no two writes can join
    into a command; what is left at the end is written by `end`."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self.out = out
        self.pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        whole, newline, self.pending = (self.pending + text).rpartition("\n")
        if newline:
            self.out.write("".join(safe_block(line) + "\n" for line in whole.split("\n")))
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def fileno(self) -> int:
        return self.out.fileno()

    def end(self) -> None:
        if self.pending:
            self.out.write(safe_block(self.pending))
            self.pending = ""
        self.out.flush()


@contextlib.contextmanager
def guarded_output() -> Iterator[None]:
    """stdout and stderr guarded line by line while a command runs: every writer of the command, its
    error lines and argparse's included, at the one place where its text leaves."""
    out, err = GuardedLines(sys.stdout), GuardedLines(sys.stderr)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield
    finally:
        out.end()
        err.end()
