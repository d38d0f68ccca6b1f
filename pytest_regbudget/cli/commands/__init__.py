"""The subcommands of `regbudget`, one module each, registered by name in the order `regbudget --help`
lists them. A module gives one `Command` (cli/base.py): its help line, its arguments and what runs it."""

from __future__ import annotations

from ..base import Command
from . import baseline, blame, compare, explain, history, merge

COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        explain.COMMAND,
        compare.COMMAND,
        merge.COMMAND,
        history.COMMAND,
        blame.COMMAND,
        baseline.COMMAND,
    )
}
