"""KernelResources + Limits -> a KernelReport whose violations are sentences a user can act on.

Owns the wording of every budget verdict: which number, which limit, which arch, and the next step.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Literal

from msgspec.structs import replace

from ..util.patterns import lazy
from .arch import get_arch
from .baseline import Key
from .checks import check
from .diagnosis import callee_names, explain_callees
from .elf import callees
from .facts import KernelFacts
from .gpu_facts import GpuFacts, Timing
from .kernel_report import KernelReport
from .limits import Level, Limits
from .liveness import PeakLive
from .ptxas import message_key
from .ratchet import UPDATE_HINT, BaselineRule, ratchet
from .sass_report import SassReport
from .timing import Interval, decided, ratio_interval
from .timing import Verdict as TimeStatus
from .timing import verdict as timing_verdict

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
    peak_live: PeakLive | None = None,
    package: str | None = None,
) -> KernelReport:
    """Everything known at compile time (and, with `gpu`, at load time) judged at once: the budgets of
    `limits`, the driver's agreement, and the baseline. `kernel` is the id the baseline keys it by.
    `peak_live`: the peak of live registers where it was read without the rest of the SASS (`sass`'s
    own otherwise); `package`: the installed distribution its file belongs to."""
    provenance = facts.provenance
    checked = check(
        nodeid,
        kernel,
        facts.arch,
        str(facts.source),
        facts.resources,
        limits,
        level,
        gpu,
        sass,
        facts.ptxas_options,
        facts.tmem,
        peak_live if sass is None else sass.peak_live,
    )
    dropped = _roles_dropped(facts, sass)
    report = replace(
        checked,
        violations=[*checked.violations, *_role_and_message_checks(facts, limits, dropped)],
        diagnosis=[*checked.diagnosis, *_call_messages(facts, sass)],
        setmaxnreg_dropped=dropped,
        ptxas_version=provenance.ptxas,
        nvrtc_version=provenance.frontend,
        compiler=provenance.compiler,
        release=provenance.release,
        options_hash=facts.options_hash,
        build_settings=facts.build_settings,
        line=facts.line,
        gpu_note=gpu_note,
        key=key,
        messages=facts.messages,
        setmaxnreg=facts.setmaxnreg,
        triton_signature=facts.triton_signature,
        triton_config=facts.triton_config,
        package=package,
    )
    return report if baseline is None else ratchet(report, baseline)


def _roles_dropped(facts: KernelFacts, sass: SassReport | None) -> bool:
    """Whether the kernel's setmaxnreg roles are gone from its machine code. Its SASS decides where it was
    read (USETMAXREG.TRY_ALLOC/DEALLOC are the roles); else ptxas's C7508, which each build attributes to
    the kernel it is about with `ptxas -e` on that entry alone."""
    if not facts.setmaxnreg:
        return False
    if sass is not None:
        return not sass.setmaxnreg
    return any("C7508" in m for m in facts.messages)


# ptxas's notes that a call serialized the wgmma pipeline; they do not name the call.
_CALL_NOTE = lazy(r"\bC75(?:10|17)\b|[Ee]xtern calls|function calls?\b")


def _call_messages(facts: KernelFacts, sass: SassReport | None) -> list[str]:
    """For ptxas's C7510/C7517: the functions the kernel calls (from its ELF's call graph, else its SASS),
    with the fix for the ones we know (`__assertfail`: -DNDEBUG)."""
    notes = [m for m in facts.messages if _CALL_NOTE.search(m)]
    if not notes:
        return []
    cubin = facts.cubin
    names = callee_names(sass, callees(cubin, facts.entry) if cubin else ())
    code = message_key(notes[0])
    if not names:
        return [
            f"{code}: ptxas serialized the wgmma pipeline around a call; the kernel's call graph names none"
        ]
    return [
        f"{code}: ptxas serialized the wgmma pipeline around the kernel's calls; it calls "
        f"{explain_callees(names)}"
    ]


def _role_arithmetic(facts: KernelFacts, limits: Limits, dropped: bool) -> list[str]:
    """With setmaxnreg_threads: the block's registers at entry (the CTA pool setmaxnreg moves registers
    within) must fit the register file, and the roles' counts x their threads must fit that pool."""
    threads_by_role = dict(limits.setmaxnreg_threads or ())
    targets = dict(facts.setmaxnreg)
    if not threads_by_role or not targets:
        return []
    block = sum(threads_by_role.values())
    most = get_arch(facts.arch).max_regs_per_block
    entry = facts.resources.registers
    allocated = -(-entry // 8) * 8  # a thread's registers are allocated in units of 8
    pool = allocated * block
    # Said where it matters: 154 registers hold 160 a thread, and the product is of 160.
    shown = f"{entry}" if allocated == entry else f"{entry} (allocated as {allocated}, in units of 8)"
    out = []
    if pool > most:
        out.append(
            f"setmaxnreg: {shown} registers at entry x {block} threads = {pool:,} > {most:,} registers per "
            f"block on {facts.arch}: the block does not launch"
        )
    if dropped:
        return out  # ptxas dropped the roles: the block runs at its entry count, and no inc waits
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
            f"setmaxnreg roles need {parts} = {need:,} registers, more than the block's {shown} x {block} "
            f"= {pool:,} at entry: a warpgroup's setmaxnreg.inc would wait forever. Fix: {fix}raise the "
            "registers at entry (__launch_bounds__)"
        )
    return out


def _role_and_message_checks(facts: KernelFacts, limits: Limits, dropped: bool) -> list[str]:
    out = []
    roles = facts.setmaxnreg
    said = next((m.rstrip(".") for m in facts.messages if "C7508" in m), "its SASS has no USETMAXREG")
    shown = ", ".join(f"{d} {n}" for d, n in roles) or "none"
    if limits.setmaxnreg == "required" and (not roles or dropped):
        why = f"ptxas dropped them: {said}" if dropped else "the kernel has no setmaxnreg"
        out.append(
            f"setmaxnreg required, but {why}. Fix: give the kernel __launch_bounds__ (ptxas needs the "
            "register count at entry to honour setmaxnreg)"
        )
    elif isinstance(limits.setmaxnreg, tuple):
        now = tuple(sorted(set(roles)))
        if dropped:
            wanted = dict(limits.setmaxnreg)
            out.append(f"setmaxnreg {wanted} expected, but ptxas dropped them: {said}")
        elif now != limits.setmaxnreg:
            out.append(
                f"setmaxnreg targets {shown}, expected {', '.join(f'{d} {n}' for d, n in limits.setmaxnreg)}"
            )
    out += _role_arithmetic(facts, limits, dropped)
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


def time_budgets_settled(
    report: KernelReport, limits: Limits, *, enforce: bool
) -> Callable[[Interval], bool] | None:
    """When an interval of this kernel's time settles its time budgets (none straddles its ceiling): until
    then the sampler samples on, up to its time limit. None: precision alone stops it (no budget, or an
    update, which records rather than judges the ratio)."""
    device = report.gpu.device if report.gpu else None
    base = report.baseline.gpu_time_interval(device) if report.baseline and device else None
    ratio = None if not enforce or base is None else limits.max_time_ratio
    ceiling = limits.max_time_ms
    if ratio is None and ceiling is None:
        return None

    def settled(now: Interval) -> bool:
        if ceiling is not None and not decided(now, ceiling):
            return False
        return ratio is None or base is None or decided(ratio_interval(now, base), ratio)

    return settled
