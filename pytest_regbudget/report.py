"""What the run tells people: the terminal summary table and the JSON report.

Owns the record format (a plain dict, so pytest-xdist workers can ship it to the controller unchanged) and
every rendering of it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypedDict

from .budget import KernelReport


class KernelRecord(TypedDict):
    nodeid: str
    kernel: str
    entry: str | None
    arch: str
    source: str
    registers: int | None
    spill_stores: int | None
    spill_loads: int | None
    stack_frame: int | None
    shared_mem: int | None
    const_mem: int | None
    barriers: int | None
    max_threads: int | None
    min_blocks_per_sm: int | None
    launch: list[int] | None
    dynamic_smem: int
    occupancy: float | None
    active_blocks: int | None
    limiter: str | None
    outcome: str
    level: str
    violations: list[str]
    error: str | None
    ptxas_line: str | None
    ptxas_version: str
    nvrtc_version: str


def to_record(r: KernelReport) -> KernelRecord:
    res, occ = r.resources, r.occupancy
    launch = None
    if r.launch is not None:
        launch = [r.launch.threads] if r.launch.blocks is None else [r.launch.threads, r.launch.blocks]
    return KernelRecord(
        nodeid=r.nodeid,
        kernel=r.kernel,
        entry=res.name if res else None,
        arch=r.arch,
        source=r.source,
        registers=res.registers if res else None,
        spill_stores=res.spill_stores if res else None,
        spill_loads=res.spill_loads if res else None,
        stack_frame=res.stack_frame if res else None,
        shared_mem=res.shared_mem if res else None,
        const_mem=res.const_mem if res else None,
        barriers=res.barriers if res else None,
        max_threads=res.max_threads if res else None,
        min_blocks_per_sm=res.min_blocks_per_sm if res else None,
        launch=launch,
        dynamic_smem=r.dynamic_smem,
        occupancy=round(occ.occupancy, 6) if occ else None,
        active_blocks=occ.active_blocks if occ else None,
        limiter=occ.limiter if occ else None,
        outcome=r.outcome,
        level=r.level,
        violations=list(r.violations),
        error=r.error,
        ptxas_line=res.ptxas_line if res else None,
        ptxas_version=r.ptxas_version,
        nvrtc_version=r.nvrtc_version,
    )


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _kernel_cell(rec: KernelRecord) -> str:
    return rec["kernel"]


def summary_lines(records: Sequence[KernelRecord]) -> list[str]:
    """A fixed-width table, one row per (test, kernel, arch), in a stable order."""
    if not records:
        return []
    header = ("test", "kernel", "arch", "regs", "spill st/ld", "stack", "smem", "occupancy", "verdict")
    rows = []
    for rec in sorted(records, key=lambda r: (r["nodeid"], r["kernel"], r["arch"])):
        spills = "-" if rec["spill_stores"] is None else f"{rec['spill_stores']}/{rec['spill_loads']}"
        occ = "-"
        if rec["occupancy"] is not None and rec["launch"]:
            occ = f"{rec['occupancy']:.0%} @{rec['launch'][0]}"
        rows.append(
            (
                rec["nodeid"].split("::", 1)[-1],
                _kernel_cell(rec),
                rec["arch"],
                _cell(rec["registers"]),
                spills,
                _cell(rec["stack_frame"]),
                _cell(rec["shared_mem"]),
                occ,
                rec["outcome"].upper() if rec["outcome"] != "passed" else "ok",
            )
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    numeric = {3, 5, 6}

    def fmt(row: Iterable[str]) -> str:
        cells = [
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [fmt(header), fmt("-" * w for w in widths), *(fmt(row) for row in rows)]


def write_json(path: Path, records: Sequence[KernelRecord]) -> None:
    """Written atomically so a reader (a CI step) never sees half a file."""
    ordered = sorted(records, key=lambda r: (r["nodeid"], r["kernel"], r["arch"]))
    text = json.dumps({"kernels": ordered}, indent=2) + "\n"
    atomic_write(path, text)


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record_list(payload: Any) -> list[KernelRecord]:
    """Records as received from an xdist worker (already plain data)."""
    return list(payload)
