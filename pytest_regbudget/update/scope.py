"""Which baseline entries a run could have seen: the base of stale-entry removal.

Owns the rule, and nothing else (no pytest import). An entry is keyed by kernel (source, name, variant,
arch) and lists the tests that measured it. It is stale only when this run could have seen it and did not:
- its source file no longer exists, under the rootdir or in an install directory on sys.path (a code
  string's entry has no file, and installed code's entry, which records its package, may be uninstalled
  here: only their tests count); or
- the run was not interrupted (collection errors, KeyboardInterrupt, -x / --maxfail, an internal error),
  its arch was built, and every test it lists is gone or ran to its end without measuring it. A test is
  "seen" when its file was collected without error, in full (a directory or the file itself was among the
  run's arguments, not a node id; the module neither skipped at import nor failed to import), and the test
  was neither deselected nor skipped; a test file that no longer exists is gone whatever the run's scope.
Every entry this run did not measure and does not remove is "kept", with a reason the summary prints.

Under pytest-xdist each worker fills its own RunScope and ships `payload()`; the controller merges them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from ..core.baseline import base_nodeid
from ..util.paths import install_search

Key = tuple[str, str, str, str, str]  # (source, kernel, variant, arch, release), as in baseline.Key


def with_base(nodeids: Iterable[str]) -> set[str]:
    """The ids and their base ids (base_nodeid), for the scope's sets: the stale rule looks up either."""
    ids = set(nodeids)
    return ids | {base_nodeid(n) for n in ids}


# How a module's collection ended (pytest's CollectReport outcome, per file).
COLLECTED = "collected"
ERROR = "error"
SKIPPED = "skipped"


class RunScope(Struct):
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


def merge_shards(payloads: Iterable[Mapping[str, Any]]) -> RunScope:
    """The scope of one run made of several (CI shards, each with its own -k or test split): a test that one
    shard deselected or skipped and another ran counts as run, as it would in one serial run; an error or
    an interruption in any shard is the whole run's."""
    merged = RunScope()
    selected: set[str] = set()
    for payload in payloads:
        shard = RunScope()
        shard.merge(payload)
        selected |= shard.collected - shard.deselected
        merged.merge(payload)
    merged.deselected -= selected
    merged.skipped -= merged.completed
    return merged


class Decision(Struct, frozen=True):
    """Stale keys (to remove on update), and kept keys grouped by the reason they were not judged."""

    stale: frozenset[Key]
    kept: Mapping[str, tuple[Key, ...]]

    def stale_entries(self) -> set[Key]:
        return set(self.stale)

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


class Rule(Struct, frozen=True):
    """The stale rule for one run: what it built, which paths it was given, and what it saw."""

    scope: RunScope
    archs: Sequence[str]
    prefixes: Sequence[str]  # the run's path arguments (see `covered`)
    rootdir: Path
    # An option that changes what is collected without reporting it (--lf skips whole files): then
    # everything not measured is kept.
    selection: str | None = None
    # The (compiler, release) pairs this run built, e.g. ("nvrtc", "12.9"), ("nvcc", "13.5"): an entry of
    # another is kept (None: not known, every release counts as built).
    built: frozenset[tuple[str, str]] | None = None
    # A merge of shards built with different toolkits: the scope of the shards that built each (compiler,
    # release). An entry is judged by what the shards of its own toolkit saw, as the serial updates would
    # have judged it: a test one cu12 shard deselected is not "run" because a cu13 shard ran it.
    release_scopes: Mapping[tuple[str, str], RunScope] = field(default_factory=dict)
    # The builds (source, variant, arch, release) that failed this run: their kernel entries are kept, to be
    # compared again once they build (update/broken.py).
    broken: frozenset[tuple[str, str, str, str]] = frozenset()

    def judging(self, compiler: str, release: str) -> Rule:
        """The rule for an entry of (compiler, release)."""
        if not self.release_scopes:
            return self
        # A pair no shard built keeps the merged scope: the `built` rule keeps its entries.
        scope = self.release_scopes.get((compiler, release), self.scope)
        return replace(self, scope=scope, release_scopes={})

    def test(self, nodeid: str, arch: str) -> str | None:
        """Why the run could not have seen what test `nodeid` measures on `arch`; None when it could have
        (the test is gone, or ran to its end)."""
        file = test_file(nodeid)
        scope = self.scope
        if scope.interrupted:
            return f"the run was interrupted ({scope.interrupted})"
        if not (self.rootdir / file).exists():
            return None
        if arch not in self.archs:
            return f"{arch} was not built (this run's archs: {', '.join(self.archs)})"
        if self.selection:
            return f"{self.selection} collects only part of the suite"
        if not covered(file, self.prefixes):
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

    def kernel(
        self, key: Key, tests: Sequence[str], compiler: str = "", *, installed: bool = False
    ) -> str | None:
        """Why a kernel's entry is kept; None when it is stale. `tests` measured it last, with `compiler`;
        `installed`: the entry records the package its source belongs to."""
        source, _, variant, arch, release = key
        if (source, variant, arch, release) in self.broken:
            return f"{source} does not build for {arch} (its kernels are compared again once it builds)"
        if self.release_scopes:
            return self.judging(compiler, release).kernel(key, tests, compiler, installed=installed)
        if self.scope.interrupted:
            return f"the run was interrupted ({self.scope.interrupted})"
        if not source.startswith(NOT_A_FILE) and not installed and not self.source_exists(source):
            return None  # its source file is gone
        if arch not in self.archs:
            return f"{arch} was not built (this run's archs: {', '.join(self.archs)})"
        if self.built is not None and (compiler, release) not in self.built:
            # Its tests may have run with another toolkit (their ids then name another release): only the
            # files of all its tests being gone makes it stale, as its source file's being gone does.
            if tests and not any((self.rootdir / test_file(t)).exists() for t in tests):
                return None
            ran = ", ".join(f"{c} {r}" for c, r in sorted(self.built)) or "none"
            return f"{compiler} {release} was not built (this run built: {ran})"
        if not tests:
            return "no test is recorded for it"
        reasons = [r for r in (self.test(t, arch) for t in tests) if r is not None]
        return reasons[0] if reasons else None

    def source_exists(self, source: str) -> bool:
        """Whether a key's source file is here: under the rootdir (an absolute key: where it says), or
        inside an install directory on sys.path (an import path, util/paths.py)."""
        if (self.rootdir / source).exists():
            return True
        return any((Path(base) / source).exists() for base in install_search(self.rootdir))

    def still_measuring(
        self, tests: Sequence[str], arch: str, compiler: str = "", release: str = ""
    ) -> list[str]:
        """The tests of an entry that may still measure it: those this run could not see."""
        rule = self.judging(compiler, release)
        return [t for t in tests if rule.test(t, arch) is not None]


# A key's source that is not a file on disk (a code string's name, a Python kernel without a file): its
# entries are judged by their tests alone.
NOT_A_FILE = "<"


def decide(
    rule: Rule,
    entries: Mapping[Key, Sequence[str]],
    compilers: Mapping[Key, str] | None = None,
    *,
    measured: set[Key],
    installed: Collection[Key] = frozenset(),
) -> Decision:
    """Split the baseline's entries that this run did not measure into stale and kept.

    `entries`: each kernel entry's tests; `compilers`: each one's compiler; `measured`: kernel keys with a
    record this run; `installed`: the entries of installed code (they record a package), judged by their
    tests alone.
    """
    stale: set[Key] = set()
    kept: dict[str, list[Key]] = {}
    foreign = _foreign_rootdir(rule, {k: t for k, t in entries.items() if k not in installed})
    if foreign:
        unmeasured = tuple(k for k in sorted(entries) if k not in measured)
        return Decision(frozenset(), {foreign: unmeasured} if unmeasured else {})
    for key, tests in sorted(entries.items()):
        if key in measured:
            continue
        reason = rule.kernel(key, tests, (compilers or {}).get(key, ""), installed=key in installed)
        if reason is None:
            stale.add(key)
        else:
            kept.setdefault(reason, []).append(key)
    return Decision(frozenset(stale), {r: tuple(k) for r, k in kept.items()})


def _foreign_rootdir(rule: Rule, entries: Mapping[Key, Sequence[str]]) -> str:
    """Why no entry can be judged, if none of the files the baseline names (sources, test files) exists under
    the rule's rootdir: the keys are relative to another one (`--rootdir=tests`, `merge --rootdir /tmp`), and
    every entry would look gone. "" when some do."""
    named = {k[0] for k in entries if not k[0].startswith(NOT_A_FILE)}
    named |= {test_file(t) for tests in entries.values() for t in tests}
    if not named or any((rule.rootdir / name).exists() for name in named):
        return ""
    return (
        f"none of the {len(named)} files the baseline names exists under the rootdir {rule.rootdir}, so no "
        "entry was removed: it was written from another rootdir (run from the baseline's project, or pass "
        "--rootdir with that directory)"
    )
