"""What a new user does: copy example_project/, run it green, raise an unroll factor, see it go red."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.runs import run_pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).parent.parent.parent / "example_project"


def run(where: Path) -> subprocess.CompletedProcess[str]:
    return run_pytest(
        where, "-p", "no:cacheprovider", "-q", env={**os.environ, "GITHUB_ACTIONS": ""}, timeout=900
    )


def test_copied_example_goes_green_then_red_after_raising_the_unroll(tmp_path: Path) -> None:
    project = tmp_path / "my-kernels"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    green = run(project)
    assert green.returncode == 0, green.stdout[-3000:]
    assert " passed" in green.stdout
    assert "failed" not in green.stdout.splitlines()[-1]
    softmax = project / "kernels" / "softmax.cu"
    text = softmax.read_text()
    assert "#define UNROLL 4\n" in text
    softmax.write_text(text.replace("#define UNROLL 4\n", "#define UNROLL 8\n"))
    red = run(project)
    assert red.returncode == 1, red.stdout[-3000:]
    assert "softmax<256> [sm_90]: registers" in red.stdout
    assert "is worse than the baseline; if intended, accept it with pytest --regbudget-update" in red.stdout
    # The copy's baseline is untouched by a failing run: only --regbudget-update writes it.
    assert (project / "regbudget-baseline.toml").read_text() == (
        EXAMPLE / "regbudget-baseline.toml"
    ).read_text()
