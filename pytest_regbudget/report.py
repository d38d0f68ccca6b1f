"""What the run tells people: the terminal table, baseline deltas, JSON, Markdown and GitHub annotations.

Owns the record format (a plain dict, so pytest-xdist workers can ship it to the controller unchanged) and
every rendering of it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

from .arch import get_arch
from .baseline import NO_VARIANT
from .budget import Delta, KernelReport, delta_text
from .errors import UnknownArchError
from .text import one_line, safe_block


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


def _baseline_cell(rec: KernelRecord) -> str:
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


def enforced(rec: KernelRecord) -> bool:
    """Held to a baseline entry of its own release with every number comparable (as KernelReport's)."""
    return rec["baseline_status"] == "compared" and rec["spill_stores"] is not None


def release_label(release: str) -> str:
    """ "CUDA 12.9" for a toolkit release; a release that is none ("prebuilt") as it is."""
    return f"CUDA {release}" if release[:1].isdigit() else release


def enforced_line(records: Sequence[KernelRecord], *, updating: bool = False) -> str | None:
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
        line += " (this update records them)" if updating else " (--regbudget-strict fails them)"
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
                _cell(rec["registers"]),
                spills,
                _cell(rec["stack_frame"]),
                _cell(rec["shared_mem"]),
                occ,
                _cliff_cell(rec),
                _baseline_cell(rec),
                rec["outcome"].upper() if rec["outcome"] != "passed" else "ok",
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


def json_text(records: Sequence[KernelRecord], extra: Mapping[str, object] | None = None) -> str:
    """`{"kernels": [...], **extra}`, the kernels sorted by test, kernel and arch."""
    return json.dumps({"kernels": _sorted(records), **(extra or {})}, indent=2) + "\n"


def _label(rec: KernelRecord) -> str:
    return one_line(f"{rec['kernel']} [{rec['arch']}] ({rec['nodeid']})")


# A suite that lost a directory of tests has thousands of stale entries: name a few, count the rest.
STALE_SHOWN = 10


def baseline_lines(
    records: Sequence[KernelRecord],
    stale: Sequence[tuple[str, ...]],
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
    """`kernels/poly.cu poly_eval (NACC=8) [sm_90]` for a kernel's entry; `test_id kernel [sm_90]` for a
    version-1 entry (keyed by test)."""
    if len(key) == 5:
        source, kernel, variant, arch, release = key
        shown = "" if variant == NO_VARIANT else f" ({variant})"
        return f"{source} {kernel}{shown} [{arch}, {release_label(release)}]"
    return f"{' '.join(key[:-1])} [{key[-1]}]"


def unknown_arch_lines(keys: Iterable[tuple[str, ...]], baseline: str) -> list[str]:
    """A line per arch of the baseline that this plugin does not know (a typo or a hand edit): no run can
    build for it, so its entries are never checked, and no update removes them."""
    by_arch: dict[str, list[tuple[str, ...]]] = {}
    for key in keys:
        by_arch.setdefault(key[3] if len(key) == 5 else key[-1], []).append(key)
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


def markdown_report(records: Sequence[KernelRecord]) -> str:
    """A GitHub-flavoured table for the job summary: a row per changed metric or per kernel."""
    rows = ["| kernel | arch | metric | baseline | now | delta | verdict |", "|---|---|---|---|---|---|---|"]
    verdicts = {"passed": "ok", "failed": "**FAILED**", "warned": "warning", "error": "**ERROR**"}
    # A run that compares toolkits has a row per release: the arch cell says which.
    several = len({r["release"] for r in records if r["release"]}) > 1
    for rec in _sorted(records):
        kernel = _md_code(rec["kernel"])
        arch = one_line(rec["arch"] + (f" ({rec['release']})" if several and rec["release"] else ""))
        arch = arch.replace("|", "\\|")
        outcome = verdicts.get(rec["outcome"], rec["outcome"])
        if rec["registers"] is None:
            first = (rec["error"] or "").strip().splitlines()[:1]
            rows.append(
                f"| {kernel} | {arch} | compile | - | - | - | {outcome}: {_md_code(' '.join(first))} |"
            )
            continue
        for d in rec["deltas"]:
            if d["metric"] == "occupancy":
                values = f"{d['baseline']:.1%} | {d['now']:.1%} | {d['delta'] * 100:+.1f} pts"
            else:
                values = f"{d['baseline']:g} | {d['now']:g} | {d['delta']:+g}"
            rows.append(f"| {kernel} | {arch} | {d['metric']} | {values} | {d['verdict']} |")
        if not rec["deltas"]:
            old = rec["baseline"]["registers"] if rec["baseline"] else "-"
            new = rec["baseline_status"] in ("new", "new-release")
            delta = "new" if new else "0" if rec["baseline"] else "-"
            rows.append(
                f"| {kernel} | {arch} | registers | {old} | {rec['registers']} | {delta} | {outcome} |"
            )
        elif rec["outcome"] != "passed":
            rows[-1] = rows[-1].rsplit("|", 2)[0] + f"| {outcome} |"
    failed = sum(1 for r in records if r["outcome"] in ("failed", "error"))
    title = f"### pytest-regbudget: {len(records)} kernel checks, {failed} failed\n\n"
    return title + "\n".join(rows) + "\n\n"


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
