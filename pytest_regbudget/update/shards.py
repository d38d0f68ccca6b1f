"""A --regbudget-json report read back from a file (`read`), by `regbudget merge` and `regbudget compare`:
from files this process did not write (CI shards, an artifact of another run). Every record and the scope are
checked against their types before anything uses them, so that a damaged or hand-edited report is one error
naming the file, the record and the field, never a traceback or a baseline that no longer loads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, cast

import msgspec
from msgspec import Meta, Struct, field

from ..core.arch import get_arch
from ..core.errors import UnknownArchError
from ..core.metrics import METRICS
from ..report.record import ReportRecord
from ..report.writers import JSON_FORMAT, JSON_VERSION, READABLE_VERSIONS
from ..util.files import parse_nested, read_regular
from .scope import RunScope

RERUN = "give a report written by pytest --regbudget-json"
DAMAGED = "an edited or damaged report: rerun pytest --regbudget-json"


class BadReport(ValueError):
    """A report file that cannot be used, with the reason and the fix."""


Count = Annotated[int, Meta(ge=0)]
Key = Annotated[list[str], Meta(min_length=5, max_length=5)]  # [source, kernel, variant, arch, release]


class _Delta(Struct):
    metric: str
    baseline: float
    now: float
    verdict: str


class _Checked(Struct):
    """The fields of a record that a merge, a comparison or the Markdown comment reads, with their types and
    ranges (the record has more: they are carried as they are); the metrics' are `_Record`'s."""

    nodeid: Annotated[str, Meta(min_length=1)]
    kernel: str
    arch: str
    source: str
    ptxas_version: str
    compiler: str
    release: str
    baseline_status: str
    key: Key | None
    outcome: str
    found_under: Key | None = None
    measured: dict[str, Any] | None = None
    time_ms: Annotated[float, Meta(gt=0)] | None = None
    # What the comment (`regbudget merge --markdown`) and a toolkit comparison read besides: a report from a
    # fork's run must render, or be refused, with no traceback (a string where a number goes would be one).
    # A field a report leaves out reads as a record that says nothing (`_FILLED`).
    violations: list[str] = field(default_factory=list)
    error: str | None = None
    deltas: list[_Delta] = field(default_factory=list)
    other_releases: list[str] = field(default_factory=list)
    baseline: dict[str, Any] | None = None
    options_changed: bool = False
    launch: Annotated[list[Annotated[int, Meta(ge=1)]], Meta(min_length=1, max_length=2)] | None = None
    active_blocks: Annotated[int, Meta(ge=0)] | None = None
    ptxas_messages: list[str] = field(default_factory=list)
    noise: Annotated[float, Meta(ge=0)] | None = None


_FILLED = (
    "violations",
    "error",
    "deltas",
    "other_releases",
    "baseline",
    "options_changed",
    "launch",
    "active_blocks",
    "ptxas_messages",
    "noise",
)


# A metric's type in a record, by its unit (at most 255 registers a thread; a fraction at most 1).
_TYPES: dict[str, Any] = {
    "registers": Annotated[int, Meta(ge=0, le=255)],
    "bytes": Count,
    "instructions": Count,
    "fraction": Annotated[float, Meta(ge=0, le=1)],
}
# Every metric of the table, None for unknown. A merge compares those that two builds of one kernel variant
# must agree on, so every record has them; the others a report of an older version may leave out.
_Record = msgspec.defstruct(
    "_Record",
    [
        (m.field, _TYPES[m.unit] | None) if m.agree else (m.field, _TYPES[m.unit] | None, None)
        for m in METRICS
    ],
    bases=(_Checked,),
    kw_only=True,
)


class Scope(Struct):
    """What a run could have seen (engine/finish.py `report_scope`); every field has the value of a run that
    says nothing, so a report without a scope merges as one that removes nothing it cannot see."""

    run: RunScope = field(default_factory=RunScope)
    prefixes: list[str] = field(default_factory=lambda: [""])
    selection: str | None = None
    archs: list[str] = field(default_factory=list)
    toolkits: list[str] = field(default_factory=list)
    built: list[Annotated[list[str], Meta(min_length=2, max_length=2)]] = field(default_factory=list)
    rootdir: str | None = None
    baseline: str | None = None
    update: bool = False
    shard: str | None = None  # --regbudget-shard K/N of the run


class Report(Struct, frozen=True):
    path: Path
    records: list[ReportRecord]
    scope: Scope
    provenance: dict[str, object] | None = None  # version 3: where the run was (kept as read, for a merge)
    # version 4: the builds that failed or that its baseline recorded as broken (update/broken.py)
    broken_builds: list[dict[str, object]] = field(default_factory=list)


def read(path: Path) -> Report:
    """A --regbudget-json report of this plugin's version, every record and the scope checked; BadReport
    naming the file (and the record and field) otherwise."""
    try:
        doc = parse_nested(json.loads, read_regular(path).decode("utf-8"))
    except FileNotFoundError:
        raise BadReport(f"{path}: no such file. Fix: give a report of pytest --regbudget-json=PATH") from None
    except OSError as exc:
        raise BadReport(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BadReport(f"{path}: cannot read it: {exc}") from None
    except ValueError as exc:  # JSONDecodeError, or TooDeep
        raise BadReport(f"{path}: not JSON ({exc}); {RERUN}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("kernels"), list):
        raise BadReport(f'{path}: not a pytest-regbudget report (no "kernels" list)')
    if doc.get("format") != JSON_FORMAT or doc.get("version") not in READABLE_VERSIONS:
        found = doc.get("version", "1 (no version: a development version before 0.1.0)")
        readable = " and ".join(map(str, READABLE_VERSIONS))
        raise BadReport(
            f"{path}: report version {found}; this regbudget reads versions {readable} (it writes "
            f"{JSON_VERSION}). Fix: rerun pytest --regbudget-json with this pytest-regbudget"
        )
    records = [_record(path, i, r) for i, r in enumerate(doc["kernels"])]
    try:
        scope = msgspec.convert(doc.get("scope") or {}, Scope)
    except msgspec.ValidationError as exc:
        raise BadReport(f"{path}: scope: {exc}; {DAMAGED}") from None
    for arch in scope.archs:
        _arch(path, "scope", arch)
    provenance = doc.get("provenance")
    builds = doc.get("broken_builds", [])
    if not isinstance(builds, list) or not all(
        isinstance(b, dict) and {"source", "variant", "arch", "release", "status"} <= set(b) for b in builds
    ):
        raise BadReport(f"{path}: broken_builds: expected a list of builds; {DAMAGED}")
    return Report(path, records, scope, provenance if isinstance(provenance, dict) else None, builds)


def _record(path: Path, index: int, raw: object) -> ReportRecord:
    where = f"{path}: kernels[{index}]"
    if isinstance(raw, dict) and isinstance(raw.get("nodeid"), str):
        where += f" ({raw['nodeid']})"
    try:
        checked = cast(_Checked, msgspec.convert(raw, _Record))
    except msgspec.ValidationError as exc:
        raise BadReport(f"{where}: {exc}; {DAMAGED}") from None
    _arch(path, where, checked.arch)
    if checked.key is not None and (checked.key[3], checked.key[4]) != (checked.arch, checked.release):
        raise BadReport(
            f"{where}: its key {checked.key} is not of its arch {checked.arch} and release "
            f"{checked.release}; {DAMAGED}"
        )
    record = cast(dict[str, Any], raw)  # checked above: convert accepts only an object with these fields
    missing = {name: msgspec.to_builtins(getattr(checked, name)) for name in _FILLED if name not in record}
    return cast(ReportRecord, {**record, **missing} if missing else record)


def _arch(path: Path, where: str, arch: str) -> None:
    try:
        get_arch(arch)
    except UnknownArchError as exc:
        raise BadReport(f"{where}: {exc}") from None
