"""`regbudget explain` on a manifest kernel prints the verdict `pytest` prints for it: both build it with the
compiler the project names (the manifest table's, else ini regbudget_compiler) and judge it through the
engine (engine/judge.py), against the table's budgets and the baseline. A failing kernel shows the same lines
in both, a passing one passes in both, and one that got worse than its baseline entry fails the same way.
Real nvcc and ptxas from the wheels."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.data import KERNELS
from helpers.runs import regbudget

ARCHS = ("sm_80", "sm_90")
MANIFEST = """\
arch = ["sm_80", "sm_90"]
[[kernels]]
source = ["src/*.cu"]
kernels = ["poly_eval"]
{compiler}defines = ["NACC={nacc}"]
{budgets}
"""


@pytest.fixture
def project(pytester: pytest.Pytester, nvcc_found: None) -> Path:
    root = pytester.path
    (root / "src").mkdir()
    (root / "src" / "poly.cu").write_text((KERNELS / "hungry.cu").read_text())
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


def manifest(root: Path, *, nacc: int, budgets: str, table_compiler: bool = True) -> None:
    compiler = 'compiler = "nvcc"\n' if table_compiler else ""
    (root / "regbudget.toml").write_text(MANIFEST.format(compiler=compiler, nacc=nacc, budgets=budgets))


def pytest_verdicts(pytester: pytest.Pytester) -> tuple[dict[str, str], dict[str, list[str]], dict[str, int]]:
    """The outcome of each arch's item, the lines of each failure, and the registers each item measured."""
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", "--regbudget-json=r.json")
    records = json.loads((pytester.path / "r.json").read_text())["kernels"]
    outcomes = {r["arch"]: r["outcome"] for r in records}
    registers = {r["arch"]: r["registers"] for r in records}
    failures: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in result.stdout.lines:
        header = re.fullmatch(r"_+ poly_eval\[(sm_\d+)\] in src/poly\.cu _+", line)
        if header:
            current = failures.setdefault(header[1], [])
        elif re.fullmatch(r"[_=-]{3,}.*", line):
            current = None
        elif current is not None:
            current.append(line)
    return outcomes, failures, registers


def explain_verdicts(root: Path) -> tuple[str, dict[str, str], dict[str, list[str]], dict[str, int]]:
    """explain's first line, and per arch its verdict word, the failure lines under it and the registers of
    the kernel as written."""
    done = regbudget("explain", "src/poly.cu::poly_eval", cwd=root)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("verdict, as pytest gives it"))
    words: dict[str, str] = {}
    failures: dict[str, list[str]] = {}
    arch = ""
    for line in lines[start + 1 :]:
        if not line:
            break
        word = re.fullmatch(r"poly_eval \[(sm_\d+)\]: (ok|FAILED|WARNED)", line)
        if word:
            arch = word[1]
            words[arch] = word[2]
        else:
            failures.setdefault(arch, []).append(line)
    registers = {
        row[1]: int(row[2]) for line in lines if line.startswith("as written") and (row := line.split()[1:])
    }
    return lines[0], words, failures, registers


def test_explain_and_pytest_fail_a_kernel_over_its_budget_with_the_same_lines(
    pytester: pytest.Pytester, project: Path
) -> None:
    manifest(project, nacc=24, budgets="max_regs = 64\nspills = 0")
    outcomes, failures, registers = pytest_verdicts(pytester)
    first, words, explained, explained_registers = explain_verdicts(project)
    assert "compiler nvcc" in first  # the table's compiler builds it, not NVRTC
    assert explained_registers == registers
    assert words == {a: "ok" if outcomes[a] == "passed" else outcomes[a].upper() for a in ARCHS}
    assert "FAILED" in words.values(), (outcomes, registers)  # hungry.cu at NACC=24 needs over 64 somewhere
    assert explained == failures
    failing = next(a for a in ARCHS if words[a] == "FAILED")
    # nvcc 13.5 builds it: nvdisasm gives its life ranges, and both name the peak of live registers.
    assert re.fullmatch(
        rf"poly_eval \[{failing}\]: registers {registers[failing]} > max_regs 64; "
        rf"peak \d+ live at poly\.cu:\d+.*",
        explained[failing][0],
    )


def test_explain_and_pytest_pass_a_kernel_within_its_budget(pytester: pytest.Pytester, project: Path) -> None:
    manifest(project, nacc=24, budgets="max_regs = 255\nspills = 0")
    outcomes, failures, registers = pytest_verdicts(pytester)
    _, words, explained, explained_registers = explain_verdicts(project)
    assert outcomes == dict.fromkeys(ARCHS, "passed")
    assert words == dict.fromkeys(ARCHS, "ok")
    assert failures == explained == {}
    assert explained_registers == registers


def test_explain_and_pytest_fail_a_kernel_that_got_worse_than_its_baseline_entry(
    pytester: pytest.Pytester, project: Path
) -> None:
    # The ini's compiler builds a file no table names one for, in both.
    (project / "pytest.ini").write_text("[pytest]\nregbudget_compiler = nvcc\n")
    manifest(project, nacc=4, budgets="", table_compiler=False)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--regbudget-update").assert_outcomes(passed=2)
    # A table's defines are build settings, not part of the key: the same entries hold the wider build.
    manifest(project, nacc=24, budgets="", table_compiler=False)
    outcomes, failures, registers = pytest_verdicts(pytester)
    first, words, explained, _ = explain_verdicts(project)
    assert "compiler nvcc" in first
    assert outcomes == dict.fromkeys(ARCHS, "failed")
    assert words == dict.fromkeys(ARCHS, "FAILED")
    assert explained == failures
    for arch in ARCHS:
        assert re.match(
            rf"poly_eval \[{arch}\]: registers \d+ -> {registers[arch]} \(\+\d+\) is worse than the baseline",
            explained[arch][0],
        ), explained[arch]
