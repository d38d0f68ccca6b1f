"""What an update writes, from the run's records alone: the entries it measured and the entries it removes.
One implementation for a pytest run (engine/finish.py `finish`) and for a merge of
CI shards' JSON reports (`regbudget merge`), so that a sharded update writes the same file, byte for byte, as
a serial one.

Records -> fresh entries (one per baseline key, the tests that measured it, every launch's occupancy) ->
with the stale rule (scope.py) and the old baseline: the plan that baseline.update applies under its lock.
No pytest here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from msgspec import Struct, field
from msgspec.structs import replace

from ..core import baseline as bl
from ..core.baseline import base_nodeid
from ..core.baseline_schema import key_text
from ..core.errors import BaselineError
from ..core.metrics import AGREED
from ..report.record import ReportRecord, value
from .scope import Decision, Rule, decide


def entry_of(rec: ReportRecord) -> bl.BaselineEntry:
    """The baseline entry a measured record writes: the one its report made (ratchet.entry_of_report).
    BaselineError when the record has none, or one that its own numbers contradict (an edited report)."""
    where = f"{rec['nodeid']} [{rec['arch']}]"
    if rec.get("measured") is None:
        raise BaselineError(f"{where}: the record has no measured entry; rerun pytest --regbudget-json")
    entry = bl.entry_from_table(rec["measured"], f"{where}: measured")
    shown = tuple(value(rec, m) for m in AGREED)  # the numbers two builds of one variant agree on
    if shown != tuple(getattr(entry, m.name) for m in AGREED):
        raise BaselineError(
            f"{where}: the record says registers, spill stores and loads, stack, smem = {shown}, its "
            "measured entry otherwise: an edited or damaged report; rerun pytest --regbudget-json"
        )
    if entry.tests != (base_nodeid(rec["nodeid"]),):
        raise BaselineError(
            f"{where}: its measured entry names the tests {list(entry.tests)}: an edited report"
        )
    return entry


def _numbers(entry: bl.BaselineEntry) -> tuple[object, ...]:
    """What two measurements of one kernel variant must agree on: its compiler and its numbers."""
    return (entry.compiler, *(getattr(entry, m.name) for m in AGREED))


class Fresh(Struct):
    """The entries a run measured, one per key, and the keys two tests measured differently."""

    entries: dict[bl.Key, bl.BaselineEntry] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)


def fresh_entries(records: Iterable[ReportRecord]) -> Fresh:
    """One entry per kernel variant: the tests that measured it, and every launch's occupancy. A key
    measured with other numbers by another test (here, or on another xdist worker or CI shard) is a
    conflict: the entry could hold only one of them."""
    out = Fresh()
    # In a stable order (a sharded run meets the records in another order than a serial one).
    for rec in sorted(records, key=lambda r: (r["nodeid"], r["kernel"], r["arch"])):
        if rec["registers"] is None or not rec["key"]:
            continue
        key = cast(bl.Key, tuple(rec["key"]))
        entry = entry_of(rec)
        seen = out.entries.get(key)
        if seen is not None:
            if _numbers(seen) != _numbers(entry) and base_nodeid(rec["nodeid"]) not in seen.tests:
                out.conflicts.append(
                    f"{key_text(key)}: measured differently by {', '.join(seen.tests)} and {rec['nodeid']}"
                )
            entry = replace(entry.merged(seen), tests=tuple(sorted({*seen.tests, *entry.tests})))
        out.entries[key] = entry
    return out


class Plan(Struct, frozen=True):
    """What baseline.update is given: the entries to write, what it removes, and the entries it moves to
    a new key (new key -> the older key the run read it under)."""

    write: Mapping[bl.Key, bl.BaselineEntry]
    stale: set[bl.Key]
    decision: Decision
    moved: Mapping[bl.Key, bl.Key] = field(default_factory=dict)


def _moved(records: Sequence[ReportRecord]) -> dict[bl.Key, bl.Key]:
    """Each measured key whose entry the run read under an older key (its `found_under`) -> that older key."""
    return {
        cast(bl.Key, tuple(r["key"])): cast(bl.Key, tuple(was))
        for r in records
        if r["key"] and (was := r.get("found_under")) and r["registers"] is not None
    }


def decision_of(
    old: bl.Baseline,
    records: Sequence[ReportRecord],
    rule: Rule,
    moved: Mapping[bl.Key, bl.Key] | None = None,
) -> Decision:
    """Which of `old`'s entries the run did not measure are stale, and which are kept: all that a run
    without --regbudget-update needs of `plan` (its warning of stale entries). `moved`: the records'
    `_moved`, where the caller has made it."""
    if moved is None:
        moved = _moved(records)
    return decide(
        rule,
        {key: entry.tests for key, entry in old.entries.items()},
        {key: entry.compiler for key, entry in old.entries.items()},
        measured={cast(bl.Key, tuple(r["key"])) for r in records if r["key"]} | set(moved.values()),
        installed={key for key, entry in old.entries.items() if entry.package},
    )


def plan(
    old: bl.Baseline, records: Sequence[ReportRecord], fresh: Mapping[bl.Key, bl.BaselineEntry], rule: Rule
) -> Plan:
    """The update of `old` by a run whose records and fresh entries these are, under the stale `rule`.

    Each written entry lists the tests that measured it now and the old tests that still may (those this
    run could not see). An entry the run read under an older key (a record's `found_under`) is measured:
    neither stale nor kept, and moved to its key, unless this run also wrote that older key (a marker's
    variant that a manifest kernel shared in 0.1): then both are written.
    """
    moved = _moved(records)
    decision = decision_of(old, records, rule, moved)
    write = {}
    for key, entry in fresh.items():
        before = old.entries.get(key) or old.entries.get(moved.get(key, key))
        still = []
        if before is not None:
            still = rule.still_measuring(before.tests, key[bl.ARCH], before.compiler, key[bl.RELEASE])
        write[key] = replace(entry, tests=tuple(sorted({*entry.tests, *still})))
    moves = {new: was for new, was in moved.items() if new in write and was not in write}
    return Plan(write, decision.stale_entries(), decision, moves)
