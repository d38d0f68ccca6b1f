"""The end of a run, on the controller: the update plan, the baseline written, and the report files (JSON,
HTML, Markdown) with the run's scope and provenance. What cannot be written becomes a finish line of the
summary and an exit status, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..cache import baselines
from ..core import baseline as bl
from ..core.baseline_schema import unknown_arch_lines
from ..core.baseline_write import confine
from ..core.errors import BaselineError
from ..report.terminal import baseline_lines
from ..update import broken
from ..update import plan as update
from ..update.scope import Rule
from ..util.files import NotRegular
from .session import RegbudgetSession

if TYPE_CHECKING:
    from ..core.trend import Trails
    from ..report.writers import FileWriter

USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR, named here without importing pytest
TESTS_FAILED = 1  # pytest.ExitCode.TESTS_FAILED


def built(session: RegbudgetSession) -> set[tuple[str, str]]:
    """The (compiler, release) pairs the run built with: its kernels', and its manifest builds' that failed
    or were recorded as broken."""
    return {(r["compiler"], r["release"]) for r in session.records if r["registers"] is not None} | {
        (b.compiler, key[3]) for key, b in session.builds.items()
    }


def _stale_rule(session: RegbudgetSession, prefixes: Sequence[str], selection: str | None) -> Rule:
    s = session.settings
    return Rule(
        session.scope,
        s.archs,
        prefixes,
        s.rootdir,
        selection,
        frozenset(built(session)),
        broken=broken.protected(session.builds),
    )


def plan(
    session: RegbudgetSession, prefixes: Sequence[str] = ("",), selection: str | None = None
) -> update.Plan:
    """What an update by the run writes and removes (see update/plan.py and update/scope.py).

    `prefixes`: the run's path arguments; `selection`: an option that hides whole files (--lf).
    """
    fresh = update.fresh_entries(session.records)
    # Conflicts between xdist workers show only now; those within one process were named already.
    named = {c.split(": ", 1)[0] for c in session.conflicts}
    session.conflicts += [c for c in fresh.conflicts if c.split(": ", 1)[0] not in named]
    rule = _stale_rule(session, prefixes, selection)
    return update.plan(session.baseline, session.records, fresh.entries, rule)


def finish(
    session: RegbudgetSession, prefixes: Sequence[str] = ("",), selection: str | None = None
) -> int | None:
    """Write what the run produced; returns an exit code when a file asked for could not be written.

    An interrupted run (scope.interrupted) still writes the entries of the kernels it measured, but removes
    none: it cannot tell a test that is gone from one it never reached.
    """
    s = session.settings
    path = s.baseline_path
    exit_code = None
    if s.update and path is not None:
        planned = plan(session, prefixes, selection)
        decision = planned.decision
        exit_code = _update(session, planned, prefixes, path)
    else:
        # Without an update only the stale entries are said: no entry is made (for thousands of kernels a
        # tenth of a second), and the conflicts that making them finds are reported by an update alone.
        decision = update.decision_of(
            session.baseline, session.records, _stale_rule(session, prefixes, selection)
        )
    stale = set(decision.stale)
    kept = decision.kept_lines() if s.update else []
    if s.update and session.scope.interrupted:
        kept.insert(0, f"run interrupted ({session.scope.interrupted}): no baseline entry was removed")
    session.finish_lines[:0] = baseline_lines(session.records, sorted(stale), updating=s.update, kept=kept)
    if s.baseline_path is not None:
        keys = list(session.baseline.entries)
        session.finish_lines += unknown_arch_lines(keys, s.display(s.baseline_path))
    if s.strict and not s.update and session.unmatched:
        # The budgets of a table whose pattern selects nothing are checked nowhere: not a pass.
        session.finish_lines += [
            f"--regbudget-strict: {m}. Fix: correct the pattern (or drop it from the table)"
            for m in session.unmatched
        ]
        exit_code = exit_code or TESTS_FAILED
    if not any((s.json_path, s.html_path, s.markdown_path, s.step_summary)):
        return exit_code

    # The writers, the run's provenance and GitHub's links only for a run that writes a report file: each
    # module costs every other run with kernels its import and its share of the interpreter's exit.
    from ..report.links import github_links
    from ..report.writers import file_writers

    writers = file_writers(
        json_path=s.json_path,
        html_path=s.html_path,
        html_all=s.html_all,
        trails=_trails(session) if s.html_path else None,
        markdown_path=s.markdown_path,
        step_summary=s.step_summary,
        scope=report_scope(session, prefixes, selection),
        provenance=run_provenance(session) if s.json_path else None,
        broken_builds=broken.json_objects(session.builds),
        rootdir=s.rootdir,
        links=github_links(os.environ),
    )
    for writer in writers:
        if not _write(session, writer) and writer.required:
            exit_code = USAGE_ERROR
    return exit_code


def _update(
    session: RegbudgetSession, planned: update.Plan, prefixes: Sequence[str], path: Path
) -> int | None:
    """Apply the plan to the baseline file at `path` (a run with --regbudget-update); USAGE_ERROR where it
    cannot."""
    s = session.settings
    if session.conflicts:
        shown = "\n  ".join(session.conflicts[:10])
        session.finish_lines.append(
            f"baseline NOT updated: kernels measured differently by two tests:\n  {shown}"
        )
        return USAGE_ERROR
    builds = broken.plan(
        session.baseline,
        session.builds,
        rootdir=str(s.rootdir),
        prefixes=prefixes,
        archs=s.archs,
        releases={r["release"] for r in session.records} | {key[3] for key in session.builds},
        interrupted=bool(session.scope.interrupted),
    )
    try:
        # Before the lock and the write: a path out of the project creates nothing, not even a lock.
        confine(path, s.rootdir, chosen=s.baseline_chosen)
        counts = bl.update(
            path,
            planned.write,
            planned.stale,
            moved=planned.moved,
            lock_dir=s.cache_dir,
            broken=builds.record,
            fixed=builds.drop,
        )
    except (BaselineError, OSError) as exc:
        # OSError: a failure baseline.py did not foresee; the file is still as it was.
        session.finish_lines.append(f"baseline NOT updated: {exc}")
        return USAGE_ERROR
    session.finish_lines.append(f"baseline {s.display(path)} updated: {counts}")
    if s.cache_dir is not None:
        # Parsed once here, where the TOML reader is loaded already, and kept (cache/baselines.py): the next
        # run reads the entries back instead of parsing the file (0.5 s for 8,436 entries) and loading tomli.
        with contextlib.suppress(BaselineError, OSError):
            baselines.load(path, s.cache_dir)
    # The reports say what the baseline now holds: each failed build is recorded.
    session.builds = broken.recorded(session.builds)
    return None


def run_provenance(session: RegbudgetSession) -> dict[str, object]:
    """Where the run was, for the JSON report (engine/provenance.py)."""
    from .provenance import provenance

    found = [b.toolkit_or_none() for b in session.builders.values()]
    return provenance(
        session.records,
        session.settings.rootdir,
        toolkits=[t.describe() for t in found if t is not None],
        nvcc=session.nvcc_found(),
    )


def report_scope(
    session: RegbudgetSession, prefixes: Sequence[str], selection: str | None
) -> dict[str, object]:
    """What the run could have seen, for the JSON report: what a later merge of shards needs to decide stale
    entries as this run would (`regbudget merge`), and what a reader needs to know what was compared. `run`
    is scope.RunScope's payload; `built` the (compiler, release) pairs measured; `shard` this run's
    --regbudget-shard (K/N), so that a merge can tell that every shard of the run is there."""
    s = session.settings
    return {
        "run": session.scope.payload(),
        "prefixes": list(prefixes),
        "selection": selection,
        "archs": list(s.archs),
        "toolkits": list(s.toolkits),
        "built": [list(pair) for pair in sorted(built(session))],
        "rootdir": str(s.rootdir),
        "baseline": s.display(s.baseline_path) if s.baseline_path else None,
        "update": s.update,
        "shard": str(s.shard) if s.shard is not None else None,
    }


def _trails(session: RegbudgetSession) -> Trails | None:
    """The baseline's last commits for the HTML report's charts; a note instead where git cannot say."""
    # Imported for an HTML report only: a run that writes none reads no history (report/writers.py).
    from ..core import trend
    from ..core.trend import Trails
    from ..history import git as history_git

    s = session.settings
    if s.baseline_path is None or s.html_history == 0:
        return None
    try:
        found = history_git.versions(s.baseline_path, cache_dir=s.cache_dir, limit=s.html_history)
    except history_git.GitError as exc:
        return Trails({}, (), f"No history charts: {exc}.")
    note = f"Shallow clone: {history_git.SHALLOW_FIX}." if found.shallow else None
    return trend.trails(found.versions, s.html_history, note)


def _write(session: RegbudgetSession, writer: FileWriter) -> bool:
    """Write one report file; a failure becomes a summary line naming the file, never a traceback."""
    try:
        writer.write(session.records)
    except (OSError, BaselineError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        path = writer.path
        hint = (
            "give a file path, not a directory"
            if path.is_dir()
            else "give the path of a regular file"
            if isinstance(exc, NotRegular)
            else "check the path and free space"
        )
        session.finish_lines.append(f"{writer.option} report NOT written to {path}: {why}; {hint}")
        return False
    return True
