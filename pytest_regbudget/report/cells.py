"""The cells of the terminal table's optional columns (report/terminal.py): the cluster, the occupancy cliff,
and, where the SASS was read, the spill instructions in loops and the estimated local share.
"""

from __future__ import annotations

import math

from ..core.blackwell import PORTABLE_CLUSTER_BLOCKS
from ..core.diagnosis import percent
from .record import ReportRecord


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
