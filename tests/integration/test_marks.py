"""Every way a regbudget marker reaches a test builds and judges its kernel on each arch, or fails that
test with one line: `pytest.param(..., marks=...)` cases with and without the fixture, budget-only markers, a
fixture test that compiles nothing, a unittest method, markers that a conftest hook adds, and `archs=`
against the suffixed spellings (sm_90a). The real NVRTC and ptxas from the wheels."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.data import KERNELS
from helpers.projects import write_tree
from helpers.runs import run_json, verbose_outcomes

HUNGRY = (KERNELS / "hungry.cu").read_text()  # poly_eval: 168 registers
SMALL = 'extern "C" __global__ void small(float* x) { x[threadIdx.x] *= 2.0f; }\n'


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_tree(pytester.path, {"kernels/poly.cu": HUNGRY, "kernels/small.cu": SMALL})
    return pytester


def failure_line(result: pytest.RunResult, nodeid: str) -> str:
    """The one line of the failure report that names `nodeid` and says what to do."""
    lines = [line for line in result.stdout.lines if line.startswith(f"{nodeid}: ") and "Fix: " in line]
    assert len(lines) == 1, result.stdout.str()
    return lines[0]


PARAM_CASES = """
import pytest

BIG = pytest.mark.regbudget(source="kernels/poly.cu", kernel="poly_eval", max_regs=32)
SMALL = pytest.mark.regbudget(source="kernels/small.cu", kernel="small", max_regs=32)


CASES = [pytest.param(1, marks=BIG, id="big"), pytest.param(2, marks=SMALL, id="small")]


@pytest.mark.parametrize("p", CASES)
def test_param({args}):
    assert p in (1, 2)
"""


@pytest.mark.parametrize("fixture", [False, True], ids=["no-fixture", "fixture"])
def test_pytest_param_marks_build_and_enforce_on_every_arch(project: pytest.Pytester, fixture: bool) -> None:
    project.makepyfile(test_k=PARAM_CASES.format(args="p, regbudget" if fixture else "p"))
    result, records = run_json(project, "--regbudget-arch=sm_80,sm_90", "-v")
    assert verbose_outcomes(result) == {
        "test_k.py::test_param[big-sm_80]": "FAILED",
        "test_k.py::test_param[big-sm_90]": "FAILED",
        "test_k.py::test_param[small-sm_80]": "PASSED",
        "test_k.py::test_param[small-sm_90]": "PASSED",
    }
    result.stdout.fnmatch_lines(["poly_eval [[]sm_80]: registers 168 > max_regs 32"])
    rows = sorted((r["nodeid"].split("::")[1], r["kernel"], r["registers"], r["outcome"]) for r in records)
    assert rows == [
        ("test_param[big-sm_80]", "poly_eval", 168, "failed"),
        ("test_param[big-sm_90]", "poly_eval", 168, "failed"),
        ("test_param[small-sm_80]", "small", 8, "passed"),
        ("test_param[small-sm_90]", "small", 8, "passed"),
    ]
    result.stdout.fnmatch_lines(["test_param[[]big[]] *poly_eval *sm_80*168*FAILED"])  # the summary


def test_pytest_param_marks_reach_the_baseline(project: pytest.Pytester) -> None:
    project.makepyfile(test_k=PARAM_CASES.format(args="p"))
    baseline = project.path / "regbudget-baseline.toml"
    project.runpytest(
        "-p",
        "no:cacheprovider",
        "--regbudget-arch=sm_80,sm_90",
        "--regbudget-update",
        f"--regbudget-baseline={baseline}",
    )
    text = baseline.read_text()
    for nodeid in ("test_param[big-sm_80]", "test_param[big-sm_90]", "test_param[small-sm_90]"):
        assert f"test_k.py::{nodeid}" in text


def test_a_case_without_a_marker_beside_marked_ones_runs_on_each_arch(project: pytest.Pytester) -> None:
    """parametrize applies to every case: the unmarked one runs per arch too, and judges nothing."""
    project.makepyfile(
        test_k="""
import pytest

SMALL = pytest.mark.regbudget(source="kernels/small.cu", kernel="small", archs=["sm_90"])


@pytest.mark.parametrize("p", [pytest.param(1, marks=SMALL, id="small"), pytest.param(2, id="plain")])
def test_param(p):
    pass
"""
    )
    result, records = run_json(project, "--regbudget-arch=sm_80,sm_90", "-v")
    assert verbose_outcomes(result) == {
        "test_k.py::test_param[small-sm_80]": "SKIPPED",  # its archs= leave out sm_80
        "test_k.py::test_param[small-sm_90]": "PASSED",
        "test_k.py::test_param[plain-sm_80]": "PASSED",
        "test_k.py::test_param[plain-sm_90]": "PASSED",
    }
    assert [r["nodeid"] for r in records] == ["test_k.py::test_param[small-sm_90]"]
    # The case is built on sm_90: it is no test left without an arch, which the summary counts.
    assert "built for no arch" not in result.stdout.str()


NOTHING_BUILT = """
import unittest

import pytest

POLY = dict(source="kernels/poly.cu", kernel="poly_eval", max_regs=32)


@pytest.mark.regbudget(max_regs=32)
def test_budget_only():
    pass


@pytest.mark.regbudget(max_regs=32)
def test_fixture_compiles_nothing(regbudget):
    pass


@pytest.mark.regbudget(max_regs=32)
def test_fixture_skips(regbudget):
    pytest.skip("nothing to build here")


class TestUnit(unittest.TestCase):
    @pytest.mark.regbudget(**POLY)
    def test_method(self):
        pass


def test_hook_marked():
    pass


def test_hook_marked_late(regbudget):
    pass


@pytest.mark.regbudget(source="kernels/small.cu", kernel="small", max_regs=32)
def test_good():
    pass
"""
CONFTEST = """
import pytest

POLY = dict(source="kernels/poly.cu", kernel="poly_eval", max_regs=32)


def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "test_hook_marked":
            item.add_marker(pytest.mark.regbudget(**POLY))


class Late:
    @pytest.hookimpl(trylast=True)  # after the plugin's own collection hook has read the markers
    def pytest_collection_modifyitems(self, items):
        for item in items:
            if item.originalname == "test_hook_marked_late":
                item.add_marker(pytest.mark.regbudget(**POLY))


def pytest_configure(config):
    config.pluginmanager.register(Late(), "late-marker")
"""


def test_a_marker_that_builds_nothing_never_passes(project: pytest.Pytester) -> None:
    project.makepyfile(test_k=NOTHING_BUILT)
    project.makeconftest(CONFTEST)
    result, records = run_json(project, "--regbudget-arch=sm_80,sm_90", "-v")
    found = verbose_outcomes(result)
    for arch in ("sm_80", "sm_90"):
        assert found[f"test_k.py::test_budget_only[{arch}]"] == "FAILED"
        assert found[f"test_k.py::test_fixture_compiles_nothing[{arch}]"] == "FAILED"
        assert found[f"test_k.py::test_fixture_skips[{arch}]"] == "SKIPPED"  # a skip is the test's own word
        # A marker a hook adds after the plugin read the markers is still the test's budget.
        assert found[f"test_k.py::test_hook_marked_late[{arch}]"] == "FAILED"
        assert found[f"test_k.py::test_good[{arch}]"] == "PASSED"  # the rest of the run goes on
        budget_only = failure_line(result, f"test_k.py::test_budget_only[{arch}]")
        assert f"built no kernel on {arch}" in budget_only
        assert "source= and kernel=" in budget_only
        assert "regbudget fixture" in budget_only
        nothing = failure_line(result, f"test_k.py::test_fixture_compiles_nothing[{arch}]")
        assert f"judged no kernel on {arch}" in nothing
        assert "regbudget.compile(" in nothing
    assert found["test_k.py::TestUnit::test_method"] == "ERROR"
    assert "unittest.TestCase" in failure_line(result, "test_k.py::TestUnit::test_method")
    assert found["test_k.py::test_hook_marked"] == "ERROR"
    assert "hook added" in failure_line(result, "test_k.py::test_hook_marked")
    judged = sorted((r["nodeid"], r["outcome"]) for r in records)
    assert judged == [
        ("test_k.py::test_good[sm_80]", "passed"),
        ("test_k.py::test_good[sm_90]", "passed"),
        ("test_k.py::test_hook_marked_late[sm_80]", "failed"),
        ("test_k.py::test_hook_marked_late[sm_90]", "failed"),
    ]


ARCHS = """
import pytest


@pytest.mark.regbudget(source="kernels/small.cu", kernel="small", archs=["sm_90"])
def test_chip():
    pass


@pytest.mark.regbudget(source="kernels/small.cu", kernel="small", archs=["sm_90a"])
def test_spelling():
    pass


@pytest.mark.regbudget(source="kernels/small.cu", kernel="small", archs=["sm_80"])
def test_other():
    pass
"""


@pytest.mark.parametrize(
    ("arch", "expected", "left_out"),
    [
        (
            "sm_90a",
            {
                "test_chip[sm_90a]": "PASSED",
                "test_spelling[sm_90a]": "PASSED",
                "test_other[sm_80]": "SKIPPED",
            },
            ["test_other[sm_80]"],
        ),
        (
            "sm_90",
            {
                "test_chip[sm_90]": "PASSED",
                "test_spelling[sm_90a]": "SKIPPED",
                "test_other[sm_80]": "SKIPPED",
            },
            ["test_other[sm_80]", "test_spelling[sm_90a]"],
        ),
    ],
)
def test_archs_name_the_chip_and_a_suffix_names_its_spelling(
    project: pytest.Pytester, arch: str, expected: dict[str, str], left_out: list[str]
) -> None:
    """archs=["sm_90"] runs on sm_90a (it builds for the same chip); archs=["sm_90a"] runs on sm_90a only. The
    tests left with no arch skip, and the summary counts them in one line."""
    project.makepyfile(test_k=ARCHS)
    result, records = run_json(project, f"--regbudget-arch={arch}", "-v")
    assert verbose_outcomes(result) == {f"test_k.py::{k}": v for k, v in expected.items()}
    built = {r["nodeid"].split("::")[1] for r in records}
    assert built == {k for k, v in expected.items() if v == "PASSED"}
    assert {r["arch"] for r in records} == {arch}
    shown = ", ".join(f"test_k.py::{n}" for n in left_out).replace("[", "[[]")  # fnmatch's brackets
    result.stdout.fnmatch_lines([f"{len(left_out)} item(s) skipped, built for no arch:*{arch}*({shown})*"])


def test_the_json_report_of_param_cases_holds_one_record_each(project: pytest.Pytester) -> None:
    """Under pytest-xdist too: the workers' records reach the controller's report."""
    project.makepyfile(test_k=PARAM_CASES.format(args="p"))
    out = project.path / "report.json"
    result = project.runpytest(
        "-p", "no:cacheprovider", "-n", "2", "--regbudget-arch=sm_80,sm_90", f"--regbudget-json={out}"
    )
    result.assert_outcomes(passed=2, failed=2)
    records: list[dict[str, Any]] = json.loads(out.read_text())["kernels"]
    assert len(records) == 4
