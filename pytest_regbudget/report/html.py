"""A self-contained HTML report: an index of every kernel, then the kernels that need a look in detail.

Owns the page, its inline SVG charts and its one inline script (the index sorts by a click on a column
header), and nothing external, so a CI artifact opens anywhere, offline. The index puts failures first;
failing and changed kernels get a section with budgets, diagnosis and the occupancy staircase, the others a
one-paragraph section (all get the staircase with `--regbudget-html-all`). The staircase is recomputed with
the same calculator the budgets use.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from html import escape
from typing import cast

from ..core.arch import get_arch
from ..core.baseline import NO_VARIANT
from ..core.occupancy import occupancy
from ..core.trend import BANDS, Point, SuitePoint, Trails, trail_key
from .record import ReportRecord
from .terminal import baseline_cell, regs_cell

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

_CSS = f"""
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
h1 {{ font-size: 1.4rem; }} h2 {{ font-size: 1.2rem; margin-top: 2rem; }} h3 {{ font-size: 1.05rem; }}
table {{ border-collapse: collapse; margin: .5rem 0; }}
td, th {{ border: 1px solid #ccc; padding: .2rem .6rem; text-align: right; }}
th {{ background: #f3f3f3; }} td.l, th.l {{ text-align: left; }}
.index td, .index th {{ text-align: left; }} .index td:not(:last-child) {{ white-space: nowrap; }}
.index td.n, .index th.n {{ text-align: right; }}
.index button {{
  font: inherit; font-weight: bold; border: 0; background: none; padding: 0; cursor: pointer;
}}
.index th[aria-sort=ascending] button::after {{ content: " \\25B2"; }}
.index th[aria-sort=descending] button::after {{ content: " \\25BC"; }}
.failed, .error {{ color: {KERNEL_COLOUR}; font-weight: bold; }} .warned {{ color: #b8860b; }}
.passed {{ color: #2a7d2a; }} .diag li {{ margin: .3rem 0; }} code {{ background: #f5f5f5; }}
section.compact h3 {{ margin-bottom: .2rem; }} section.compact p {{ margin-top: 0; }}
"""

# Sorts the index by the clicked column, again for the other direction. A cell's data-v, when it has one,
# is its sort key (a fraction for "25% @256", a rank for the verdict); a numeric column puts cells with no
# number ("-") last either way, so a sort never buries the figures under compile errors.
_SCRIPT = """
for (const th of document.querySelectorAll("table.index th")) {
  th.querySelector("button").addEventListener("click", () => {
    const table = th.closest("table"), col = th.cellIndex, num = th.hasAttribute("data-num");
    const up = th.getAttribute("aria-sort") !== "ascending";
    for (const h of th.parentNode.cells) h.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    const key = (tr) => {
      const c = tr.cells[col], v = c.dataset.v ?? c.textContent;
      return num ? parseFloat(v) : v;
    };
    const rows = Array.from(table.tBodies[0].rows, (tr) => [key(tr), tr]);
    rows.sort(([a], [b]) => {
      if (num && Number.isNaN(a) !== Number.isNaN(b)) return Number.isNaN(a) ? 1 : -1;
      const d = num ? a - b || 0 : a.localeCompare(b, undefined, { numeric: true });
      return up ? d : -d;
    });
    table.tBodies[0].append(...rows.map(([, tr]) => tr));
  });
}
"""


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


def _row(name: str, value: object, baseline: object = None) -> str:
    shown = "-" if value is None else escape(str(value))
    base = "-" if baseline is None else escape(str(baseline))
    return f'<tr><th class="l">{escape(name)}</th><td>{shown}</td><td>{base}</td></tr>'


def _kernel_section(rec: ReportRecord, anchor: str, trails: Trails | None = None) -> str:
    base = rec["baseline"] or {}
    occ = (
        None
        if rec["occupancy"] is None
        else f"{rec['occupancy']:.1%} at {rec['launch'][0] if rec['launch'] else '?'}"
    )
    cliff = None
    if rec["cliff_grow"] is not None:
        shed = (
            "no smaller count gains one"
            if rec["cliff_shed"] is None
            else f"-{rec['cliff_shed']} to gain one ({rec['cliff_blocks_if_shed']} blocks)"
        )
        grow = rec["cliff_grow"] or 0
        grown = (rec["registers"] or 0) + grow
        keeps = f"+{grow} before losing one" if grown < 255 else "can grow to 255 without losing one"
        cliff = f"{rec['cliff_blocks']} blocks; {keeps}; {shed}"
    rows = [
        _row(
            "registers (setmaxnreg roles)" if rec.get("setmaxnreg") else "registers",
            regs_cell(rec),
            base.get("registers"),
        ),
        _row(
            "ptxas messages",
            "; ".join(rec.get("ptxas_messages") or []) or None,
            ", ".join(str(m) for m in cast(list[object], base.get("ptxas_messages") or [])) or None,
        ),
        _row(
            "spill stores / loads (bytes)",
            _pair(rec["spill_stores"], rec["spill_loads"]),
            _pair(base.get("spill_stores"), base.get("spill_loads")),
        ),
        _row("stack frame (bytes)", rec["stack_frame"], base.get("stack")),
        _row("static shared memory (bytes)", rec["shared_mem"], base.get("smem")),
        _row("occupancy", occ, _percent(_baseline_occupancy(rec, base))),
        _row("occupancy cliff", cliff),
        _row(
            "spill instructions in loops / all",
            _pair(rec["spill_instructions_in_loops"], rec["spill_instructions"]),
        ),
        _row("local-memory instructions", rec["local_instructions"]),
    ]
    if rec["time_ms"] is not None:
        rows.append(
            _row(f"time on {rec['gpu_device']} (ms)", f"{rec['time_ms']:.4g}", rec["baseline_time_ms"])
        )
    problems = rec["violations"] + ([rec["error"]] if rec["error"] else [])
    parts = [f'<section id="{anchor}">{_heading(rec)}', f"<p>{_where(rec)}</p>"]
    if problems:
        parts.append('<ul class="problems">' + "".join(f"<li>{escape(p)}</li>" for p in problems) + "</ul>")
    if rec["registers"] is not None:
        parts.append(
            '<table><tr><th class="l">metric</th><th>now</th><th>baseline</th></tr>'
            + "".join(rows)
            + "</table>"
        )
    if rec["launch"] and rec["registers"] is not None:
        parts.append(staircase_svg(rec))
    parts.append(_history(rec, trails))
    parts.append(_diagnosis(rec))
    parts.append("</section>")
    return "\n".join(p for p in parts if p)


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


def _history(rec: ReportRecord, trails: Trails | None) -> str:
    if trails is None or not rec.get("key") or rec["registers"] is None:
        return ""
    points = trails.kernels.get(trail_key(cast(Sequence[str], rec["key"])), ())
    spills = (rec["spill_stores"] or 0) + (rec["spill_loads"] or 0)
    chart = history_svg(points, Point("now", "", rec["registers"], spills))
    if not chart:
        return ""
    return f"<p>Over the baseline's last {len(points)} commit(s) that held it, then this run:</p>{chart}"


def _compact_section(rec: ReportRecord, anchor: str) -> str:
    """A passing, unchanged kernel: the index row's target, its figures in a sentence, no chart."""
    figures = [
        f"{_text(rec['registers'])} registers",
        f"spills {_text(_pair(rec['spill_stores'], rec['spill_loads']))} B",
        f"stack {_text(rec['stack_frame'])} B",
        f"smem {_text(rec['shared_mem'])} B",
    ]
    if rec["occupancy"] is not None and rec["launch"]:
        figures.append(f"occupancy {rec['occupancy']:.1%} at {rec['launch'][0]}")
    if rec["cliff_grow"] is not None:
        shed = "-" if rec["cliff_shed"] is None else f"-{rec['cliff_shed']}"
        figures.append(f"cliff +{rec['cliff_grow']}/{shed}")
    if rec["time_ms"] is not None:
        base = "" if rec["baseline_time_ms"] is None else f" (baseline {rec['baseline_time_ms']:.4g})"
        figures.append(f"time on {rec['gpu_device']} {rec['time_ms']:.4g} ms{base}")
    return (
        f'<section id="{anchor}" class="compact">{_heading(rec)}\n'
        f"<p>{_where(rec)}<br>{escape(', '.join(figures))}</p>{_diagnosis(rec)}</section>"
    )


def _heading(rec: ReportRecord) -> str:
    name, arch, outcome = escape(rec["kernel"]), escape(rec["arch"]), escape(rec["outcome"])
    return f'<h3>{name} [{arch}] <span class="{outcome}">{outcome}</span></h3>'


def _where(rec: ReportRecord) -> str:
    return f"<code>{escape(rec['nodeid'])}</code> &middot; <code>{escape(rec['source'])}</code>"


def _diagnosis(rec: ReportRecord) -> str:
    if not rec["diagnosis"]:
        return ""
    return '<ul class="diag">' + "".join(f"<li>{escape(d)}</li>" for d in rec["diagnosis"]) + "</ul>"


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def _baseline_occupancy(rec: ReportRecord, base: Mapping[str, object]) -> object:
    """The baseline's occupancy at this record's launch: entries keep one figure per launch."""
    per_launch = base.get("occupancy")
    if not isinstance(per_launch, Mapping) or not rec["launch"]:
        return None
    dynamic = f", {rec['dynamic_smem']} B dynamic smem" if rec["dynamic_smem"] else ""
    return per_launch.get(f"{rec['launch'][0]} threads{dynamic}")


def _percent(value: object) -> str | None:
    return f"{value:.1%}" if isinstance(value, float) else None


def _pair(a: object, b: object) -> str | None:
    return None if a is None else f"{a} / {b}"


# Index order: what fails first, then what warns, then what changed against the baseline, then the rest.
FAILED, WARNED, CHANGED, UNCHANGED = range(4)


def rank(rec: ReportRecord) -> int:
    if rec["outcome"] in ("failed", "error"):
        return FAILED
    if rec["outcome"] == "warned":
        return WARNED
    if rec["deltas"] or rec["baseline_status"] == "new":
        return CHANGED
    return UNCHANGED


_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


def anchor(rec: ReportRecord) -> str:
    """`k-gemm-32-32-sm_90-75e968e363f5`: readable, URL-safe, and the same in every run for the same test,
    kernel and arch (the hash tells apart the tests and kernels that the shortened name does not)."""
    slug = _UNSAFE.sub("-", rec["kernel"]).strip("-")[:40].rstrip("-") or "kernel"
    arch = _UNSAFE.sub("-", rec["arch"]).strip("-")
    # JSON keeps the three fields apart whatever they contain: ("a", "b|c") and ("a|b", "c") differ.
    digest = hashlib.sha256(json.dumps([rec["nodeid"], rec["kernel"], rec["arch"]]).encode()).hexdigest()
    return f"k-{slug}-{arch}-{digest[:12]}"


def anchors(records: Sequence[ReportRecord]) -> list[str]:
    """Each record's anchor, unique on the page: one test can measure a kernel twice on one arch (two
    variants), and a second one gets `-2`, in the page's order."""
    used: set[str] = set()
    out = []
    for rec in records:
        base = name = anchor(rec)
        n = 1
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        out.append(name)
    return out


_VERDICT = {"passed": "ok", "failed": "FAILED", "error": "ERROR", "warned": "warned"}


def _variant(rec: ReportRecord) -> str:
    """The define set that picks this variant (`NACC=8`), as its baseline entry names it; "-" for none."""
    return rec["key"][2] if rec["key"] and len(rec["key"]) == 5 else NO_VARIANT


def _file(rec: ReportRecord) -> str:
    """The source as the baseline keys it (relative to the rootdir), else as measured."""
    return rec["key"][0] if rec["key"] else rec["source"]


def _index_row(rec: ReportRecord, anchor: str) -> str:
    outcome = rec["outcome"]
    verdict = escape(_VERDICT.get(outcome, outcome))
    occ = '<td class="n">-</td>'
    if rec["occupancy"] is not None and rec["launch"]:
        occ = f'<td class="n" data-v="{rec["occupancy"]}">{rec["occupancy"]:.0%} @{rec["launch"][0]}</td>'
    spills = '<td class="n">-</td>'
    if rec["spill_stores"] is not None:
        total = rec["spill_stores"] + (rec["spill_loads"] or 0)
        spills = f'<td class="n" data-v="{total}">{rec["spill_stores"]}/{rec["spill_loads"]}</td>'
    # The delta column sorts by the change in registers, the figure a budget is about; a kernel that was not
    # compared has no key and sorts last.
    regs = next((d["delta"] for d in rec["deltas"] if d["metric"] == "registers"), None)
    compared = rec["baseline_status"] in ("compared", "toolkit-mismatch") and rec["registers"] is not None
    delta_key = f' data-v="{regs:g}"' if regs is not None else ' data-v="0"' if compared else ""
    return (
        f'<tr><td><a href="#{anchor}">{escape(rec["kernel"])}</a></td><td>{escape(_variant(rec))}</td>'
        f'<td>{escape(rec["arch"])}</td><td class="{escape(outcome)}" data-v="{rank(rec)}">{verdict}</td>'
        f'<td class="n">{_text(rec["registers"])}</td>{spills}<td class="n">{_text(rec["stack_frame"])}</td>'
        f"{occ}<td{delta_key}>{escape(baseline_cell(rec))}</td>"
        f"<td>{escape(_file(rec))}</td><td>{escape(rec['nodeid'])}</td></tr>"
    )


# The index's columns, and whether each sorts as numbers.
_COLUMNS = {
    "kernel": False,
    "variant": False,
    "arch": False,
    "verdict": True,
    "registers": True,
    "spills st/ld": True,
    "stack": True,
    "occupancy": True,
    "delta": True,
    "file": False,
    "test": False,
}
_RIGHT = {"registers", "spills st/ld", "stack", "occupancy"}


def _index(ordered: Sequence[ReportRecord], ids: Sequence[str]) -> str:
    right = ' class="n"'
    header = "".join(
        f"<th{' data-num' if num else ''}{right if name in _RIGHT else ''}>"
        f'<button type="button">{name}</button></th>'
        for name, num in _COLUMNS.items()
    )
    rows = "\n".join(_index_row(rec, a) for rec, a in zip(ordered, ids, strict=True))
    return f'<table class="index"><thead><tr>{header}</tr></thead><tbody>\n{rows}\n</tbody></table>'


# Registers a kernel can add before it loses a resident block: the picture's bins, nearest the cliff first.
CLIFF_BINS = ((0, 0, "0"), (1, 2, "1-2"), (3, 4, "3-4"), (5, 8, "5-8"), (9, 16, "9-16"), (17, 32, "17-32"))


def _cliff_bin(rec: ReportRecord) -> int | None:
    grow = rec["cliff_grow"]
    if grow is None:
        return None
    return next((i for i, (lo, hi, _) in enumerate(CLIFF_BINS) if lo <= grow <= hi), len(CLIFF_BINS))


def suite_svg(ordered: Sequence[ReportRecord], ids: Sequence[str]) -> str:
    """The whole suite in one picture: each kernel's registers now against its baseline entry (a point on
    the diagonal did not move; above it, more registers), and how many kernels sit how near their occupancy
    cliff. Failures in red and drawn last, each a link to its section."""
    measured = [(r, a) for r, a in zip(ordered, ids, strict=True) if r["registers"] is not None]
    left_w = 500
    top, bottom, left = 28, 44, 44
    plot = SUITE_H - top - bottom

    def base_of(rec: ReportRecord) -> int:
        base = rec["baseline"]["registers"] if rec["baseline"] else None
        return base if isinstance(base, int) else cast(int, rec["registers"])

    high = max([32, *(max(cast(int, r["registers"]), base_of(r)) for r, _ in measured)])
    high = min(256, -(-high // 32) * 32)
    side = min(left_w - left - 10, plot)

    def px(v: float) -> float:
        return left + v / high * side

    def py(v: float) -> float:
        return top + plot - v / high * plot

    out = [
        f'<svg class="suite" xmlns="http://www.w3.org/2000/svg" width="{SUITE_W}" height="{SUITE_H}" '
        'role="img" aria-label="registers against the baseline, and distance to the occupancy cliff">',
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">Registers now against the baseline'
        "</text>",
        f'<rect x="{left}" y="{top}" width="{side:.0f}" height="{plot}" fill="#fafafa" stroke="#ccc"/>',
        f'<line x1="{px(0):.1f}" y1="{py(0):.1f}" x2="{px(high):.1f}" y2="{py(high):.1f}" stroke="#bbb" '
        'stroke-dasharray="4,4"/>',
    ]
    for tick in range(0, high + 1, 32 if high <= 128 else 64):
        out.append(
            f'<text x="{px(tick):.1f}" y="{top + plot + 14}" font-size="10" text-anchor="middle">'
            f"{tick}</text>"
        )
        out.append(
            f'<text x="{left - 4}" y="{py(tick) + 3:.1f}" font-size="10" text-anchor="end">{tick}</text>'
        )
    out.append(
        f'<text x="{left + side / 2:.0f}" y="{SUITE_H - 14}" font-size="11" text-anchor="middle">'
        "baseline registers (above the line: more now)</text>"
    )
    # Calm points first, failures last: a red point is never hidden under a grey one.
    for rec, a in sorted(measured, key=lambda ra: -rank(ra[0])):
        r = rank(rec)
        colour, size = {
            FAILED: (KERNEL_COLOUR, 5.5),
            WARNED: (CHANGED_COLOUR, 4),
            CHANGED: (CHANGED_COLOUR, 4),
        }.get(r, (CALM_COLOUR, 2.5))
        title = escape(f"{rec['kernel']} [{rec['arch']}]: {base_of(rec)} -> {rec['registers']} registers")
        out.append(
            f'<a href="#{a}"><circle cx="{px(base_of(rec)):.1f}" cy="{py(cast(int, rec["registers"])):.1f}" '
            f'r="{size}" fill="{colour}"><title>{title}</title></circle></a>'
        )
    # Right: kernels per distance to the cliff, stacked failures / changed / the rest.
    x0 = left_w + PANEL_GAP
    bins = [*(label for _, _, label in CLIFF_BINS), "33+"]
    counts = [[0, 0, 0] for _ in bins]
    for rec, _ in measured:
        b = _cliff_bin(rec)
        if b is not None:
            r = rank(rec)
            counts[b][0 if r == FAILED else 1 if r in (WARNED, CHANGED) else 2] += 1
    most = max([1, *(sum(c) for c in counts)])
    bar_w = (SUITE_W - x0 - 10) / len(bins)
    out.append(
        f'<text x="{x0}" y="16" font-size="13" font-weight="bold">'
        "Kernels by distance to the occupancy cliff</text>"
    )
    for i, (label, (failed, changed, calm)) in enumerate(zip(bins, counts, strict=True)):
        bx, base_y = x0 + i * bar_w + 4, float(top + plot)
        for n, colour in ((failed, KERNEL_COLOUR), (changed, CHANGED_COLOUR), (calm, CALM_COLOUR)):
            h = n / most * (plot - 16)  # room for the count above the tallest bar
            if n:
                out.append(
                    f'<rect x="{bx:.1f}" y="{base_y - h:.1f}" width="{bar_w - 8:.1f}" height="{h:.1f}" '
                    f'fill="{colour}"><title>{n} kernel(s)</title></rect>'
                )
            base_y -= h
        total = failed + changed + calm
        out.append(
            f'<text x="{bx + (bar_w - 8) / 2:.1f}" y="{base_y - 4:.1f}" font-size="10" text-anchor="middle">'
            f"{total}</text>"
        )
        out.append(
            f'<text x="{bx + (bar_w - 8) / 2:.1f}" y="{top + plot + 14}" font-size="10" text-anchor="middle">'
            f"{label}</text>"
        )
    out.append(
        f'<text x="{x0 + (SUITE_W - x0) / 2:.0f}" y="{SUITE_H - 14}" font-size="11" text-anchor="middle">'
        "registers it can add before losing a block</text>"
    )
    out.append("</svg>")
    return "\n".join(out)


def _suite_history(trails: Trails | None) -> list[str]:
    if trails is None:
        return []
    chart = suite_history_svg(trails.suite)
    note = f"<p>{escape(trails.note)}</p>" if trails.note else ""
    if not chart:
        return [note] if note else []
    return [
        f"<p>Over the baseline's last {len(trails.suite)} commits: kernels per occupancy band (bars) and the "
        "total spill bytes (red line). A failing or changed kernel's section shows its own.</p>",
        chart,
        note,
    ]


def render(
    records: Sequence[ReportRecord], *, all_kernels: bool = False, trails: Trails | None = None
) -> str:
    """The page. Failing, warned and changed kernels get a section with the staircase; with `all_kernels`
    (--regbudget-html-all) every kernel does, and the others get a one-paragraph section."""
    # The baseline key tells apart two variants of a kernel in one test, so their order, and so their
    # anchors, do not depend on the order the records came in.
    ordered = sorted(records, key=lambda r: (rank(r), r["nodeid"], r["kernel"], r["arch"], r["key"] or []))
    ids = anchors(ordered)
    counts = [sum(1 for r in ordered if rank(r) == n) for n in (FAILED, WARNED, CHANGED, UNCHANGED)]
    detailed = [
        _kernel_section(rec, a, trails)
        for rec, a in zip(ordered, ids, strict=True)
        if all_kernels or rank(rec) != UNCHANGED
    ]
    compact = [
        _compact_section(rec, a)
        for rec, a in zip(ordered, ids, strict=True)
        if not all_kernels and rank(rec) == UNCHANGED
    ]
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>pytest-regbudget report</title><style>{_CSS}</style></head><body>",
        f"<h1>pytest-regbudget: {len(ordered)} kernel checks, {counts[FAILED]} failed</h1>",
        f"<p>{counts[FAILED]} failed or did not build, {counts[WARNED]} warned, {counts[CHANGED]} changed "
        f"against the baseline or new, {counts[UNCHANGED]} passed unchanged. The index lists failures first; "
        "click a column header to sort by it, a kernel to go to its section.</p>",
        "<h2>The suite</h2>",
        "<p>Left: each kernel's registers now (up) against its baseline entry (across); on the dashed line "
        "it did not move. Right: how many kernels sit how near the register count at which they lose a "
        f'resident block. <span style="color:{KERNEL_COLOUR}">Red</span>: failing; '
        f'<span style="color:{CHANGED_COLOUR}">orange</span>: warned, changed or new; grey: unchanged. A '
        "point links to its kernel.</p>",
        suite_svg(ordered, ids),
        *_suite_history(trails),
        "<h2>Index</h2>",
        _index(ordered, ids),
    ]
    if detailed:
        which = "All kernels" if all_kernels else "Failing, warned and changed kernels"
        parts += [
            f"<h2>{which}</h2>",
            "<p>Each chart: resident blocks per SM (left) and occupancy (right) against registers per "
            "thread, at the kernel's launch size. Red: the kernel now; grey dashed: its baseline; green: the "
            "next steps.</p>",
            *detailed,
        ]
    if compact:
        parts += [
            "<h2>Passed unchanged</h2>",
            "<p>No chart for these (<code>--regbudget-html-all</code> draws one for every kernel).</p>",
            *compact,
        ]
    parts.append(f"<script>{_SCRIPT}</script>\n</body></html>\n")
    return "\n".join(parts)
