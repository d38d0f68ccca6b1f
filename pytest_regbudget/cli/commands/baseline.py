"""`regbudget baseline check FILE...`: validate baseline files, for a pre-commit hook. A file must load
(exit 2 with the place of its first problem), and may hold no entry of an arch this plugin does not know and
no kernel spelled two ways (exit 1, naming each).

The check is core/baseline_schema.py's `check`, which needs the standard library alone: pre-commit's hook
(hooks/baseline_check.py) runs the same code without installing the package, with the same output and exit
status.
"""

from __future__ import annotations

import argparse

from ...core import baseline_schema
from ..base import Command


def check(args: argparse.Namespace) -> int:
    return baseline_schema.check(args.files)


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
