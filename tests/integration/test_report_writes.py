"""Report files that cannot be written: a line naming the file and the fix, the summary table intact, no
traceback, and the baseline untouched by the failure."""

from __future__ import annotations

from pathlib import Path

import pytest

HUNGRY = Path(__file__).parent.parent / "kernels" / "hungry.cu"


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
            "test_a[[]sm_90[]]*poly_eval*ok",
            "*baseline regbudget-baseline.toml updated: 1 added*",
            "--regbudget-json report NOT written to */out: *; give a file path, not a directory",
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
            "test_a[[]sm_90[]]*ok",
            "$GITHUB_STEP_SUMMARY report NOT written to */summary.md: No such file or directory*",
        ]
    )
