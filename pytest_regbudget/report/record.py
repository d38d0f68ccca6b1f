"""One kernel's verdict as a record: what the JSON report holds and what pytest-xdist workers send.

Owns the record format (a plain dict, so pytest-xdist workers can ship it to the controller unchanged), the
JSON report's text, and the readers of a record's numbers that the renderers share (`spills`, `value`). Like
core/baseline.py for the baseline file, it spells each metric's field of the file out: the TypedDict must,
for mypy to check the renderers. terminal.py, markdown.py, html.py and compare.py render records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, cast

from msgspec import to_builtins

from ..core.kernel_report import Delta, KernelReport
from ..core.metrics import Metric
from ..core.ratchet import entry_of_report
from ..core.sass_report import SassReport


class DeltaRecord(TypedDict):
    metric: str
    baseline: float
    now: float
    delta: float
    verdict: str


class ReportRecord(TypedDict):
    """One kernel's verdict. Its arrays are Sequences: tuples in the run that made it (a record of a
    library's thousands then holds nothing the garbage collector walks), lists once read back from a JSON
    report. Readers accept both (test_records_render_the_same_before_and_after_the_json_report)."""

    nodeid: str
    kernel: str
    entry: str | None
    arch: str
    source: str
    registers: int | None
    spill_stores: int | None  # bytes, the kernel's own and its callees'
    spill_loads: int | None
    # Version 6: the callees' part of spill_stores and spill_loads (None where spills are unknown), and the
    # callees that spill, each {"name" (as ptxas names it), "spill_stores", "spill_loads"}.
    spill_stores_callees: int | None
    spill_loads_callees: int | None
    spilling_callees: Sequence[dict[str, object]]
    stack_frame: int | None
    shared_mem: int | None
    const_mem: int | None
    barriers: int | None
    max_threads: int | None
    min_blocks_per_sm: int | None
    launch: Sequence[int] | None
    dynamic_smem: int
    occupancy: float | None
    active_blocks: int | None
    limiter: str | None
    outcome: str
    level: str
    violations: Sequence[str]
    error: str | None
    ptxas_line: str | None
    ptxas_version: str
    nvrtc_version: str
    compiler: str  # the source kind that produced the numbers (nvrtc, nvcc, triton, numba, binary, string)
    release: str  # the toolkit release of the numbers ("12.9"), which picks the baseline entry
    options_hash: str
    options_changed: bool  # built with other options than its baseline entry
    settings_change: (
        str | None
    )  # what changed in its build settings since the entry (ratchet.settings_change)
    ptxas_messages: Sequence[str]  # ptxas's warnings and performance-loss notes for this kernel
    setmaxnreg: Sequence[Sequence[object]]  # its warpgroups' register targets: [["inc", 232], ["dec", 40]]
    # The PTX asks for the roles, but the machine code does not keep them (no USETMAXREG in its SASS, or
    # ptxas's C7508): the kernel runs at its entry count.
    setmaxnreg_dropped: bool
    # The baseline's [source, kernel, variant, arch, release]; None for a compile error.
    key: Sequence[str] | None
    found_under: Sequence[str] | None  # the older key its entry was read under, which an update moves it from
    line: int | None
    baseline_status: str  # none (no baseline file), new, new-release, compared, toolkit-mismatch
    other_releases: Sequence[str]  # with new-release: the releases that have an entry for this kernel
    baseline: dict[str, object] | None
    # The baseline entry these numbers make (ratchet.entry_of_report), as TOML: what an update writes, from a
    # pytest run or a merge of shards (update/plan.py). None for a kernel without numbers.
    measured: dict[str, object] | None
    deltas: Sequence[DeltaRecord]
    gpu_device: str | None
    driver_registers: int | None
    driver_local_bytes: int | None
    driver_max_threads: int | None
    driver_blocks: int | None
    driver_occupancy: float | None
    model_defects: Sequence[str]
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
    local_instructions: int | None  # LDL/STL: 0 without local memory, else counted where the SASS was read
    # Where the SASS was read, estimated per thread (core/estimate.py): the share of executed instructions
    # that are local loads and stores, the counts it divides, the source lines by their executed local
    # instructions ({"where", "executed", "share"}, hottest first) and each source loop once ({"where",
    # "trips", "known", "copies", "local_executed"}). None and [] where the SASS was not read.
    local_share: float | None
    instructions_executed: float | None
    local_executed: float | None
    spill_executed: float | None
    local_lines: Sequence[dict[str, object]]
    loops: Sequence[dict[str, object]]
    # The most general registers live at one instruction, and where: {"live", "where", "loop"} (`where`
    # "poly.cu:19", `loop` the SASS loop around it or null; core/liveness.py). Where the SASS is read, or a
    # register budget fails, and nvdisasm gives life ranges of the cubin; else null.
    peak_live: dict[str, object] | None
    diagnosis: Sequence[str]
    cliff_blocks: int | None
    cliff_grow: int | None
    cliff_shed: int | None
    cliff_blocks_if_shed: int | None
    # Tensor memory: the columns one block allocates (tcgen05.alloc; null without one, or where unknown), the
    # blocks that hold theirs at once (512 // columns), and where the count comes from ("ptx", "stated" by
    # tmem_cols where the PTX's cannot be read, "unknown"; null without tcgen05.alloc).
    tmem_cols: int | None
    tmem_blocks: int | None
    tmem_source: str | None
    cluster_dims: Sequence[int] | None  # the compiled __cluster_dims__ (.reqnctapercluster), [x, y, z]
    # The cluster the kernel runs with: cluster_dims, else the marker's cluster=.
    cluster: Sequence[int] | None
    driver_active_clusters: int | None  # cuOccupancyMaxActiveClusters at the launch, on a GPU runner
    # Version 7: a Triton kernel's parameters as compiled, in Triton's AOT syntax ({"X": "*fp16:16",
    # "N": "i32", "BLOCK": "constexpr 1024"}, in parameter order), and its autotune config (Triton's
    # str(config)); null for other kernels.
    triton_signature: dict[str, str] | None
    triton_config: str | None


def _delta_record(d: Delta) -> DeltaRecord:
    return DeltaRecord(metric=d.metric, baseline=d.baseline, now=d.now, delta=d.change, verdict=d.verdict)


def to_record(r: KernelReport) -> ReportRecord:
    res, occ = r.resources, r.occupancy
    launch = None
    if r.launch is not None:
        launch = (r.launch.threads,) if r.launch.blocks is None else (r.launch.threads, r.launch.blocks)
    # cast: the GPU fields are spread in from a plain dict, which TypedDict's constructor cannot check.
    return cast(
        ReportRecord,
        dict(
            nodeid=r.nodeid,
            kernel=r.kernel,
            entry=res.name if res else None,
            arch=r.arch,
            source=r.source,
            registers=res.registers if res else None,
            spill_stores=res.spill_stores if res and res.spills_known else None,
            spill_loads=res.spill_loads if res and res.spills_known else None,
            spill_stores_callees=res.spill_stores_callees if res and res.spills_known else None,
            spill_loads_callees=res.spill_loads_callees if res and res.spills_known else None,
            spilling_callees=tuple(
                {"name": c.name, "spill_stores": c.spill_stores, "spill_loads": c.spill_loads}
                for c in (res.spilling_callees if res else ())
            ),
            stack_frame=res.stack if res else None,
            shared_mem=res.smem if res else None,
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
            violations=tuple(r.violations),
            error=r.error,
            ptxas_line=res.ptxas_line if res else None,
            ptxas_version=r.ptxas_version,
            nvrtc_version=r.nvrtc_version,
            compiler=r.compiler,
            release=r.release,
            options_hash=r.options_hash,
            options_changed=r.options_changed,
            settings_change=r.settings_change,
            ptxas_messages=r.messages,
            setmaxnreg=r.setmaxnreg,
            setmaxnreg_dropped=r.setmaxnreg_dropped,
            key=r.key or None,
            found_under=r.found_under or None,
            line=r.line,
            baseline_status=r.baseline_status,
            other_releases=r.other_releases,
            baseline=r.baseline.to_toml() if r.baseline else None,
            measured=entry_of_report(r).to_toml() if res else None,
            deltas=tuple(_delta_record(d) for d in r.deltas),
            **_gpu_fields(r),
            spill_instructions=r.sass.spill_instructions if r.sass else None,
            spill_instructions_in_loops=r.sass.spill_instructions_in_loops if r.sass else None,
            local_instructions=res.local_instructions if res else None,
            **_estimate_fields(r.sass),
            peak_live=None if r.peak_live is None else to_builtins(r.peak_live),
            diagnosis=tuple(r.diagnosis),
            cliff_blocks=r.cliff.blocks if r.cliff else None,
            cliff_grow=r.cliff.grow if r.cliff else None,
            cliff_shed=r.cliff.shed if r.cliff else None,
            cliff_blocks_if_shed=r.cliff.blocks_if_shed if r.cliff else None,
            tmem_cols=r.tmem.columns if r.tmem else None,
            tmem_blocks=r.tmem.blocks if r.tmem else None,
            tmem_source=r.tmem.source if r.tmem else None,
            cluster_dims=res.cluster_dims if res and res.cluster_dims else None,
            cluster=r.cluster or None,
            triton_signature=dict(r.triton_signature) if r.triton_signature else None,
            triton_config=r.triton_config,
        ),
    )


def _estimate_fields(sass: SassReport | None) -> dict[str, Any]:
    if sass is None or not sass.executed:
        return {
            "local_share": None,
            "instructions_executed": None,
            "local_executed": None,
            "spill_executed": None,
            "local_lines": (),
            "loops": (),
        }
    total = sass.local_executed
    lines = tuple(
        {"where": where, "executed": round(executed, 2), "share": round(executed / total, 4)}
        for where, executed in sass.local_lines()[:10]
    )
    loops = tuple(
        {
            "where": where,
            "trips": max(lp.trips for lp in found),
            "known": all(lp.known for lp in found),
            "copies": len(found),
            "local_executed": round(sum(a.runs for a in sass.local if a.loop in found), 2),
        }
        for where, found in sass.source_loops().items()  # one source loop once, with its copies
    )
    return {
        "local_share": round(sass.local_share, 4),
        "instructions_executed": round(sass.executed, 2),
        "local_executed": round(sass.local_executed, 2),
        "spill_executed": round(sass.spill_executed, 2),
        "local_lines": lines,
        "loops": loops,
    }


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
        "driver_active_clusters": g.driver_active_clusters if g else None,
        "model_defects": tuple(r.model_defects),
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


def value(rec: Mapping[str, object], metric: Metric) -> object:
    """A metric of the table as a record holds it (under its JSON field)."""
    return rec.get(metric.field)


def spills(rec: Mapping[str, object]) -> tuple[int, int] | None:
    """(stores, loads) in bytes of a record or a baseline entry's table; None where unknown (a binary) or
    not built."""
    stores, loads = rec.get("spill_stores"), rec.get("spill_loads")
    if not isinstance(stores, int) or not isinstance(loads, int):
        return None
    return stores, loads


def sorted_records(records: Iterable[ReportRecord]) -> list[ReportRecord]:
    return sorted(records, key=lambda r: (r["nodeid"], r["kernel"], r["arch"]))


def json_text(
    records: Sequence[ReportRecord], extra: Mapping[str, object] | None = None, first: Sequence[str] = ()
) -> str:
    """`{"kernels": [...], **extra}`, the kernels sorted by test, kernel and arch; the keys of `extra`
    named in `first` come before the kernels (a reader sees the format and version first)."""
    extra = dict(extra or {})
    head = {k: extra.pop(k) for k in first if k in extra}
    return json.dumps({**head, "kernels": sorted_records(records), **extra}, indent=2) + "\n"
