"""The Markdown report: a pull-request comment and a GitHub job summary. The verdict and the failing and
changed kernels first; unchanged kernels counted; the whole kept under GitHub's comment limit.

Owns the one quoting of outside text in Markdown (`md_code`), which compare.py's tables use too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from ..core.arch import is_arch_name
from ..core.baseline import NO_VARIANT
from ..core.baseline_schema import release_label
from ..core.kernel_report import delta_text
from ..core.metrics import BY_NAME
from ..core.ratchet import WORSE_THAN_BASELINE
from ..core.text import one_line
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
# kernel, leaving room for the toolkit comparison that writers.py appends after it.
MARKDOWN_LIMIT = 60_000
# A new arch or a first baseline makes every kernel new: past this many, they are folded like unchanged ones.
NEW_ROWS = 10

# The verdict line's counts, in order; each kernel is in one (_md_kind).
_MD_KINDS = ("failed", "error", "warned", "improved", "changed", "new", "unchanged", "no baseline")
_MD_FLAGS = {"failed": "**FAILED**", "error": "**ERROR**", "warned": "warning"}
# A change that is no violation: better, within its tolerance, or worse where the entry is not enforced.
_MD_CHANGES = {"better": "improved", "tolerated": "tolerated", "worse": "not enforced"}
_MD_TABLE = ("| verdict | kernel | arch | what |", "|---|---|---|---|")
_MD_FOLD_TABLE = ("| kernel | arch | regs | spill st/ld | occupancy |", "|---|---|---|---|---|")
# Folded tables of kernels with no entry to compare with: their numbers are the news. Unchanged kernels are
# only counted, at the end: at 1,200 kernels their table was the comment's bulk and said nothing.
_MD_FOLDS = {
    "new": "new kernel{s}",
    "no baseline": "kernel{s} with no baseline file",
}


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
    """`registers 72 -> 80 (+8)`: a change against the baseline, of a metric of the table as our own words;
    a metric that a report file names and the table does not, quoted."""
    text = delta_text(d["metric"], d["baseline"], d["now"])
    return _md_text(text) if d["metric"] in BY_NAME else md_code(text)


def _md_name(rec: ReportRecord) -> str:
    """`poly_eval (NACC=8)`: the kernel and its variant, as its baseline entry names it, in a code span."""
    variant = rec["key"][2] if rec["key"] and len(rec["key"]) == 5 else NO_VARIANT
    return md_code(rec["kernel"] if variant == NO_VARIANT else f"{rec['kernel']} ({variant})")


def _md_kind(rec: ReportRecord) -> str:
    if rec["outcome"] != "passed":
        return rec["outcome"]
    if rec["baseline_status"] in ("new", "new-release"):
        return "new"
    if rec["deltas"]:
        return "improved" if all(d["verdict"] == "better" for d in rec["deltas"]) else "changed"
    return "no baseline" if rec["baseline_status"] == "none" else "unchanged"


def _md_count(kind: str, n: int) -> str:
    if kind == "failed":
        return f"**{n} failed**"
    if kind == "error":
        return f"**{n} error{'s' if n > 1 else ''}**"
    if kind == "warned":
        return f"{n} warning{'s' if n > 1 else ''}"
    return f"{n} with no baseline file" if kind == "no baseline" else f"{n} {kind}"


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


# The tolerance a caught regression's sentence names (core/ratchet.py): our own number.
_TOLERANCE = re.compile(r", tolerance [0-9.e+-]+")


def _md_worse(d: DeltaRecord, rest: str) -> str:
    """`registers 72 -> 80 (+8) is worse than the baseline, tolerance 4`, then what else the sentence says
    (the callees that spill more, by name) quoted."""
    own = _TOLERANCE.match(rest)
    tolerance = own[0] if own else ""
    rest = rest[len(tolerance) :].strip()
    return _md_delta(d) + WORSE_THAN_BASELINE + tolerance + (f" {md_code(rest)}" if rest else "")


def _md_rows(rec: ReportRecord, arch: str) -> tuple[list[str], list[str]]:
    """A kernel's rows, one per failed or changed metric with the reason, its failures first; and the fixes
    its failures name."""
    kernel = _md_name(rec)
    flag = _MD_FLAGS.get(rec["outcome"], "")

    def row(verdict: str, what: str) -> str:
        return f"| {verdict} | {kernel} | {arch} | {what} |"

    if rec["registers"] is None:
        first = (rec["error"] or "").strip().splitlines()[:1]
        return [row(flag or "**ERROR**", f"did not compile: {md_code(' '.join(first))}")], []
    if not flag and rec["baseline_status"] in ("new", "new-release"):
        what = _md_facts(rec)
        if rec["baseline_status"] == "new-release":
            others = md_code(", ".join(rec["other_releases"]))
            what += f"; no entry for {release_label(md_release(rec['release']))} yet (entries: {others})"
        return [row("new", what)], []
    # A regression the baseline caught is a violation that starts with its delta's text: one row for both,
    # and its fix said once, under the table.
    worse = {
        delta_text(d["metric"], d["baseline"], d["now"]): d for d in rec["deltas"] if d["verdict"] == "worse"
    }
    caught = set(worse)
    rows, fixes = [], []
    for v in rec["violations"]:
        text = next((t for t in caught if v.startswith(t + WORSE_THAN_BASELINE)), None)
        if text is None:
            rows.append(row(flag, md_code(v)))  # a budget's sentence, which may quote names
            continue
        caught.discard(text)
        why, _, fix = v.partition("; ")
        rows.append(row(flag, _md_worse(worse[text], why[len(text + WORSE_THAN_BASELINE) :])))
        fixes += [fix] if fix else []
    notes = []
    if rec["baseline_status"] == "toolkit-mismatch":
        old = rec["baseline"].get("ptxas", "?") if rec["baseline"] else "?"
        notes.append(f"entry recorded with ptxas {md_code(str(old))}")
    if rec["options_changed"]:
        notes.append("built with other options")
    note = f" ({'; '.join(notes)})" if notes else ""
    for d in rec["deltas"]:
        text = delta_text(d["metric"], d["baseline"], d["now"])
        if d["verdict"] != "worse" or text in caught:
            rows.append(row(_MD_CHANGES.get(d["verdict"]) or md_code(d["verdict"]), _md_delta(d) + note))
    return rows, fixes


def _md_fold_row(rec: ReportRecord, arch: str) -> str:
    occ = "-"
    if rec["occupancy"] is not None and rec["launch"]:
        occ = f"{rec['occupancy']:.0%} at {rec['launch'][0]}"  # "@256" would mention a user "256"
    return f"| {_md_name(rec)} | {arch} | {cell(rec['registers'])} | {spills_cell(rec)} | {occ} |"


def _md_fit(groups: Sequence[Sequence[str]], room: int) -> int:
    """How many of `groups` (a kernel's rows, kept together), taken in order, fit in `room` characters."""
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


def markdown_report(records: Sequence[ReportRecord], *, limit: int = MARKDOWN_LIMIT) -> str:
    """The run as a pull-request comment and job summary: the verdict in one line, then a row per failed or
    changed metric (failures, warnings, changes, new kernels), then the unchanged kernels' count. At most
    `limit` characters: past that, whole kernels are left out, and counted."""
    several = len({r["release"] for r in records if r["release"]}) > 1
    kinds: list[tuple[ReportRecord, str, str]] = []
    for rec in sorted_records(records):
        # A run that compares toolkits has a row per release: the arch cell says which.
        release = f" ({md_release(rec['release'])})" if several and rec["release"] else ""
        arch = md_arch(rec["arch"]) + release
        kinds.append((rec, arch, _md_kind(rec)))
    by_kind = {kind: [(rec, arch) for rec, arch, k in kinds if k == kind] for kind in _MD_KINDS}
    archs = ", ".join(sorted({md_arch(r["arch"]) for r in records}))
    verdict = ", ".join(_md_count(kind, len(recs)) for kind, recs in by_kind.items() if recs)
    enforced = enforced_line(records, label=md_release)
    blocks = [
        "### pytest-regbudget" + (f" ({archs})" if archs else ""),
        (verdict or "no kernels checked") + (f"; {enforced}" if enforced else ""),
    ]
    # Each block ends with a blank line (so does the text, before what writers.py appends): 2 newlines each.
    room = limit - sum(len(b) + 2 for b in blocks)

    folds = [k for k in _MD_FOLDS if by_kind[k] and (k != "new" or len(by_kind[k]) > NEW_ROWS)]
    # Failures and compile errors first, in test order: either blocks the merge.
    main = [(rec, arch) for rec, arch, k in kinds if k in ("failed", "error")]
    main += [ra for k in ("warned", "improved", "changed", "new") if k not in folds for ra in by_kind[k]]
    groups: list[list[str]] = []
    failing: list[bool] = []
    fixes: list[str] = []
    seen: set[str] = set()
    for rec, arch in main:
        rows, fix = _md_rows(rec, arch)
        # Two tests of one kernel variant fail the same way: one row says it.
        rows = [row for row in rows if row not in seen]
        seen.update(rows)
        if rows:
            groups.append(rows)
            failing.append(rec["outcome"] in ("failed", "error"))
        fixes += fix
    fix_block = "\n".join(f"Fix: {md_code(fix)}" for fix in dict.fromkeys(fixes))
    room -= len(fix_block) + 2 if fix_block else 0

    def more_changed(n: int) -> str:
        failed = sum(failing[len(failing) - n :])
        of_them = f" ({failed} of them failed)" if failed else ""
        return f"... and {n} more changed kernels{of_them}: see the job's artifacts"

    table, left = _md_table(_MD_TABLE, groups, room - 1, more_changed) if groups else ([], 0)
    if table:
        blocks.append("\n".join(table))
        room -= sum(len(line) + 1 for line in table) + 1
    if fix_block:
        blocks.append(fix_block)
    for kind in folds:
        if left:
            break  # the report is full: what would follow matters less than what was left out
        count = len(by_kind[kind])
        top = f"<details><summary>{count} {_MD_FOLDS[kind].format(s='' if count == 1 else 's')}</summary>"
        # The blank lines around the table let GitHub read Markdown inside the HTML.
        frame = len(top) + len("</details>") + 5
        lines = [[_md_fold_row(rec, arch)] for rec, arch in by_kind[kind]]
        fold, left = _md_table(
            _MD_FOLD_TABLE, lines, room - frame, lambda n: f"... and {n} more: see the job's artifacts"
        )
        if fold:
            blocks.append("\n".join([top, "", *fold, "", "</details>"]))
            room -= sum(len(line) + 1 for line in fold) + frame
    unchanged = len(by_kind["unchanged"])
    if unchanged and not left:
        line = (
            f"{unchanged:,} unchanged kernel{'s' if unchanged > 1 else ''}: every number as in the baseline."
        )
        if len(line) + 2 <= room:
            blocks.append(line)
    return "".join(b + "\n\n" for b in blocks)
