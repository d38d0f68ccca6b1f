"""What the run tells people: the terminal table, baseline deltas, JSON, Markdown and GitHub annotations.

Owns the record format (a plain dict, so pytest-xdist workers can ship it to the controller unchanged) and
every rendering of it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

from ..core.arch import get_arch
from ..core.baseline import NO_VARIANT, Key
from ..core.errors import UnknownArchError
from ..core.text import one_line, safe_block
from ..core.verdict import Delta, KernelReport, delta_text


class DeltaRecord(TypedDict):
    metric: str
    baseline: float
    now: float
    delta: float
    verdict: str


class KernelRecord(TypedDict):
    nodeid: str
    kernel: str
    entry: str | None
    arch: str
    source: str
    registers: int | None
    spill_stores: int | None
    spill_loads: int | None
    stack_frame: int | None
    shared_mem: int | None
    const_mem: int | None
    barriers: int | None
    max_threads: int | None
    min_blocks_per_sm: int | None
    launch: list[int] | None
    dynamic_smem: int
    occupancy: float | None
    active_blocks: int | None
    limiter: str | None
    outcome: str
    level: str
    violations: list[str]
    error: str | None
    ptxas_line: str | None
    ptxas_version: str
    nvrtc_version: str
    compiler: str  # the source kind that produced the numbers (nvrtc, nvcc, triton, numba, binary, string)
    release: str  # the toolkit release of the numbers ("12.9"), which picks the baseline entry
    options_hash: str
    options_changed: bool  # built with other options than its baseline entry
    ptxas_messages: list[str]  # ptxas's warnings and performance-loss notes for this kernel
    setmaxnreg: list[list[object]]  # its warpgroups' register targets: [["inc", 232], ["dec", 40]]
    key: list[str] | None  # the baseline's [source, kernel, variant, arch, release]; None for a compile error
    line: int | None
    baseline_status: str  # none (no baseline file), new, new-release, compared, toolkit-mismatch
    other_releases: list[str]  # with new-release: the releases that have an entry for this kernel
    baseline: dict[str, object] | None
    deltas: list[DeltaRecord]
    gpu_device: str | None
    driver_registers: int | None
    driver_local_bytes: int | None
    driver_max_threads: int | None
    driver_blocks: int | None
    driver_occupancy: float | None
    model_defects: list[str]
    time_ms: float | None
    ci_low_ms: float | None  # the median's ~95 % interval (timing.py)
    ci_high_ms: float | None
    time_status: str | None  # pass, fail, ambiguous (noisy: decided on the median); None: not judged
    timing_spent_s: float | None  # wall time spent timing this kernel
    timing_launches: int | None  # launches per sample: > 1 for a short kernel timed as a CUDA graph
    too_short: bool | None  # too short to time even as a graph: not judged
    max_sm_clock_mhz: int | None
    noise: float | None
    samples: int | None
    sm_clock_mhz: int | None
    baseline_time_ms: float | None
    time_ratio: float | None
    gpu_note: str | None
    spill_instructions: int | None
    spill_instructions_in_loops: int | None
    local_instructions: int | None
    diagnosis: list[str]
    cliff_blocks: int | None
    cliff_grow: int | None
    cliff_shed: int | None
    cliff_blocks_if_shed: int | None


def _delta_record(d: Delta) -> DeltaRecord:
    return DeltaRecord(metric=d.metric, baseline=d.baseline, now=d.now, delta=d.change, verdict=d.verdict)


def to_record(r: KernelReport) -> KernelRecord:
    res, occ = r.resources, r.occupancy
    launch = None
    if r.launch is not None:
        launch = [r.launch.threads] if r.launch.blocks is None else [r.launch.threads, r.launch.blocks]
    # cast: the GPU fields are spread in from a plain dict, which TypedDict's constructor cannot check.
    return cast(
        KernelRecord,
        dict(
            nodeid=r.nodeid,
            kernel=r.kernel,
            entry=res.name if res else None,
            arch=r.arch,
            source=r.source,
            registers=res.registers if res else None,
            spill_stores=res.spill_stores if res and res.spills_known else None,
            spill_loads=res.spill_loads if res and res.spills_known else None,
            stack_frame=res.stack_frame if res else None,
            shared_mem=res.shared_mem if res else None,
            const_mem=res.const_mem if res else None,
            barriers=res.barriers if res else None,
            max_threads=res.max_threads if res else None,
            min_blocks_per_sm=res.min_blocks_per_sm if res else None,
            launch=launch,
            dynamic_smem=r.dynamic_smem,
            occupancy=round(occ.occupancy, 6) if occ else None,
            active_blocks=occ.active_blocks if occ else None,
            limiter=occ.limiter if occ else None,
            outcome=r.outcome,
            level=r.level,
            violations=list(r.violations),
            error=r.error,
            ptxas_line=res.ptxas_line if res else None,
            ptxas_version=r.ptxas_version,
            nvrtc_version=r.nvrtc_version,
            compiler=r.compiler,
            release=r.release,
            options_hash=r.options_hash,
            options_changed=r.options_changed,
            ptxas_messages=list(r.messages),
            setmaxnreg=[[d, n] for d, n in r.setmaxnreg],
            key=list(r.key) if r.key else None,
            line=r.line,
            baseline_status=r.baseline_status,
            other_releases=list(r.other_releases),
            baseline=r.baseline.to_toml() if r.baseline else None,
            deltas=[_delta_record(d) for d in r.deltas],
            **_gpu_fields(r),
            spill_instructions=r.sass.spill_instructions if r.sass else None,
            spill_instructions_in_loops=r.sass.spill_instructions_in_loops if r.sass else None,
            local_instructions=r.sass.local_instructions if r.sass else None,
            diagnosis=list(r.diagnosis),
            cliff_blocks=r.cliff.blocks if r.cliff else None,
            cliff_grow=r.cliff.grow if r.cliff else None,
            cliff_shed=r.cliff.shed if r.cliff else None,
            cliff_blocks_if_shed=r.cliff.blocks_if_shed if r.cliff else None,
        ),
    )


def _gpu_fields(r: KernelReport) -> dict[str, Any]:
    g, t = r.gpu, r.timing
    driver_occ = None if r.driver_occupancy is None else round(r.driver_occupancy, 6)
    return {
        "gpu_device": g.device if g else None,
        "driver_registers": g.view.registers if g else None,
        "driver_local_bytes": g.view.local_bytes if g else None,
        "driver_max_threads": g.view.max_threads if g else None,
        "driver_blocks": g.driver_blocks if g else None,
        "driver_occupancy": driver_occ,
        "model_defects": list(r.model_defects),
        "time_ms": t.median_ms if t else None,
        "ci_low_ms": t.ci_low_ms if t else None,
        "ci_high_ms": t.ci_high_ms if t else None,
        "time_status": r.time_status,
        "timing_spent_s": round(t.spent_s, 4) if t else None,
        "timing_launches": t.launches_per_sample if t else None,
        "too_short": t.too_short if t else None,
        "max_sm_clock_mhz": t.max_sm_clock_mhz if t else None,
        "noise": t.noise if t else None,
        "samples": t.samples if t else None,
        "sm_clock_mhz": t.sm_clock_mhz if t else None,
        "baseline_time_ms": r.baseline_time_ms,
        "time_ratio": t.median_ms / r.baseline_time_ms if t and r.baseline_time_ms else None,
        "gpu_note": r.gpu_note,
    }


def _sorted(records: Iterable[KernelRecord]) -> list[KernelRecord]:
    return sorted(records, key=lambda r: (r["nodeid"], r["kernel"], r["arch"]))


_SHORT = {"registers": "regs", "spill_stores": "spill st", "spill_loads": "spill ld", "occupancy": "occ"}


def _delta_cell(d: DeltaRecord) -> str:
    name = _SHORT.get(d["metric"], d["metric"])
    if d["metric"] == "occupancy":
        return f"{name} {d['delta'] * 100:+.0f}pt"
    return f"{name} {d['delta']:+g}"


def baseline_cell(rec: KernelRecord) -> str:
    status = rec["baseline_status"]
    if status == "none" or rec["registers"] is None:
        return "-"
    if status == "new":
        return "new"
    if status == "new-release":
        return f"new for {one_line(rec['release'])} (entries: {one_line(', '.join(rec['other_releases']))})"
    cells = ", ".join(_delta_cell(d) for d in rec["deltas"]) or "="
    if status == "toolkit-mismatch":
        old = rec["baseline"]["ptxas"] if rec["baseline"] else "?"
        return f"{cells} (ptxas {one_line(str(old))}, not enforced)"
    return f"{cells} (options changed)" if rec["options_changed"] else cells


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def regs_cell(rec: KernelRecord) -> str:
    """`168`, or with warpgroup roles `168 (inc 232, dec 40)`: the entry count, then each role's target."""
    roles = rec.get("setmaxnreg") or []
    if rec["registers"] is None or not roles:
        return _cell(rec["registers"])
    ignored = any("C7508" in m for m in rec.get("ptxas_messages") or [])
    shown = ", ".join(f"{d} {n}" for d, n in roles)
    # The PTX asks for the roles; after a C7508 the kernel runs at its entry count throughout.
    return f"{rec['registers']} ({shown}: ignored by ptxas)" if ignored else f"{rec['registers']} ({shown})"


def _messages_note(rec: KernelRecord) -> str:
    count = len(rec.get("ptxas_messages") or [])
    return f", {count} ptxas msg" if count else ""


def enforced(rec: KernelRecord) -> bool:
    """Held to a baseline entry of its own release with every number comparable (as KernelReport's)."""
    return rec["baseline_status"] == "compared" and rec["spill_stores"] is not None


def release_label(release: str) -> str:
    """ "CUDA 12.9" for a toolkit release; a release that is none ("prebuilt") as it is."""
    return f"CUDA {release}" if release[:1].isdigit() else release


def enforced_line(
    records: Sequence[KernelRecord], *, updating: bool = False, strict: bool = False
) -> str | None:
    """How many baseline entries this run measured were held to an entry of their release, and why the
    others were not: `52 of 52 baseline entries enforced (CUDA 12.9)`. Counted per entry (two tests of one
    kernel variant are one), a kernel without a key (a compile error) not at all. None when nothing was
    measured."""
    by_key: dict[tuple[str, ...], list[KernelRecord]] = {}
    for r in records:
        if r["registers"] is not None and r["key"]:
            by_key.setdefault(tuple(r["key"]), []).append(r)
    if not by_key:
        return None
    held = sum(1 for recs in by_key.values() if all(enforced(r) for r in recs))
    releases = sorted({r["release"] for recs in by_key.values() for r in recs if r["release"]})
    shown = [release_label(one_line(r)) for r in releases]
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
            "new-release": f"no entry for {release_label(one_line(first['release']))} yet",
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


def summary_lines(records: Sequence[KernelRecord]) -> list[str]:
    """A fixed-width table, one row per (test, kernel, arch), in a stable order."""
    if not records:
        return []
    header: tuple[str, ...] = (
        "test",
        "kernel",
        "arch",
        "regs",
        "spill st/ld",
        "stack",
        "smem",
        "occupancy",
        "cliff",
        "baseline",
        "verdict",
    )
    rows: list[tuple[str, ...]] = []
    for rec in _sorted(records):
        spills = "-" if rec["spill_stores"] is None else f"{rec['spill_stores']}/{rec['spill_loads']}"
        occ = "-"
        if rec["occupancy"] is not None and rec["launch"]:
            occ = f"{rec['occupancy']:.0%} @{rec['launch'][0]}"
        rows.append(
            (
                one_line(rec["nodeid"].split("::", 1)[-1]),
                one_line(rec["kernel"]),
                one_line(rec["arch"]),
                regs_cell(rec),
                spills,
                _cell(rec["stack_frame"]),
                _cell(rec["shared_mem"]),
                occ,
                _cliff_cell(rec),
                baseline_cell(rec),
                (rec["outcome"].upper() if rec["outcome"] != "passed" else "ok") + _messages_note(rec),
            )
        )
    numeric = {"regs", "stack", "smem"}
    if any(rec["spill_instructions"] is not None for rec in records):
        header = (*header[:5], "spill instr loop/all", *header[5:])
        rows = [
            (*row[:5], _sass_cell(rec), *row[5:]) for row, rec in zip(rows, _sorted(records), strict=True)
        ]
    if any(rec["gpu_device"] for rec in records):
        header, rows = _with_gpu_columns(header, rows, _sorted(records))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    # Right-justified by name: optional columns (SASS, GPU) shift the positions.
    right = [h in numeric for h in header]

    def fmt(row: Iterable[str]) -> str:
        cells = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True)]
        return "  ".join(cells).rstrip()

    # The test column leads each row: a non-Python item's id could start with "::".
    return [fmt(header), fmt("-" * w for w in widths), *(safe_block(fmt(row)) for row in rows)]


def _cliff_cell(rec: KernelRecord) -> str:
    """`+3/-5`: registers it can grow before losing a block / must shed to gain one."""
    if rec["cliff_grow"] is None:
        return "-"
    shed = "-" if rec["cliff_shed"] is None else f"-{rec['cliff_shed']}"
    return f"+{rec['cliff_grow']}/{shed}"


def _sass_cell(rec: KernelRecord) -> str:
    if rec["spill_instructions"] is None:
        return "-"
    return f"{rec['spill_instructions_in_loops']}/{rec['spill_instructions']}"


def _with_gpu_columns(
    header: tuple[str, ...], rows: list[tuple[str, ...]], records: list[KernelRecord]
) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Occupancy and time side by side: either alone can be made to look like an improvement."""
    extra = ("drv regs", "drv occ", "time ms", "noise", "base ms", "ratio")
    out = []
    for row, rec in zip(rows, records, strict=True):
        occ = rec["driver_occupancy"]
        t, base, ratio = rec["time_ms"], rec["baseline_time_ms"], rec["time_ratio"]
        cells = (
            _cell(rec["driver_registers"]),
            "-" if occ is None else f"{occ:.0%}",
            "-" if t is None else f"{t:.4g}",
            "-" if rec["noise"] is None else f"{rec['noise']:.1%}",
            "-" if base is None else f"{base:.4g}",
            "-" if ratio is None else f"x{ratio:.3f}",
        )
        out.append((*row[:-1], *cells, row[-1]))
    return (*header[:-1], *extra, header[-1]), out


def json_text(
    records: Sequence[KernelRecord], extra: Mapping[str, object] | None = None, first: Sequence[str] = ()
) -> str:
    """`{"kernels": [...], **extra}`, the kernels sorted by test, kernel and arch; the keys of `extra`
    named in `first` come before the kernels (a reader sees the format and version first)."""
    extra = dict(extra or {})
    head = {k: extra.pop(k) for k in first if k in extra}
    return json.dumps({**head, "kernels": _sorted(records), **extra}, indent=2) + "\n"


def _label(rec: KernelRecord) -> str:
    return one_line(f"{rec['kernel']} [{rec['arch']}] ({rec['nodeid']})")


# A suite that lost a directory of tests has thousands of stale entries: name a few, count the rest.
STALE_SHOWN = 10


def baseline_lines(
    records: Sequence[KernelRecord],
    stale: Sequence[Key],
    *,
    updating: bool,
    kept: Sequence[str] = (),
) -> list[str]:
    """Improvements to lock in and stale entries to remove, each ending with what to do; during an update,
    `kept` says which entries the run could not judge and why."""
    lines = []
    improved = [
        (rec, [d for d in rec["deltas"] if d["verdict"] == "better"])
        for rec in _sorted(records)
        if rec["baseline_status"] == "compared"
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
    lines += kept
    return [safe_block(line) for line in lines]


def key_text(key: Sequence[str]) -> str:
    """`kernels/poly.cu poly_eval (NACC=8) [sm_90, CUDA 12.9]` for a kernel's entry."""
    source, kernel, variant, arch, release = key
    shown = "" if variant == NO_VARIANT else f" ({variant})"
    return f"{source} {kernel}{shown} [{arch}, {release_label(release)}]"


def unknown_arch_lines(keys: Iterable[Key], baseline: str) -> list[str]:
    """A line per arch of the baseline that this plugin does not know (a typo or a hand edit): no run can
    build for it, so its entries are never checked, and no update removes them."""
    by_arch: dict[str, list[Key]] = {}
    for key in keys:
        by_arch.setdefault(key[3], []).append(key)
    lines = []
    for arch, found in sorted(by_arch.items()):
        try:
            get_arch(arch)
        except UnknownArchError as exc:
            example = key_text(min(found))
            entries = f"{len(found)} entr{'y' if len(found) == 1 else 'ies'}"
            lines.append(
                one_line(
                    f"baseline {baseline}: {entries} for arch {arch!r} (e.g. {example}) are never "
                    f"checked and never removed: correct the arch or delete them; {exc}"
                )
            )
    return [safe_block(line) for line in lines]


def _md_code(text: str) -> str:
    """`text` as a code span that fits in one table cell, whatever backticks or pipes it holds."""
    text = one_line(text).replace("|", "\\|")
    if not text:
        return "-"
    # A fence one backtick longer than any run inside; a space keeps a backtick at an end off the fence.
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


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
_MD_FOLDS = {
    "new": "new kernel{s}",
    "unchanged": "unchanged kernel{s}",
    "no baseline": "kernel{s} with no baseline file",
}


def _md_text(text: str) -> str:
    """Our own wording and numbers in a table cell: one line, no column break. Outside text (names, logs,
    violations that quote them) goes in `_md_code`, where no Markdown, HTML or @mention is read."""
    return one_line(text).replace("|", "\\|")


def _md_name(rec: KernelRecord) -> str:
    """`poly_eval (NACC=8)`: the kernel and its variant, as its baseline entry names it, in a code span."""
    variant = rec["key"][2] if rec["key"] and len(rec["key"]) == 5 else NO_VARIANT
    return _md_code(rec["kernel"] if variant == NO_VARIANT else f"{rec['kernel']} ({variant})")


def _md_kind(rec: KernelRecord) -> str:
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


def _md_facts(rec: KernelRecord) -> str:
    """`102 registers, no spills, occupancy 25% at 256 threads`: what a new kernel brings."""
    parts = [f"{rec['registers']} registers"]
    stores, loads = rec["spill_stores"], rec["spill_loads"]
    if stores is None:
        parts.append("spills unknown")
    elif stores == loads == 0:
        parts.append("no spills")
    else:
        parts.append(f"{stores} B spill stores, {loads} B spill loads")
    if rec["occupancy"] is not None and rec["launch"]:
        parts.append(f"occupancy {rec['occupancy']:.0%} at {rec['launch'][0]} threads")
    return ", ".join(parts)


def _md_rows(rec: KernelRecord, arch: str) -> tuple[list[str], list[str]]:
    """A kernel's rows, one per failed or changed metric with the reason, its failures first; and the fixes
    its failures name."""
    kernel = _md_name(rec)
    flag = _MD_FLAGS.get(rec["outcome"], "")

    def row(verdict: str, what: str) -> str:
        return f"| {verdict} | {kernel} | {arch} | {what} |"

    if rec["registers"] is None:
        first = (rec["error"] or "").strip().splitlines()[:1]
        return [row(flag or "**ERROR**", f"did not compile: {_md_code(' '.join(first))}")], []
    if not flag and rec["baseline_status"] in ("new", "new-release"):
        what = _md_facts(rec)
        if rec["baseline_status"] == "new-release":
            others = _md_code(", ".join(rec["other_releases"]))
            what += f"; no entry for {_md_text(release_label(rec['release']))} yet (entries: {others})"
        return [row("new", what)], []
    # A regression the baseline caught is a violation that starts with its delta's text: one row for both,
    # and its fix said once, under the table.
    caught = {
        delta_text(d["metric"], d["baseline"], d["now"]) for d in rec["deltas"] if d["verdict"] == "worse"
    }
    rows, fixes = [], []
    for v in rec["violations"]:
        text = next((t for t in caught if v.startswith(t + " ")), None)
        if text is None:
            rows.append(row(flag, _md_code(v)))  # a budget's sentence, which may quote names
            continue
        caught.discard(text)
        why, _, fix = v.partition("; ")
        rows.append(row(flag, _md_text(why)))
        fixes += [fix] if fix else []
    notes = []
    if rec["baseline_status"] == "toolkit-mismatch":
        old = rec["baseline"]["ptxas"] if rec["baseline"] else "?"
        notes.append(f"entry recorded with ptxas {_md_code(str(old))}")
    if rec["options_changed"]:
        notes.append("built with other options")
    note = f" ({'; '.join(notes)})" if notes else ""
    for d in rec["deltas"]:
        text = delta_text(d["metric"], d["baseline"], d["now"])
        if d["verdict"] != "worse" or text in caught:
            rows.append(row(_MD_CHANGES.get(d["verdict"], d["verdict"]), _md_text(text) + note))
    return rows, fixes


def _md_fold_row(rec: KernelRecord, arch: str) -> str:
    spills = "-" if rec["spill_stores"] is None else f"{rec['spill_stores']}/{rec['spill_loads']}"
    occ = "-"
    if rec["occupancy"] is not None and rec["launch"]:
        occ = f"{rec['occupancy']:.0%} @{rec['launch'][0]}"
    return f"| {_md_name(rec)} | {arch} | {_cell(rec['registers'])} | {spills} | {occ} |"


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


def markdown_report(records: Sequence[KernelRecord], *, limit: int = MARKDOWN_LIMIT) -> str:
    """The run as a pull-request comment and job summary: the verdict in one line, then a row per failed or
    changed metric (failures, warnings, changes, new kernels), the unchanged kernels folded. At most `limit`
    characters: past that, whole kernels are left out, and counted."""
    several = len({r["release"] for r in records if r["release"]}) > 1
    kinds: list[tuple[KernelRecord, str, str]] = []
    for rec in _sorted(records):
        # A run that compares toolkits has a row per release: the arch cell says which.
        arch = _md_text(rec["arch"] + (f" ({rec['release']})" if several and rec["release"] else ""))
        kinds.append((rec, arch, _md_kind(rec)))
    by_kind = {kind: [(rec, arch) for rec, arch, k in kinds if k == kind] for kind in _MD_KINDS}
    archs = ", ".join(sorted({_md_text(r["arch"]) for r in records}))
    verdict = ", ".join(_md_count(kind, len(recs)) for kind, recs in by_kind.items() if recs)
    enforced = enforced_line(records)
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
    fix_block = "\n".join(f"Fix: {_md_code(fix)}" for fix in dict.fromkeys(fixes))
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
    return "".join(b + "\n\n" for b in blocks)


def _escape(text: str, prop: bool = False) -> str:
    """GitHub workflow-command escaping (actions/toolkit's escapeData and escapeProperty).

    The runner reads a command up to the line break and a property up to ':' or ','. A message keeps its
    line breaks as %0A (the annotation shows them); a property is one line. Other non-printable characters
    are shown escaped.
    """
    text = one_line(text) if prop else "\n".join(one_line(line) for line in text.splitlines())
    text = text.replace("%", "%25").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github_annotations(records: Sequence[KernelRecord], rootdir: Path) -> list[str]:
    """`::error file=...,line=N,title=...::message` at each failing kernel's __global__ line."""
    base = Path(os.environ.get("GITHUB_WORKSPACE") or rootdir)
    out = []
    for rec in _sorted(records):
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
