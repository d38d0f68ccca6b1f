"""A kernel held to its baseline entry (`ratchet`): the deltas always, and a failure for each number that got
worse where the entry is enforced (its own CUDA release, not during an update), beyond the tolerance. The
entry a measured kernel's numbers make (`entry_of_report`) is what the deltas compare with.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct, field
from msgspec.structs import replace

from .baseline import NO_OPTIONS_HASH, BaselineEntry, Key, base_nodeid, numbers_of
from .diagnosis import callees_part
from .facts import release_of
from .kernel_report import KernelReport, compare
from .metrics import BY_NAME
from .ptxas import message_key

UPDATE_HINT = "pytest --regbudget-update"
# What follows a caught regression's change in its violation: the Markdown report finds the change by it.
WORSE_THAN_BASELINE = " is worse than the baseline"


class BaselineRule(Struct, frozen=True):
    """How a kernel is held to its baseline entry."""

    entry: BaselineEntry | None  # this kernel's entry, if the baseline has one
    recorded: bool = False  # a baseline file is in use: a kernel without an entry is "new", not "none"
    releases: tuple[str, ...] = ()  # other releases with an entry for this kernel (when `entry` is None)
    tolerance: Mapping[str, float] = field(default_factory=dict)
    enforce: bool = True  # False during an update, which accepts whatever it measures
    name: str = "the baseline"  # the file, as the fix names it
    conflict: str | None = None  # another test of this run measured the same kernel variant differently
    # The key `entry` was read under, when not the kernel's own: an older version's (see
    # KernelFacts.legacy_variant), which an update moves it from.
    found_under: Key | None = None


def entry_of_report(report: KernelReport) -> BaselineEntry:
    """The baseline entry a measured kernel's numbers make (its report must have resources), to compare
    with the entry on file."""
    res, occ = report.resources, report.occupancy
    if res is None:
        raise ValueError(f"{report.label} has no numbers to record: {report.error}")
    at = report.occupancy_at
    return BaselineEntry(
        **numbers_of(res),
        ptxas=report.ptxas_version,
        nvrtc=report.nvrtc_version,
        compiler=report.compiler,
        messages=tuple(sorted({message_key(m) for m in report.messages})),
        setmaxnreg=targets_of(report),
        options_hash=report.options_hash,
        build_settings=report.build_settings,
        package=report.package,
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
    report = replace(report, found_under=rule.found_under)
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
            settings_change=settings_change(old, report),
        )
    worse = []
    new_messages = sorted({message_key(m) for m in report.messages} - set(old.messages))
    if rule.enforce and new_messages:
        worse.append(
            f"new ptxas message(s) since the baseline: {', '.join(new_messages)}; if intended, accept them "
            f"with {UPDATE_HINT} and commit {rule.name}"
        )
    now = targets_of(report)
    if rule.enforce and old.setmaxnreg and now != old.setmaxnreg:
        worse.append(
            f"setmaxnreg targets {', '.join(old.setmaxnreg)} -> {', '.join(now) or 'none'} since the "
            f"baseline; if intended, accept them with {UPDATE_HINT} and commit {rule.name}"
        )
    for d in deltas if rule.enforce else []:
        if d.verdict == "worse":
            allowed = f", tolerance {d.tolerance:g}" if d.tolerance else ""
            # Before the fix, which two regressions share (KernelReport.failure_text says it once).
            peak = report.peak_live
            where = f"; {peak.text()}" if peak and d.metric == "registers" else ""
            callees = _callees_change(old, report, d.metric)
            worse.append(
                f"{d.text()}{WORSE_THAN_BASELINE}{allowed}{callees}{where}; if intended, accept it "
                f"with {UPDATE_HINT} and commit {rule.name}"
            )
    return replace(
        report,
        baseline=old,
        deltas=deltas,
        baseline_status="compared",
        violations=[*report.violations, *worse],
        # Another compiler (NVRTC -> nvcc) is a build change like a flag: reported, and still enforced.
        options_changed=old.options_hash != report.options_hash or old.compiler != report.compiler,
        settings_change=settings_change(old, report),
    )


def _callees_change(old: BaselineEntry, report: KernelReport, metric: str) -> str:
    """Where a spill figure grew in the kernel's callees: ` (996 bytes of them in the __noinline__ callee
    heavy(float const*, int, int, int), where the entry records none: ...)`; "" otherwise. An entry without
    the callees' part is one whose callees did not spill, or one written before they were counted, which the
    entry cannot tell apart: both are compared as they are, since a callee that starts to spill must fail."""
    row = BY_NAME.get(metric)
    if row is None or row.callees is None or report.resources is None:
        return ""
    was = getattr(old, row.callees) or 0
    if report.resources.callees_count(row) <= was:
        return ""
    part = callees_part(report.resources, row)
    if was:
        return f" ({part}, where the entry records {was:,})"
    return f" ({part}, where the entry records none: pytest-regbudget 0.1 counted a kernel's own spills only)"


def settings_change(old: BaselineEntry, report: KernelReport) -> str | None:
    """What changed in a kernel's build since its entry, as the once-per-run line names it ("added
    -DGGML_CUDA_F16"); None when nothing did. The entry is still enforced: a flag that costs registers is
    caught by the numbers. An installed package's new version is named as a toolkit's would be
    ("package liger_kernel 0.8.5 -> 0.8.6"), with any flag change after it."""
    upgrade = _package_change(old.package, report.package)
    flags = _flags_change(old, report)
    return "; ".join(p for p in (upgrade, flags) if p) or None


def _package_change(old: str | None, now: str | None) -> str | None:
    if not old or not now or old == now:
        return None  # an entry written before packages were recorded reads as the same package
    name, _, was = old.partition(" ")
    new_name, _, version = now.partition(" ")
    return f"package {name} {was} -> {version}" if name == new_name else f"package {old} -> {now}"


def _flags_change(old: BaselineEntry, report: KernelReport) -> str | None:
    if old.compiler != report.compiler:
        return f"compiler {old.compiler} -> {report.compiler}"
    if old.options_hash == report.options_hash:
        return None
    before, now = old.build_settings, report.build_settings
    if before == now:
        # The settings read alike: what changed is not a flag (a `depends` glob, or an option's place).
        return "other build inputs (the options' digest differs)"
    if not before and old.options_hash != NO_OPTIONS_HASH:
        # Written before 0.2, which recorded no settings: which of these are new is not known.
        return f"built with {' '.join(now)}; the entry records no settings"
    added = [s for s in now if s not in before]
    removed = [s for s in before if s not in now]
    # A setting that is a name and a value (Triton's num_warps=8) changed value: "num_warps 8 -> 2".
    was = {s.partition("=")[0]: s.partition("=")[2] for s in removed if _named(s)}
    changed = [
        f"{name} {was[name]} -> {value}"
        for name, _, value in (s.partition("=") for s in added if _named(s))
        if name in was
    ]
    names = {c.partition(" ")[0] for c in changed}
    added = [s for s in added if s.partition("=")[0] not in names]
    removed = [s for s in removed if s.partition("=")[0] not in names]
    parts = [
        ", ".join(changed),
        f"added {' '.join(added)}" if added else "",
        f"removed {' '.join(removed)}" if removed else "",
    ]
    return "; ".join(p for p in parts if p) or "the same settings in another order"


def _named(setting: str) -> bool:
    """A `name=value` setting, not a flag (`-DX=1` is a define, reported added and removed as it is)."""
    return "=" in setting and not setting.startswith("-")


def targets_of(report: KernelReport) -> tuple[str, ...]:
    """A kernel's setmaxnreg targets as the baseline keeps them: "dec 40", "inc 232", sorted, once each."""
    return tuple(sorted({f"{direction} {count}" for direction, count in report.setmaxnreg}))
