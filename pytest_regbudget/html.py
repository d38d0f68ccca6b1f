"""A self-contained HTML report: per kernel, the occupancy staircase, the budgets, and the diagnosis.

Owns the page and its inline SVG charts (no scripts, no external files), so a CI artifact opens anywhere.
The staircase is recomputed with the same calculator the budgets use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from .arch import get_arch
from .occupancy import occupancy
from .report import KernelRecord

# Chart geometry and colours (the screenshot test looks for STEP_COLOUR and KERNEL_COLOUR pixels).
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 260, 48, 56, 16, 36
STEP_COLOUR = "#1f77b4"
KERNEL_COLOUR = "#d62728"
BASELINE_COLOUR = "#7f7f7f"
CLIFF_COLOUR = "#2ca02c"

_CSS = f"""
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
h1 {{ font-size: 1.4rem; }} h2 {{ font-size: 1.1rem; margin-top: 2rem; }}
table {{ border-collapse: collapse; margin: .5rem 0; }}
td, th {{ border: 1px solid #ccc; padding: .2rem .6rem; text-align: right; }}
th {{ background: #f3f3f3; }} td.l, th.l {{ text-align: left; }}
.failed, .error {{ color: {KERNEL_COLOUR}; font-weight: bold; }} .warned {{ color: #b8860b; }}
.passed {{ color: #2a7d2a; }} .diag li {{ margin: .3rem 0; }} code {{ background: #f5f5f5; }}
"""


def _staircase(rec: KernelRecord, threads: int) -> list[int]:
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


def staircase_svg(rec: KernelRecord) -> str:
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

    points = []
    for regs, b in enumerate(blocks, start=1):
        points.append(f"{x(regs - 0.5 if regs > 1 else 1):.1f},{y(b):.1f}")
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
    if isinstance(base, int) and base != regs_now:
        parts.append(_marker(x(base), BASELINE_COLOUR, f"baseline {base}", dashed=True))
    if regs_now is not None:
        parts.append(_marker(x(regs_now), KERNEL_COLOUR, f"{regs_now} regs"))
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


def _marker(at: float, colour: str, label: str, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="5,4"' if dashed else ""
    return (
        f'<line x1="{at:.1f}" y1="{TOP}" x2="{at:.1f}" y2="{HEIGHT - BOTTOM}" stroke="{colour}" '
        f'stroke-width="2.5"{dash}/><text x="{at + 4:.1f}" y="{TOP + 12}" font-size="11" '
        f'fill="{colour}">{escape(label)}</text>'
    )


def _row(name: str, value: object, baseline: object = None) -> str:
    shown = "-" if value is None else escape(str(value))
    base = "-" if baseline is None else escape(str(baseline))
    return f'<tr><th class="l">{escape(name)}</th><td>{shown}</td><td>{base}</td></tr>'


def _kernel_section(rec: KernelRecord) -> str:
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
        _row("registers", rec["registers"], base.get("registers")),
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
    parts = [
        f"<section><h2>{escape(rec['kernel'])} [{escape(rec['arch'])}] "
        f'<span class="{escape(rec["outcome"])}">{escape(rec["outcome"])}</span></h2>',
        f"<p><code>{escape(rec['nodeid'])}</code> &middot; <code>{escape(rec['source'])}</code></p>",
    ]
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
    if rec["diagnosis"]:
        parts.append(
            '<ul class="diag">' + "".join(f"<li>{escape(d)}</li>" for d in rec["diagnosis"]) + "</ul>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def _baseline_occupancy(rec: KernelRecord, base: Mapping[str, object]) -> object:
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


def render(records: Sequence[KernelRecord]) -> str:
    ordered = sorted(records, key=lambda r: (r["nodeid"], r["kernel"], r["arch"]))
    failed = sum(1 for r in ordered if r["outcome"] in ("failed", "error"))
    body = "\n".join(_kernel_section(r) for r in ordered)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>pytest-regbudget report</title><style>{_CSS}</style></head><body>\n"
        f"<h1>pytest-regbudget: {len(ordered)} kernel checks, {failed} failed</h1>\n"
        "<p>Each chart: resident blocks per SM (left) and occupancy (right) against registers per thread, "
        "at the kernel's launch size. Red: the kernel now; grey dashed: its baseline; green: the next "
        "steps.</p>\n"
        f"{body}\n</body></html>\n"
    )
