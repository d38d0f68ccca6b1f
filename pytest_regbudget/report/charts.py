"""The HTML report's charts, as inline SVG: a kernel's occupancy staircase (resident blocks against registers
per thread, recomputed with the calculator the budgets use), its registers and spills over the baseline's
history, and the suite's over that history. html.py places them on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ..core.arch import get_arch
from ..core.occupancy import occupancy
from ..core.trend import BANDS, Point, SuitePoint
from .record import ReportRecord

# Chart geometry and colours (the screenshot test looks for STEP_COLOUR and KERNEL_COLOUR pixels).
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 260, 48, 56, 16, 36
STEP_COLOUR = "#1f77b4"
KERNEL_COLOUR = "#d62728"
BASELINE_COLOUR = "#7f7f7f"
CLIFF_COLOUR = "#2ca02c"
# The suite picture: unchanged kernels, changed or new ones, failures (KERNEL_COLOUR).
CALM_COLOUR = "#8da0b3"
CHANGED_COLOUR = "#ff7f0e"
SUITE_W, SUITE_H, PANEL_GAP = 900, 320, 60


def _staircase(rec: ReportRecord, threads: int) -> list[int]:
    """Resident blocks per SM for 1..255 registers per thread at the record's launch size."""
    return [
        occupancy(
            rec["arch"],
            regs,
            threads,
            rec["shared_mem"] or 0,
            rec["dynamic_smem"],
            rec["max_threads"],
            barriers=rec["barriers"] or 0,
        ).active_blocks
        for regs in range(1, 256)
    ]


def staircase_svg(rec: ReportRecord) -> str:
    """Resident blocks (left axis) and occupancy (right axis) against registers per thread."""
    threads = rec["launch"][0] if rec["launch"] else 0
    blocks = _staircase(rec, threads)
    lim = get_arch(rec["arch"])
    warps_per_block = -(-threads // lim.warp_size)
    top_blocks = max(max(blocks), 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(regs: float) -> float:
        return LEFT + (regs - 1) / 254 * plot_w

    def y(b: float) -> float:
        return TOP + plot_h - b / top_blocks * plot_h

    # A corner where the block count changes, nothing between: the same line, and a page of many charts stays
    # small (a step drawn point by point was 510 points, some 6 kB, per chart).
    points = []
    for regs, b in enumerate(blocks, start=1):
        if regs == 1 or blocks[regs - 2] != b:
            points.append(f"{x(regs - 0.5 if regs > 1 else 1):.1f},{y(b):.1f}")
        if regs == 255 or blocks[regs] != b:
            points.append(f"{x(regs + 0.5 if regs < 255 else 255):.1f},{y(b):.1f}")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="resident blocks against registers for {escape(rec["kernel"])}">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>',
        f'<polyline class="steps" fill="none" stroke="{STEP_COLOUR}" stroke-width="2.5" '
        f'points="{" ".join(points)}"/>',
    ]
    for regs in (32, 64, 96, 128, 160, 192, 224, 255):
        parts.append(
            f'<text x="{x(regs):.1f}" y="{HEIGHT - BOTTOM + 16}" font-size="11" text-anchor="middle">'
            f"{regs}</text>"
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 4}" font-size="11" text-anchor="middle">'
        "registers per thread</text>"
    )
    for b in sorted({0, top_blocks, *blocks}):
        occ = b * warps_per_block / lim.max_warps_per_sm
        parts.append(f'<text x="{LEFT - 6}" y="{y(b) + 4:.1f}" font-size="11" text-anchor="end">{b}</text>')
        parts.append(f'<text x="{WIDTH - RIGHT + 6}" y="{y(b) + 4:.1f}" font-size="11">{occ:.0%}</text>')
    regs_now = rec["registers"]
    base = rec["baseline"]["registers"] if rec["baseline"] else None
    lines = []
    if isinstance(base, int) and base != regs_now:
        lines.append((x(base), BASELINE_COLOUR, f"baseline {base}", True))
    if regs_now is not None:
        lines.append((x(regs_now), KERNEL_COLOUR, f"{regs_now} regs", False))
    parts += [_marker(*line, place) for line, place in zip(lines, _label_places(lines), strict=True)]
    if regs_now is not None:
        grow = regs_now + (rec["cliff_grow"] or 0)
        for edge, label in (
            # Growing to 255 loses nothing: there is no register count beyond it to lose a block at.
            (grow if grow < 255 else None, "loses a block after"),
            (regs_now - (rec["cliff_shed"] or 0) if rec["cliff_shed"] else None, "gains a block at"),
        ):
            if edge is not None and 1 <= edge <= 255 and edge != regs_now:
                parts.append(
                    f'<circle class="cliff" cx="{x(edge):.1f}" cy="{y(blocks[edge - 1]):.1f}" r="5" '
                    f'fill="{CLIFF_COLOUR}"><title>{label} {edge} registers</title></circle>'
                )
    parts.append("</svg>")
    return "\n".join(parts)


# A label's width in the chart's 11 px font, generously: the placement below keeps labels apart by it.
CHAR_WIDTH = 7.0
LABEL_GAP = 4.0


def label_width(text: str) -> float:
    return len(text) * CHAR_WIDTH


def _label_places(lines: Sequence[tuple[float, str, str, bool]]) -> list[tuple[str, int]]:
    """Where each marker's label goes, as (text-anchor, row): the right-hand line's label to its right, the
    left-hand one's to its left, and on a second row where even then they would touch (a line near an edge
    turns its label inwards). Two labels never overlap, however close the lines are."""
    if len(lines) < 2:
        return [_inward(lines[0][0], lines[0][2])] if lines else []
    left, right = (0, 1) if lines[0][0] <= lines[1][0] else (1, 0)
    places: list[tuple[str, int]] = [("start", 0), ("start", 0)]
    places[left], places[right] = ("end", 0), ("start", 0)
    xl, tl = lines[left][0], lines[left][2]
    xr, tr = lines[right][0], lines[right][2]
    fits_left = xl - LABEL_GAP - label_width(tl) >= LEFT
    fits_right = xr + LABEL_GAP + label_width(tr) <= WIDTH - RIGHT
    if not (fits_left and fits_right):
        places[left], places[right] = _inward(xl, tl), (_inward(xr, tr)[0], 1)
    return places


def _inward(at: float, text: str) -> tuple[str, int]:
    """A lone label: to the right of its line, or to its left where the plot ends first."""
    return ("start", 0) if at + LABEL_GAP + label_width(text) <= WIDTH - RIGHT else ("end", 0)


def _marker(at: float, colour: str, label: str, dashed: bool, place: tuple[str, int]) -> str:
    anchor, row = place
    dash = ' stroke-dasharray="5,4"' if dashed else ""
    tx = at + LABEL_GAP if anchor == "start" else at - LABEL_GAP
    return (
        f'<line x1="{at:.1f}" y1="{TOP}" x2="{at:.1f}" y2="{HEIGHT - BOTTOM}" stroke="{colour}" '
        f'stroke-width="2.5"{dash}/><text class="marker" x="{tx:.1f}" y="{TOP + 12 + 14 * row}" '
        f'font-size="11" text-anchor="{anchor}" fill="{colour}">{escape(label)}</text>'
    )


HISTORY_WIDTH, HISTORY_HEIGHT = 420, 96
BAND_COLOURS = ("#2ca02c", "#98df8a", "#ffbb78", "#d62728")  # BANDS' order: high occupancy to low


def _scaled(values: Sequence[float], top: float, bottom: float) -> list[float]:
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return [bottom - (v - low) / span * (bottom - top) for v in values]


def history_svg(points: Sequence[Point], now: Point) -> str:
    """A kernel's registers (blue) and spill bytes (red) over the baseline's last commits, the run last
    ("now"): each on its own scale, its range written at the left; a point's tooltip names its commit."""
    shown = [*points, now]
    if len(shown) < 2:
        return ""
    left, right, top, bottom = 130, HISTORY_WIDTH - 40, 12, HISTORY_HEIGHT - 22
    step = (right - left) / (len(shown) - 1)
    xs = [left + n * step for n in range(len(shown))]
    parts = [
        f'<svg class="history" width="{HISTORY_WIDTH}" height="{HISTORY_HEIGHT}" '
        f'viewBox="0 0 {HISTORY_WIDTH} {HISTORY_HEIGHT}" role="img" aria-label="history">'
    ]
    series = (
        ("registers", STEP_COLOUR, [float(p.registers) for p in shown]),
        ("spill bytes", KERNEL_COLOUR, [float(p.spills) for p in shown]),
    )
    for n, (metric, colour, values) in enumerate(series):
        ys = _scaled(values, top + n * 3, bottom - n * 3)
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))
        parts.append(
            f'<polyline class="trend" points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for x, y, p, v in zip(xs, ys, shown, values, strict=True):
            label = "this run" if p.commit == "now" else f"{p.commit} {p.date}"
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{4 if p.commit == "now" else 2.5}" fill="{colour}">'
                f"<title>{escape(label)}: {metric} {int(v)}</title></circle>"
            )
        low, high = int(min(values)), int(max(values))
        parts.append(
            f'<text x="4" y="{top + 14 + n * 18}" fill="{colour}">{metric} {low}'
            + (f"..{high}" if high != low else "")
            + "</text>"
        )
    first = shown[0]
    parts.append(f'<text x="{left}" y="{HISTORY_HEIGHT - 6}">{escape(first.date)}</text>')
    parts.append(f'<text x="{right - 20}" y="{HISTORY_HEIGHT - 6}">now</text>')
    parts.append("</svg>")
    return "".join(parts)


def suite_history_svg(points: Sequence[SuitePoint]) -> str:
    """The suite over the baseline's last commits: kernels per occupancy band (stacked bars, high occupancy
    at the bottom) and the total spill bytes (the red line, its own scale)."""
    if len(points) < 2:
        return ""
    width, height, left, top, bottom = 640, 176, 60, 26, 146
    most = max(sum(p.bands) for p in points) or 1
    bar = (width - left - 20) / len(points)
    parts = [
        f'<svg class="suite-history" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="the suite over time">'
    ]
    for n, p in enumerate(points):
        x = left + n * bar
        y = float(bottom)
        for band, count in enumerate(p.bands):
            h = count / most * (bottom - top)
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar - 1, 1):.1f}" height="{h:.1f}" '
                f'fill="{BAND_COLOURS[band]}"><title>{escape(p.commit)} {escape(p.date)}: {count} kernel(s) '
                f"at {escape(BANDS[band][1])} occupancy</title></rect>"
            )
    ys = _scaled([float(p.spills) for p in points], top, bottom)
    line = " ".join(f"{left + (n + 0.5) * bar:.1f},{y:.1f}" for n, y in enumerate(ys))
    parts.append(f'<polyline points="{line}" fill="none" stroke="{KERNEL_COLOUR}" stroke-width="2"/>')
    spills = [p.spills for p in points]
    parts.append(
        f'<text x="4" y="{top + 10}" fill="{KERNEL_COLOUR}">spill bytes {min(spills)}..{max(spills)}</text>'
    )
    parts.append(f'<text x="{left}" y="{height - 12}">{escape(points[0].date)}</text>')
    parts.append(f'<text x="{width - 90}" y="{height - 12}">{escape(points[-1].date)}</text>')
    legend = " ".join(
        f'<tspan fill="{c}">&#9632; {escape(label)}</tspan>'
        for c, (_, label) in zip(BAND_COLOURS, BANDS, strict=True)
    )
    parts.append(f'<text x="{left}" y="{height - 1}">{legend}</text>')
    parts.append("</svg>")
    return "".join(parts)
