"""The terminal's view of a run: the summary table (one row per kernel and arch, with its cells), the baseline
lines (stale entries, kept entries, how many were enforced), and GitHub annotations at each failing kernel's
`__global__` line. Every name and log that comes from outside is made safe to print (core/text.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ..core.baseline import Key
from ..core.baseline_schema import key_text, release_label
from ..core.kernel_report import delta_text
from ..core.text import one_line, safe_block
from . import cells, layout
from .counts import counts_line
from .record import ReportRecord, sorted_records, spills


def baseline_cell(rec: ReportRecord) -> str:
    """The baseline cell in full (the HTML report's and pytest -vv's): every change, failing ones first."""
    return cells.baseline_forms(rec)[0]


def cell(value: object) -> str:
    return "-" if value is None else str(value)


def spills_cell(rec: ReportRecord) -> str:
    """`16/24`: spill stores/loads in bytes; `-` where unknown (a binary) or not built."""
    pair = spills(rec)
    return "-" if pair is None else f"{pair[0]}/{pair[1]}"


def regs_cell(rec: ReportRecord) -> str:
    """`168`, or with warpgroup roles `168 (inc 232, dec 40)`: the entry count, then each role's target."""
    roles = rec.get("setmaxnreg") or []
    if rec["registers"] is None or not roles:
        return cell(rec["registers"])
    # A record written before the field (JSON version 2) says it by ptxas's C7508 alone.
    ignored = rec.get("setmaxnreg_dropped", any("C7508" in m for m in rec.get("ptxas_messages") or []))
    shown = ", ".join(f"{d} {n}" for d, n in roles)
    # The PTX asks for the roles; once dropped the kernel runs at its entry count throughout.
    return f"{rec['registers']} ({shown}: ignored by ptxas)" if ignored else f"{rec['registers']} ({shown})"


def _occupancy_forms(rec: ReportRecord) -> tuple[str, ...]:
    """The occupancy cell, and without its block size (`25% TMEM`): the launch is the marker's."""
    full = occupancy_cell(rec)
    short = full.replace(f" @{rec['launch'][0]}", "", 1) if rec["launch"] else full
    return (full, short) if short != full else (full,)


def _regs_forms(rec: ReportRecord) -> tuple[str, ...]:
    """The regs cell, and where ptxas dropped the warpgroup roles, that said in fewer words."""
    full = regs_cell(rec)
    return (full, f"{rec['registers']} (roles ignored)") if full.endswith(": ignored by ptxas)") else (full,)


def _messages_note(rec: ReportRecord) -> str:
    count = len(rec.get("ptxas_messages") or [])
    return f", {count} ptxas msg" if count else ""


def enforced(rec: ReportRecord) -> bool:
    """Held to a baseline entry of its own release with every number comparable (as KernelReport's)."""
    return rec["baseline_status"] == "compared" and rec["spill_stores"] is not None


def enforced_line(
    records: Sequence[ReportRecord],
    *,
    updating: bool = False,
    strict: bool = False,
    label: Callable[[str], str] = one_line,
) -> str | None:
    """How many baseline entries this run measured were held to an entry of their release, and why the
    others were not: `52 of 52 baseline entries enforced (CUDA 12.9)`. Counted per entry (two tests of one
    kernel variant are one), a kernel without a key (a compile error) not at all. None when nothing was
    measured. `label` shows a release (the Markdown report quotes one that is not a version number)."""
    by_key: dict[tuple[str, ...], list[ReportRecord]] = {}
    for r in records:
        if r["registers"] is not None and r["key"]:
            by_key.setdefault(tuple(r["key"]), []).append(r)
    if not by_key:
        return None
    held = sum(1 for recs in by_key.values() if all(enforced(r) for r in recs))
    releases = sorted({r["release"] for recs in by_key.values() for r in recs if r["release"]})
    shown = [release_label(label(r)) for r in releases]
    cuda = [label.removeprefix("CUDA ") for label in shown if label.startswith("CUDA ")]
    others = [label for label in shown if not label.startswith("CUDA ")]
    parts = ([f"CUDA {', '.join(cuda)}"] if cuda else []) + others
    line = f"{held} of {len(by_key)} baseline entries enforced" + (f" ({'; '.join(parts)})" if parts else "")
    why: dict[str, int] = {}
    for recs in by_key.values():
        first = next((r for r in recs if not enforced(r)), None)
        if first is None:
            continue
        reason = {
            "none": "no baseline file",
            "new": "new",
            "new-release": f"no entry for {release_label(label(first['release']))} yet",
            "toolkit-mismatch": "recorded with another ptxas",
        }.get(first["baseline_status"], "spills unknown (prebuilt binary)")
        why[reason] = why.get(reason, 0) + 1
    if why:
        line += "; not enforced: " + ", ".join(f"{n} {reason}" for reason, n in sorted(why.items()))
        # An update records them; elsewhere, say what would make this a failure.
        line += (
            " (this update records them)"
            if updating
            else " (--regbudget-strict fails them)"
            if not strict
            else ""
        )
    return line


# --regbudget-summary: which rows the table shows. "changes" (the default): failing, warned, changed and new
# rows, then a count of the rest; "all" (or pytest -v): every row; "failures": failing rows only.
SUMMARY_MODES = ("changes", "all", "failures")
_FAILING = ("failed", "error")


def _attention(rec: ReportRecord) -> int:
    """0 unchanged, 1 changed or new (or with no baseline to compare), 2 warned, 3 failed: the row order,
    so that failures come last, next to pytest's own summary."""
    if rec["outcome"] in _FAILING:
        return 3
    if rec["outcome"] != "passed":
        return 2
    # Build settings alone change no number: the run names them once (settings_lines), not per row.
    if rec["baseline_status"] == "compared" and not rec["deltas"]:
        return 0
    return 1


def summary_table(
    records: Sequence[ReportRecord], *, mode: str = "changes", width: int | None = None
) -> list[str]:
    """The terminal's table: the rows `mode` selects, failures last, capped to `width` columns, then the
    run's counts (`count_lines`)."""
    if not records:
        return []
    floor = {"all": 0, "changes": 1, "failures": 3}[mode]
    shown = [rec for rec in records if _attention(rec) >= floor]
    lines = summary_lines(shown, width=width, names_from=records) if shown else []
    return [*lines, *count_lines(records, hidden=len(records) - len(shown), width=width)]


def count_lines(records: Sequence[ReportRecord], *, hidden: int = 0, width: int | None = None) -> list[str]:
    """The run's counts in the words every face uses (report/counts.py), wrapped at `width` with a hanging
    indent, then how many rows the table left out, on a line of its own."""
    lines = [counts_line(records)]
    if hidden:
        rows = f"{hidden:,} row{'s' if hidden > 1 else ''}"
        lines.append(f"{rows} not shown: pytest -v or --regbudget-summary=all shows all")
    return lines if width is None else [part for line in lines for part in _wrap_clauses(line, width)]


def _wrap_clauses(line: str, width: int) -> list[str]:
    """`line` in lines of at most `width` characters where it can be, broken after a comma, semicolon or
    colon, so that a number keeps its word (`12 changed`), the lines after the first indented by two."""
    out = [""]
    for clause in re.split(r"(?<=[,;:]) ", line):
        joined = f"{out[-1]} {clause}" if out[-1].strip() else out[-1] + clause
        if len(joined) <= width or not out[-1].strip():
            out[-1] = joined
        else:
            out.append("  " + clause)
    return out


def _test_cells(records: Sequence[ReportRecord]) -> dict[str, str]:
    """Each nodeid's test cell: the part after the file, or the whole nodeid where that part is shared by
    tests of several files (one kernel name in three sources)."""
    short: dict[str, set[str]] = {}
    for rec in records:
        short.setdefault(rec["nodeid"].split("::", 1)[-1], set()).add(rec["nodeid"])
    return {
        nodeid: name if len(nodeids) == 1 else nodeid for name, nodeids in short.items() for nodeid in nodeids
    }


def summary_lines(
    records: Sequence[ReportRecord],
    *,
    width: int | None = None,
    names_from: Sequence[ReportRecord] | None = None,
) -> list[str]:
    """A fixed-width table, one line per (test, kernel, arch) in test order, failures last, at most `width`
    characters wide (report/layout.py: columns drop, names are cut, the baseline cell counts what it leaves
    out); every column in full where `width` is None. `names_from`: the records whose test names decide
    which need their file to tell them apart (default: `records`)."""
    if not records:
        return []
    records = sorted(sorted_records(records), key=_attention)
    tests = _test_cells(names_from if names_from is not None else records)
    names = [
        _without_arch(
            one_line(tests.get(rec["nodeid"], rec["nodeid"].split("::", 1)[-1])), one_line(rec["arch"])
        )
        for rec in records
    ]
    kernels = [one_line(rec["kernel"]) for rec in records]

    def column(header: str, cell_of: Callable[[ReportRecord], str], right: bool = False) -> layout.Column:
        return layout.Column(header, [(cell_of(rec),) for rec in records], right=right)

    columns = [
        layout.Column("test", [(n,) for n in names], name=True),
        layout.Column("kernel", [(k,) for k in kernels], name=True, droppable=False),
        column("arch", lambda r: one_line(r["arch"])),
        layout.Column("regs", [_regs_forms(rec) for rec in records], right=True),
        layout.Column("spill st/ld", [(spills_cell(rec),) for rec in records], short="spills"),
        column("stack", lambda r: cell(r["stack_frame"]), right=True),
        column("smem", lambda r: cell(r["shared_mem"]), right=True),
        layout.Column("occupancy", [_occupancy_forms(rec) for rec in records], short="occ", uniform=True),
        column("cliff", cells.cliff_cell),
        layout.Column("baseline", [cells.baseline_forms(rec) for rec in records]),
        layout.Column("verdict", [_verdict_forms(rec) for rec in records]),
    ]
    columns[-2].droppable = columns[-1].droppable = columns[2].droppable = False
    if names == kernels:
        del columns[0]  # each test is its kernel (a manifest's items): the kernel column says it
    elif all(n.startswith(k) for n, k in zip(names, kernels, strict=True)):
        # Each test is named after its kernel (a fixture's default, a variant's): say it once.
        del columns[1]
        columns[0].droppable = False
    elif len({(k, r["arch"]) for k, r in zip(kernels, records, strict=True)}) < len(records):
        # Two tests measure one kernel on one arch (two variants): the test tells the rows apart, and where it
        # does alone, the kernel column goes first instead.
        columns[0].droppable = False
        columns[1].droppable = len({(n, r["arch"]) for n, r in zip(names, records, strict=True)}) == len(
            records
        )
    at = 1 + [c.header for c in columns].index("spill st/ld")
    if any(rec["spill_instructions"] is not None for rec in records):
        columns[at:at] = [
            column("spill instr loop/all", cells.sass_cell),
            column("local %", cells.share_cell, right=True),
        ]
    if any(rec.get("cluster") for rec in records):
        at = 1 + [c.header for c in columns].index("occupancy")
        columns.insert(at, column("cluster", cells.cluster_cell))
    if any(rec["gpu_device"] for rec in records):
        columns[-1:-1] = _gpu_columns(records)
    # The test column leads each row: a non-Python item's id could start with "::".
    return layout.render(columns, width, safe_block)


def _without_arch(test: str, arch: str) -> str:
    """A test's id without the arch the plugin added to it (`k[sm_90]` is `k`, `t[4-sm_90]` is `t[4]`): the
    arch column says it."""
    if test.endswith(f"[{arch}]"):
        return test[: -len(arch) - 2]
    return test[: -len(arch) - 2] + "]" if test.endswith(f"-{arch}]") else test


def _verdict_forms(rec: ReportRecord) -> tuple[str, ...]:
    verdict = rec["outcome"].upper() if rec["outcome"] != "passed" else "ok"
    note = _messages_note(rec)
    return (verdict + note, verdict) if note else (verdict,)


def occupancy_cell(rec: ReportRecord) -> str:
    """`25% @256` at the launch's block size. Where fewer blocks hold their tensor memory at once than the
    occupancy calculator lets reside, the occupancy of those, marked: `12% @256 TMEM`; `TMEM?` where the
    kernel's TMEM count is unknown. (Records of an older report have no TMEM fields.)"""
    if rec["occupancy"] is None or not rec["launch"]:
        return "-"
    occ, mark = rec["occupancy"], ""
    blocks, held = rec["active_blocks"], rec.get("tmem_blocks")
    if held is not None and blocks and held < blocks:
        occ, mark = occ * held / blocks, " TMEM"
    elif rec.get("tmem_source") == "unknown":
        mark = " TMEM?"
    return f"{occ:.0%} @{rec['launch'][0]}{mark}"


def _gpu_columns(records: Sequence[ReportRecord]) -> list[layout.Column]:
    """Occupancy and time side by side: either alone can be made to look like an improvement."""

    def column(header: str, cell_of: Callable[[ReportRecord], str]) -> layout.Column:
        return layout.Column(header, [(cell_of(rec),) for rec in records])

    return [
        column("drv regs", lambda r: cell(r["driver_registers"])),
        column("drv occ", lambda r: "-" if r["driver_occupancy"] is None else f"{r['driver_occupancy']:.0%}"),
        column("time ms", lambda r: "-" if r["time_ms"] is None else f"{r['time_ms']:.4g}"),
        column("noise", lambda r: "-" if r["noise"] is None else f"{r['noise']:.1%}"),
        column("base ms", lambda r: "-" if r["baseline_time_ms"] is None else f"{r['baseline_time_ms']:.4g}"),
        column("ratio", lambda r: "-" if r["time_ratio"] is None else f"x{r['time_ratio']:.3f}"),
    ]


def _label(rec: ReportRecord) -> str:
    return one_line(f"{rec['kernel']} [{rec['arch']}] ({rec['nodeid']})")


# A suite that lost a directory of tests has thousands of stale entries: name a few, count the rest.
STALE_SHOWN = 10


def baseline_lines(
    records: Sequence[ReportRecord],
    stale: Sequence[Key],
    *,
    updating: bool,
    kept: Sequence[str] = (),
) -> list[str]:
    """Improvements to lock in and stale entries to remove, each ending with what to do; during an update,
    `kept` says which entries the run could not judge and why."""
    lines = []
    # An improvement to lock in: every metric held or got better, and the kernel passed. Registers that fell
    # while spills rose (even within a tolerance) are a trade, not an improvement.
    improved = [
        (rec, [d for d in rec["deltas"] if d["verdict"] == "better"])
        for rec in sorted_records(
            r
            for r in records  # sorted after the filter: a library's thousands are rarely improved
            if r["baseline_status"] == "compared"
            and r["outcome"] != "failed"
            and all(d["verdict"] == "better" for d in r["deltas"])
        )
    ]
    improved = [(rec, ds) for rec, ds in improved if ds]
    if improved and not updating:
        lines.append(f"{len(improved)} kernel(s) improved on the baseline:")
        for rec, ds in improved:
            changes = ", ".join(delta_text(d["metric"], d["baseline"], d["now"]) for d in ds)
            lines.append(f"  {_label(rec)}: {changes}")
        lines.append("  Run pytest --regbudget-update to lock the improvements in.")
    if stale and not updating:
        lines.append(
            f"{len(stale)} stale baseline entr{'y' if len(stale) == 1 else 'ies'} (test or kernel gone):"
        )
        lines += [one_line(f"  {key_text(key)}") for key in stale[:STALE_SHOWN]]
        if len(stale) > STALE_SHOWN:
            lines.append(f"  ... and {len(stale) - STALE_SHOWN} more")
        lines.append("  pytest --regbudget-update removes them.")
    lines += settings_lines(records, updating=updating)
    lines += kept
    return [safe_block(line) for line in lines]


SETTINGS_SHOWN = 5  # distinct build-setting changes a run names; the rest are counted


def settings_lines(records: Sequence[ReportRecord], *, updating: bool) -> list[str]:
    """Once per run, not per kernel: the build-setting changes since the baseline, each with how many
    entries it touches ("build settings changed for 1,200 entries: added -DGGML_CUDA_F16"), and the entries
    read under an older version's key. Neither fails: the numbers are still enforced."""
    by_change: dict[str, set[tuple[str, ...]]] = {}
    moved: set[tuple[str, ...]] = set()
    for rec in records:
        key = tuple(rec["key"] or ())
        change = rec.get("settings_change")
        if change and rec["baseline_status"] in ("compared", "toolkit-mismatch"):
            by_change.setdefault(change, set()).add(key)
        if rec.get("found_under"):
            moved.add(key)
    groups = sorted(by_change.items(), key=lambda item: (-len(item[1]), item[0]))
    then = (
        "recorded by this update"
        if updating
        else "each entry is still held to its numbers; pytest --regbudget-update records the new settings"
    )
    lines = [
        f"build settings changed for {_entries(len(keys))}: {change} ({then})"
        for change, keys in groups[:SETTINGS_SHOWN]
    ]
    rest = {key for _, keys in groups[SETTINGS_SHOWN:] for key in keys}
    if rest:
        lines.append(
            f"build settings changed in {len(groups) - SETTINGS_SHOWN} other ways for {_entries(len(rest))}"
        )
    if moved and not updating:
        lines.append(
            f"{_entries(len(moved))} read under the key an older pytest-regbudget gave them (build-wide "
            "defines or a Triton kernel's num_warps and num_stages in the variant, or `..` out of the "
            "rootdir); pytest --regbudget-update moves them to their new key"
        )
    return lines


def _entries(n: int) -> str:
    return f"{n:,} entr{'y' if n == 1 else 'ies'}"


def _escape(text: str, prop: bool = False) -> str:
    """GitHub workflow-command escaping (actions/toolkit's escapeData and escapeProperty).

    The runner reads a command up to the line break and a property up to ':' or ','. A message keeps its
    line breaks as %0A (the annotation shows them); a property is one line. Other non-printable characters
    are shown escaped.
    """
    text = one_line(text) if prop else "\n".join(one_line(line) for line in text.splitlines())
    text = text.replace("%", "%25").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github_annotations(records: Sequence[ReportRecord], rootdir: Path) -> list[str]:
    """`::error file=...,line=N,title=...::message` at each failing kernel's __global__ line."""
    base = Path(os.environ.get("GITHUB_WORKSPACE") or rootdir)
    out = []
    for rec in sorted_records(records):
        if rec["outcome"] == "passed":
            continue
        level = "warning" if rec["outcome"] == "warned" else "error"
        try:
            path = os.path.relpath(rec["source"], base)
        except ValueError:
            path = rec["source"]
        where = f"file={_escape(path, True)}"
        if rec["line"] is not None:
            where += f",line={rec['line']}"
        title = _escape(f"regbudget {rec['kernel']} [{rec['arch']}]", True)
        message = rec["error"] or "\n".join(rec["violations"])
        out.append(f"::{level} {where},title={title}::{_escape(message)}")
    return out


def _made_by(rec: ReportRecord, nvcc: str | None) -> str:
    """Who made a kernel's numbers: `NVRTC 12.9.86 with ptxas 12.9.86`, `nvcc 13.5.37 (path, from PATH)`."""
    compiler, frontend, ptxas = (
        rec["compiler"],
        one_line(rec["nvrtc_version"]),
        one_line(rec["ptxas_version"]),
    )
    if frontend.startswith("nvcc "):
        return nvcc if nvcc is not None and nvcc.startswith(frontend + " ") else frontend
    name = {"nvrtc": "NVRTC", "string": "NVRTC", "triton": "Triton", "numba": "Numba"}.get(compiler, compiler)
    return f"{name} {frontend} with ptxas {ptxas}"


def compilers_line(
    records: Sequence[ReportRecord], nvcc: str | None, cuobjdump: str | None = None
) -> str | None:
    """What built this run's kernels, with how many each, and what read the prebuilt ones (the header names
    the toolkit found before any test ran; a manifest of nvcc kernels never uses its NVRTC). `nvcc`,
    `cuobjdump`: the ones this process found, described; the records tell xdist's controller, which finds
    none itself, the versions."""
    made: dict[str, int] = {}
    read = 0
    for rec in records:
        if rec["compiler"] == "binary":
            read += 1
        elif rec["nvrtc_version"]:
            who = _made_by(rec, nvcc)
            made[who] = made.get(who, 0) + 1
    parts = [f"{who} built {n:,} kernel(s)" for who, n in sorted(made.items(), key=lambda kv: -kv[1])]
    if read:
        parts.append(f"{cuobjdump or 'cuobjdump'} read {read:,} kernel(s) from prebuilt binaries")
    return "; ".join(parts) or None


def empty_binaries_line(
    empty: Mapping[str, int], archs: Sequence[str], sources: Iterable[str] = ()
) -> list[str]:
    """One line for the source files, binaries and library cubins that hold no kernel for the run's archs
    (host code, or device functions only), instead of a warning each. `empty`: binary file -> empty cubins
    (0: the whole file); `sources`: the manifest's source files whose builds hold no kernel."""
    files = sorted(f for f, n in empty.items() if n == 0)
    cubins = sum(n for n in empty.values() if n > 0)
    hosts = sorted(set(sources))
    if not files and not cubins and not hosts:
        return []
    parts = []
    for kind, names in (("source", hosts), ("binary", files)):
        if names:
            shown = ", ".join(one_line(f) for f in names[:3]) + (
                f" and {len(names) - 3} more" if len(names) > 3 else ""
            )
            parts.append(f"{len(names)} {kind} file(s) ({shown})")
    if cubins:
        parts.append(f"{cubins} cubin(s) inside {sum(1 for n in empty.values() if n > 0)} library file(s)")
    return [
        f"{' and '.join(parts)} hold no kernel for {', '.join(archs)} (host code or device functions only): "
        "nothing to check there"
    ]


def no_arch_line(nodeids: Iterable[str], archs: Sequence[str]) -> list[str]:
    """One line for the items skipped because their marker's (or manifest table's) `archs=` leave out their
    arch, instead of a skip each in pytest's summary alone: they are checked nowhere in this run."""
    found = sorted(set(nodeids))
    if not found:
        return []
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    shown = ", ".join(one_line(n) for n in found[:3]) + more
    return [
        f"{len(found)} item(s) skipped, built for no arch: their archs= leave out this run's archs "
        f"{','.join(archs)} ({shown}); add their arch to --regbudget-arch to check them"
    ]


def gpu_line(records: Sequence[ReportRecord], gpu_mode: str) -> str:
    """Where the GPU checks ran, or why not (from the records: this probes nothing)."""
    if gpu_mode == "off":
        return "GPU checks: off (--regbudget-gpu=off)"
    devices = sorted({r["gpu_device"] for r in records if r["gpu_device"]})
    if devices:
        spent = sorted(r["timing_spent_s"] for r in records if r["timing_spent_s"] is not None)
        if not spent:
            return f"GPU checks ran on {', '.join(devices)} (no kernel timed)"
        median = spent[len(spent) // 2]
        return (
            f"GPU checks ran on {', '.join(devices)}: {len(spent)} kernel(s) timed in {sum(spent):.2f} s "
            f"(median {median:.2f} s per kernel)"
        )
    notes = sorted({r["gpu_note"] for r in records if r["gpu_note"]})
    return f"GPU checks: none ran ({notes[0] if notes else 'no kernel reached them'})"
