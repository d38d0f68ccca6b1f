"""The `regbudget` command (also `python -m pytest_regbudget`): work on kernels and reports outside pytest.

    regbudget explain SOURCE::KERNEL   registers, spills, stack, largest block, occupancy and cliff of one
                                       kernel per launch-bounds variant and arch, pytest's verdict on it,
                                       and a marker line
    regbudget compare A.json B.json    the kernels that differ between two --regbudget-json reports
    regbudget merge SHARD.json...      one report (and one baseline update) from the reports of CI shards
    regbudget history [PATTERN]        each kernel's numbers over the baseline file's git history
    regbudget blame KERNEL             the commits where one of its numbers changed
    regbudget baseline check FILE      validate a baseline file (for a pre-commit hook)

Exit status: 0 success; 1 a check failed (`compare --fail-on`, `baseline check` finding problems); 2 bad
input (a missing file, a report of another version, a shard conflict, a kernel that does not build), with
one line on stderr saying what and how to fix it. argparse, from the standard library: a handful of
subcommands and options need no third-party parser.

Each subcommand is a module of commands/, registered by name there (as pip's `_internal/commands/`); this
module keeps the parser and `main`. The command reuses the plugin's own compiler, occupancy, judging,
comparison and update code (engine/, report/, update/), never plugin/: its numbers are the plugin's.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from .base import BAD_INPUT, FAILED, OK, CliError, guarded_output
from .commands import COMMANDS
from .explaining import Bounds, explain

__all__ = ["BAD_INPUT", "COMMANDS", "FAILED", "OK", "Bounds", "CliError", "explain", "main", "parser"]


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(
        prog="regbudget",
        description="CUDA kernel register budgets outside pytest. Exit status: 0 ok, 1 a check failed, "
        "2 bad input.",
    )
    main.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # Not required: a bare `regbudget` prints this help and exits 0 (main), as git and pip do.
    sub = main.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_arguments(sub.add_parser(command.name, help=command.help))
    return main


def main(argv: Sequence[str] | None = None) -> int:
    # Whatever the command prints, its error line and argparse's messages too, leaves guarded (base.py).
    try:
        with guarded_output():
            return _main(argv)
    except BrokenPipeError:
        # The reader went away (`regbudget history | head`): stop quietly, as git does, and keep Python from
        # complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return FAILED


def _main(argv: Sequence[str] | None) -> int:
    command_line = parser()
    args = command_line.parse_args(argv)
    if args.command is None:
        command_line.print_help()
        return OK
    try:
        return int(COMMANDS[args.command].run(args))
    except CliError as exc:
        print(f"regbudget {args.command}: error: {exc}", file=sys.stderr)
        return BAD_INPUT
