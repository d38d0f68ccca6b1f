"""The HTML report's charts, as inline SVG: the suite's picture (each kernel's change in registers and spill
bytes against its baseline entry, coloured by the metric it failed on, and the kernels by distance to their
occupancy cliff), a kernel's occupancy staircase (resident blocks against registers per thread, recomputed
with the calculator the budgets use), its registers and spills over the baseline's history, and the suite's
over that history. html.py places them on the page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from ..core.arch import get_arch
from ..core.metrics import BY_NAME, METRICS, SPILLS
from ..core.occupancy import occupancy
from ..core.trend import BANDS, Point, SuitePoint
from .record import DeltaRecord, ReportRecord, spills

# Chart geometry and colours (the screenshot test looks for STEP_COLOUR and KERNEL_COLOUR pixels).
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 260, 48, 56, 16, 36
STEP_COLOUR = "#1f77b4"
KERNEL_COLOUR = "#d62728"
BASELINE_COLOUR = "#7f7f7f"
CLIFF_COLOUR = "#2ca02c"
# The suite picture: unchanged kernels, changed or new ones, warned ones; a failure in its metric's colour.
CALM_COLOUR = "#8da0b3"
CHANGED_COLOUR = "#ff7f0e"
WARNED_COLOUR = "#b8860b"
SPILL_COLOUR = "#9467bd"
OCCUPANCY_COLOUR = "#8c564b"
OTHER_COLOUR = "#e377c2"
BETTER_FILL = "#e3f2e3"
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
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
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


# What a failing kernel's mark is coloured by: the first of these kinds among the metrics it failed on.
# Spills come first: a kernel that traded registers for spills failed on its spills, whatever its registers
# did.
FAILURE_KINDS = {
    "spills": (SPILL_COLOUR, "spills or stack"),
    "registers": (KERNEL_COLOUR, "registers"),
    "occupancy": (OCCUPANCY_COLOUR, "occupancy or launch"),
    "other": (OTHER_COLOUR, "another check"),
}
# The spill metrics (stores, then loads), read from the metrics table.
_SPILL_METRICS = tuple(m.name for m in METRICS if m.group == SPILLS)
# Local memory, however it is counted, is the spills' kind; occupancy's is the launch's.
_KIND_OF = {
    "registers": "registers",
    **dict.fromkeys(_SPILL_METRICS, "spills"),
    "stack": "spills",
    "local_instructions": "spills",
    "occupancy": "occupancy",
}
# A failure's metric, by how its sentence starts (core/checks.py, core/ratchet.py): the metric's name or
# label, or the budget's own word where that is not the metric's.
_PREFIXES = (
    *((prefix, m.name) for m in METRICS for prefix in (f"{m.name} ", f"{m.label} ")),
    ("launch=", "occupancy"),
    ("spill instructions in loops", "spill_stores"),
    ("local_share", "local_instructions"),
)


def failed_on(rec: ReportRecord) -> list[str]:
    """The kinds of FAILURE_KINDS that a record's failures and worse-than-baseline metrics fall in, first
    kind first; ["other"] for a failure named by no metric (a cluster, the time)."""
    metrics = {d["metric"] for d in _worse(rec)}
    kinds = {_KIND_OF.get(m, "other") for m in metrics}
    for sentence in [*rec["violations"], *([rec["error"]] if rec["error"] else [])]:
        found = next((name for prefix, name in _PREFIXES if sentence.startswith(prefix)), None)
        kinds.add("other" if found is None else _KIND_OF.get(found, "other"))
    return [kind for kind in FAILURE_KINDS if kind in kinds] or ["other"]


def _kind(rec: ReportRecord) -> str:
    """A record's place in the suite picture: the kind it failed on, else warned, changed (or new), calm."""
    if rec["outcome"] in ("failed", "error"):
        return failed_on(rec)[0]
    if rec["outcome"] == "warned":
        return "warned"
    return "changed" if rec["deltas"] or rec["baseline_status"] in ("new", "new-release") else "calm"


# Calm marks first, failures last: no calmer mark hides a failure.
_DRAW_ORDER = ["calm", "changed", "warned", *reversed(FAILURE_KINDS)]
_KIND_STYLE = {
    **{kind: (colour, 6.0, f"failed on {words}") for kind, (colour, words) in FAILURE_KINDS.items()},
    "warned": (WARNED_COLOUR, 4.5, "warned"),
    "changed": (CHANGED_COLOUR, 4.0, "passed, changed or new"),
    "calm": (CALM_COLOUR, 3.0, "unchanged"),
}


def _moves(rec: ReportRecord) -> tuple[float, float]:
    """(change in registers, change in spill bytes) against the baseline entry. Where stores or loads grew,
    the spill change is their growth alone: a kernel whose spills grew never sits below the line of none."""
    delta = {d["metric"]: d["delta"] for d in rec["deltas"]}
    moved = [delta.get(name, 0.0) for name in _SPILL_METRICS]
    grew = sum(max(v, 0.0) for v in moved)
    return delta.get("registers", 0.0), grew if grew > 0 else sum(moved)


def _symlog(v: float) -> float:
    """A scale on which +1 register and +1,000 spill bytes are both seen: log10(1 + |v|), signed."""
    return math.copysign(math.log10(1 + abs(v)), v)


def _decades(values: Sequence[float]) -> int:
    """The power of ten an axis reaches, at least 10: the scale's ends."""
    top = max([10.0, *(abs(v) for v in values)])
    return math.ceil(math.log10(top) - 1e-9)


def _ticks(decades: int) -> list[float]:
    """0 and each power of ten to the axis's end, both ways; not 1 on a long axis, where it would sit on 0."""
    powers = [10.0**d for d in range(0 if decades < 3 else 1, decades + 1)]
    return [0.0, *powers, *(-p for p in powers)]


def _signed(v: float) -> str:
    return f"{v:+g}" if v else "0"


def _worse(rec: ReportRecord) -> list[DeltaRecord]:
    return [d for d in rec["deltas"] if d["verdict"] == "worse"]


def _label(metric: str) -> str:
    return BY_NAME[metric].label if metric in BY_NAME else metric


def _mark_title(rec: ReportRecord, kind: str) -> str:
    base = rec["baseline"] or {}
    regs = f"registers {base.get('registers', '?')} -> {rec['registers']}"
    now, was = spills(rec), spills(base)
    spilled = "" if now is None or was is None else f", spill bytes {sum(was)} -> {sum(now)}"
    verdict = {"failed": "FAILED", "error": "ERROR", "warned": "warned"}.get(rec["outcome"], "passed")
    worse = [f"{_label(d['metric'])} {d['baseline']:g} -> {d['now']:g}" for d in _worse(rec)]
    why = f"; {_KIND_STYLE[kind][2]}" if kind in FAILURE_KINDS else ""
    why += f" ({', '.join(worse)})" if worse else ""
    return f"{rec['kernel']} [{rec['arch']}] {verdict}: {regs}{spilled}{why}"


def _change_panel(placed: Sequence[tuple[ReportRecord, str, str]]) -> list[str]:
    """The left panel: each kernel that has a baseline entry at (change in registers, change in spill
    bytes), on signed log scales. The lower left quadrant, fewer of both or the same, is the improvements';
    unchanged kernels sit at the centre, one mark for all."""
    left, right, top, bottom = 70, 480, 30, 262
    cx, cy = (left + right) / 2, (top + bottom) / 2
    moves = [_moves(rec) for rec, _, _ in placed]
    x_dec, y_dec = _decades([m[0] for m in moves]), _decades([m[1] for m in moves])

    # A fifth of the half-width beyond the last tick: no mark on the frame or under a corner's words.
    x_end, y_end = _symlog(10.0**x_dec) * 1.2, _symlog(10.0**y_dec) * 1.2

    def px(v: float) -> float:
        return cx + _symlog(v) / x_end * (right - cx)

    def py(v: float) -> float:
        return cy - _symlog(v) / y_end * (cy - top)

    out = [
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">Change against the baseline: registers '
        "and spill bytes</text>",
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="#fafafa" '
        'stroke="#ccc"/>',
        f'<rect class="better" x="{left}" y="{cy:.1f}" width="{cx - left:.1f}" height="{bottom - cy:.1f}" '
        f'fill="{BETTER_FILL}"><title>better: no more registers and no more spill bytes</title></rect>',
        f'<line class="zero" x1="{cx:.1f}" y1="{top}" x2="{cx:.1f}" y2="{bottom}" stroke="#999"/>',
        f'<line class="zero" x1="{left}" y1="{cy:.1f}" x2="{right}" y2="{cy:.1f}" stroke="#999"/>',
        f'<text x="{right - 4}" y="{top + 12}" font-size="10" text-anchor="end" fill="#666">worse</text>',
        f'<text x="{left + 4}" y="{top + 12}" font-size="10" fill="#666">fewer registers, more spills</text>',
        f'<text x="{right - 4}" y="{bottom - 5}" font-size="10" text-anchor="end" fill="#666">'
        "more registers, fewer spills</text>",
        f'<text x="{left + 4}" y="{bottom - 5}" font-size="10" fill="#2a7d2a">better</text>',
    ]
    for v in _ticks(x_dec):
        out.append(
            f'<text x="{px(v):.1f}" y="{bottom + 13}" font-size="10" text-anchor="middle">{_signed(v)}</text>'
        )
    for v in _ticks(y_dec):
        out.append(
            f'<text x="{left - 4}" y="{py(v) + 3:.1f}" font-size="10" text-anchor="end">{_signed(v)}</text>'
        )
    out.append(
        f'<text x="{cx:.0f}" y="{bottom + 30}" font-size="11" text-anchor="middle">registers (right: more '
        "than the baseline)</text>"
    )
    out.append(
        f'<text x="14" y="{cy:.0f}" font-size="11" text-anchor="middle" transform="rotate(-90 14 {cy:.0f})">'
        "spill bytes (up: more)</text>"
    )
    calm = [rec for rec, _, kind in placed if kind == "calm"]
    if calm:
        out.append(
            f'<circle class="mark" data-kind="calm" cx="{cx:.1f}" cy="{cy:.1f}" r="{_KIND_STYLE["calm"][1]}" '
            f'fill="{CALM_COLOUR}"><title>{len(calm)} kernel check(s) unchanged</title></circle>'
        )
    for (rec, anchor, kind), (dx, dy) in sorted(
        zip(placed, moves, strict=True), key=lambda p: _DRAW_ORDER.index(p[0][2])
    ):
        if kind == "calm":
            continue
        colour, size, _ = _KIND_STYLE[kind]
        edge = ' stroke="#fff" stroke-width="1.5"' if kind in FAILURE_KINDS else ""
        out.append(
            f'<a href="#{anchor}"><circle class="mark" data-kind="{kind}" cx="{px(dx):.1f}" '
            f'cy="{py(dy):.1f}" r="{size}" fill="{colour}"{edge}><title>{escape(_mark_title(rec, kind))}'
            "</title></circle></a>"
        )
    return out


# Registers a kernel can add before it loses a resident block: the picture's bins, nearest the cliff first.
CLIFF_BINS = ((0, 0, "0"), (1, 2, "1-2"), (3, 4, "3-4"), (5, 8, "5-8"), (9, 16, "9-16"), (17, 32, "17-32"))


def _cliff_bin(rec: ReportRecord) -> int | None:
    grow = rec["cliff_grow"]
    if grow is None:
        return None
    return next((i for i, (lo, hi, _) in enumerate(CLIFF_BINS) if lo <= grow <= hi), len(CLIFF_BINS))


def _cliff_panel(kinds: Sequence[tuple[ReportRecord, str]], x0: float, top: int, bottom: int) -> list[str]:
    """The right panel: kernels per distance to their occupancy cliff, stacked by kind, failures lowest."""
    bins = [*(label for _, _, label in CLIFF_BINS), "33+"]
    counts = [dict.fromkeys(_DRAW_ORDER[::-1], 0) for _ in bins]
    for rec, kind in kinds:
        b = _cliff_bin(rec)
        if b is not None:
            counts[b][kind] += 1
    most = max([1, *(sum(c.values()) for c in counts)])
    bar_w = (SUITE_W - x0 - 10) / len(bins)
    plot = bottom - top
    out = [
        f'<text x="{x0}" y="16" font-size="13" font-weight="bold">Kernels by distance to the occupancy cliff'
        "</text>"
    ]
    for i, (label, stack) in enumerate(zip(bins, counts, strict=True)):
        bx, base_y = x0 + i * bar_w + 4, float(bottom)
        for kind, n in stack.items():
            h = n / most * (plot - 16)  # room for the count above the tallest bar
            colour, _, words = _KIND_STYLE[kind]
            if n:
                out.append(
                    f'<rect x="{bx:.1f}" y="{base_y - h:.1f}" width="{bar_w - 8:.1f}" height="{h:.1f}" '
                    f'fill="{colour}"><title>{n} kernel check(s): {words}</title></rect>'
                )
            base_y -= h
        middle = bx + (bar_w - 8) / 2
        out.append(
            f'<text x="{middle:.1f}" y="{base_y - 4:.1f}" font-size="10" text-anchor="middle">'
            f"{sum(stack.values())}</text>"
        )
        out.append(
            f'<text x="{middle:.1f}" y="{bottom + 13}" font-size="10" text-anchor="middle">{label}</text>'
        )
    out.append(
        f'<text x="{x0 + (SUITE_W - x0) / 2:.0f}" y="{bottom + 30}" font-size="11" text-anchor="middle">'
        "registers it can add before losing a block</text>"
    )
    return out


def _legend(kinds: Sequence[tuple[ReportRecord, str]], left: int, y: float) -> tuple[list[str], float]:
    """The kinds present, with their counts, in rows as wide as the picture, and the count of kernels that
    the left panel cannot place (`left`); and where the rows end."""
    count = {kind: sum(1 for _, k in kinds if k == kind) for kind in _DRAW_ORDER[::-1]}
    items = [(_KIND_STYLE[k][0], f"{_KIND_STYLE[k][2]}: {n}") for k, n in count.items() if n]
    if left:
        items.append(("", f"{left} without a baseline entry or numbers: not on the left"))
    out, x = [], 10.0
    for colour, text in items:
        width = 16 + len(text) * 6.2 + 14  # the 11 px font's letters, generously
        if x + width > SUITE_W and x > 10:
            x, y = 10.0, y + 16
        if colour:
            out.append(f'<circle cx="{x + 5:.1f}" cy="{y - 4:.1f}" r="5" fill="{colour}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{y:.1f}" font-size="11">{escape(text)}</text>')
        x += width
    return out, y


def suite_svg(records: Sequence[ReportRecord], ids: Sequence[str]) -> str:
    """The whole suite in one picture: each kernel's change in registers and spill bytes against its baseline
    entry (left), and how many kernels sit how near their occupancy cliff (right). A failing kernel's mark
    is in the colour of the metric it failed on, drawn last, and a link to its section."""
    measured = [(r, a) for r, a in zip(records, ids, strict=True) if r["registers"] is not None]
    kinds = [(r, _kind(r)) for r, _ in measured]
    placed = [
        (r, a, kind)
        for (r, a), (_, kind) in zip(measured, kinds, strict=True)
        if r["baseline_status"] in ("compared", "toolkit-mismatch")
    ]
    top, bottom = 30, 262
    legend, end = _legend(kinds, len(records) - len(placed), 318)
    height = int(end) + 10
    return "\n".join(
        [
            f'<svg class="suite" xmlns="http://www.w3.org/2000/svg" width="{SUITE_W}" height="{height}" '
            f'viewBox="0 0 {SUITE_W} {height}" role="img" aria-label="each kernel\'s change in registers and '
            'spill bytes against the baseline, and its distance to the occupancy cliff">',
            *_change_panel(placed),
            *_cliff_panel(kinds, 500 + PANEL_GAP, top, bottom),
            *legend,
            "</svg>",
        ]
    )
