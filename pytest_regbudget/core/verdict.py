"""KernelResources + Limits -> a KernelReport whose violations are sentences a user can act on.

Owns the wording of every budget verdict: which number, which limit, which arch, and the next step.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from .arch import get_arch
from .baseline import Entry, Key, base_nodeid
from .diagnosis import diagnose
from .facts import KernelFacts, release_of
from .limits import Launch, Level, Limits
from .occupancy import (
    BARRIERS,
    BLOCKS,
    LAUNCH,
    REGISTERS,
    SHARED_MEMORY,
    WARPS,
    Cliff,
    Occupancy,
    occupancy,
    register_cliff,
)
from .ptxas import KernelResources, message_key
from .text import one_line, safe_block

if TYPE_CHECKING:
    from .gpu_facts import GpuFacts, Timing  # made on a GPU only (gpu.py)
    from .sass import SassReport  # read only where asked for: a run without it does not import the parser
    from .timing import Interval  # GPU timing only, imported where a kernel is timed
    from .timing import Verdict as TimeStatus

Outcome = Literal["passed", "failed", "warned", "error"]
DeltaVerdict = Literal["worse", "better", "same", "tolerated"]
# none: no baseline file; new: no entry; new-release: entries for other toolkit releases only (a CUDA
# upgrade); compared: judged against its entry; toolkit-mismatch: an entry whose ptxas is of another release
# than its key says (a hand-edited file).
BaselineStatus = Literal["none", "new", "new-release", "compared", "toolkit-mismatch"]

# Metrics the ratchet compares: for all but occupancy, more is worse.
RATCHET_METRICS = ("registers", "spill_stores", "spill_loads", "stack", "smem", "occupancy")


@dataclass(frozen=True)
class Delta:
    metric: str
    baseline: float
    now: float
    verdict: DeltaVerdict
    tolerance: float = 0

    @property
    def change(self) -> float:
        return self.now - self.baseline

    def text(self) -> str:
        return delta_text(self.metric, self.baseline, self.now)


def delta_text(metric: str, baseline: float, now: float) -> str:
    """`registers 72 -> 80 (+8)`; occupancy in percent."""
    if metric == "occupancy":
        return f"occupancy {baseline:.1%} -> {now:.1%} ({(now - baseline) * 100:+.1f} pts)"
    return f"{metric} {baseline:g} -> {now:g} ({now - baseline:+g})"


def compare(old: Entry, new: Entry, tolerance: Mapping[str, float]) -> list[Delta]:
    """Every ratchet metric that differs between `old` and `new`, judged with `tolerance`."""
    deltas = []
    for metric in RATCHET_METRICS:
        if metric == "occupancy":
            # At the same launch only: a kernel's occupancy is a property of (kernel, block size).
            common = [at for at in new.occupancy if at in old.occupancy]
            if not common:
                continue
            was, now = old.occupancy[common[0]], new.occupancy[common[0]]
            # Lower occupancy is worse: flip the sign so "worse" means a positive change below.
            before, after = -was, -now
        else:
            if getattr(old, metric) is None or getattr(new, metric) is None:
                continue  # unknown (a binary's spills): nothing to compare
            before = was = float(getattr(old, metric))
            after = now = float(getattr(new, metric))
        if was == now:
            continue
        allowed = tolerance.get(metric, tolerance.get("spills", 0.0) if metric.startswith("spill") else 0.0)
        if after < before:
            verdict: DeltaVerdict = "better"
        elif after - before <= allowed + 1e-9:
            verdict = "tolerated"
        else:
            verdict = "worse"
        deltas.append(Delta(metric, was, now, verdict, allowed))
    return deltas


@dataclass(frozen=True)
class KernelReport:
    """One kernel on one arch in one test: what ptxas said, what it means, and the verdict.

    Immutable: `verdict()` makes it whole, and `timed()` makes the final one of a timed kernel.
    """

    nodeid: str
    kernel: str
    arch: str
    source: str
    resources: KernelResources | None
    launch: Launch | None = None
    dynamic_smem: int = 0
    occupancy: Occupancy | None = None
    violations: list[str] = field(default_factory=list)
    level: Level = "fail"
    error: str | None = None  # a compile error, when there are no resources
    ptxas_version: str = ""
    nvrtc_version: str = ""
    compiler: str = ""  # the source kind that produced the numbers: nvrtc, nvcc, triton, numba, binary...
    release: str = ""  # the toolkit release of those numbers ("12.9"): the baseline entry's
    options_hash: str = ""
    line: int | None = None  # the kernel's __global__ line in `source`, for annotations
    baseline: Entry | None = None
    baseline_status: BaselineStatus = "none"
    deltas: list[Delta] = field(default_factory=list)
    gpu: GpuFacts | None = None
    model_defects: list[str] = field(default_factory=list)
    timing: Timing | None = None
    baseline_time_ms: float | None = None
    gpu_note: str | None = None  # why GPU checks did not run, or what they lacked
    sass: SassReport | None = None
    diagnosis: list[str] = field(default_factory=list)
    cliff: Cliff | None = None
    key: Key | None = None  # the baseline's (source, kernel, variant, arch, release)
    options_changed: bool = False  # built with other options than its baseline entry (still enforced)
    time_status: TimeStatus | None = None  # pass, fail, or ambiguous (noisy, decided on the median)
    messages: tuple[str, ...] = ()  # ptxas's warnings and performance-loss notes for this kernel
    setmaxnreg: tuple[tuple[str, int], ...] = ()  # its warpgroups' register targets, by direction
    other_releases: tuple[str, ...] = ()  # releases with an entry for this kernel, when its own has none

    @property
    def enforced(self) -> bool:
        """Held to a baseline entry of its own release, every number comparable (strict mode's test)."""
        r = self.resources
        return self.baseline_status == "compared" and r is not None and r.spills_known

    def unenforced_reason(self) -> str:
        """Why this kernel is not `enforced`, for strict mode's failure."""
        if self.resources is None:
            return "it did not build"
        if self.baseline_status == "new-release":
            others = ", ".join(self.other_releases)
            return f"the baseline has no CUDA {self.release} entry for it (only {others})"
        if self.baseline_status == "toolkit-mismatch" and self.baseline is not None:
            old, now = self.baseline.ptxas, self.ptxas_version
            return f"its entry was recorded with ptxas {old}, this build used {now}"
        if self.baseline_status in ("new", "none"):
            return "the baseline has no entry for it" if self.baseline_status == "new" else "no baseline file"
        if not self.resources.spills_known:
            return "its spills are unknown (a prebuilt binary records none)"
        return "it was not compared"

    @property
    def registers(self) -> int | None:
        return self.resources.registers if self.resources else None

    @property
    def spill_stores(self) -> int | None:
        return self.resources.spill_stores if self.resources else None

    @property
    def spill_loads(self) -> int | None:
        return self.resources.spill_loads if self.resources else None

    @property
    def stack_frame(self) -> int | None:
        return self.resources.stack_frame if self.resources else None

    @property
    def shared_mem(self) -> int | None:
        return self.resources.shared_mem if self.resources else None

    @property
    def occupancy_at(self) -> str | None:
        """The launch the occupancy figure is for ("256 threads, 4096 B dynamic smem"), if there is one."""
        if self.occupancy is None or self.launch is None:
            return None
        dynamic = f", {self.dynamic_smem} B dynamic smem" if self.dynamic_smem else ""
        return f"{self.launch.threads} threads{dynamic}"

    @property
    def driver_occupancy(self) -> float | None:
        """The occupancy the driver grants at the launch size, where GPU checks ran."""
        if self.gpu is None or self.gpu.driver_blocks is None or self.occupancy is None:
            return None
        return self.occupancy.of_blocks(self.gpu.driver_blocks)

    @property
    def outcome(self) -> Outcome:
        if self.error is not None:
            return "error"
        if not self.violations:
            return "passed"
        return "warned" if self.level == "warn" else "failed"

    @property
    def label(self) -> str:
        return f"{one_line(self.kernel)} [{self.arch}]"

    def failure_text(self) -> str:
        """The lines a failing test shows: one per violated budget, then ptxas's own line.

        pytest prints them as they are, so no line may read as a GitHub workflow command.
        """
        lines = [f"{self.label}: {v}" for v in self.violations]
        if self.resources is not None:
            lines.append(f"    ptxas: {self.resources.ptxas_line}")
        lines += [f"    diagnosis: {d}" for d in self.diagnosis]
        return safe_block("\n".join(lines))


def _bytes(n: int) -> str:
    return f"{n:,} bytes"


def _occupancy(
    arch: str, r: KernelResources, threads: int, dynamic_smem: int, regs: int | None = None
) -> Occupancy:
    return occupancy(
        arch,
        r.registers if regs is None else regs,
        threads,
        r.shared_mem,
        dynamic_smem,
        r.max_threads,
        barriers=r.barriers,
    )


def _register_cap(arch: str, r: KernelResources, launch: Launch, dynamic_smem: int) -> int | None:
    """The most registers per thread at which the registers alone let `launch` fit: what
    __launch_bounds__(threads, blocks) makes ptxas aim for."""
    need = launch.blocks or 1
    for regs in range(255, 0, -1):
        by_regs = _occupancy(arch, r, launch.threads, dynamic_smem, regs).blocks_by_registers
        if by_regs is None or by_regs >= need:
            return regs
    return None


def _smem_room(arch: str, r: KernelResources, threads: int, need: int) -> int:
    """The most static + dynamic shared memory per block at which `need` blocks fit by shared memory."""
    lim = get_arch(arch)

    def fits(total: int) -> bool:
        occ = occupancy(arch, 0, threads, total, 0, r.max_threads, barriers=r.barriers)
        return occ.blocks_by_smem is None or occ.blocks_by_smem >= need

    low, high = 0, lim.smem_per_block_optin
    if not fits(low):
        return 0
    while low < high:  # fits() only turns false as the size grows
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


def _launch_fixes(arch: str, r: KernelResources, launch: Launch, occ: Occupancy) -> list[str]:
    """One way out per limit that holds the launch back: easing any other limit would not help."""
    lim = occ.limits
    need = launch.blocks or 1
    per_sm = f"for {need} blocks per SM" if need > 1 else "for one block"
    if launch.threads > lim.max_threads_per_block:
        return [
            f"a block of at most {lim.max_threads_per_block:,} threads, the most {arch} allows (launch more "
            "blocks to cover the same work)"
        ]
    short = occ.short_of(need)
    if WARPS in short or BLOCKS in short:
        # The launch's shape cannot fit whatever the kernel uses; fix it first, then its resources.
        short = tuple(limit for limit in short if limit in (WARPS, BLOCKS))
    fixes = []
    for limit in short:
        if limit == LAUNCH:
            fixes.append(
                f"a block of at most {occ.max_threads:,} threads, the kernel's own bound "
                f"(__launch_bounds__/.maxntid), or __launch_bounds__({launch.threads}) in the kernel"
            )
        elif limit == WARPS:
            most = lim.max_warps_per_sm // need * lim.warp_size
            fixes.append(
                f"a block of at most {most:,} threads {per_sm} ({lim.max_warps_per_sm} warps per SM on "
                f"{arch}), or fewer blocks per SM in launch="
            )
        elif limit == REGISTERS:
            fixes.append(_register_fix(arch, r, launch, occ))
        elif limit == SHARED_MEMORY:
            room = _smem_room(arch, r, launch.threads, need)
            fixes.append(
                f"at most {room:,} bytes of shared memory per block {per_sm} (now {r.shared_mem:,} static + "
                f"{occ.dynamic_shared_mem:,} dynamic): less static or dynamic shared memory, or a smaller "
                "block if its shared memory shrinks with it"
            )
        elif limit == BLOCKS:
            fixes.append(
                f"at most {lim.max_blocks_per_sm} blocks per SM in launch=, the most {arch} keeps resident "
                "whatever their size (bigger blocks reach the same threads per SM)"
            )
        elif limit == BARRIERS and lim.block_barriers_per_sm is not None:
            most = lim.block_barriers_per_sm // need
            fixes.append(
                f"at most {most} barriers per block {per_sm} (now {r.barriers}; {lim.block_barriers_per_sm} "
                f"per SM on {arch}): fewer named barriers (bar.sync ids)"
            )
    return fixes


def _register_fix(arch: str, r: KernelResources, launch: Launch, occ: Occupancy) -> str:
    bounds = f"{launch.threads}" if launch.blocks is None else f"{launch.threads}, {launch.blocks}"
    cap = _register_cap(arch, r, launch, occ.dynamic_shared_mem)
    lower = "" if cap is None else f"__launch_bounds__({bounds}) (ptxas then keeps it to {cap} registers), "
    fix = f"a smaller block, {lower}or fewer live values (less unrolling, smaller per-thread arrays)"
    if cap is not None and r.max_threads is None and r.min_blocks_per_sm is None:
        # With __launch_bounds__ in the source, ptxas ignores -maxrregcount (see diagnosis.py).
        fix += f"; -maxrregcount={cap} in ptxas_options caps every kernel of the file the same way"
    return fix


def _launch_violation(arch: str, r: KernelResources, launch: Launch, occ: Occupancy) -> str | None:
    problem = occ.shortfall(launch.blocks or 1)
    if problem is None:
        return None
    fixes = f"Fix: {'; and '.join(_launch_fixes(arch, r, launch, occ) or ['a smaller block'])}."
    if occ.failure is not None:
        return (
            f"launch={launch} cannot launch on {arch}: {occ.failure}; at run time this is "
            f"{_launch_error(occ)}. {fixes}"
        )
    return f"launch={launch}: {problem}. {fixes}"


def _launch_error(occ: Occupancy) -> str:
    """What the runtime answers a launch that no SM can hold."""
    if occ.block_size > occ.limits.max_threads_per_block:
        return "cudaErrorInvalidConfiguration"
    if occ.block_size > occ.max_threads or occ.blocks_by_registers == 0:
        return "cudaErrorLaunchOutOfResources"
    return "a launch failure"


def check(
    nodeid: str,
    kernel: str,
    arch: str,
    source: str,
    resources: KernelResources,
    limits: Limits,
    level: Level = "fail",
    gpu: GpuFacts | None = None,
    sass: SassReport | None = None,
    ptxas_options: Sequence[str] = (),
    **found: Any,
) -> KernelReport:
    """Every budget of `limits` against ptxas's numbers; occupancy at the launch size when one is given.

    With `gpu` (the driver's view of this very cubin), the driver must agree with ptxas, and
    `min_occupancy` is judged on the occupancy the driver grants. `found`: the report's other fields
    (verdict's, so that one report is made rather than copied).
    """
    r = limits
    res = resources
    violations: list[str] = []
    defects: list[str] = []
    if r.max_regs is not None and res.registers > r.max_regs:
        violations.append(f"registers {res.registers} > max_regs {r.max_regs}")
    if not res.spills_known and any(v is not None for v in (r.spills, r.spill_stores, r.spill_loads)):
        violations.append(
            "spill budgets cannot be checked: this binary does not record spill bytes. Check them where the "
            'kernel is compiled (source= with compiler="nvcc"), or drop the spill budget for the binary'
        )
    for metric, value in (("spill stores", res.spill_stores), ("spill loads", res.spill_loads)):
        if r.spills is not None and value > r.spills:
            violations.append(f"{metric} {_bytes(value)} > spills {r.spills}")
    if r.spill_stores is not None and res.spill_stores > r.spill_stores:
        violations.append(f"spill stores {_bytes(res.spill_stores)} > spill_stores {r.spill_stores}")
    if r.spill_loads is not None and res.spill_loads > r.spill_loads:
        violations.append(f"spill loads {_bytes(res.spill_loads)} > spill_loads {r.spill_loads}")
    if r.stack is not None and res.stack_frame > r.stack:
        violations.append(f"stack frame {_bytes(res.stack_frame)} > stack {r.stack}")
    if r.smem is not None and res.shared_mem > r.smem:
        violations.append(f"static shared memory {_bytes(res.shared_mem)} > smem {r.smem}")
    occ = None
    if r.launch is not None:
        occ = _occupancy(arch, res, r.launch.threads, r.dynamic_smem)
        launch_problem = _launch_violation(arch, res, r.launch, occ)
        if launch_problem:
            violations.append(launch_problem)
        driver_occ: float | None = None
        if gpu is not None and gpu.driver_blocks is not None:
            driver_occ = occ.of_blocks(gpu.driver_blocks)
            if gpu.driver_blocks != occ.active_blocks:
                defects.append(
                    f"the driver grants {gpu.driver_blocks} blocks of {r.launch.threads} threads per SM on "
                    f"{gpu.device}, the static calculator {occ.active_blocks} ({occ.summary}): a defect of "
                    "pytest-regbudget's occupancy model, please report it with this line"
                )
        if r.min_occupancy is not None:
            achieved = occ.occupancy if driver_occ is None else driver_occ
            source_name = occ.summary if gpu is None else f"as the driver of {gpu.device} grants it"
            if achieved < r.min_occupancy:
                violations.append(
                    f"occupancy {achieved:.1%} at {r.launch.threads} threads < min_occupancy "
                    f"{r.min_occupancy:.1%} ({source_name})"
                )
    cliff = None
    if r.launch is not None:
        cliff = register_cliff(
            arch,
            res.registers,
            r.launch.threads,
            res.shared_mem,
            r.dynamic_smem,
            res.max_threads,
            barriers=res.barriers,
        )
    if r.hot_spills is not None and sass is not None and sass.spill_instructions_in_loops > r.hot_spills:
        loops = sorted({a.loop.where() for a in sass.local if a.spill and a.loop is not None})
        violations.append(
            f"spill instructions in loops {sass.spill_instructions_in_loops} > hot_spills {r.hot_spills} "
            f"(loop at {', '.join(loops)})"
        )
    if gpu is not None:
        violations += _driver_disagreements(res, gpu)
        top = max_block(arch, res)
        if gpu.view.max_threads != top:
            defects.append(
                f"the driver allows blocks of up to {gpu.view.max_threads} threads on {gpu.device}, the "
                f"static calculator {top}: a defect of pytest-regbudget's occupancy model, please report it"
            )
    return KernelReport(
        nodeid=nodeid,
        kernel=kernel,
        arch=arch,
        source=source,
        resources=res,
        launch=r.launch,
        dynamic_smem=r.dynamic_smem,
        occupancy=occ,
        violations=violations,
        level=level,
        gpu=gpu,
        model_defects=defects,
        sass=sass,
        diagnosis=diagnose(res, arch, sass, ptxas_options, r.dynamic_smem),
        cliff=cliff,
        **found,
    )


def _driver_disagreements(res: KernelResources, gpu: GpuFacts) -> list[str]:
    """The driver loaded the cubin ptxas measured: any difference means the numbers are not this binary's."""
    out = []
    for what, ptxas_value, driver_value in (
        ("registers", res.registers, gpu.view.registers),
        ("local memory bytes", res.stack_frame, gpu.view.local_bytes),
        ("static shared memory bytes", res.shared_mem, gpu.view.shared_bytes),
    ):
        if ptxas_value != driver_value:
            out.append(
                f"the driver reports {driver_value} {what} for this cubin on {gpu.device}, ptxas reported "
                f"{ptxas_value}: the binary the driver runs is not the one measured"
            )
    return out


def max_block(arch: str, res: KernelResources) -> int:
    """The largest block that launches, as cuFuncGetAttribute(MAX_THREADS_PER_BLOCK) reports it.

    The driver folds .maxntid into that attribute but not .reqntid (seen on an H200 with Triton kernels,
    which declare .reqntid): a required block size is a launch rule, not a register limit.
    """
    lim = get_arch(arch)
    bound = math.prod(res.maxntid) if res.maxntid else None
    res = replace(res, max_threads=bound)
    top = min(lim.max_threads_per_block, bound or lim.max_threads_per_block)
    for threads in range(top, 0, -lim.warp_size if top % lim.warp_size == 0 else -1):
        if _occupancy(arch, res, threads, 0).active_blocks >= 1:
            return threads
    return 0


TimeBasis = Literal["time", "cycles"]
CLOCK_TOLERANCE = 0.05  # an SM clock this far from the baseline's is named in the verdict


def _on_basis(iv: Interval, clock: int | None, basis: TimeBasis) -> Interval:
    """A time interval in ms, or in millions of cycles (time x SM clock) where that is the basis."""
    return iv.scaled(clock / 1000) if basis == "cycles" and clock else iv


def time_verdict(
    report: KernelReport,
    limits: Limits,
    timing: Timing,
    base: Interval | None,
    base_clock: int | None = None,
    basis: TimeBasis = "time",
) -> tuple[list[str], TimeStatus | None]:
    """Time budgets from intervals (timing.py): `max_time_ms` on the median's interval, `max_time_ratio` on
    the interval of the ratio to this device's baseline. A ceiling fails when the whole interval lies above
    it; an interval that still straddles it after sampling is decided on the median, and says so. A kernel
    too short to time is not judged."""
    if timing.too_short:
        return [], None
    from .timing import Interval, ratio_interval
    from .timing import verdict as timing_verdict

    now = Interval(*timing.interval_ms)
    measured = (
        f"median {timing.median_ms:.4g} ms [{now.low:.4g}, {now.high:.4g}], {timing.samples} samples"
        + (f" of {timing.launches_per_sample} launches" if timing.launches_per_sample > 1 else "")
        + (f", SM clock {timing.sm_clock_mhz} MHz" if timing.sm_clock_mhz else "")
    )
    device = report.gpu.device if report.gpu else "this GPU"
    out, statuses = [], []
    if limits.max_time_ms is not None:
        status = timing_verdict(now, limits.max_time_ms)
        statuses.append(status)
        if status == "fail" or (status == "ambiguous" and now.median > limits.max_time_ms):
            noisy = " (ambiguous, noisy: decided on the median)" if status == "ambiguous" else ""
            out.append(
                f"time {timing.median_ms:.4g} ms > max_time_ms {limits.max_time_ms:g}{noisy} on {device} "
                f"({measured})"
            )
    if limits.max_time_ratio is not None and base is not None:
        clock = timing.sm_clock_mhz if basis == "cycles" and base_clock else None
        ratio = ratio_interval(
            _on_basis(now, clock, basis), _on_basis(base, base_clock if clock else None, basis)
        )
        status = timing_verdict(ratio, limits.max_time_ratio)
        statuses.append(status)
        if status == "fail" or (status == "ambiguous" and ratio.median > limits.max_time_ratio):
            noisy = " (ambiguous, noisy: decided on the median)" if status == "ambiguous" else ""
            what = "cycles" if clock else "time"
            out.append(
                f"{what} {base.median:.4g} -> {timing.median_ms:.4g} ms (x{ratio.median:.3f}, interval "
                f"[{ratio.low:.3f}, {ratio.high:.3f}]) > max_time_ratio {limits.max_time_ratio:g}{noisy} on "
                f"{device} ({measured}); if intended, accept it with pytest --regbudget-update on this GPU"
            )
    overall: TimeStatus | None = None
    if statuses:
        overall = "fail" if out else "ambiguous" if "ambiguous" in statuses else "pass"
    return out, overall


UPDATE_HINT = "pytest --regbudget-update"


@dataclass(frozen=True)
class BaselineRule:
    """How a kernel is held to its baseline entry."""

    entry: Entry | None  # this kernel's entry, if the baseline has one
    recorded: bool = False  # a baseline file is in use: a kernel without an entry is "new", not "none"
    releases: tuple[str, ...] = ()  # other releases with an entry for this kernel (when `entry` is None)
    tolerance: Mapping[str, float] = field(default_factory=dict)
    enforce: bool = True  # False during an update, which accepts whatever it measures
    name: str = "the baseline"  # the file, as the fix names it
    conflict: str | None = None  # another test of this run measured the same kernel variant differently


def verdict(
    nodeid: str,
    kernel: str,
    facts: KernelFacts,
    limits: Limits,
    level: Level = "fail",
    *,
    gpu: GpuFacts | None = None,
    sass: SassReport | None = None,
    baseline: BaselineRule | None = None,
    gpu_note: str | None = None,
    key: Key | None = None,
) -> KernelReport:
    """Everything known at compile time (and, with `gpu`, at load time) judged at once: the budgets of
    `limits`, the driver's agreement, and the baseline. `kernel` is the id the baseline keys it by."""
    provenance = facts.provenance
    report = check(
        nodeid,
        kernel,
        facts.arch,
        str(facts.source),
        facts.resources,
        limits,
        level,
        gpu=gpu,
        sass=sass,
        ptxas_options=facts.ptxas_options,
        ptxas_version=provenance.ptxas,
        nvrtc_version=provenance.frontend,
        compiler=provenance.compiler,
        release=provenance.release,
        options_hash=facts.options_hash,
        line=facts.line,
        gpu_note=gpu_note,
        key=key,
        messages=facts.messages,
        setmaxnreg=facts.setmaxnreg,
    )
    more = _role_and_message_checks(facts, limits)
    if more:
        report = replace(report, violations=[*report.violations, *more])
    return report if baseline is None else ratchet(report, baseline)


def _role_arithmetic(facts: KernelFacts, limits: Limits) -> list[str]:
    """With setmaxnreg_threads: the block's registers at entry (the CTA pool setmaxnreg moves registers
    within) must fit the register file, and the roles' counts x their threads must fit that pool."""
    threads_by_role = dict(limits.setmaxnreg_threads or ())
    targets = dict(facts.setmaxnreg)
    if not threads_by_role or not targets:
        return []
    block = sum(threads_by_role.values())
    most = get_arch(facts.arch).max_regs_per_block
    entry = facts.resources.registers
    pool = -(-entry // 8) * 8 * block  # allocated per thread in units of 8
    out = []
    if pool > most:
        out.append(
            f"setmaxnreg: {entry} registers at entry x {block} threads = {pool:,} > {most:,} registers per "
            f"block on {facts.arch}: the block does not launch"
        )
    missing = sorted(set(threads_by_role) - set(targets))
    if missing:
        out.append(f"setmaxnreg_threads names {', '.join(missing)}, but the kernel sets no such role")
        return out
    need = sum(targets[d] * threads_by_role[d] for d in threads_by_role)
    parts = " + ".join(f"{targets[d]} x {threads_by_role[d]} ({d})" for d in sorted(threads_by_role))
    if need > pool:
        inc_threads = threads_by_role.get("inc", 0)
        room = pool - (need - targets.get("inc", 0) * inc_threads)
        fix = f"lower the inc target to {room // inc_threads // 8 * 8} or " if inc_threads else ""
        out.append(
            f"setmaxnreg roles need {parts} = {need:,} registers, more than the block's {entry} x {block} = "
            f"{pool:,} at entry: a warpgroup's setmaxnreg.inc would wait forever. Fix: {fix}raise the "
            "registers at entry (__launch_bounds__)"
        )
    return out


def _role_and_message_checks(facts: KernelFacts, limits: Limits) -> list[str]:
    out = []
    roles = facts.setmaxnreg
    dropped = [m for m in facts.messages if "C7508" in m]
    shown = ", ".join(f"{d} {n}" for d, n in roles) or "none"
    if limits.setmaxnreg == "required" and (not roles or dropped):
        why = f"ptxas dropped them: {dropped[0].rstrip('.')}" if dropped else "the kernel has no setmaxnreg"
        out.append(
            f"setmaxnreg required, but {why}. Fix: give the kernel __launch_bounds__ (ptxas needs the "
            "register count at entry to honour setmaxnreg)"
        )
    elif isinstance(limits.setmaxnreg, tuple):
        now = tuple(sorted(set(roles)))
        if dropped:
            wanted = dict(limits.setmaxnreg)
            out.append(f"setmaxnreg {wanted} expected, but ptxas dropped them: {dropped[0].rstrip('.')}")
        elif now != limits.setmaxnreg:
            out.append(
                f"setmaxnreg targets {shown}, expected {', '.join(f'{d} {n}' for d, n in limits.setmaxnreg)}"
            )
    out += _role_arithmetic(facts, limits)
    allowed = limits.ptxas_warnings
    if isinstance(allowed, int) and len(facts.messages) > allowed:
        out.append(
            f"{len(facts.messages)} ptxas message(s) > ptxas_warnings {allowed}: " + "; ".join(facts.messages)
        )
    elif isinstance(allowed, tuple):
        bad = [
            m
            for m in facts.messages
            if not any(message_key(m) == a or fnmatch.fnmatch(m, a) for a in allowed)
        ]
        if bad:
            out.append(f"ptxas message not allowed by ptxas_warnings {list(allowed)}: " + "; ".join(bad))
    return out


def entry_of_report(report: KernelReport) -> Entry:
    """The baseline entry a measured kernel's numbers make (its report must have resources), to compare
    with the entry on file."""
    res, occ = report.resources, report.occupancy
    if res is None:
        raise ValueError(f"{report.label} has no numbers to record: {report.error}")
    at = report.occupancy_at
    return Entry(
        registers=res.registers,
        spill_stores=res.spill_stores if res.spills_known else None,
        spill_loads=res.spill_loads if res.spills_known else None,
        stack=res.stack_frame,
        smem=res.shared_mem,
        const_mem=res.const_mem,
        ptxas=report.ptxas_version,
        nvrtc=report.nvrtc_version,
        compiler=report.compiler,
        messages=tuple(sorted({message_key(m) for m in report.messages})),
        options_hash=report.options_hash,
        # Rounded so that the file does not churn on float noise.
        occupancy={} if occ is None or at is None else {at: round(round(occ.occupancy, 6), 4)},
        tests=(base_nodeid(report.nodeid),),
        gpu=_gpu_figures(report),
    )


def _gpu_figures(report: KernelReport) -> dict[str, dict[str, object]]:
    """Per-device figures for the baseline; only a timed kernel has any."""
    g, t = report.gpu, report.timing
    if g is None or t is None:
        return {}
    figures: dict[str, object] = {
        "time_ms": float(f"{t.median_ms:.4g}"),
        "noise": round(t.noise or 0.0, 4),
        "samples": t.samples,
        "driver_registers": g.view.registers,
    }
    driver = report.driver_occupancy
    if driver is not None:
        figures["driver_occupancy"] = round(round(driver, 6), 4)
    if t.sm_clock_mhz is not None:
        figures["sm_clock_mhz"] = t.sm_clock_mhz
    if t.max_sm_clock_mhz is not None:
        figures["max_sm_clock_mhz"] = t.max_sm_clock_mhz
    if t.ci_low_ms is not None and t.ci_high_ms is not None:
        figures["ci_low_ms"] = float(f"{t.ci_low_ms:.4g}")
        figures["ci_high_ms"] = float(f"{t.ci_high_ms:.4g}")
    return {g.device: figures}


def ratchet(report: KernelReport, rule: BaselineRule) -> KernelReport:
    """The report held to its baseline entry: deltas always, violations where enforced and comparable."""
    if rule.conflict is not None:
        report = replace(report, violations=[*report.violations, rule.conflict])
    old = rule.entry
    if old is None:
        if rule.releases:
            return replace(report, baseline_status="new-release", other_releases=rule.releases)
        return replace(report, baseline_status="new" if rule.recorded else "none")
    deltas = compare(old, entry_of_report(report), rule.tolerance)
    # An entry is its release's (the key says so); only a hand-edited one can hold another release's ptxas.
    # Patch versions of one release (12.9.41, 12.9.86) share entries.
    if release_of(old.ptxas) != report.release:
        return replace(
            report,
            baseline=old,
            deltas=deltas,
            baseline_status="toolkit-mismatch",
            options_changed=old.options_hash != report.options_hash,
        )
    worse = []
    new_messages = sorted({message_key(m) for m in report.messages} - set(old.messages))
    if rule.enforce and new_messages:
        worse.append(
            f"new ptxas message(s) since the baseline: {', '.join(new_messages)}; if intended, accept them "
            f"with {UPDATE_HINT} and commit {rule.name}"
        )
    for d in deltas if rule.enforce else []:
        if d.verdict == "worse":
            allowed = f", tolerance {d.tolerance:g}" if d.tolerance else ""
            worse.append(
                f"{d.text()} is worse than the baseline{allowed}; if intended, accept it with "
                f"{UPDATE_HINT} and commit {rule.name}"
            )
    return replace(
        report,
        baseline=old,
        deltas=deltas,
        baseline_status="compared",
        violations=[*report.violations, *worse],
        # Another compiler (NVRTC -> nvcc) is a build change like a flag: reported, and still enforced.
        options_changed=old.options_hash != report.options_hash or old.compiler != report.compiler,
    )


def strict(report: KernelReport) -> KernelReport:
    """Strict mode (--regbudget-strict): a built kernel that is not held to an entry of its own release
    fails, whatever its level, so that a toolkit upgrade or a forgotten update cannot pass in silence."""
    if report.resources is None or report.enforced:
        return report
    text = (
        f"strict: not enforced, {report.unenforced_reason()}; record it with {UPDATE_HINT} and review the "
        "diff (entries of other CUDA releases are kept beside it)"
    )
    return replace(report, violations=[*report.violations, text], level="fail")


def timed(
    report: KernelReport, limits: Limits, timing: Timing, *, enforce: bool, basis: TimeBasis = "time"
) -> KernelReport:
    """The report with its GPU time judged: `max_time_ms` always, `max_time_ratio` against this device's
    baseline interval where there is one and the run is not an update. A clock other than the baseline's,
    and a kernel too short to time, are said in the note."""
    device = report.gpu.device if report.gpu else None
    base = report.baseline.gpu_time_interval(device) if report.baseline and device else None
    base_clock = report.baseline.gpu_clock_mhz(device) if report.baseline and device else None
    notes = [report.gpu_note] if report.gpu_note else []
    if timing.too_short:
        notes.append(
            f"too short to time: {timing.median_ms * 1000:.2f} us per launch even as a CUDA graph of "
            f"{timing.launches_per_sample} launches; its time budgets are not checked"
        )
    elif base is None and limits.max_time_ratio is not None:
        notes.append(
            f"no time baseline for {device or 'this GPU'} yet: max_time_ratio not checked; "
            f"record one with {UPDATE_HINT} on this GPU"
        )
    if base_clock and timing.sm_clock_mhz and abs(timing.sm_clock_mhz / base_clock - 1) > CLOCK_TOLERANCE:
        notes.append(
            f"SM clock {timing.sm_clock_mhz} MHz, {base_clock} MHz when the baseline was timed (a throttled "
            "runner, or another SKU of the same name?)"
            + ("" if basis == "cycles" else "; regbudget_time_basis = cycles judges on cycles instead")
        )
    judged = limits if enforce else replace(limits, max_time_ratio=None)
    out = replace(
        report,
        timing=timing,
        baseline_time_ms=None if base is None else base.median,
        gpu_note="; ".join(notes) or None,
    )
    violations, status = time_verdict(out, judged, timing, base, base_clock, basis)
    return replace(out, violations=[*report.violations, *violations], time_status=status)
