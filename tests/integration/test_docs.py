"""The documentation site builds strictly and covers every option, ini key and marker key."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_regbudget.markers import VALID_KEYS

ROOT = Path(__file__).parent.parent.parent
DOCS = ROOT / "docs"


def docs_text() -> str:
    return "\n".join(p.read_text() for p in sorted(DOCS.rglob("*.md")))


def test_mkdocs_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the test extra")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "reference" / "options" / "index.html").exists()


def test_every_option_and_ini_key_in_pytest_help_is_documented(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest("--help").stdout.str()
    options = set(re.findall(r"--regbudget-[a-z-]+", help_text))
    ini_keys = set(re.findall(r"^\s+(regbudget_[a-z_]+)", help_text, re.MULTILINE))
    assert len(options) >= 11
    assert len(ini_keys) >= 7
    text = docs_text()
    assert sorted(o for o in options if o not in text) == []
    assert sorted(k for k in ini_keys if k not in text) == []


def test_every_marker_key_has_a_reference_entry() -> None:
    reference = (DOCS / "reference" / "markers.md").read_text()
    assert sorted(k for k in VALID_KEYS if f"`{k}`" not in reference) == []
