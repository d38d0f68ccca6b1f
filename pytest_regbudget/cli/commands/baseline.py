"""`regbudget baseline check FILE...`: validate baseline files, for a pre-commit hook. A file must load
(exit 2 with the place of its first problem), and may hold no entry of an arch this plugin does not know and
no kernel spelled two ways (exit 1, naming each).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...core import baseline as bl
from ...core.errors import BaselineError
from ...core.names import normalize
from ...core.text import one_line
from ...report.terminal import key_text, unknown_arch_lines
from ..base import FAILED, OK, CliError, Command


def check_baseline(path: Path) -> list[str]:
    """Problems of a baseline file that loads: entries for archs this plugin does not know, and kernel
    names that differ only in their spelling (two entries for one kernel). The file's own errors (TOML,
    schema) raise CliError."""
    try:
        loaded = bl.load(path)
    except BaselineError as exc:
        raise CliError(str(exc)) from None
    if not path.exists():
        raise CliError(f"{path}: no such file")
    problems = list(unknown_arch_lines(list(loaded.entries), str(path)))
    seen: dict[tuple[str, ...], bl.Key] = {}
    for key in sorted(loaded.entries):
        source, kernel, variant, arch, release = key
        same = (source, normalize(kernel), variant, arch, release)
        if same in seen:
            problems.append(
                one_line(
                    f"{path}: {key_text(seen[same])} and {key_text(key)} are one kernel spelled two ways; "
                    "keep one (the next update writes the spelling its test uses)"
                )
            )
        seen.setdefault(same, key)
    return problems


def check(args: argparse.Namespace) -> int:
    failed = 0
    for name in args.files:
        problems = check_baseline(Path(name))
        for line in problems:
            print(line, file=sys.stderr)
        failed += bool(problems)
        if not problems:
            print(f"{name}: ok ({len(bl.load(Path(name)))} entries)")
    return FAILED if failed else OK


def add_arguments(p: argparse.ArgumentParser) -> None:
    base = p.add_subparsers(dest="baseline_command", required=True, metavar="COMMAND")
    c = base.add_parser(
        "check", help="validate baseline files (exit 1 on a problem, 2 on an unreadable file)"
    )
    c.add_argument("files", nargs="+", metavar="FILE")


def run(args: argparse.Namespace) -> int:
    # `baseline` alone is refused by its parser: a subcommand is required.
    return {"check": check}[args.baseline_command](args)


COMMAND = Command("baseline", "baseline file commands", add_arguments, run)
