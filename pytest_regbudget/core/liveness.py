"""Where the registers go: the general registers live at each SASS instruction, as `nvdisasm -c -plr
-lrm count` prints them (its `#` column: Nsight Compute's "Live Registers"), and the peak, named by its
source line.

Pure: tools/nvdisasm.py runs nvdisasm, core/sass.py joins the counts with the line-info listing by address
(`peak_at`) and keeps the result in `SassReport.peak_live`. How the peak relates to ptxas's register count:
docs/diagnostics.md, "Where the registers go".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from msgspec import Struct

from ..util.patterns import lazy

# Within this many registers of the peak an instruction counts as at it, when the lines that reach the peak
# are weighed: the peak itself is often one instruction wide (an extra address or a load landing).
NEAR = 2

# An instruction's line of the listing: its address, and the table's cells after the `//` (`|  158  |  1  |`).
_ROW = lazy(r"^\s*/\*([0-9a-fA-F]+)\*/[^\n]*?//\s*(\|.*)$")
_HEADER = lazy(r"//\s*\|.*\bGPR\b")


class PeakLive(Struct, frozen=True):
    """The most general registers live at one instruction of a kernel, and where it is written."""

    live: int
    where: str | None  # "poly.cu:19": the line of the instruction named; None without line info
    loop: str | None = None  # where the innermost SASS loop around it is written ("poly.cu:17"), if any

    def text(self) -> str:
        """`peak 102 live at poly.cu:19 (in the loop at poly.cu:17)`, as the failure messages end."""
        at = f" at {self.where}" if self.where else ""
        inside = f" (in the loop at {self.loop})" if self.loop else ""
        return f"peak {self.live} live{at}{inside}"

    def cell(self) -> str:
        """`102 @ poly.cu:19`, for a table."""
        return f"{self.live} @ {self.where}" if self.where else str(self.live)


def live_counts(lines: Iterable[str]) -> dict[int, int]:
    """Address -> general registers live, of one function's lines of an `nvdisasm -plr -lrm count` listing.
    An instruction whose cell is blank (none live) has no entry. The column is found by its header (`GPR`,
    before `PRED` and `UGPR`: predicates and uniform registers are counted apart, as ptxas counts them)."""
    column = 0
    counts: dict[int, int] = {}
    for line in lines:
        if _HEADER.search(line):
            cells = [c.strip() for c in line.split("//", 1)[1].strip().strip("|").split("|")]
            column = cells.index("GPR") if "GPR" in cells else 0
            continue
        row = _ROW.match(line)
        if row is None:
            continue
        cells = [c.strip() for c in row.group(2).strip().strip("|").split("|")]
        if column < len(cells) and cells[column].isdigit():
            counts[int(row.group(1), 16)] = int(cells[column])
    return counts


Line = tuple[str, int]  # (file, line) of an instruction


def peak_at(counts: Sequence[int | None], lines: Sequence[Line | None]) -> int | None:
    """Which instruction names the peak, by index: one where the most registers are live, on the source line
    that holds the most instructions within NEAR of that peak (an unrolled statement repeats its line; a
    lone load that lands at the peak does not outweigh it), its first such instruction; None without counts.
    Lines without line info are weighed last."""
    known = [c for c in counts if c is not None]
    if not known:
        return None
    peak = max(known)
    near: Counter[Line | None] = Counter(
        line for count, line in zip(counts, lines, strict=True) if count is not None and count >= peak - NEAR
    )
    at_peak = [n for n, count in enumerate(counts) if count == peak]
    return min(at_peak, key=lambda n: (lines[n] is None, -near[lines[n]], n))
