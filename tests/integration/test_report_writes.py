"""Report files that cannot be written: a line naming the file and the fix, the summary table intact, no
traceback, and the baseline untouched by the failure."""

from __future__ import annotations

import json
import platform
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers.data import KERNELS

import pytest_regbudget

HUNGRY = KERNELS / "hungry.cu"


@pytest.fixture
def one_test(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(
        test_k=f"""
import pytest
@pytest.mark.regbudget(source={str(HUNGRY)!r}, kernel="poly_eval", defines={{"NACC": 4}})
def test_a():
    pass
"""
    )
    return pytester


def test_json_path_that_is_a_directory(one_test: pytest.Pytester) -> None:
    (one_test.path / "out").mkdir()
    result = one_test.runpytest("--regbudget-json=out", "--regbudget-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [
            "*baseline regbudget-baseline.toml updated: 1 added*",
            "--regbudget-json report NOT written to */out: *; give a file path, not a directory",
            "test_a *poly_eval *sm_90*ok",
        ]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "registers = " in (one_test.path / "regbudget-baseline.toml").read_text()


def test_markdown_under_a_path_that_is_a_file(one_test: pytest.Pytester) -> None:
    # A parent that is a regular file fails for every user, root included (a read-only dir does not).
    (one_test.path / "afile").write_text("not a directory")
    result = one_test.runpytest("--regbudget-markdown=afile/report.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["--regbudget-markdown report NOT written to */afile/report.md: *"])
    assert (one_test.path / "afile").read_text() == "not a directory"


def test_step_summary_in_a_missing_directory_is_reported_not_fatal(
    one_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(one_test.path / "no" / "such" / "dir" / "summary.md"))
    result = one_test.runpytest()
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "$GITHUB_STEP_SUMMARY report NOT written to */summary.md: No such file or directory*",
            "test_a *sm_90*ok",
        ]
    )


def _git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=True).stdout


def test_json_report_says_where_its_numbers_came_from(
    one_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    # Outside a checkout: no commit, and nothing made up.
    result = one_test.runpytest("--regbudget-json=r.json")
    result.assert_outcomes(passed=1)
    doc = json.loads((one_test.path / "r.json").read_text())
    assert (doc["version"], doc["provenance"]["commit"]) == (7, None)
    # Version 7: the counts, before the provenance and the records they count.
    assert list(doc)[:4] == ["format", "version", "summary", "provenance"]
    assert doc["summary"] == {
        **dict.fromkeys(("checks", "passed", "new"), 1),
        **dict.fromkeys(("failed", "errors", "warned", "changed", "worse", "improved", "unchanged"), 0),
        "no_baseline": 0,
    }
    # In a checkout with a change to a tracked file: its commit, dirty.
    _git(one_test.path, "init", "-q")
    _git(one_test.path, "add", "test_k.py")
    _git(one_test.path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "kernels")
    head = _git(one_test.path, "rev-parse", "HEAD").strip()
    result = one_test.runpytest("--regbudget-json=r.json")
    doc = json.loads((one_test.path / "r.json").read_text())
    assert list(doc)[:4] == ["format", "version", "summary", "provenance"]
    prov = doc["provenance"]
    assert prov["commit"] == {"sha": head, "dirty": False, "from": "git"}
    assert prov["plugin_version"] == pytest_regbudget.__version__
    assert prov["host"] == platform.node()
    assert abs(datetime.fromisoformat(prov["date"]) - datetime.now(timezone.utc)) < timedelta(minutes=10)
    (rec,) = doc["kernels"]
    assert prov["compilers"] == [
        {"compiler": "nvrtc", "frontend": rec["nvrtc_version"], "ptxas": rec["ptxas_version"], "kernels": 1}
    ]
    assert prov["gpu"] == sorted(filter(None, [rec["gpu_device"]]))
    assert len(prov["toolkits"]) == 1
    assert f"NVRTC {rec['nvrtc_version']}, ptxas {rec['ptxas_version']}" in prov["toolkits"][0]
    (one_test.path / "test_k.py").write_text((one_test.path / "test_k.py").read_text() + "\n# edited\n")
    one_test.runpytest("--regbudget-json=r.json")
    assert json.loads((one_test.path / "r.json").read_text())["provenance"]["commit"]["dirty"] is True
    # GitHub's variable where git cannot tell.
    monkeypatch.setenv("GITHUB_SHA", "abc123")
    monkeypatch.setenv("PATH", "")
    one_test.runpytest_inprocess("--regbudget-json=r.json")
    assert json.loads((one_test.path / "r.json").read_text())["provenance"]["commit"] == {
        "sha": "abc123",
        "dirty": None,
        "from": "GITHUB_SHA",
    }
