"""budget.check over ptxas numbers: one sentence per violated budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.baseline import NO_OPTIONS_HASH, BaselineEntry
from pytest_regbudget.core.checks import check
from pytest_regbudget.core.elf import call_tree
from pytest_regbudget.core.errors import BaselineError
from pytest_regbudget.core.kernel_report import Delta, KernelReport, compare
from pytest_regbudget.core.limits import Launch, Limits
from pytest_regbudget.core.liveness import PeakLive
from pytest_regbudget.core.metrics import CAP_KEYS, KernelResources
from pytest_regbudget.core.ptxas import parse_functions, parse_ptxas_output, with_callees
from pytest_regbudget.core.ratchet import BaselineRule, entry_of_report, ratchet
from pytest_regbudget.core.verdict import strict, timed

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'poly_eval' for 'sm_90'
ptxas info    : Function properties for poly_eval
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 167 registers, used 1 barriers, 4096 bytes smem, 56 bytes cumulative stack size
"""
POLY = parse_ptxas_output(PTXAS)["poly_eval"]


def verdict(**limits: object) -> list[str]:
    # A marker's keys as they land on Limits: a metric's cap (spills=, stack=) among its caps.
    caps = {k: v for k, v in limits.items() if k in CAP_KEYS}
    rest = {k: v for k, v in limits.items() if k not in CAP_KEYS}
    return check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(**rest, caps=caps)).violations  # type: ignore[arg-type]


def test_parsed_fixture_numbers() -> None:
    assert (POLY.registers, POLY.spill_stores, POLY.spill_loads, POLY.stack_frame, POLY.shared_mem) == (
        167,
        40,
        36,
        48,
        4096,
    )


def test_no_limits_no_violations() -> None:
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits())
    assert report.violations == []
    assert report.outcome == "passed"
    assert report.occupancy is None


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"max_regs": 64}, ["registers 167 > max_regs 64"]),
        ({"max_regs": 167}, []),
        ({"spills": 0}, ["spill stores 40 bytes > spills 0", "spill loads 36 bytes > spills 0"]),
        ({"spills": 38}, ["spill stores 40 bytes > spills 38"]),
        ({"spill_stores": 40, "spill_loads": 30}, ["spill loads 36 bytes > spill_loads 30"]),
        ({"stack": 32}, ["stack frame 48 bytes > stack 32"]),
        ({"smem": 1024}, ["static shared memory 4,096 bytes > smem 1024"]),
    ],
)
def test_each_budget_is_one_sentence(limits: dict[str, object], expected: list[str]) -> None:
    assert verdict(**limits) == expected


def test_failure_text_names_kernel_arch_and_quotes_ptxas() -> None:
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(max_regs=64))
    assert report.outcome == "failed"
    assert report.failure_text().splitlines() == [
        "poly_eval [sm_90]: registers 167 > max_regs 64",
        "    ptxas: Used 167 registers, used 1 barriers, 4096 bytes smem, 56 bytes cumulative stack size",
        "    diagnosis: 40 bytes of spill stores and 36 bytes of loads: run with --regbudget-sass (or give"
        " max_local_share) to estimate what share of the executed instructions they are, and where.",
    ]


def test_warn_level_outcome() -> None:
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(max_regs=64), level="warn")
    assert report.outcome == "warned"


def test_launch_that_cannot_fit_gives_arithmetic_and_register_cap() -> None:
    (msg,) = verdict(launch=Launch(512))
    assert msg.startswith(
        "launch=(512,) cannot launch on sm_90: 167 registers -> 5,376 per warp (units of 256) x 16 warps"
        " = 86,016 > 65,536 registers per block on sm_90; at run time this is cudaErrorLaunchOutOfResources."
    )
    assert "__launch_bounds__(512) (ptxas then keeps it to 128 registers)" in msg


def test_launch_that_fits_has_occupancy() -> None:
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(launch=Launch(256)))
    assert report.violations == []
    assert report.occupancy is not None
    assert report.occupancy.active_blocks == 1
    assert report.occupancy.occupancy == pytest.approx(8 / 64)


def test_resident_blocks_requirement() -> None:
    (msg,) = verdict(launch=Launch(128, 4))
    assert msg.startswith("launch=(128, 4): only 3 blocks of 128 threads fit per SM on sm_90, 4 needed")
    assert "__launch_bounds__(128, 4) (ptxas then keeps it to 128 registers)" in msg


def test_dynamic_smem_counts_toward_launch() -> None:
    small = replace(POLY, registers=32)
    report = check("t", "k", "sm_90", "k.cu", small, Limits(launch=Launch(256, 2), dynamic_smem=150 * 1024))
    (msg,) = report.violations
    assert "only 1 block of 256 threads fits per SM" in msg
    assert "shared memory" in msg


def test_min_occupancy() -> None:
    (msg,) = verdict(launch=Launch(256), min_occupancy=0.25)
    assert msg.startswith("occupancy 12.5% at 256 threads < min_occupancy 25.0% (1 block x 8 warps")
    assert "limited by registers" in msg


def test_max_threads_from_launch_bounds_blocks_a_bigger_launch() -> None:
    bounded = replace(POLY, registers=32, max_threads=256)
    (msg,) = check("t", "k", "sm_90", "k.cu", bounded, Limits(launch=Launch(512))).violations
    assert "cannot launch on sm_90" in msg
    assert "256" in msg


def entry(**changes: object) -> BaselineEntry:
    base = {
        "registers": 72,
        "spill_stores": 0,
        "spill_loads": 0,
        "stack": 0,
        "smem": 0,
        "const_mem": 0,
        "ptxas": "12.9.86",
        "nvrtc": "12.9.86",
        "compiler": "nvrtc",
        "options_hash": "x",
        "occupancy": {"256 threads": 0.5},
    }
    return BaselineEntry(**{**base, **changes})  # type: ignore[arg-type]


def at256(occupancy: float) -> dict[str, float]:
    return {"256 threads": occupancy}


def test_compare_reports_each_changed_metric() -> None:
    deltas = compare(entry(), entry(registers=80, spill_stores=8, occupancy=at256(0.375)), {})
    assert [(d.metric, d.verdict, d.text()) for d in deltas] == [
        ("registers", "worse", "registers 72 -> 80 (+8)"),
        ("spill_stores", "worse", "spill_stores 0 -> 8 (+8)"),
        ("occupancy", "worse", "occupancy 50.0% -> 37.5% (-12.5 pts)"),
    ]


def test_compare_improvements_and_tolerance() -> None:
    better = compare(entry(), entry(registers=64, occupancy=at256(0.75)), {})
    assert [d.verdict for d in better] == ["better", "better"]
    tolerated = compare(entry(), entry(registers=76, spill_loads=16), {"registers": 4, "spills": 16})
    assert [d.verdict for d in tolerated] == ["tolerated", "tolerated"]
    assert [d.verdict for d in compare(entry(), entry(registers=77), {"registers": 4})] == ["worse"]
    assert [d.verdict for d in compare(entry(), entry(occupancy=at256(0.45)), {"occupancy": 0.05})] == [
        "tolerated"
    ]


def test_compare_skips_occupancy_at_another_launch_size() -> None:
    assert compare(entry(), entry(occupancy={"512 threads": 0.25}), {}) == []
    assert compare(entry(), entry(occupancy={}), {}) == []
    assert compare(entry(occupancy={}), entry(), {}) == []


def test_compare_occupancy_at_the_launch_both_entries_have() -> None:
    # The old entry also knows 512 threads, the new one 1024: only 256 threads is in both.
    old = entry(occupancy={"256 threads": 0.5, "512 threads": 0.5})
    new = entry(occupancy={"1024 threads": 0.25, "256 threads": 0.375})
    (d,) = compare(old, new, {})
    assert (d.metric, d.baseline, d.now, d.verdict) == ("occupancy", 0.5, 0.375, "worse")
    # A launch with dynamic shared memory is a launch of its own, not the same as without.
    smem = "256 threads, 4096 B dynamic smem"
    assert compare(entry(occupancy={smem: 0.5}), entry(occupancy={smem: 0.25, "512 threads": 1.0}), {}) == [
        Delta("occupancy", 0.5, 0.25, "worse")
    ]
    assert compare(entry(), entry(occupancy={smem: 0.25}), {}) == []


def test_spill_budget_on_a_binary_without_spill_figures_fails_instead_of_guessing() -> None:
    unknown = replace(POLY, spill_stores=0, spill_loads=0, spills_known=False)
    (msg,) = check("t", "k", "sm_90", "k.so", unknown, Limits(caps={"spills": 0})).violations
    assert msg.startswith("spill budgets cannot be checked: this binary does not record spill bytes")
    assert check("t", "k", "sm_90", "k.so", unknown, Limits(max_regs=255)).violations == []


def test_occupancy_is_recorded_per_launch_with_the_test_that_measured_it() -> None:
    small = replace(POLY, registers=32)
    plain = check("t.py::test", "k", "sm_90", "k.cu", small, Limits(launch=Launch(256)))
    smem = check("t.py::test", "k", "sm_90", "k.cu", small, Limits(launch=Launch(256), dynamic_smem=4096))
    assert (plain.occupancy_at, smem.occupancy_at) == ("256 threads", "256 threads, 4096 B dynamic smem")
    assert smem.occupancy is not None
    recorded = entry_of_report(smem)
    assert recorded.occupancy == {"256 threads, 4096 B dynamic smem": round(smem.occupancy.occupancy, 4)}
    assert recorded.tests == ("t.py::test",)
    no_launch = check("t.py::test", "k", "sm_90", "k.cu", small, Limits())
    assert no_launch.occupancy_at is None
    assert entry_of_report(no_launch).occupancy == {}


def test_ratchet_flags_changed_options_and_adds_a_conflict() -> None:
    report = replace(
        check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits()),
        ptxas_version="12.9.86",
        nvrtc_version="12.9.86",
        compiler="nvrtc",
        release="12.9",
        options_hash="new",
    )
    old = entry_of_report(replace(report, options_hash="old"))
    same = ratchet(report, BaselineRule(replace(old, options_hash="new"), recorded=True))
    assert (same.baseline_status, same.options_changed, same.violations) == ("compared", False, [])
    changed = ratchet(report, BaselineRule(old, recorded=True))
    # Other options are reported, and the entry is still enforced.
    assert (changed.baseline_status, changed.options_changed, changed.deltas) == ("compared", True, [])
    worse = ratchet(report, BaselineRule(replace(old, registers=160), recorded=True))
    assert worse.options_changed
    assert worse.violations[0].startswith("registers 160 -> 167 (+7) is worse than the baseline")
    clash = "measured differently by t.py::other"
    conflicted = ratchet(report, BaselineRule(None, recorded=True, conflict=clash))
    assert (conflicted.baseline_status, conflicted.violations, conflicted.outcome) == (
        "new",
        [clash],
        "failed",
    )


def test_ratchet_names_what_changed_in_the_build_settings() -> None:
    """ratchet.settings_change: the once-per-run line's text (docs/baseline.md, "Build settings")."""
    report = replace(
        check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits()),
        ptxas_version="12.9.86",
        compiler="nvcc",
        release="12.9",
        options_hash="new",
        build_settings=("-DGGML_A", "-DGGML_CUDA_F16", "-Iggml/src"),
    )
    old = replace(entry_of_report(report), options_hash="old", build_settings=("-DGGML_A", "-Iggml/src"))

    def change(entry: BaselineEntry, now: KernelReport = report) -> str | None:
        return ratchet(now, BaselineRule(entry, recorded=True)).settings_change

    assert change(old) == "added -DGGML_CUDA_F16"
    assert change(replace(old, build_settings=("-DGGML_A", "-DOLD", "-Iggml/src", "-DGGML_CUDA_F16"))) == (
        "removed -DOLD"
    )
    assert change(replace(old, options_hash="new")) is None  # the same digest: nothing changed
    assert change(replace(old, compiler="nvrtc")) == "compiler nvrtc -> nvcc"
    # An entry from before 0.2 records no settings: which are new is unknown, unless it had no options.
    assert change(replace(old, build_settings=())) == (
        "built with -DGGML_A -DGGML_CUDA_F16 -Iggml/src; the entry records no settings"
    )
    assert change(replace(old, build_settings=(), options_hash=NO_OPTIONS_HASH)) == (
        "added -DGGML_A -DGGML_CUDA_F16 -Iggml/src"
    )
    assert change(replace(old, build_settings=report.build_settings)) == (
        "other build inputs (the options' digest differs)"
    )
    reordered = replace(old, build_settings=tuple(reversed(report.build_settings)))
    assert change(reordered) == "the same settings in another order"
    # Reported, never a failure: the numbers decide.
    assert ratchet(report, BaselineRule(old, recorded=True)).violations == []
    # A setting that is a name and a value (a Triton kernel's num_warps) is named with both values; a define's
    # value is a flag of its own.
    triton = replace(report, compiler="triton", build_settings=("num_warps=2", "num_stages=3", "maxnreg=128"))
    was = replace(old, compiler="triton", build_settings=("num_warps=8", "num_stages=3", "-DX=1"))
    assert change(was, triton) == "num_warps 8 -> 2; added maxnreg=128; removed -DX=1"
    flags = replace(report, build_settings=("-DX=2",))
    assert change(replace(old, build_settings=("-DX=1",)), flags) == "added -DX=2; removed -DX=1"


def measured(ptxas: str = "12.9.86") -> KernelReport:
    """poly_eval as a build with the ptxas `ptxas` (NVRTC of the same version) measured it."""
    release = ".".join(ptxas.split(".")[:2])
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits())
    return replace(report, ptxas_version=ptxas, nvrtc_version=ptxas, compiler="nvrtc", release=release)


def test_ratchet_enforces_an_entry_of_another_patch_version_of_the_same_release() -> None:
    # 12.9.41 and 12.9.86 are one release: its entry, keyed "12.9", holds both.
    old = replace(entry_of_report(measured("12.9.41")), registers=160)
    worse = ratchet(measured("12.9.86"), BaselineRule(old, recorded=True))
    assert (worse.baseline_status, worse.outcome, worse.enforced) == ("compared", "failed", True)
    assert worse.violations[0].startswith("registers 160 -> 167 (+7) is worse than the baseline")
    same = ratchet(measured("12.9.86"), BaselineRule(entry_of_report(measured("12.9.41")), recorded=True))
    assert (same.baseline_status, same.outcome, same.deltas, same.enforced) == (
        "compared",
        "passed",
        [],
        True,
    )


PEAK = PeakLive(158, "poly.cu:23", "poly.cu:17")


def test_a_register_failure_ends_with_the_peak_of_live_registers_and_its_line() -> None:
    over = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(max_regs=160), peak=PEAK)
    assert over.violations == [
        "registers 167 > max_regs 160; peak 158 live at poly.cu:23 (in the loop at poly.cu:17)"
    ]
    assert over.peak_live == PEAK
    # Other budgets are not about registers: they do not name it.
    spilled = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(caps={"stack": 0}), peak=PEAK)
    assert "peak" not in " ".join(spilled.violations)


def test_grown_registers_name_the_peak_before_the_fix_that_two_regressions_share() -> None:
    old = replace(entry_of_report(measured()), registers=150, stack=8)
    grown = ratchet(replace(measured(), peak_live=PEAK), BaselineRule(old, recorded=True))
    fix = "if intended, accept it with pytest --regbudget-update and commit the baseline"
    assert grown.violations == [
        f"registers 150 -> 167 (+17) is worse than the baseline; {PEAK.text()}; {fix}",
        f"stack 8 -> 48 (+40) is worse than the baseline; {fix}",
    ]
    # The fix is said once, last; the peak stays with the registers.
    assert grown.failure_text().splitlines()[:2] == [
        f"poly_eval [sm_90]: registers 150 -> 167 (+17) is worse than the baseline; {PEAK.text()}",
        f"poly_eval [sm_90]: stack 8 -> 48 (+40) is worse than the baseline; {fix}",
    ]
    alone = ratchet(measured(), BaselineRule(old, recorded=True))
    assert alone.violations[0] == f"registers 150 -> 167 (+17) is worse than the baseline; {fix}"


def test_a_kernel_with_entries_of_other_releases_only_is_new_for_its_release() -> None:
    # A CUDA upgrade: the kernel's entries are 12.8's and 13.5's, this build is 12.9's. Nothing to compare it
    # to (another release's registers are not this one's), so it passes, is not enforced, and says why.
    report = ratchet(measured("12.9.86"), BaselineRule(None, recorded=True, releases=("12.8", "13.5")))
    assert (report.baseline_status, report.other_releases, report.baseline) == (
        "new-release",
        ("12.8", "13.5"),
        None,
    )
    assert (report.outcome, report.violations, report.deltas, report.enforced) == ("passed", [], [], False)
    assert report.unenforced_reason() == "the baseline has no CUDA 12.9 entry for it (only 12.8, 13.5)"
    # Without other releases, it is plainly new (or there is no baseline file at all).
    assert ratchet(measured(), BaselineRule(None, recorded=True)).baseline_status == "new"
    assert ratchet(measured(), BaselineRule(None)).baseline_status == "none"


def test_an_entry_of_another_release_than_its_key_is_shown_but_not_enforced() -> None:
    # A hand-edited entry: filed under 12.9 but recorded by 12.8. It is compared, never enforced.
    old = replace(entry_of_report(measured("12.8.93")), registers=160)
    report = ratchet(measured("12.9.86"), BaselineRule(old, recorded=True))
    assert (report.baseline_status, report.outcome, report.enforced) == ("toolkit-mismatch", "passed", False)
    assert [d.text() for d in report.deltas] == ["registers 160 -> 167 (+7)"]
    assert report.unenforced_reason() == "its entry was recorded with ptxas 12.8.93, this build used 12.9.86"


def test_strict_fails_every_built_kernel_not_held_to_an_entry_of_its_release() -> None:
    compared = ratchet(measured(), BaselineRule(entry_of_report(measured()), recorded=True))
    assert strict(compared) == compared
    upgraded = ratchet(measured(), BaselineRule(None, recorded=True, releases=("12.8",)))
    failed = strict(upgraded)
    assert (failed.outcome, failed.level) == ("failed", "fail")
    assert failed.violations == [
        "strict: not enforced, the baseline has no CUDA 12.9 entry for it (only 12.8); record it with "
        "pytest --regbudget-update and review the diff (entries of other CUDA releases are kept beside it)"
    ]
    # Whatever its level: a warn-only budget fails too.
    assert strict(replace(upgraded, level="warn")).outcome == "failed"
    new = strict(ratchet(measured(), BaselineRule(None, recorded=True)))
    assert new.violations[0].startswith("strict: not enforced, the baseline has no entry for it;")
    assert strict(measured()).violations[0].startswith("strict: not enforced, no baseline file;")
    # A binary's entry cannot hold its spills: not enforced either.
    unknown = replace(measured(), resources=replace(POLY, spills_known=False))
    binary = ratchet(unknown, BaselineRule(entry_of_report(unknown), recorded=True))
    assert (binary.baseline_status, binary.enforced) == ("compared", False)
    assert strict(binary).violations[0].startswith("strict: not enforced, its spills are unknown")
    # A kernel that did not build has its error already; strict adds nothing.
    broken = replace(measured(), resources=None, error="boom")
    assert strict(broken) == broken


def test_time_budgets_are_judged_from_a_timing_and_the_entrys_interval() -> None:
    # What a GPU run does after timing a kernel (budget.timed), with the figures given: the interval code
    # is imported only here, so a run without a GPU never loads it.
    from pytest_regbudget.core.gpu_facts import DriverView, GpuFacts, Timing

    gpu = GpuFacts(device="NVIDIA H200", arch="sm_90", view=DriverView(167, 56, 4096, 384), driver_blocks=1)
    old = replace(
        entry(),
        gpu={"NVIDIA H200": {"time_ms": 1.0, "ci_low_ms": 0.98, "ci_high_ms": 1.02, "sm_clock_mhz": 1980}},
    )
    report = replace(ratchet(measured(), BaselineRule(old, recorded=True)), gpu=gpu)
    assert report.baseline is old
    interval = old.gpu_time_interval("NVIDIA H200")
    assert interval is not None
    assert (interval.median, interval.low, interval.high) == (1.0, 0.98, 1.02)
    timing = Timing(1.5, 0.01, 30, 1.45, 1980, 1980, 0, True, ci_low_ms=1.48, ci_high_ms=1.52)
    limits = Limits(max_time_ms=1.2, max_time_ratio=1.1)
    slow = timed(report, limits, timing, enforce=True)
    assert slow.time_status == "fail"
    assert slow.violations[-2].startswith("time 1.5 ms > max_time_ms 1.2 on NVIDIA H200 (median 1.5 ms [1.48")
    assert slow.violations[-1].startswith(
        "time 1 -> 1.5 ms (x1.500, interval [1.451, 1.551]) > max_time_ratio"
    )
    fast = timed(
        report, limits, replace(timing, median_ms=1.0, ci_low_ms=0.99, ci_high_ms=1.01), enforce=True
    )
    assert fast.time_status == "pass"
    assert fast.baseline_time_ms == 1.0


def test_the_sampler_stops_once_the_interval_settles_both_ceilings() -> None:
    # The stopping rule a GPU run hands the sampler (timing.py), from the same entry as above.
    from pytest_regbudget.core.gpu_facts import DriverView, GpuFacts
    from pytest_regbudget.core.timing import Interval
    from pytest_regbudget.core.verdict import time_budgets_settled

    gpu = GpuFacts(device="NVIDIA H200", arch="sm_90", view=DriverView(167, 56, 4096, 384), driver_blocks=1)
    old = replace(entry(), gpu={"NVIDIA H200": {"time_ms": 1.0, "ci_low_ms": 0.99, "ci_high_ms": 1.01}})
    report = replace(ratchet(measured(), BaselineRule(old, recorded=True)), gpu=gpu)
    decided = time_budgets_settled(report, Limits(max_time_ms=1.2, max_time_ratio=1.1), enforce=True)
    assert decided is not None
    assert decided(Interval(1.05, 1.04, 1.06))  # under both ceilings, whatever the noise
    assert decided(Interval(1.5, 1.48, 1.52))  # over both
    assert not decided(Interval(1.1, 1.0, 1.2))  # straddles the ratio's ceiling: sample on
    assert time_budgets_settled(report, Limits(), enforce=True) is None
    # An update records the ratio rather than judging it: only the ceiling in ms settles.
    ceiling_only = time_budgets_settled(report, Limits(max_time_ms=1.2, max_time_ratio=1.1), enforce=False)
    assert ceiling_only is not None
    assert ceiling_only(Interval(1.1, 1.0, 1.15))


def test_a_changed_setmaxnreg_target_fails_the_ratchet() -> None:
    # A warp-specialized kernel: its producer drops to 40 registers, its consumers rise to 232.
    roles = replace(measured(), setmaxnreg=(("dec", 40), ("inc", 232), ("inc", 232)))
    recorded = entry_of_report(roles)
    assert recorded.setmaxnreg == ("dec 40", "inc 232")
    assert recorded.to_toml()["setmaxnreg"] == ("dec 40", "inc 232")
    assert bl.entry_from_table(recorded.to_toml()) == recorded
    same = ratchet(roles, BaselineRule(recorded, recorded=True))
    assert (same.outcome, same.violations) == ("passed", [])
    raised = replace(roles, setmaxnreg=(("dec", 40), ("inc", 240)))
    worse = ratchet(raised, BaselineRule(recorded, recorded=True))
    assert worse.outcome == "failed"
    assert worse.violations == [
        "setmaxnreg targets dec 40, inc 232 -> dec 40, inc 240 since the baseline; if intended, accept them "
        "with pytest --regbudget-update and commit the baseline"
    ]
    dropped = ratchet(measured(), BaselineRule(recorded, recorded=True))  # ptxas dropped the roles (C7508)
    assert "inc 232 -> none" in dropped.violations[0]
    # An update records the new targets rather than judging them.
    assert ratchet(raised, BaselineRule(recorded, recorded=True, enforce=False)).violations == []
    # An entry written before targets were recorded holds none: nothing to compare with.
    assert ratchet(roles, BaselineRule(replace(recorded, setmaxnreg=()), recorded=True)).outcome == "passed"


@pytest.mark.parametrize("value", [["inc"], ["inc 232", 40], "inc 232", ["up 232"]])
def test_a_malformed_setmaxnreg_entry_is_refused(value: object) -> None:
    table = {**entry_of_report(measured()).to_toml(), "setmaxnreg": value}
    with pytest.raises(BaselineError, match=r"setmaxnreg = .*expected a list such as \["):
        bl.entry_from_table(table)


def _roles(registers: int, messages: tuple[str, ...] = ()) -> list[str]:
    """The role checks of a warp-specialized kernel: dec 40 for 128 producer threads, inc 232 for 256."""
    from pathlib import Path

    from pytest_regbudget.core.facts import KernelFacts, Provenance
    from pytest_regbudget.core.verdict import _role_and_message_checks, _roles_dropped

    facts = KernelFacts(
        kernel="k",
        entry="k",
        arch="sm_90a",
        source=Path("k.cu"),
        resources=replace(POLY, registers=registers, arch="sm_90a"),
        provenance=Provenance("nvrtc", frontend="12.9.86", ptxas="12.9.86", origin="test"),
        messages=messages,
        setmaxnreg=(("dec", 40), ("inc", 232)),
    )
    limits = Limits(setmaxnreg_threads=(("dec", 128), ("inc", 256)))
    return _role_and_message_checks(facts, limits, _roles_dropped(facts, None))


def test_role_arithmetic_says_the_allocation_unit_and_is_silent_once_ptxas_dropped_the_roles() -> None:
    # 154 registers are allocated as 160 a thread: the product (of 160) says so. 40 x 128 + 232 x 256 =
    # 64,512 > 61,440: an inc would wait.
    (need,) = _roles(154)
    assert "more than the block's 154 (allocated as 160, in units of 8) x 384 = 61,440 at entry" in need
    assert "would wait forever" in need
    # 168 is a whole unit: said as it is, and 168 x 384 = 64,512 holds the roles exactly.
    assert _roles(168) == []
    (launch,) = _roles(171)
    assert launch.startswith("setmaxnreg: 171 (allocated as 176, in units of 8) registers at entry x 384 ")
    # After C7508 the roles are not in effect: nothing waits, so nothing is said of waiting.
    dropped = "(C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count"
    assert _roles(154, (dropped,)) == []


# --- spills in the functions a kernel calls (tests/data/callees: tests/kernels/callees.cu, NVRTC 12.9) ---

CALLEES = Path(__file__).parents[1] / "data" / "callees"
CALLEES_LOG = (CALLEES / "nvrtc_12.9.86_sm_90.txt").read_text()
OWN = parse_ptxas_output(CALLEES_LOG)  # each kernel's own figures, as ptxas prints them under its name


def with_its_callees(kernel: str) -> KernelResources:
    cubin = (CALLEES / "nvrtc_12.9.86_sm_90.cubin").read_bytes()
    return with_callees(OWN[kernel], parse_functions(CALLEES_LOG), call_tree(cubin, kernel))


def judged(res: KernelResources, **caps: int) -> KernelReport:
    report = check("t.py::test", res.name, "sm_90", "callees.cu", res, Limits(caps=caps))
    return replace(report, ptxas_version="12.9.86", nvrtc_version="12.9.86", compiler="nvrtc", release="12.9")


HEAVY = "heavy(float const*, int, int, int)"
MIDDLE = "middle(float const*, int, int, int)"


def test_a_spill_budget_fails_on_the_callees_spills_and_names_them() -> None:
    # only_callee spills nothing under its own name: before callees were counted, spills=0 passed.
    assert judged(OWN["only_callee"], spills=0).violations == []
    assert judged(with_its_callees("only_callee"), spills=0).violations == [
        "spill stores 72 bytes > spills 0 (72 bytes of them in __noinline__ callees: "
        f"4 in heavy_into(float const*, float*, int, int), 68 in {HEAVY})",
        "spill loads 84 bytes > spills 0 (84 bytes of them in __noinline__ callees: "
        f"4 in heavy_into(float const*, float*, int, int), 80 in {HEAVY})",
    ]
    # first spills 20 bytes of its own; heavy's 256 are named.
    assert judged(with_its_callees("first"), spill_stores=100).violations == [
        f"spill stores 276 bytes > spill_stores 100 (256 bytes of them in the __noinline__ callee {HEAVY})"
    ]
    # A callee that does not spill adds nothing.
    assert judged(with_its_callees("calls_light"), spills=0).violations == []


def test_the_diagnosis_says_which_callee_spills_and_how_to_fix_it() -> None:
    said = [d for d in judged(with_its_callees("second")).diagnosis if "__noinline__" in d]
    assert said == [
        "264 of the 276 bytes of spill stores and 292 of the 304 bytes of loads are in the __noinline__ "
        f"functions the kernel calls (stores/loads: {HEAVY} 256/288, {MIDDLE} 8/4), "
        "which ptxas reports under each function; they run on every call. Fix: let the compiler inline the "
        "function (drop __noinline__) or lower its register need: ptxas holds a function to the register "
        "limit of the kernel it is compiled with (__launch_bounds__, -maxrregcount)."
    ]
    assert not [d for d in judged(with_its_callees("calls_light")).diagnosis if "__noinline__" in d]


def test_the_entry_records_the_callees_part_and_the_ratchet_holds_the_whole() -> None:
    now = judged(with_its_callees("first"))
    entry = entry_of_report(now)
    assert (entry.spill_stores, entry.spill_loads) == (276, 300)
    assert (entry.spill_stores_callees, entry.spill_loads_callees) == (256, 288)
    assert ratchet(now, BaselineRule(entry, recorded=True)).violations == []
    # An entry of 0.1 holds the kernel's own 20/12: the callees' spills it never counted are named.
    old = entry_of_report(judged(OWN["first"]))
    assert (old.spill_stores, old.spill_stores_callees) == (20, None)
    stores, loads = ratchet(now, BaselineRule(old, recorded=True)).violations
    assert stores == (
        f"spill_stores 20 -> 276 (+256) is worse than the baseline (256 bytes of them in the __noinline__ "
        f"callee {HEAVY}, where the entry records none: pytest-regbudget 0.1 counted a kernel's own spills "
        "only); if intended, accept it with pytest --regbudget-update and commit the baseline"
    )
    assert loads.startswith("spill_loads 12 -> 300 (+288) is worse than the baseline (288 bytes of them in")
    # A callee that spills more than the entry recorded of it.
    grown = replace(entry, spill_stores=200, spill_stores_callees=180)
    (worse,) = ratchet(now, BaselineRule(grown, recorded=True)).violations
    assert (
        "(256 bytes of them in the __noinline__ callee heavy(float const*, int, int, int), where the entry "
        in worse
    )
    assert "records 180); if intended" in worse
    # The kernel's own spills grew, its callees' did not: nothing about callees to say.
    (own,) = ratchet(now, BaselineRule(replace(entry, spill_stores=270), recorded=True)).violations
    assert own.startswith("spill_stores 270 -> 276 (+6) is worse than the baseline; if intended")
