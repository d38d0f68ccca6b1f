"""What differs between two measurements of the same kernels: two toolkits in one run (--regbudget-toolkit),
and, on the same code, two runs (`regbudget compare`, issue 15).

Owns the identity of a kernel across measurements (source, readable name, variant, arch: a baseline key
without its release), the metrics compared, and the text, Markdown and JSON of the differences. Reads
records (report.ReportRecord) only: no pytest, no compiler.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from msgspec import Struct

from ..core.metrics import COMPARED, Metric
from ..core.ptxas import message_key
from ..core.text import one_line
from .markdown import md_arch, md_code, md_release
from .record import ReportRecord, value

Ident = tuple[str, str, str, str]  # (source, kernel, variant, arch)

# What a reviewer of a toolkit upgrade wants to see change, in this order: the metrics table's compared ones,
# by their JSON field, then whether the launch fits and ptxas's messages.
METRICS = (*(m.field for m in COMPARED), "launchable", "messages")
# GPU time, compared where both measurements have one: a change within either's measured noise is none.
_SHORT = {
    **{m.field: m.label for m in COMPARED},
    "stack_frame": "stack",  # as these rows have always said it; a budget's sentence says "stack frame"
    "launchable": "launchable",
    "messages": "ptxas messages",
    "time_ms": "time (ms)",
}


class Change(Struct, frozen=True):
    metric: str
    old: object
    new: object

    def text(self) -> str:
        delta = self.delta()
        shown = f" ({delta})" if delta else ""
        if self.metric == "occupancy" and isinstance(self.old, float) and isinstance(self.new, float):
            return f"occupancy {self.old:.0%} -> {self.new:.0%}{shown}"
        return f"{_SHORT[self.metric]} {_value(self.old)} -> {_value(self.new)}{shown}"

    def delta(self) -> str:
        """The change and its share of the old value ("+8, +12.5%"); occupancy in points ("-12.5 pts"); ""
        where either side is not a number."""
        old, new = self.old, self.new
        if isinstance(old, bool) or isinstance(new, bool):
            return ""
        if not isinstance(old, (int, float)) or not isinstance(new, (int, float)):
            return ""
        if self.metric == "occupancy":
            return f"{(new - old) * 100:+.1f} pts"
        change = new - old
        amount = f"{change:+g}" if isinstance(change, int) else f"{change:+.4g}"
        return f"{amount}, {change / old:+.1%}" if old else amount


class KernelDiff(Struct, frozen=True):
    ident: Ident
    old: str  # what measured it first ("12.9", a file name)
    new: str
    changes: tuple[Change, ...]

    def label(self) -> str:
        source, kernel, variant, arch = self.ident
        shown = "" if variant == "-" else f" ({variant})"
        return one_line(f"{source} {kernel}{shown} [{arch}]")

    def to_json(self) -> dict[str, object]:
        source, kernel, variant, arch = self.ident
        return {
            "source": source,
            "kernel": kernel,
            "variant": variant,
            "arch": arch,
            "old": self.old,
            "new": self.new,
            "changes": [{"metric": c.metric, "old": c.old, "new": c.new} for c in self.changes],
        }


class Comparison(Struct, frozen=True):
    """`old` against `new` (two releases, two files): every kernel both measured, and those that differ."""

    old: str
    new: str
    compared: int
    diffs: tuple[KernelDiff, ...]
    releases: bool = True  # old and new are toolkit releases ("12.9"), not report files

    def title(self, quote: Callable[[str], str]) -> str:
        """`Toolkits compared: CUDA 12.9 -> 13.5`, each side shown by `quote`."""
        old, new = quote(self.old), quote(self.new)
        what = f"CUDA {old} -> {new}" if self.releases else f"{old} -> {new}"
        return f"{'Toolkits compared' if self.releases else 'Compared'}: {what}"

    def lines(self) -> list[str]:
        head = f"{self.old} -> {self.new}: {len(self.diffs)} of {self.compared} kernel build(s) differ"
        return [head, *(f"  {d.label()}: {', '.join(c.text() for c in d.changes)}" for d in self.diffs)]

    def to_json(self) -> dict[str, object]:
        return {
            "old": self.old,
            "new": self.new,
            "compared": self.compared,
            "differences": [d.to_json() for d in self.diffs],
        }


def _value(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def ident(rec: ReportRecord) -> Ident | None:
    """A record's kernel across measurements: its baseline key without the release."""
    key = rec["key"]
    return None if not key else (key[0], key[1], key[2], key[3])


def metrics(rec: ReportRecord) -> dict[str, object]:
    launchable = None if not rec["launch"] else bool(rec["active_blocks"])
    return {
        **{m.field: _rounded(m, value(rec, m)) for m in COMPARED},
        "launchable": launchable,
        # ptxas's warnings by code (C7508) or text: a release that brings a new one shows it.
        "messages": ", ".join(sorted({message_key(m) for m in rec.get("ptxas_messages") or []})) or None,
    }


def _rounded(metric: Metric, value: object) -> object:
    # A fraction (occupancy) to 4 places: a difference below that is float noise, not a change.
    return round(value, 4) if metric.unit == "fraction" and isinstance(value, float) else value


def diff(ident_: Ident, old: ReportRecord, new: ReportRecord, old_name: str, new_name: str) -> KernelDiff:
    a, b = metrics(old), metrics(new)
    changes = [Change(m, a[m], b[m]) for m in METRICS if a[m] != b[m]]
    t_old, t_new = old.get("time_ms"), new.get("time_ms")
    if isinstance(t_old, (int, float)) and isinstance(t_new, (int, float)) and t_old > 0:
        noise = max(old.get("noise") or 0.0, new.get("noise") or 0.0)
        if abs(t_new / t_old - 1) > noise:
            changes.append(Change("time_ms", round(t_old, 6), round(t_new, 6)))
    return KernelDiff(ident_, old_name, new_name, tuple(changes))


def between(
    old: Sequence[ReportRecord], new: Sequence[ReportRecord], old_name: str, new_name: str
) -> Comparison:
    """Two runs' reports (two commits, two machines, two toolkits): every kernel both measured, paired by
    source, name, variant and arch, and within that by release where both have the release (a report of
    several toolkits); a kernel measured with one release on each side is paired across them."""
    a_map, b_map = _by_ident(old), _by_ident(new)
    diffs = []
    compared = 0
    for found in sorted(a_map.keys() & b_map.keys()):
        a_rel, b_rel = a_map[found], b_map[found]
        common = sorted(a_rel.keys() & b_rel.keys(), key=_release_order)
        pairs = [(a_rel[r], b_rel[r]) for r in common]
        if not pairs and len(a_rel) == 1 and len(b_rel) == 1:
            pairs = [(next(iter(a_rel.values())), next(iter(b_rel.values())))]
        for a, b in pairs:
            compared += 1
            d = diff(found, a, b, old_name, new_name)
            if d.changes:
                diffs.append(d)
    return Comparison(old_name, new_name, compared, tuple(diffs), releases=False)


def _by_ident(records: Sequence[ReportRecord]) -> dict[Ident, dict[str, ReportRecord]]:
    out: dict[Ident, dict[str, ReportRecord]] = {}
    for rec in records:
        found = ident(rec)
        if found is not None and rec["registers"] is not None:
            out.setdefault(found, {})[rec["release"]] = rec
    return out


def across_releases(records: Sequence[ReportRecord]) -> list[Comparison]:
    """Each pair of consecutive toolkit releases of one run, over the kernels measured with both (a run
    with --regbudget-toolkit=cu12,cu13: "12.9 -> 13.5"). Empty when the run built with one release."""
    by_release: dict[str, dict[Ident, ReportRecord]] = {}
    for rec in records:
        found = ident(rec)
        if found is not None and rec["registers"] is not None and rec["release"]:
            by_release.setdefault(rec["release"], {})[found] = rec
    releases = sorted(by_release, key=_release_order)
    out = []
    for old, new in itertools.pairwise(releases):
        both = sorted(by_release[old].keys() & by_release[new].keys())
        if not both:
            continue
        diffs = [diff(i, by_release[old][i], by_release[new][i], old, new) for i in both]
        out.append(Comparison(old, new, len(both), tuple(d for d in diffs if d.changes)))
    return out


def _release_order(release: str) -> tuple[int, ...] | tuple[int, str]:
    parts = release.split(".")
    if all(p.isdigit() for p in parts):
        return tuple(int(p) for p in parts)
    return (1 << 30, release)


def summary_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """The terminal's section: one head line per pair of releases, a line per kernel that differs."""
    if not comparisons:
        return []
    lines = ["toolkits compared (registers, spills, stack, occupancy, launchable):"]
    for c in comparisons:
        lines += [f"  {line}" for line in c.lines()]
    return lines


# GitHub's limit on a comment, less a margin: what `regbudget compare --markdown` prints is pasted as one.
COMMENT_LIMIT = 65_000


def markdown(comparisons: Sequence[Comparison], limit: int = COMMENT_LIMIT) -> str:
    """A table per pair of releases, for the step summary, --regbudget-markdown and `regbudget compare
    --markdown`, in at most `limit` characters: past that, whole kernels are left out, and counted."""
    out: list[str] = []
    room = limit
    for c in comparisons:
        # Two releases, or two report files: a file's name is outside text (markdown.md_code).
        quote = md_release if c.releases else md_code
        head = f"#### {c.title(quote)}, {len(c.diffs)} of {c.compared} kernel builds differ\n"
        if len(head) + 1 > room:
            break
        out.append(head)
        room -= len(head) + 1
        if not c.diffs:
            continue
        rows = [
            f"| kernel | arch | metric | {quote(c.old)} | {quote(c.new)} | change |",
            "|---|---|---|---|---|---|",
        ]
        shown = 0
        for d in c.diffs:
            _source, kernel, variant, arch = d.ident
            name = md_code(kernel if variant == "-" else f"{kernel} ({variant})")
            group = [
                f"| {name} | {md_arch(arch)} | {_SHORT[ch.metric]} | {_md_cell(ch.metric, ch.old)} | "
                f"{_md_cell(ch.metric, ch.new)} | {ch.delta()} |"
                for ch in d.changes
            ]
            cost = sum(len(row) + 1 for row in group)
            # Room for this kernel and for the line that would count the rest.
            if sum(len(row) + 1 for row in rows) + cost + 120 > room:
                break
            rows += group
            shown += 1
        text = "\n".join(rows) + "\n"
        if shown < len(c.diffs):
            text += f"\n... and {len(c.diffs) - shown} more kernel builds differ: see the JSON reports\n"
        out.append(text)
        room -= len(text) + 1
    return "\n".join(out) + ("\n" if out else "")


def _md_cell(metric: str, value: object) -> str:
    """A number as it is; text (ptxas's messages, which may quote names) in a code span."""
    if metric == "occupancy" and isinstance(value, float):
        return f"{value:.1%}"
    return md_code(value) if isinstance(value, str) else _value(value)
