"""A kernel's budgets see the `__noinline__` functions it calls (issue 43): ptxas reports a callee's spills
under the callee, not the kernel, and the kernel's spill figures count them, from the call tree its cubin
gives. Built from tests/kernels/callees.cu by the real NVRTC and nvcc of the wheels, whole-program and
relocatable (nvcc -rdc=true)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from helpers.data import KERNELS
from helpers.runs import run_json
from msgspec.structs import replace

from pytest_regbudget.core import baseline as bl

HEAVY = "heavy(float const*, int, int, int)"
HEAVY_INTO = "heavy_into(float const*, float*, int, int)"
TESTS = """
import pytest

def marked(kernel, **budget):
    return pytest.mark.regbudget(source="callees.cu", kernel=kernel, {build} **budget)

@marked("only_callee", spills=0)
def test_only_callee():
    pass

@marked("first", spills=0)
def test_first():
    pass

@marked("second", spills=0)
def test_second():
    pass

@marked("calls_light", spills=0)
def test_calls_light():
    pass
"""
BUILDS = {
    "nvrtc": 'compiler="nvrtc",',
    "nvcc": 'compiler="nvcc",',
    # Each function compiled apart, so that the call graph's edges decide which a kernel calls.
    "nvcc -rdc": 'compiler="nvcc", options=["-rdc=true"], defines={"BOUNDS": ""}, '
    'ptxas_options=["-maxrregcount=32"],',
}


@pytest.fixture(params=list(BUILDS))
def build(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> str:
    if request.param != "nvrtc":
        request.getfixturevalue("nvcc_found")
    shutil.copy(KERNELS / "callees.cu", pytester.path)
    pytester.makepyfile(test_k=TESTS.format(build=BUILDS[request.param]))
    return str(request.param)


def by_kernel(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["kernel"]: r for r in records}


def callee_names(record: dict[str, Any]) -> list[str]:
    """The functions whose spills a kernel counts, without a relocatable build's clone mark ("$6")."""
    return [c["name"].partition("$")[0] for c in record["spilling_callees"]]


def test_spills_0_fails_where_only_a_callee_spills_and_names_it(
    pytester: pytest.Pytester, build: str
) -> None:
    result, records = run_json(pytester)
    result.assert_outcomes(passed=1, failed=3)
    kernels = by_kernel(records)
    only = kernels["only_callee"]
    # ptxas reports no spills under the kernel's own name: all of them are its callees'.
    assert only["spill_stores"] == only["spill_stores_callees"] > 0
    assert only["spill_loads"] == only["spill_loads_callees"] > 0
    assert callee_names(only) == ["_Z10heavy_intoPKfPfii", "_Z5heavyPKfiii"]
    assert sum(c["spill_stores"] for c in only["spilling_callees"]) == only["spill_stores_callees"]
    result.stdout.fnmatch_lines(
        [
            f"*only_callee [[]sm_90[]]: spill stores * bytes > spills 0 (* bytes of them in __noinline__ "
            f"callees: * in {HEAVY_INTO}, * in {HEAVY})",
            f"*only_callee [[]sm_90[]]: spill loads * bytes > spills 0 (* bytes of them in __noinline__ "
            f"callees: * in {HEAVY_INTO}, * in {HEAVY})",
        ]
    )
    # A callee that does not spill leaves its kernel passing.
    light = kernels["calls_light"]
    assert (light["outcome"], light["spill_stores"], light["spilling_callees"]) == ("passed", 0, [])


def test_two_kernels_that_share_a_callee_each_count_it(pytester: pytest.Pytester, build: str) -> None:
    result, records = run_json(pytester)
    kernels = by_kernel(records)
    first, second = kernels["first"], kernels["second"]
    assert callee_names(first) == ["_Z5heavyPKfiii"]
    # second calls heavy itself and through middle: heavy is counted once.
    assert sorted(callee_names(second)) == ["_Z5heavyPKfiii", "_Z6middlePKfiii"]
    for rec in (first, second):
        assert rec["outcome"] == "failed"
        assert any(HEAVY in v for v in rec["violations"])
        assert rec["spill_stores_callees"] == sum(c["spill_stores"] for c in rec["spilling_callees"])
    if build == "nvcc -rdc":
        # Each function compiled apart: the kernels spill nothing of their own, and one heavy, which both
        # call, has the same figures in both.
        assert first["spill_stores"] == first["spill_stores_callees"]
        heavy = [
            next(c for c in r["spilling_callees"] if c["name"] == "_Z5heavyPKfiii") for r in (first, second)
        ]
        assert heavy[0] == heavy[1]
    result.stdout.fnmatch_lines(
        [f"*second [[]sm_90[]]: spill stores * bytes > spills 0 (* of them in *{HEAVY}*"]
    )


def test_the_baseline_holds_the_callees_part_and_names_what_an_old_entry_did_not_count(
    pytester: pytest.Pytester, build: str
) -> None:
    pytester.makepyfile(test_k=TESTS.format(build=BUILDS[build]).replace("spills=0", "max_regs=255"))
    result, _ = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(passed=4)
    path = pytester.path / "regbudget-baseline.toml"
    # Written where a callee spills, after the spills: only_callee's, first's and second's entries.
    text = path.read_text()
    assert text.count("spill_stores_callees = ") == text.count("spill_loads_callees = ") == 3
    result, _ = run_json(pytester)
    result.assert_outcomes(passed=4)
    # The file as pytest-regbudget 0.1 wrote it: the kernels' own spills, and no callees' part.
    recorded = bl.load(path).entries
    old = {
        key: replace(
            e,
            spill_stores=(e.spill_stores or 0) - (e.spill_stores_callees or 0),
            spill_loads=(e.spill_loads or 0) - (e.spill_loads_callees or 0),
            spill_stores_callees=None,
            spill_loads_callees=None,
        )
        for key, e in recorded.items()
    }
    path.write_text(bl.dumps(bl.Baseline(old)))
    result, records = run_json(pytester)
    result.assert_outcomes(passed=1, failed=3)
    assert by_kernel(records)["calls_light"]["outcome"] == "passed"
    result.stdout.fnmatch_lines(
        [
            f"*only_callee [[]sm_90[]]: spill_stores 0 -> * is worse than the baseline (* bytes of them in "
            f"__noinline__ callees: * in {HEAVY_INTO}, * in {HEAVY}, where the entry records none: "
            "pytest-regbudget 0.1 counted a kernel's own spills only)*"
        ]
    )
