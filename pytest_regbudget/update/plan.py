"""What an update writes, from the run's records alone: the entries it measured and the entries it removes.
One implementation for a pytest run (`session.finish`) and for a merge of
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
from ..core.ptxas import message_key
from ..report.record import KernelRecord
from ..report.terminal import key_text
from .scope import Decision, Rule, decide


def entry_of(rec: KernelRecord) -> bl.Entry:
    """The baseline entry a measured record writes, as verdict.entry_of_report makes it from a report."""
    occupancy: dict[str, float] = {}
    if rec["occupancy"] is not None and rec["launch"]:
        dynamic = f", {rec['dynamic_smem']} B dynamic smem" if rec["dynamic_smem"] else ""
        occupancy[f"{rec['launch'][0]} threads{dynamic}"] = round(round(rec["occupancy"], 6), 4)
    gpu: dict[str, dict[str, object]] = {}
    if rec["gpu_device"] is not None and rec["time_ms"] is not None:
        figures: dict[str, object] = {
            "time_ms": float(f"{rec['time_ms']:.4g}"),
            "noise": round(rec["noise"] or 0.0, 4),
            "samples": rec["samples"],
            "driver_registers": rec["driver_registers"],
        }
        if rec["driver_occupancy"] is not None:
            figures["driver_occupancy"] = round(round(rec["driver_occupancy"], 6), 4)
        if rec["sm_clock_mhz"] is not None:
            figures["sm_clock_mhz"] = rec["sm_clock_mhz"]
        if rec["max_sm_clock_mhz"] is not None:
            figures["max_sm_clock_mhz"] = rec["max_sm_clock_mhz"]
        if rec["ci_low_ms"] is not None and rec["ci_high_ms"] is not None:
            figures["ci_low_ms"] = float(f"{rec['ci_low_ms']:.4g}")
            figures["ci_high_ms"] = float(f"{rec['ci_high_ms']:.4g}")
        gpu[rec["gpu_device"]] = figures
    assert rec["registers"] is not None  # only measured records write entries
    return bl.Entry(
        registers=rec["registers"],
        spill_stores=rec["spill_stores"],
        spill_loads=rec["spill_loads"],
        stack=rec["stack_frame"] or 0,
        smem=rec["shared_mem"] or 0,
        const_mem=rec["const_mem"] or 0,
        ptxas=rec["ptxas_version"],
        nvrtc=rec["nvrtc_version"],
        compiler=rec["compiler"],
        options_hash=rec["options_hash"],
        occupancy=occupancy,
        tests=(base_nodeid(rec["nodeid"]),),
        gpu=gpu,
        messages=tuple(sorted({message_key(m) for m in rec.get("ptxas_messages") or []})),
    )


def _numbers(entry: bl.Entry) -> tuple[object, ...]:
    return (entry.compiler, entry.registers, entry.spill_stores, entry.spill_loads, entry.stack, entry.smem)


class Fresh(Struct):
    """The entries a run measured, one per key, and the keys two tests measured differently."""

    entries: dict[bl.Key, bl.Entry] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)


def fresh_entries(records: Iterable[KernelRecord]) -> Fresh:
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


# A named tuple rather than a frozen dataclass: every run defines it at import (docs/speed.md, "Records").
class Plan(Struct, frozen=True):
    """What baseline.update is given: the entries to write, and what it removes."""

    write: Mapping[bl.Key, bl.Entry]
    stale: set[bl.Key]
    decision: Decision


def plan(
    old: bl.Baseline, records: Sequence[KernelRecord], fresh: Mapping[bl.Key, bl.Entry], rule: Rule
) -> Plan:
    """The update of `old` by a run whose records and fresh entries these are, under the stale `rule`.

    Each written entry lists the tests that measured it now and the old tests that still may (those this
    run could not see).
    """
    decision = decide(
        rule,
        {key: entry.tests for key, entry in old.entries.items()},
        {key: entry.compiler for key, entry in old.entries.items()},
        measured={cast(bl.Key, tuple(r["key"])) for r in records if r["key"]},
    )
    write = {}
    for key, entry in fresh.items():
        before = old.entries.get(key)
        still = rule.still_measuring(before.tests, key[bl.ARCH]) if before else []
        write[key] = replace(entry, tests=tuple(sorted({*entry.tests, *still})))
    return Plan(write, decision.stale_entries(), decision)
