"""Runs of pytest and of `regbudget`, and reading what they printed.

A subprocess run of either is spelt here and only here (tests/test_suite_rules.py holds it): `pytest_argv` and
`regbudget_argv` name the running interpreter (`sys.executable -m ...`), never a `pytest` or `regbudget`
script that PATH finds, so the suite tests this checkout's install whatever PATH holds. `run_pytest`,
`start_pytest` and `regbudget` run them. In-process runs go through pytester (`run_json`), and
`pytester.runpytest_subprocess` runs `sys.executable -mpytest` itself.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

# A conftest.py for a pytester project that logs every nvdisasm run the plugin makes, one command line a
# line, to the file $NVDISASM_RUNS names: for the tests that count how often a cubin is disassembled.
NVDISASM_COUNTER = """
import os

from pytest_regbudget.tools import nvdisasm

_real = nvdisasm.run_tool


def _counting(cmd, timeout):
    with open(os.environ["NVDISASM_RUNS"], "a", encoding="utf-8") as fh:
        fh.write(" ".join(str(c) for c in cmd) + "\\n")
    return _real(cmd, timeout)


nvdisasm.run_tool = _counting
"""


def pytest_argv(*args: str, executable: str | None = None) -> list[str]:
    """The command line of a pytest run by the running interpreter (or by `executable`, another venv's)."""
    return [executable or sys.executable, "-m", "pytest", *args]


def regbudget_argv(*args: str, module: str = "pytest_regbudget") -> list[str]:
    """The command line of `regbudget` run by the running interpreter (`python -m pytest_regbudget`, or
    another module that is the command: `pytest_regbudget.cli`)."""
    return [sys.executable, "-m", module, *args]


def run_pytest(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    executable: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """pytest in a fresh process in `cwd` (run by `executable`, the python of another venv, when given);
    its output captured as text."""
    return subprocess.run(
        pytest_argv(*args, executable=executable),
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def start_pytest(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """pytest started in a fresh process in `cwd` and left running; stdout and stderr in one pipe."""
    return subprocess.Popen(
        pytest_argv(*args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )


def regbudget(
    *args: str,
    cwd: Path | None = None,
    module: str = "pytest_regbudget",
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """The `regbudget` command, as a user runs it."""
    return subprocess.run(
        regbudget_argv(*args, module=module),
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def run_json(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[dict[str, Any]]]:
    """Run pytest in `pytester` with a JSON report; return the result and the report's kernel records."""
    out = pytester.path / "report.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={out}", *args)
    records = json.loads(out.read_text())["kernels"] if out.exists() else []
    out.unlink(missing_ok=True)
    return result, records


def bad_input(done: subprocess.CompletedProcess[str], pattern: str) -> None:
    """Exit status 2 and one line on stderr matching `pattern`, no traceback."""
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert re.search(pattern, lines[0]), lines[0]


def verbose_outcomes(result: pytest.RunResult) -> dict[str, str]:
    """nodeid -> PASSED/FAILED/ERROR/SKIPPED, from a -v run's progress lines."""
    found: dict[str, str] = {}
    for line in result.stdout.lines:
        match = re.match(r"(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED)\b", line)
        if match:
            found[match[1]] = match[2]
    return found
