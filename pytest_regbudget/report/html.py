"""A self-contained HTML report: an index of every kernel, then the kernels that need a look in detail.

Owns the page, the suite's picture and its one inline script (the index sorts by a click on a column
header), and nothing external, so a CI artifact opens anywhere, offline. The index puts failures first;
failing and changed kernels get a section with budgets, diagnosis and the occupancy staircase, the others a
one-paragraph section (all get the staircase with `--regbudget-html-all`). The kernels' charts are
charts.py's.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from html import escape
from typing import cast

from ..core.baseline import NO_VARIANT
from ..core.trend import Point, Trails, trail_key
from .charts import BASELINE_COLOUR as BASELINE_COLOUR
from .charts import CALM_COLOUR as CALM_COLOUR
from .charts import KERNEL_COLOUR as KERNEL_COLOUR
from .charts import SPILL_COLOUR as SPILL_COLOUR
from .charts import STEP_COLOUR as STEP_COLOUR
from .charts import history_svg, staircase_svg, suite_history_svg, suite_svg
from .counts import counts_line
from .record import ReportRecord, spills
from .terminal import baseline_cell, regs_cell

# The page fits a 1,400 px window: the index's long cells (class w: variant, delta, file, test) wrap anywhere
# but keep 6em, names wrap first after a separator (breakable), numbers never wrap, and the charts shrink.
_CSS = f"""
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; overflow-wrap: break-word; }}
h1 {{ font-size: 1.4rem; }} h2 {{ font-size: 1.2rem; margin-top: 2rem; }} h3 {{ font-size: 1.05rem; }}
table {{ border-collapse: collapse; margin: .5rem 0; }}
td, th {{ border: 1px solid #ccc; padding: .2rem .6rem; text-align: right; }}
th {{ background: #f3f3f3; }} td.l, th.l {{ text-align: left; }}
.index td, .index th {{ text-align: left; }} .index td.n {{ white-space: nowrap; }}
.index td.n, .index th.n {{ text-align: right; }} svg {{ max-width: 100%; height: auto; }}
.index td.w, section td {{ overflow-wrap: anywhere; }} .index td.w {{ min-width: 6em; }}
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
        _row("spill stores / loads (bytes)", _spills(rec), _spills(base)),
        _row("stack frame (bytes)", rec["stack_frame"], base.get("stack")),
        _row("static shared memory (bytes)", rec["shared_mem"], base.get("smem")),
        _row("occupancy", occ, _percent(_baseline_occupancy(rec, base))),
        _row("occupancy cliff", cliff),
        _row(
            "spill instructions in loops / all",
            _pair(rec["spill_instructions_in_loops"], rec["spill_instructions"]),
        ),
        _row("local-memory instructions", rec["local_instructions"], base.get("local_instructions")),
    ]
    if rec["time_ms"] is not None:
        rows.append(
            _row(f"time on {rec['gpu_device']} (ms)", f"{rec['time_ms']:.4g}", rec["baseline_time_ms"])
        )
    problems = [*rec["violations"], *([rec["error"]] if rec["error"] else [])]
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


def _history(rec: ReportRecord, trails: Trails | None) -> str:
    if trails is None or not rec.get("key") or rec["registers"] is None:
        return ""
    points = trails.kernels.get(trail_key(cast(Sequence[str], rec["key"])), ())
    chart = history_svg(points, Point("now", "", rec["registers"], sum(spills(rec) or ())))
    if not chart:
        return ""
    return f"<p>Over the baseline's last {len(points)} commit(s) that held it, then this run:</p>{chart}"


def _compact_section(rec: ReportRecord, anchor: str) -> str:
    """A passing, unchanged kernel: the index row's target, its figures in a sentence, no chart."""
    figures = [
        f"{_text(rec['registers'])} registers",
        f"spills {_text(_spills(rec))} B",
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


def _spills(rec: Mapping[str, object]) -> str | None:
    """`16 / 24` bytes of spill stores / loads of a record or a baseline entry; None where unknown."""
    pair = spills(rec)
    return None if pair is None else _pair(*pair)


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


# Where a long name may wrap: after one or two separators that follow a letter (`py::`, not the `/` that
# starts a path), and inside a run of more than _RUN characters with none.
_SEP, _NOT = r"[/:\[\](),=\-]", r"[^/:\[\](),=\-]"
_BREAK_AFTER = re.compile(f"(?:(?<={_NOT}{_SEP})|(?<={_NOT}{_SEP}{_SEP}))(?={_NOT})")
_RUN = 24


def breakable(text: str) -> str:
    """`text` escaped, with a <wbr> where a name may wrap: a table of long test ids and define sets then
    fits the window, and each name still reads whole (copying it gives the same characters)."""
    pieces = []
    for part in _BREAK_AFTER.split(text):
        pieces += [part[i : i + _RUN] for i in range(0, len(part), _RUN)] or [part]
    return "<wbr>".join(escape(p) for p in pieces)


def _index_row(rec: ReportRecord, anchor: str) -> str:
    outcome = rec["outcome"]
    verdict = escape(_VERDICT.get(outcome, outcome))
    occ = '<td class="n">-</td>'
    if rec["occupancy"] is not None and rec["launch"]:
        occ = f'<td class="n" data-v="{rec["occupancy"]}">{rec["occupancy"]:.0%} @{rec["launch"][0]}</td>'
    pair = spills(rec)
    spilled = '<td class="n">-</td>'
    if pair is not None:
        spilled = f'<td class="n" data-v="{sum(pair)}">{pair[0]}/{pair[1]}</td>'
    # The delta column sorts by the change in registers, the figure a budget is about; a kernel that was not
    # compared has no key and sorts last.
    regs = next((d["delta"] for d in rec["deltas"] if d["metric"] == "registers"), None)
    compared = rec["baseline_status"] in ("compared", "toolkit-mismatch") and rec["registers"] is not None
    delta_key = f' data-v="{regs:g}"' if regs is not None else ' data-v="0"' if compared else ""
    return (
        f'<tr><td><a href="#{anchor}">{breakable(rec["kernel"])}</a></td>'
        f'<td class="w">{breakable(_variant(rec))}</td>'
        f'<td>{escape(rec["arch"])}</td><td class="{escape(outcome)}" data-v="{rank(rec)}">{verdict}</td>'
        f'<td class="n">{_text(rec["registers"])}</td>{spilled}<td class="n">{_text(rec["stack_frame"])}</td>'
        f'{occ}<td class="w"{delta_key}>{escape(baseline_cell(rec))}</td>'
        f'<td class="w">{breakable(_file(rec))}</td><td class="w">{breakable(rec["nodeid"])}</td></tr>'
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
    ordered = sorted(
        records, key=lambda r: (rank(r), r["nodeid"], r["kernel"], r["arch"], tuple(r["key"] or ()))
    )
    ids = anchors(ordered)
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
        # The headline: the run's counts in the words every face uses (report/counts.py).
        f"<h1>pytest-regbudget</h1>\n<p><strong>{escape(counts_line(ordered))}</strong></p>",
        "<p>The index lists failures first; click a column header to sort by it, a kernel to go to its "
        "section.</p>",
        "<h2>The suite</h2>",
        "<p>Left: each kernel's change against its baseline entry, in registers (across) and in spill "
        "bytes (up), on scales where one register and a thousand bytes both show; the green corner holds "
        "the kernels with no more of either, the centre those that did not move. A failing kernel is in "
        "the colour of the metric it failed on. Right: how many kernels sit how near the register count at "
        "which they lose a resident block. A mark links to its kernel.</p>",
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
