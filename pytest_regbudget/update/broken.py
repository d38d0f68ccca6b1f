"""Builds that fail: the ratchet over them, as the kernel entries are a ratchet over numbers.

A manifest file that does not build for an arch (or variant) is one failed item of its own, never a collection
error: the other files are checked. The baseline's `broken` table (core/baseline.py) records the builds that
failed when it was last updated, keyed as kernel entries are without the kernel name. Against it each build of
a run is one of:

- `recorded`: it fails, and the baseline says it does: it passes (its error may differ), and the run's summary
  names all of them in one line;
- `failed`: it fails and is not recorded: its item fails with the compiler's log;
- `fixed`: the baseline records it as broken and it builds now: reported, and an update drops the record.

An update records the failed and recorded builds, drops the fixed ones and those of files the run saw whole
that no longer have the build, and keeps every kernel entry of a broken build (its kernels are not stale:
they are compared again once it builds). No pytest here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from msgspec import Struct
from msgspec.structs import replace

from ..core import baseline as bl
from .scope import covered

Status = Literal["recorded", "failed", "fixed"]
RECORDED: Status = "recorded"
FAILED: Status = "failed"
FIXED: Status = "fixed"


class BuildNote(Struct, frozen=True):
    """What became of one recorded or failing build this run."""

    status: Status
    error: str  # the compiler's log now; for a fixed build, what the baseline recorded
    compiler: str = ""  # "nvcc", "nvrtc"
    kernels_before: int = 0  # kernel entries the baseline holds of this source, variant and arch

    def to_json(self, key: bl.BuildKey) -> dict[str, object]:
        source, variant, arch, release = key
        return {
            "source": source,
            "variant": variant,
            "arch": arch,
            "release": release,
            "status": self.status,
            "compiler": self.compiler,
            "error": self.error,
        }


def note(baseline: bl.Baseline, key: bl.BuildKey, error: str | None, compiler: str) -> BuildNote | None:
    """The note of a build of `key` that failed with `error` (None: it built); None for a build that built
    and is not recorded as broken, which is every healthy one."""
    recorded = baseline.broken.get(key)
    if error is None:
        return None if recorded is None else BuildNote(FIXED, recorded.error, compiler)
    if recorded is not None:
        return BuildNote(RECORDED, error, compiler)
    source, variant, arch, release = key
    before = sum(1 for k in baseline.entries if (k[0], k[2], k[3], k[4]) == (source, variant, arch, release))
    return BuildNote(FAILED, error, compiler, before)


def shown(key: bl.BuildKey) -> str:
    """`src/a.cu [sm_90]`, `src/a.cu [BM=128 sm_90]`: how a build is named in lines and messages."""
    source, variant, arch, release = key
    where = arch if variant == bl.NO_VARIANT else f"{variant} {arch}"
    return f"{source} [{where}, CUDA {release}]"


def failure_text(key: bl.BuildKey, build: BuildNote, *, updating: bool) -> str:
    """The message of a failed build's item: the file, the arch, the compiler's log, and what to do."""
    lines = [f"{shown(key)} does not build with {build.compiler or 'its compiler'}:", build.error.rstrip()]
    if build.kernels_before:
        lines.append(
            f"It built before: the baseline holds {build.kernels_before} kernel entr"
            f"{'y' if build.kernels_before == 1 else 'ies'} of it for {key[2]}, kept until it builds again."
        )
    if updating:
        lines.append("Recorded in the baseline's broken table by this update.")
    else:
        lines.append(
            "Fix: make it build; or, if it is not meant to build alone (a file another #includes, host "
            "code), leave it out with exclude = [...] in its manifest table; or record it as broken with "
            "pytest --regbudget-update (it then passes while it still fails)."
        )
    return "\n".join(lines)


def summary_lines(builds: Mapping[bl.BuildKey, BuildNote], *, updating: bool, limit: int = 6) -> list[str]:
    """One line for the builds that fail unrecorded (their items say why), one for those that fail as
    recorded, one for those that build again."""
    out = []
    for status, head, tail in (
        (
            FAILED,
            "fail and are not recorded as broken",
            "their items fail with the compiler's log; fix them, exclude them, or record them with "
            "pytest --regbudget-update",
        ),
        (RECORDED, "fail as the baseline records", "not checked until they build"),
        (
            FIXED,
            "recorded as broken build again",
            "this update records their kernels and drops their broken entries"
            if updating
            else "pytest --regbudget-update records their kernels and drops their broken entries",
        ),
    ):
        keys = sorted(k for k, b in builds.items() if b.status == status)
        if not keys:
            continue
        names = ", ".join(shown(k) for k in keys[:limit])
        more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
        out.append(f"{len(keys)} build(s) {head} ({names}{more}): {tail}")
    return out


def json_objects(builds: Mapping[bl.BuildKey, BuildNote]) -> list[dict[str, object]]:
    """The JSON report's `broken_builds`, sorted by key."""
    return [builds[key].to_json(key) for key in sorted(builds)]


def from_json(objects: Iterable[Mapping[str, object]]) -> dict[bl.BuildKey, BuildNote]:
    """`json_objects` read back (a worker's payload, a shard's report)."""
    out: dict[bl.BuildKey, BuildNote] = {}
    for obj in objects:
        key = (str(obj["source"]), str(obj["variant"]), str(obj["arch"]), str(obj["release"]))
        status = str(obj["status"])
        if status not in (RECORDED, FAILED, FIXED):
            continue
        out[key] = BuildNote(status, str(obj.get("error", "")), str(obj.get("compiler", "")))
    return out


class BrokenPlan(Struct, frozen=True):
    """What an update does to the baseline's broken table."""

    record: Mapping[bl.BuildKey, bl.BrokenBuild]
    drop: set[bl.BuildKey]


def plan(
    old: bl.Baseline,
    builds: Mapping[bl.BuildKey, BuildNote],
    *,
    rootdir: str,
    prefixes: Sequence[str],
    archs: Sequence[str],
    releases: set[str],
    interrupted: bool,
) -> BrokenPlan:
    """Record every failing build; drop the fixed ones and, unless the run was interrupted, the recorded
    builds it could have tried and did not: of a file it saw whole (`prefixes`), for one of its archs and
    releases. Their file, or their variant, is gone or excluded. The logs' paths are written relative to the
    `rootdir`: a committed file must read the same from every checkout."""
    record = {
        key: bl.BrokenBuild(bl.error_summary(_relative(b.error, rootdir)))
        for key, b in builds.items()
        if b.status != FIXED
    }
    drop = {key for key, b in builds.items() if b.status == FIXED}
    if not interrupted:
        drop |= {
            key
            for key in old.broken
            if key not in builds and key[2] in archs and key[3] in releases and covered(key[0], prefixes)
        }
    return BrokenPlan(record, drop)


def _relative(log: str, rootdir: str) -> str:
    """`log` with the rootdir's absolute path (as given, and resolved) left out of the paths it names."""
    for root in dict.fromkeys([rootdir, os.path.realpath(rootdir)]):
        log = log.replace(root.rstrip("/") + "/", "")
    return log


def recorded(builds: Mapping[bl.BuildKey, BuildNote]) -> dict[bl.BuildKey, BuildNote]:
    """The builds as an update that wrote them leaves them: each failed one is recorded now."""
    return {k: replace(b, status=RECORDED) if b.status == FAILED else b for k, b in builds.items()}


def protected(builds: Mapping[bl.BuildKey, BuildNote]) -> frozenset[bl.BuildKey]:
    """The builds whose kernel entries an update keeps, unjudged: those that fail now."""
    return frozenset(key for key, b in builds.items() if b.status != FIXED)
