"""The Markdown report: a pull-request comment and a GitHub job summary. The run's counts (report/counts.py),
then one row per failing, warned, changed or new kernel check, with its file and line and its changes; the
whole kept under GitHub's comment limit.

Owns the one quoting of outside text in Markdown (`md_code`), which compare.py's tables use too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from msgspec import Struct, field

from ..core.arch import is_arch_name
from ..core.baseline import NO_VARIANT
from ..core.baseline_schema import release_label
from ..core.kernel_report import delta_text
from ..core.metrics import BY_NAME
from ..core.ratchet import WORSE_THAN_BASELINE
from ..core.text import one_line
from .counts import change_of, counts_line, verdict_of
from .links import GithubLinks
from .record import DeltaRecord, ReportRecord, sorted_records, spills
from .terminal import cell, enforced_line, spills_cell


def md_code(text: str) -> str:
    """Text from outside the plugin (a name, a test id, a define value, a path, a compiler's line, a report
    file's field) in Markdown: one code span that stays in its table cell. Every Markdown writer quotes
    outside text with it.

    GitHub reads nothing inside a code span: no emphasis, link, image, autolink, raw HTML, entity, @mention
    or issue reference. What could end the span or the cell is dealt with: non-printable characters (a
    newline, a carriage return, an escape) are shown escaped (`one_line`), a pipe is escaped (GFM splits
    cells before it reads code spans), the fence is one backtick longer than any run of backticks inside,
    and a space pads a text that starts or ends with a backtick or a space, since CommonMark strips one
    space from each end of a span that has both. An empty text is `-`.
    """
    text = one_line(text).replace("|", "\\|")
    if not text:
        return "-"
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    # Only spaces: CommonMark keeps them as they are, so a pad would show.
    pad = " " if text.strip(" ") and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# A release shown as it is: the major.minor that a toolkit's ptxas version gives (core/facts.py release_of).
# No run of digits is long enough to read as a commit SHA, which GitHub links.
_RELEASE = re.compile(r"\d{1,4}(\.\d{1,4}){0,3}")


def md_release(release: str) -> str:
    """`12.9` as it is; any other release (`prebuilt`, or what a report file says) in a code span."""
    return release if _RELEASE.fullmatch(release) else md_code(release)


def md_arch(arch: str) -> str:
    """`sm_90` as it is (a report's arch is checked against the arch table when read); anything else that is
    not spelt as an arch, in a code span."""
    return arch if is_arch_name(arch) else md_code(arch)


# GitHub refuses a pull-request comment over 65,536 characters. The report stops short of that at a whole
# row, leaving room for the toolkit comparison that writers.py appends after it.
MARKDOWN_LIMIT = 60_000
# Past this many rows, the improvements fold into <details>, and new kernels into a table of their numbers.
FOLD_AFTER = 10
NEW_ROWS = FOLD_AFTER

# A row's verdict cell, by the kind of check it holds, in the table's order: failures (and builds that
# failed) first, in test order, then warnings, changes and new kernels.
_VERDICTS = {
    "failed": "**FAILED**",
    "error": "**ERROR**",
    "warned": "warning",
    "worse": "worse",
    "improved": "improved",
    "new": "new",
}
_FAILING = ("failed", "error")
_MD_TABLE = ("| verdict | kernel | arch | file | changes |", "|---|---|---|---|---|")
_MD_FOLD_TABLE = ("| kernel | arch | regs | spill st/ld | occupancy |", "|---|---|---|---|---|")
# A change that is no violation, where the words say more than its numbers: within its tolerance, or worse
# where the entry is not enforced (another ptxas recorded it).
_MD_CHANGES = {"better": "", "tolerated": " (tolerated)", "worse": " (not enforced)"}


def broken_builds_markdown(builds: Sequence[Mapping[str, object]], limit: int = 20) -> str:
    """The manifest builds that fail (update/broken.py): a row for each new failure and each build that
    builds again, and a count of those that fail as the baseline records. "" when there are none."""
    rows = [b for b in builds if b.get("status") in ("failed", "fixed")]
    recorded = sum(1 for b in builds if b.get("status") == "recorded")
    if not rows and not recorded:
        return ""
    lines = ["", "#### Builds"]
    if rows:
        lines += ["", "| verdict | file | arch | error |", "|---|---|---|---|"]
        for b in rows[:limit]:
            verdict = "**FAILED**" if b["status"] == "failed" else "builds again"
            variant = "" if b.get("variant") in (None, NO_VARIANT) else f" ({b['variant']})"
            log = str(b.get("error", "")).strip().splitlines() if b["status"] == "failed" else []
            # The compiler's first error, not its heading ("nvcc 13.5.37 could not compile ...:").
            error = md_code(next((line for line in log[1:] if "error" in line), log[0] if log else ""))
            name = md_code(str(b["source"]) + variant)
            lines.append(f"| {verdict} | {name} | {md_arch(str(b['arch']))} | {error} |")
        if len(rows) > limit:
            lines.append(f"\n{len(rows) - limit} more: see the run's JSON report (`broken_builds`).")
    if recorded:
        lines.append(f"\n{recorded} build(s) fail as the baseline records (not checked until they build).")
    return "\n".join(lines) + "\n"


def _md_text(text: str) -> str:
    """Our own wording and numbers in a table cell: one line, no column break. Outside text (names, logs,
    violations that quote them, releases and metrics a report file names) goes in `md_code`, where no
    Markdown, HTML or @mention is read."""
    return one_line(text).replace("|", "\\|")


def _md_delta(d: DeltaRecord) -> str:
    """`spill st 112 -> 584 (+472)`, `occ 25% -> 50% (+25pt)`: a change against the baseline, by the metric's
    column name, as our own words; a metric that a report file names and the table does not, quoted."""
    metric = BY_NAME.get(d["metric"])
    if metric is None:
        return md_code(delta_text(d["metric"], d["baseline"], d["now"]))
    was, now = d["baseline"], d["now"]
    if metric.unit == "fraction":
        # The points between the percentages shown, so that the three numbers agree.
        before, after = round(was * 100), round(now * 100)
        return _md_text(f"{metric.column} {before}% -> {after}% ({after - before:+d}pt)")
    return _md_text(f"{metric.column} {was:g} -> {now:g} ({now - was:+g})")


def _md_name(rec: ReportRecord) -> str:
    """`poly_eval (NACC=8)`: the kernel and its variant, as its baseline entry names it, in a code span."""
    variant = rec["key"][2] if rec["key"] and len(rec["key"]) == 5 else NO_VARIANT
    return md_code(rec["kernel"] if variant == NO_VARIANT else f"{rec['kernel']} ({variant})")


def _row_kind(rec: ReportRecord) -> str | None:
    """The row a check gets (a key of _VERDICTS), in the words of report/counts.py; None for a check that
    passed and did not change (unchanged, or with no baseline to compare with)."""
    verdict = verdict_of(rec)
    if verdict != "passed":
        return {"errors": "error"}.get(verdict, verdict)
    change = change_of(rec)
    return change if change in ("worse", "improved", "new") else None


def _md_facts(rec: ReportRecord) -> str:
    """`102 registers, no spills, occupancy 25% at 256 threads`: what a new kernel brings."""
    parts = [f"{rec['registers']} registers"]
    pair = spills(rec)
    if pair is None:
        parts.append("spills unknown")
    elif pair == (0, 0):
        parts.append("no spills")
    else:
        parts.append(f"{pair[0]} B spill stores, {pair[1]} B spill loads")
    if rec["occupancy"] is not None and rec["launch"]:
        parts.append(f"occupancy {rec['occupancy']:.0%} at {rec['launch'][0]} threads")
    return ", ".join(parts)


def _md_changes(rec: ReportRecord) -> tuple[str, list[str]]:
    """A check's changes cell: what fails first, in bold (a regression the baseline caught as its change, a
    budget's sentence quoted), then every other change against the baseline; and the fixes its failures
    name, said once under the table."""
    if rec["registers"] is None:
        first = (rec["error"] or "").strip().splitlines()[:1]
        return f"did not compile: {md_code(' '.join(first))}", []
    worse = {
        delta_text(d["metric"], d["baseline"], d["now"]): d for d in rec["deltas"] if d["verdict"] == "worse"
    }
    caught: set[str] = set()
    failing, fixes = [], []
    for v in rec["violations"]:
        text = next((t for t in worse if v.startswith(t + WORSE_THAN_BASELINE)), None)
        if text is None:
            failing.append(md_code(v))  # a budget's sentence, which may quote names
            continue
        caught.add(text)
        fix = v.partition("; ")[2]
        failing.append(_md_delta(worse[text]))
        fixes += [fix] if fix else []
    others = []
    for d in rec["deltas"]:
        if delta_text(d["metric"], d["baseline"], d["now"]) in caught:
            continue
        said = _MD_CHANGES.get(d["verdict"])
        others.append(_md_delta(d) + (f" ({md_code(d['verdict'])})" if said is None else said))
    if rec["baseline_status"] in ("new", "new-release"):
        what = _md_facts(rec)
        if rec["baseline_status"] == "new-release":
            entries = md_code(", ".join(rec["other_releases"]))
            what += f"; no entry for {release_label(md_release(rec['release']))} yet (entries: {entries})"
        others.append(what)
    notes = []
    if rec["baseline_status"] == "toolkit-mismatch":
        old = rec["baseline"].get("ptxas", "?") if rec["baseline"] else "?"
        notes.append(f"entry recorded with ptxas {md_code(str(old))}")
    if rec["options_changed"]:
        notes.append("built with other options")
    note = f" ({'; '.join(notes)})" if notes else ""
    bold = [f"**{', '.join(failing)}**"] if failing else []
    return ", ".join([*bold, *others]) + note, fixes


def _source_path(source: str, rootdir: str | Path | None) -> tuple[str, bool]:
    """`kernels/median.cu` and True for a file inside the rootdir, by the path relative to it; a file
    elsewhere as it is, and False."""
    if rootdir is None or not os.path.isabs(source):
        inside = not os.path.isabs(source) and ".." not in Path(source).parts
        return source.replace(os.sep, "/"), inside
    try:
        rel = os.path.relpath(source, rootdir)
    except ValueError:  # another drive
        return source, False
    if rel.split(os.sep)[0] == "..":
        return source, False
    return rel.replace(os.sep, "/"), True


def _md_file(
    rec: ReportRecord, rootdir: str | Path | None, links: GithubLinks | None
) -> tuple[str, str | None]:
    """`kernels/median.cu:22` in a code span; on GitHub Actions, and the URL of that line at the head
    commit."""
    path, inside = _source_path(rec["source"], rootdir)
    line = rec["line"] if isinstance(rec["line"], int) else None
    url = links.file(path, line) if links is not None and inside else None
    return md_code(path + (f":{line}" if line is not None else "")), url


def _md_fold_row(rec: ReportRecord, arch: str) -> str:
    occ = "-"
    if rec["occupancy"] is not None and rec["launch"]:
        occ = f"{rec['occupancy']:.0%} at {rec['launch'][0]}"  # "@256" would mention a user "256"
    return f"| {_md_name(rec)} | {arch} | {cell(rec['registers'])} | {spills_cell(rec)} | {occ} |"


def _md_fit(groups: Sequence[Sequence[str]], room: int) -> int:
    """How many of `groups` (rows kept together), taken in order, fit in `room` characters."""
    n = 0
    for group in groups:
        room -= sum(len(row) + 1 for row in group)
        if room < 0:
            break
        n += 1
    return n


def _md_table(
    header: Sequence[str], groups: Sequence[Sequence[str]], room: int, more: Callable[[int], str]
) -> tuple[list[str], int]:
    """The table's lines in at most `room` characters, a newline each, and how many groups they leave out:
    every group, or those that fit and then, after a blank line that ends the table, `more(left)`."""
    frame = sum(len(line) + 1 for line in header)
    if _md_fit(groups, room - frame) == len(groups):
        return [*header, *(row for group in groups for row in group)], 0
    # The count line of all groups is the longest: fewer left out never makes it longer.
    reserve = len(more(len(groups))) + 2
    n = _md_fit(groups, room - frame - reserve)
    if n:
        rows = [row for group in groups[:n] for row in group]
        return [*header, *rows, "", more(len(groups) - n)], len(groups) - n
    return [more(len(groups))] if reserve - 1 <= room else [], len(groups)


def _arch_order(arch: str) -> tuple[int, str]:
    """sm_80 before sm_90 before sm_100."""
    number = re.search(r"[0-9]+", arch)
    return (int(number[0]) if number else 0, arch)


class _Row(Struct):
    """One row of the table: the checks of one kernel variant whose cells but the arch are the same (its
    archs, and two tests that check it alike, share the row)."""

    kind: str
    cells: tuple[str, str, str]  # the kernel, its file, its changes
    url: str | None  # where its file links to, on GitHub Actions
    archs: list[str] = field(default_factory=list)
    checks: int = 0

    def text(self, linked: bool = True) -> str:
        name, where, changes = self.cells
        if linked and self.url:
            where = f"[{where}]({self.url})"
        archs = ", ".join(sorted(set(self.archs), key=_arch_order))
        return f"| {_VERDICTS[self.kind]} | {name} | {archs} | {where} | {changes} |"


def _rows(
    checks: Sequence[tuple[ReportRecord, str, str]], rootdir: str | Path | None, links: GithubLinks | None
) -> tuple[list[_Row], list[str]]:
    """The table's rows in its order, and the fixes their failures name."""
    rows: dict[tuple[str, str, str, str], _Row] = {}
    fixes: list[str] = []
    for rec, arch, kind in checks:
        changes, fix = _md_changes(rec)
        fixes += fix
        where, url = _md_file(rec, rootdir, links)
        cells = (_md_name(rec), where, changes)
        row = rows.setdefault((kind, *cells), _Row(kind, cells, url))
        row.archs.append(arch)
        row.checks += 1
    order = {kind: i for i, kind in enumerate(_VERDICTS)}
    # Failures and builds that failed together, in test order: either blocks the merge.
    ranked = sorted(rows.values(), key=lambda r: 0 if r.kind in _FAILING else order[r.kind])
    return ranked, fixes


def _linked(table: list[str], rows: Sequence[_Row], room: int) -> list[str]:
    """`table` (its rows written without links, but maybe the first ones) with the links that fit in `room`
    more characters, from the top: a link is worth less than a row, so the rows were fitted first."""
    out = list(table)
    for i, row in enumerate(rows):
        at = i + 2  # below the header and its rule
        linked = row.text()
        if at < len(out) and out[at] == linked:
            continue
        if at >= len(out) or out[at] != row.text(linked=False):
            break
        room -= len(linked) - len(out[at])
        if room < 0:
            break
        out[at] = linked
    return out


def _checks(n: int, what: str = "") -> str:
    return f"{n:,} {what}kernel check{'' if n == 1 else 's'}"


def _fold(summary: str, header: Sequence[str], rows: Sequence[str], room: int) -> tuple[list[str], int]:
    """Rows folded into <details> in at most `room` characters ([] where none fits), and how many it left
    out."""
    top = f"<details><summary>{summary}</summary>"
    # The blank lines around the table let GitHub read Markdown inside the HTML.
    frame = len(top) + len("</details>") + 5
    table, left = _md_table(
        header, [[row] for row in rows], room - frame, lambda n: f"... and {n} more: see the job's artifacts"
    )
    if not table:
        return [], left
    return [top, "", *table, "", "</details>"], left


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def markdown_report(
    records: Sequence[ReportRecord],
    *,
    limit: int = MARKDOWN_LIMIT,
    rootdir: str | Path | None = None,
    links: GithubLinks | None = None,
) -> str:
    """The run as a pull-request comment and job summary: its counts in one line, then a row per failing,
    warned, changed or new kernel check (failures, warnings, changes, new kernels), then, on GitHub Actions,
    a link to the run's reports. Files are shown relative to `rootdir`, and with `links` link to their line.
    At most `limit` characters: past that, whole rows are left out, and counted."""
    several = len({r["release"] for r in records if r["release"]}) > 1
    checks: list[tuple[ReportRecord, str, str]] = []
    folded: list[tuple[ReportRecord, str]] = []  # passed with no baseline file: their numbers, folded
    for rec in sorted_records(records):
        # A run that compares toolkits has a row per release: the arch cell says which.
        release = f" ({md_release(rec['release'])})" if several and rec["release"] else ""
        arch = md_arch(rec["arch"]) + release
        kind = _row_kind(rec)
        if kind is not None:
            checks.append((rec, arch, kind))
        elif change_of(rec) == "no_baseline":
            folded.append((rec, arch))
    archs = ", ".join(sorted({md_arch(r["arch"]) for r in records}))
    enforced = enforced_line(records, label=md_release)
    blocks = [
        "### pytest-regbudget" + (f" ({archs})" if archs else ""),
        counts_line(records) if records else "no kernels checked",
        *([enforced] if enforced else []),
    ]
    run = links.run() if links is not None else None
    closing = f"The HTML and JSON reports: [the run's artifacts]({run})" if run else ""
    # Each block ends with a blank line (so does the text, before what writers.py appends): 2 newlines each.
    room = limit - sum(len(b) + 2 for b in [*blocks, *([closing] if closing else [])])

    new = [c for c in checks if c[2] == "new"]
    fold_new = len(new) > NEW_ROWS
    rows, fixes = _rows([c for c in checks if not (fold_new and c[2] == "new")], rootdir, links)
    if len(rows) > FOLD_AFTER:
        improved = [r for r in rows if r.kind == "improved"]
        rows = [r for r in rows if r.kind != "improved"]
    else:
        improved = []
    fix_block = "\n".join(f"Fix: {md_code(fix)}" for fix in dict.fromkeys(fixes))
    room -= len(fix_block) + 2 if fix_block else 0

    def more_rows(n: int) -> str:
        left = rows[len(rows) - n :]
        failing = sum(r.checks for r in left if r.kind in _FAILING)
        of_them = f" ({failing:,} of them failing)" if failing else ""
        return f"... and {_checks(sum(r.checks for r in left), 'more ')}{of_them}: see the job's artifacts"

    # The first rows keep their links even in a full report; the others get theirs where room is left.
    texts = [[r.text(linked=i < FOLD_AFTER)] for i, r in enumerate(rows)]
    table, left = _md_table(_MD_TABLE, texts, room - 1, more_rows)
    table = table if rows else []
    room -= _size(table) + 1 if table else 0
    if fix_block:
        blocks.append(fix_block)
    n_new, n_none = len(new), len(folded)
    folds: list[tuple[str, Sequence[str], Sequence[_Row | str]]] = [
        (_checks(sum(r.checks for r in improved), "improved "), _MD_TABLE, improved),
        (
            f"{n_new} new kernel{'s' if n_new != 1 else ''}",
            _MD_FOLD_TABLE,
            [_md_fold_row(rec, arch) for rec, arch, _ in new] if fold_new else [],
        ),
        (
            f"{n_none} kernel{'s' if n_none != 1 else ''} with no baseline file",
            _MD_FOLD_TABLE,
            [_md_fold_row(rec, arch) for rec, arch in folded],
        ),
    ]
    made: list[tuple[list[str], Sequence[_Row]]] = []
    for summary, header, fold_rows in folds:
        if left:
            break  # the report is full: what would follow matters less than what was left out
        if fold_rows:
            plain = [r.text(linked=False) if isinstance(r, _Row) else r for r in fold_rows]
            fold, left = _fold(summary, header, plain, room)
            if fold:
                made.append((fold, [r for r in fold_rows if isinstance(r, _Row)]))
                room -= _size(fold) + 1
    # What room is left links the files: the table's rows first, then the folded improvements'.
    if table:
        linked = _linked(table, rows, room)
        room -= _size(linked) - _size(table)
        blocks.insert(len(blocks) - (1 if fix_block else 0), "\n".join(linked))
    for fold, fold_rows in made:
        if fold_rows:
            body = _linked(fold[2:-2], fold_rows, room)
            room -= _size(body) - _size(fold[2:-2])
            fold = [*fold[:2], *body, *fold[-2:]]
        blocks.append("\n".join(fold))
    if closing:
        blocks.append(closing)
    return "".join(b + "\n\n" for b in blocks)
