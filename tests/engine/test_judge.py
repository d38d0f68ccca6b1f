"""engine/judge.py without pytest's machinery: recorded `ptxas -v` output (tests/data/ptxas) read into
KernelFacts by the core's parser, judged against a marker's budget and a baseline as a run judges them. The
verdict text is what a failing test shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.facts import KernelFacts, Provenance
from pytest_regbudget.core.liveness import PeakLive
from pytest_regbudget.core.ptxas import read
from pytest_regbudget.core.ratchet import entry_of_report
from pytest_regbudget.engine.judge import (
    Context,
    baseline_rule,
    fails_on_registers,
    item_archs,
    judge,
    judge_alone,
    limits_of,
    reads_sass,
)
from pytest_regbudget.engine.state import Settings
from pytest_regbudget.project.markers import Budget, parse_marker

DATA = Path(__file__).parents[1] / "data" / "ptxas"
ROOT = Path("/project")
SOURCE = ROOT / "kernels.cu"


def recorded(stem: str, entry: str = "pressure") -> KernelFacts:
    """The facts of `entry` in a recording (`12.9_sm_90` or `12.9_sm_90_cap32`: -maxrregcount=32)."""
    release, _, arch = stem.split("_")[:3]
    text = (DATA / f"{stem}.txt").read_text()
    ptx = (DATA / f"{release}_sm_{arch}.ptx").read_text()
    resources = read(text, ptx)[entry]
    version = {"12.9": "12.9.86"}[release]
    return KernelFacts(
        kernel=entry,
        entry=entry,
        arch=f"sm_{arch}",
        source=SOURCE,
        resources=resources,
        provenance=Provenance("nvrtc", version, version),
    )


def marker(**budgets: object) -> Budget:
    return parse_marker((), {"source": "kernels.cu", "kernel": "pressure", **budgets}, ROOT)


SETTINGS = Settings(archs=("sm_90",), rootdir=ROOT, baseline_path=ROOT / "regbudget-baseline.toml")


def test_a_kernel_over_its_register_budget_fails_with_ptxas_line() -> None:
    # pressure: 56 registers, no spill on sm_90 with CUDA 12.9.
    report = judge(recorded("12.9_sm_90"), marker(max_regs=48, spills=0), Context("t.py::t", "pressure"))
    assert report.outcome == "failed"
    assert report.failure_text() == (
        "pressure [sm_90]: registers 56 > max_regs 48\n    ptxas: Used 56 registers, used 0 barriers"
    )


def test_a_kernel_within_its_budget_passes_and_a_warn_level_warns() -> None:
    facts = recorded("12.9_sm_90")
    assert judge(facts, marker(max_regs=64, spills=0), Context("t.py::t", "pressure")).outcome == "passed"
    warned = judge(facts, marker(max_regs=48, level="warn"), Context("t.py::t", "pressure"))
    assert (warned.outcome, warned.violations[0]) == ("warned", "registers 56 > max_regs 48")


def test_spills_name_each_direction_and_the_diagnosis() -> None:
    # -maxrregcount=32 makes pressure spill: 668 bytes stored, 672 loaded.
    report = judge(recorded("12.9_sm_90_cap32"), marker(spills=0), Context("t.py::t", "pressure"))
    lines = report.failure_text().splitlines()
    assert lines[:2] == [
        "pressure [sm_90]: spill stores 668 bytes > spills 0",
        "pressure [sm_90]: spill loads 672 bytes > spills 0",
    ]
    assert lines[2] == "    ptxas: Used 32 registers, used 0 barriers, 344 bytes cumulative stack size"
    assert lines[3].startswith("    diagnosis: 668 bytes of spill stores and 672 bytes of loads")


def test_the_build_gives_the_launch_the_budget_leaves_out() -> None:
    facts = replace(recorded("12.9_sm_90"), block=128, dynamic_smem=1024)
    limits = limits_of(marker(), facts)
    assert (limits.launch is not None and limits.launch.threads, limits.dynamic_smem) == (128, 1024)
    given = limits_of(marker(launch=(256,), dynamic_smem=2048), facts)
    assert (given.launch is not None and given.launch.threads, given.dynamic_smem) == (256, 2048)
    # The occupancy is figured at the build's launch.
    report = judge(facts, marker(), Context("t.py::t", "pressure"))
    assert report.occupancy_at == "128 threads, 1024 B dynamic smem"


def test_archs_keep_the_chip_and_sass_is_read_for_hot_spills() -> None:
    assert item_archs(["sm_80", "sm_90", "sm_90a"], marker(archs=["sm_90"])) == ["sm_90", "sm_90a"]
    assert item_archs(["sm_80", "sm_90a"], marker(archs=["sm_90a"])) == ["sm_90a"]
    assert item_archs(["sm_80"], None) == ["sm_80"]
    assert not reads_sass(marker(), "sm_90", sass=False)
    assert reads_sass(marker(), "sm_90", sass=True)
    assert reads_sass(marker(hot_spills=0), "sm_90", sass=False)


def test_a_kernel_that_got_worse_than_its_entry_fails_with_the_fix() -> None:
    before = judge_alone(recorded("12.9_sm_90_cap32"), marker(), SETTINGS, bl.Baseline(), "t.py::t")
    assert (before.outcome, before.baseline_status) == ("passed", "new")
    now = recorded("12.9_sm_90")
    baseline = bl.Baseline(entries={SETTINGS.baseline_key(now): entry_of_report(before)})
    report = judge_alone(now, marker(), SETTINGS, baseline, "t.py::t")
    assert report.baseline_status == "compared"
    assert report.failure_text().splitlines()[0] == (
        "pressure [sm_90]: registers 32 -> 56 (+24) is worse than the baseline; if intended, accept it with "
        "pytest --regbudget-update and commit regbudget-baseline.toml"
    )
    # Within the run's tolerance, or during an update, it passes.
    tolerant = replace(SETTINGS, tolerance={"registers": 24})
    assert judge_alone(now, marker(), tolerant, baseline, "t.py::t").outcome == "passed"
    updating = replace(SETTINGS, update=True)
    assert judge_alone(now, marker(), updating, baseline, "t.py::t").outcome == "passed"


def test_an_entry_keyed_with_dotdot_is_found_and_installed_code_records_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    settings = replace(SETTINGS, rootdir=root, baseline_path=root / "regbudget-baseline.toml")
    # Outside the rootdir and every install: keyed by its absolute path; 0.1's `..` key still finds it.
    outside = replace(recorded("12.9_sm_90"), source=tmp_path / "vendor" / "k.cu")
    key = settings.baseline_key(outside)
    assert key[0] == (tmp_path / "vendor" / "k.cu").as_posix()
    dotted = ("../vendor/k.cu", *key[1:])
    first = judge_alone(outside, marker(), settings, bl.Baseline(), "t.py::t")
    baseline = bl.Baseline(entries={dotted: entry_of_report(first)})
    again = judge_alone(outside, marker(), settings, baseline, "t.py::t")
    assert (again.baseline_status, again.found_under) == ("compared", dotted)
    # In a `pip install --target` folder on sys.path, with the distribution's metadata: its import path, and
    # the package and version in the entry it makes.
    target = tmp_path / "target"
    (target / "h45kpkg").mkdir(parents=True)
    info = target / "h45kpkg-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: h45kpkg\nVersion: 1.2.3\n")
    (info / "RECORD").write_text("h45kpkg/k.cu,,\nh45kpkg-1.2.3.dist-info/METADATA,,\n")
    monkeypatch.syspath_prepend(str(target))
    installed = replace(recorded("12.9_sm_90"), source=target / "h45kpkg" / "k.cu")
    assert settings.baseline_key(installed)[0] == "h45kpkg/k.cu"
    report = judge_alone(installed, marker(), settings, bl.Baseline(), "t.py::t")
    assert entry_of_report(report).package == "h45kpkg 1.2.3"
    assert entry_of_report(report).to_toml()["package"] == "h45kpkg 1.2.3"
    # An older version's entry: compared, and the upgrade named as a build change.
    old = replace(entry_of_report(report), package="h45kpkg 1.2.0")
    upgraded = judge_alone(
        installed, marker(), settings, bl.Baseline({settings.baseline_key(installed): old}), "t.py::t"
    )
    assert (upgraded.baseline_status, upgraded.settings_change) == (
        "compared",
        "package h45kpkg 1.2.0 -> 1.2.3",
    )
    assert settings.package_of(recorded("12.9_sm_90")) is None  # the project's own file (or none)


def test_a_failure_on_registers_asks_for_the_peak_and_names_it() -> None:
    facts = recorded("12.9_sm_90")
    peak = PeakLive(50, "kernels.cu:12", "kernels.cu:10")
    over = marker(max_regs=48)
    plain = judge(facts, over, Context("t.py::t", "pressure"))
    assert fails_on_registers(plain, limits_of(over, facts), None)
    named = judge(facts, over, Context("t.py::t", "pressure", peak_live=peak))
    assert named.failure_text().splitlines()[0] == (
        "pressure [sm_90]: registers 56 > max_regs 48; peak 50 live at kernels.cu:12 (in the loop at "
        "kernels.cu:10)"
    )
    # Spills over their budget, or registers within theirs, read no peak.
    for budget in (marker(max_regs=64), marker(spills=0)):
        spilled = recorded("12.9_sm_90_cap32")
        report = judge(spilled, budget, Context("t.py::t", "pressure"))
        assert not fails_on_registers(report, limits_of(budget, spilled), None)

    # Grown against an enforced entry, as judge_alone holds it: the peak before the fix; not during an update.
    entry = entry_of_report(judge_alone(recorded("12.9_sm_90_cap32"), marker(), SETTINGS, bl.Baseline(), "t"))
    key = SETTINGS.baseline_key(facts)
    baseline = bl.Baseline(entries={key: entry})
    grown = judge_alone(facts, marker(), SETTINGS, baseline, "t.py::t", peak)
    assert grown.violations[0].startswith(
        f"registers 32 -> 56 (+24) is worse than the baseline; {peak.text()}; "
    )
    for settings, failing in ((SETTINGS, True), (replace(SETTINGS, update=True), False)):
        rule = baseline_rule(baseline, settings, key, facts, marker())
        report = judge(facts, marker(), Context("t.py::t", "pressure", key=key, baseline=rule))
        assert fails_on_registers(report, limits_of(marker(), facts), rule) is failing


def test_strict_fails_a_kernel_without_an_entry_and_a_conflict_is_a_violation() -> None:
    facts = recorded("12.9_sm_90")
    strict = judge_alone(facts, marker(), replace(SETTINGS, strict=True), bl.Baseline(), "t.py::t")
    assert strict.outcome == "failed"
    assert strict.violations[0].startswith("strict: not enforced, the baseline has no entry for it;")
    key = SETTINGS.baseline_key(facts)
    assert key == ("kernels.cu", "pressure", "-", "sm_90", "12.9")
    rule = baseline_rule(bl.Baseline(), SETTINGS, key, facts, marker(), conflict="measured differently")
    report = judge(facts, marker(), Context("t.py::t", "pressure", key=key, baseline=rule))
    assert (report.outcome, report.violations) == ("failed", ["measured differently"])


@pytest.mark.parametrize("tolerance", [{"registers": 4.0}, {}])
def test_the_budgets_tolerance_adds_to_the_runs(tolerance: dict[str, float]) -> None:
    facts = recorded("12.9_sm_90")
    key = SETTINGS.baseline_key(facts)
    settings = replace(SETTINGS, tolerance={"spills": 16.0})
    rule = baseline_rule(bl.Baseline(), settings, key, facts, marker(tolerance=tolerance))
    assert dict(rule.tolerance) == {"spills": 16.0, **tolerance}
    assert (rule.recorded, rule.enforce, rule.name) == (True, True, "regbudget-baseline.toml")
