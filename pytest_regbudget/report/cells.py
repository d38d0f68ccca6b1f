"""The cells of the terminal table (report/terminal.py) that are more than a number: the baseline changes,
in each of the shorter forms the table may need (report/layout.py), the cluster, the occupancy cliff, and,
where the SASS was read, the spill instructions in loops and the estimated local share.
"""

from __future__ import annotations

import math

from ..core.blackwell import PORTABLE_CLUSTER_BLOCKS
from ..core.diagnosis import percent
from ..core.metrics import BY_NAME
from ..core.text import one_line
from .record import DeltaRecord, ReportRecord

# A failing change first: it is why the row is there. Then what moved within its tolerance, then the gains.
_CHANGE_ORDER = {"worse": 0, "tolerated": 1, "better": 2}


def delta_cell(d: DeltaRecord) -> str:
    """`regs +8`, `occ -6pt`: a change, by the metric's column name, signed."""
    metric = BY_NAME.get(d["metric"])
    name = d["metric"] if metric is None else metric.column
    if metric is not None and metric.unit == "fraction":
        return f"{name} {d['delta'] * 100:+.0f}pt"
    return f"{name} {d['delta']:+g}"


def baseline_forms(rec: ReportRecord) -> list[str]:
    """The baseline cell, fullest first: every change, failing ones first (`spill st +472, regs -8`), then
    fewer of them with the rest counted (`spill st +472, +4 more`). Build settings that changed alone make
    no change here: the run says so once (terminal.settings_lines)."""
    status = rec["baseline_status"]
    if status == "none" or rec["registers"] is None:
        return ["-"]
    if status == "new":
        return ["new"]
    if status == "new-release":
        release = one_line(rec["release"])
        return [
            f"new for {release} (entries: {one_line(', '.join(rec['other_releases']))})",
            f"new for {release}",
        ]
    deltas = sorted(rec["deltas"], key=lambda d: _CHANGE_ORDER.get(d["verdict"], 1))
    parts = [delta_cell(d) for d in deltas]
    changes = [
        ", ".join(parts[:k]) + (f", +{len(parts) - k} more" if k < len(parts) else "")
        for k in range(len(parts), 0, -1)
    ] or ["="]
    if status != "toolkit-mismatch":
        return changes
    old = rec["baseline"]["ptxas"] if rec["baseline"] else "?"
    notes = (f" (ptxas {one_line(str(old))}, not enforced)", " (not enforced)")
    return [c + note for c in changes for note in notes]


def cluster_cell(rec: ReportRecord) -> str:
    """`2x1x1`, with the driver's active clusters where GPU checks ran (`2x1x1 (66 active)`); a cluster over
    the portable size is marked `non-portable` (it needs cudaFuncAttributeNonPortableClusterSizeAllowed)."""
    dims = rec.get("cluster")
    if not dims:
        return "-"
    active = rec.get("driver_active_clusters")
    wide = " non-portable" if math.prod(dims) > PORTABLE_CLUSTER_BLOCKS else ""
    return "x".join(map(str, dims)) + wide + ("" if active is None else f" ({active} active)")


def cliff_cell(rec: ReportRecord) -> str:
    """`+3/-5`: registers it can grow before losing a block / must shed to gain one."""
    if rec["cliff_grow"] is None:
        return "-"
    shed = "-" if rec["cliff_shed"] is None else f"-{rec['cliff_shed']}"
    return f"+{rec['cliff_grow']}/{shed}"


def sass_cell(rec: ReportRecord) -> str:
    if rec["spill_instructions"] is None:
        return "-"
    return f"{rec['spill_instructions_in_loops']}/{rec['spill_instructions']}"


def share_cell(rec: ReportRecord) -> str:
    """The estimated share of executed instructions that are local loads and stores (report/record.py)."""
    share = rec.get("local_share")  # an older report has none
    if share is None:
        return "-"
    return percent(share)
