"""Which baseline entries a run could have seen: the base of stale-entry removal.

Owns the rule, and nothing else (no pytest import): an entry is stale only when this run could have seen it
and did not. That needs all of:
- the run was not interrupted (collection errors, KeyboardInterrupt, -x / --maxfail, an internal error);
- the entry's test file was collected without error, in full (a directory or the file itself was among the
  run's arguments, not a node id, and the module was neither skipped at import nor failed to import);
- the entry's arch was built by this run;
- its test was collected, neither deselected nor skipped, and ran to its end without measuring that kernel
  (or no longer exists at all).
A test file that no longer exists on disk is gone whatever the run's scope; so is a kernel whose source file
the run found missing. Every entry this run did not measure and does not remove is "kept", with a reason the
summary prints.

Under pytest-xdist each worker fills its own RunScope and ships `payload()`; the controller merges them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Key = tuple[str, str, str]  # (test nodeid, kernel, arch), as in baseline.Key

# How a module's collection ended (pytest's CollectReport outcome, per file).
COLLECTED = "collected"
ERROR = "error"
SKIPPED = "skipped"


@dataclass
class RunScope:
    """What the run collected, selected and finished; filled by plugin hooks, merged across xdist workers."""

    collected: set[str] = field(default_factory=set)  # test node ids
    deselected: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)
    completed: set[str] = field(default_factory=set)  # tests whose body ran to the end
    files: dict[str, str] = field(default_factory=dict)  # rootdir-relative file -> COLLECTED/ERROR/SKIPPED
    file_notes: dict[str, str] = field(default_factory=dict)  # file -> why it was skipped
    collection_errors: int = 0  # reports of any collector that failed (a conftest, a package, a file)
    interrupted: str | None = None  # why this session stopped early, if it did

    def note_file(self, path: str, outcome: str, note: str = "") -> None:
        # A file that failed on any worker (or was skipped on one) is not "in full" for the whole run.
        rank = {COLLECTED: 0, SKIPPED: 1, ERROR: 2}
        if rank[outcome] >= rank.get(self.files.get(path, COLLECTED), 0):
            self.files[path] = outcome
            if note:
                self.file_notes[path] = note

    def payload(self) -> dict[str, Any]:
        return {
            "collected": sorted(self.collected),
            "deselected": sorted(self.deselected),
            "skipped": sorted(self.skipped),
            "completed": sorted(self.completed),
            "files": dict(sorted(self.files.items())),
            "file_notes": dict(sorted(self.file_notes.items())),
            "collection_errors": self.collection_errors,
            "interrupted": self.interrupted,
        }

    def merge(self, payload: Mapping[str, Any]) -> None:
        self.collected.update(payload.get("collected", []))
        self.deselected.update(payload.get("deselected", []))
        self.skipped.update(payload.get("skipped", []))
        self.completed.update(payload.get("completed", []))
        notes = payload.get("file_notes", {})
        for path, outcome in payload.get("files", {}).items():
            self.note_file(path, outcome, notes.get(path, ""))
        self.collection_errors += int(payload.get("collection_errors", 0))
        self.interrupted = self.interrupted or payload.get("interrupted")


@dataclass(frozen=True)
class Decision:
    """Stale keys (to remove on update), and kept keys grouped by the reason they were not judged."""

    stale: frozenset[Key]
    kept: Mapping[str, tuple[Key, ...]]

    def kept_lines(self, limit: int = 8) -> list[str]:
        """`10 entries kept: tests/test_b.py was not collected (error)`, largest group first."""
        groups = sorted(self.kept.items(), key=lambda item: (-len(item[1]), item[0]))
        lines = [f"{_entries(len(keys))} kept: {reason}" for reason, keys in groups[:limit]]
        rest = sum(len(keys) for _, keys in groups[limit:])
        if rest:
            lines.append(f"{_entries(rest)} kept for {len(groups) - limit} other reason(s)")
        return lines


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def test_file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def covered(file: str, prefixes: Sequence[str]) -> bool:
    """Whether the run's arguments name `file` in full: a directory above it, or the file itself."""
    return any(p == "" or (p.endswith("/") and file.startswith(p)) or p == file for p in prefixes)


def decide(
    keys: Iterable[Key],
    scope: RunScope,
    *,
    measured: set[Key],
    missing_sources: set[Key],
    archs: Sequence[str],
    prefixes: Sequence[str],
    rootdir: Path,
    selection: str | None = None,
) -> Decision:
    """Split the baseline's `keys` that this run did not measure into stale and kept.

    `measured`: keys with a record this run (built or failed); `missing_sources`: keys whose kernel source
    the run found missing; `prefixes`: the run's path arguments (see `covered`); `selection`: an option
    that changes what is collected without reporting it (--lf skips whole files), which keeps everything
    not measured.
    """
    stale: set[Key] = set()
    kept: dict[str, list[Key]] = {}
    for key in sorted(keys):
        reason = _why_kept(key, scope, measured, missing_sources, archs, prefixes, rootdir, selection)
        if reason is None:
            stale.add(key)
        elif reason:
            kept.setdefault(reason, []).append(key)
    return Decision(frozenset(stale), {r: tuple(k) for r, k in kept.items()})


def _why_kept(
    key: Key,
    scope: RunScope,
    measured: set[Key],
    missing_sources: set[Key],
    archs: Sequence[str],
    prefixes: Sequence[str],
    rootdir: Path,
    selection: str | None,
) -> str | None:
    """None: stale. "": measured this run (neither kept nor stale). Otherwise the reason it is kept."""
    nodeid, _, arch = key
    file = test_file(nodeid)
    if scope.interrupted:
        return "" if key in measured else f"the run was interrupted ({scope.interrupted})"
    if key in missing_sources:
        return None
    if key in measured:
        return ""
    if not (rootdir / file).exists():
        return None
    if arch not in archs:
        return f"{arch} was not built (this run's archs: {', '.join(archs)})"
    if selection:
        return f"{selection} collects only part of the suite"
    if not covered(file, prefixes):
        return "not in this run's paths (or only some of its tests were named)"
    state = scope.files.get(file)
    if state == ERROR:
        return f"{file} was not collected (error)"
    if state == SKIPPED:
        note = scope.file_notes.get(file)
        return f"{file} was skipped at collection" + (f" ({note})" if note else "")
    if state is None:
        return f"{file} was not collected"
    if nodeid in scope.deselected:
        return "deselected (-k, -m or --deselect)"
    if nodeid in scope.skipped:
        return "test skipped"
    if nodeid in scope.collected and nodeid not in scope.completed:
        return "test did not run to its end"
    return None
