"""report/counts.py: each check counted once by verdict and once against the baseline, in the words every
face prints."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_regbudget.report.counts import CheckCounts, change_of, count_checks, counts_text, verdict_of


def rec(outcome: str = "passed", status: str = "compared", *verdicts: str, **more: Any) -> dict[str, Any]:
    deltas = [{"metric": "registers", "baseline": 40, "now": 48, "delta": 8, "verdict": v} for v in verdicts]
    return {"outcome": outcome, "baseline_status": status, "deltas": deltas, **more}


@pytest.mark.parametrize(
    ("record", "change"),
    [
        (rec("passed", "compared"), "unchanged"),
        (rec("failed", "compared"), "unchanged"),  # a budget failed; no number moved
        (rec("failed", "compared", "worse", "better"), "worse"),  # a failing kernel whose numbers moved
        (rec("passed", "compared", "tolerated"), "worse"),  # worse, tolerated or not
        (rec("passed", "compared", "better", "better"), "improved"),
        (rec("passed", "compared", "same"), "unchanged"),
        (rec("passed", "toolkit-mismatch", "worse"), "worse"),  # moved, though not enforced
        (rec("passed", "toolkit-mismatch"), "unchanged"),
        (rec("passed", "new"), "new"),
        (rec("failed", "new-release"), "new"),
        (rec("passed", "none"), "no_baseline"),
        (rec("error", "none"), "no_baseline"),  # did not build: no numbers to compare
        # Build settings alone change nothing.
        (rec("passed", "compared", options_changed=True, settings_change="added -DX"), "unchanged"),
        # A report file's invented verdict moves nothing.
        (rec("passed", "compared", "@someone"), "unchanged"),
    ],
)
def test_each_check_has_one_place_against_the_baseline(record: dict[str, Any], change: str) -> None:
    assert change_of(record) == change


@pytest.mark.parametrize(
    ("outcome", "verdict"),
    [("passed", "passed"), ("failed", "failed"), ("warned", "warned"), ("error", "errors"), ("x", "failed")],
)
def test_each_check_has_one_verdict(outcome: str, verdict: str) -> None:
    assert verdict_of(rec(outcome)) == verdict


def test_the_two_partitions_each_add_up_to_the_checks() -> None:
    records = [
        *[rec("failed", "compared", "worse")] * 10,
        *[rec("warned", "compared", "tolerated", "better")] * 2,
        *[rec("passed", "compared", "better")] * 2,
        rec("passed", "new"),
        rec("error", "none"),
        *[rec("passed", "compared")] * 26,
    ]
    c = count_checks(records)
    assert c == CheckCounts(
        checks=42, failed=10, errors=1, warned=2, passed=29, changed=14, worse=12, improved=2, new=1,
        unchanged=26, no_baseline=1,
    )  # fmt: skip
    assert c.failed + c.errors + c.warned + c.passed == c.checks
    assert c.changed + c.new + c.unchanged + c.no_baseline == c.checks
    assert c.worse + c.improved == c.changed
    assert list(c.to_json()) == [
        *("checks", "failed", "errors", "warned", "passed"),
        *("changed", "worse", "improved", "new", "unchanged", "no_baseline"),
    ]


def test_the_line_every_face_prints() -> None:
    c = CheckCounts(checks=42, failed=10, warned=2, passed=30, changed=12, worse=10, improved=2, unchanged=30)
    assert counts_text(c) == (
        "42 kernel checks: 10 failed, 2 warned, 30 passed; against the baseline: 12 changed (10 worse, "
        "2 improved), 0 new, 30 unchanged"
    )
    # Builds that failed and checks with nothing to compare with are named only when there are any.
    odd = CheckCounts(checks=1, errors=1, no_baseline=1)
    assert counts_text(odd) == (
        "1 kernel check: 0 failed, 1 did not build, 0 warned, 0 passed; against the baseline: 0 changed, "
        "0 new, 0 unchanged, 1 with no baseline"
    )
    assert counts_text(CheckCounts(checks=1200, passed=1200, unchanged=1200)).startswith(
        "1,200 kernel checks:"
    )
