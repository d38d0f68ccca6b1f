"""Judging one kernel: its facts and its budget, with what the run knows of it (its baseline entry, the
GPU's view, its SASS), make its `KernelReport`. Plain functions of records: the session judges every kernel
of a pytest run through `judge`, and `regbudget explain` a manifest kernel through `judge_alone`, so that
both faces print one verdict for one kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct
from msgspec.structs import replace

from ..core import baseline as bl
from ..core.arch import get_arch
from ..core.facts import KernelFacts
from ..core.gpu_facts import GpuFacts
from ..core.kernel_report import KernelReport
from ..core.limits import Launch, Limits
from ..core.liveness import PeakLive
from ..core.ratchet import BaselineRule
from ..core.sass_report import SassReport
from ..core.verdict import strict, verdict
from ..project.markers import Budget
from .state import Settings


class Context(Struct, frozen=True):
    """What the run knows of one kernel beyond its facts and its budget."""

    nodeid: str  # the test, or the manifest item, that judges it
    kernel_id: str  # what its baseline entry is keyed by: its name, or "name #2" for a test's second build
    key: bl.Key | None = None  # its baseline key (Settings.baseline_key)
    baseline: BaselineRule | None = None  # None: held to no baseline
    gpu: GpuFacts | None = None  # the driver's view, where the GPU checks loaded it
    sass: SassReport | None = None  # its machine code read, where a budget or --regbudget-sass asks
    gpu_note: str | None = None  # why the GPU checks did not run, or what they lacked
    # The peak of live registers, read alone for a kernel that fails on registers (`fails_on_registers`).
    peak_live: PeakLive | None = None
    package: str | None = None  # the installed distribution its file belongs to (Settings.package_of)


def limits_of(budget: Budget, facts: KernelFacts) -> Limits:
    """The budget's limits on the facts' arch, with the launch and the dynamic shared memory the build
    itself declares (a fixture call's, a prebuilt kernel's) where the budget names none."""
    limits = budget.limits(facts.arch)
    if limits.launch is None and facts.block is not None:
        limits = replace(limits, launch=Launch(facts.block))
    if limits.dynamic_smem == 0 and facts.dynamic_smem:
        limits = replace(limits, dynamic_smem=facts.dynamic_smem)
    return limits


def reads_sass(budget: Budget, arch: str, *, sass: bool) -> bool:
    """Whether a kernel's SASS is read on `arch`: with --regbudget-sass (`sass`), or for a hot_spills or
    max_local_share budget."""
    limits = budget.limits(arch)
    return sass or limits.hot_spills is not None or limits.max_local_share is not None


def fails_on_registers(report: KernelReport, limits: Limits, rule: BaselineRule | None) -> bool:
    """Whether the kernel fails on its registers: over max_regs, or grown beyond an enforced baseline
    entry. Such a failure names the peak of live registers, read then even where its SASS is not: a passing
    run pays for no nvdisasm (docs/diagnostics.md, "Where the registers go")."""
    res = report.resources
    if res is None:
        return False
    over = limits.max_regs is not None and res.registers > limits.max_regs
    enforced = rule is not None and rule.enforce and report.baseline_status == "compared"
    return over or (enforced and any(d.metric == "registers" and d.verdict == "worse" for d in report.deltas))


def item_archs(archs: Sequence[str], budget: Budget | None) -> list[str]:
    """The run's `archs` that a budget's `archs=` keeps. `sm_90` names the chip, so it keeps sm_90a and
    sm_90f too (they build for it); `sm_90a` keeps that spelling only."""
    if budget is None or budget.archs is None:
        return list(archs)
    wanted = budget.archs
    return [a for a in archs if a in wanted or get_arch(a).base_name in wanted]


def baseline_rule(
    baseline: bl.Baseline,
    settings: Settings,
    key: bl.Key,
    facts: KernelFacts,
    budget: Budget,
    conflict: str | None = None,
) -> BaselineRule:
    """How the run holds a kernel to its entry: the entry (or the releases that have one), the run's and
    the budget's tolerance, and whether the run enforces it (not an update). `conflict`: another test of
    the run measured the same kernel variant differently."""
    s = settings
    entry, found_under = baseline.find(key, facts.legacy_variant)
    before = s.key_before(key, facts) if entry is None else None
    if before is not None and before in baseline.entries:  # outside the rootdir, as 0.1 keyed it (`..`)
        entry, found_under = baseline.entries[before], before
    return BaselineRule(
        entry=entry,
        found_under=found_under,
        releases=tuple(baseline.releases(key)) if entry is None else (),
        conflict=conflict,
        recorded=s.baseline_path is not None,
        tolerance={**s.tolerance, **budget.tolerance},
        enforce=not s.update,
        name=s.display(s.baseline_path) if s.baseline_path else "the baseline",
    )


def judge(facts: KernelFacts, budget: Budget, context: Context) -> KernelReport:
    """One kernel judged at compile time (and at load time, with `context.gpu`): the budgets of its arch,
    the driver's agreement and its baseline entry."""
    return verdict(
        context.nodeid,
        context.kernel_id,
        facts,
        limits_of(budget, facts),
        budget.level,
        gpu=context.gpu,
        sass=context.sass,
        baseline=context.baseline,
        gpu_note=context.gpu_note,
        key=context.key,
        peak_live=context.peak_live,
        package=context.package,
    )


def judge_alone(
    facts: KernelFacts,
    budget: Budget,
    settings: Settings,
    baseline: bl.Baseline,
    nodeid: str,
    peak_live: PeakLive | None = None,
) -> KernelReport:
    """A kernel judged outside a run of tests (`regbudget explain`), as a run judges it at compile time:
    its budgets, its baseline entry with the run's tolerance, and strict mode, with the peak of live
    registers where the caller read it. Nothing else of a run shares its entry, and no GPU is asked."""
    key = settings.baseline_key(facts)
    rule = baseline_rule(baseline, settings, key, facts, budget)
    package = settings.package_of(facts)
    context = Context(nodeid, facts.kernel, key=key, baseline=rule, peak_live=peak_live, package=package)
    report = judge(facts, budget, context)
    return strict(report) if settings.strict and not settings.update else report
