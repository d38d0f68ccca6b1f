"""The documentation site builds strictly and covers every option, ini key and marker key."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_regbudget.project.markers import VALID_KEYS

ROOT = Path(__file__).parent.parent.parent
DOCS = ROOT / "docs"


def docs_text() -> str:
    return "\n".join(p.read_text() for p in sorted(DOCS.rglob("*.md")))


@pytest.mark.slow
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


def test_release_files_name_the_packages_version() -> None:
    """The pre-commit snippets pin the tag the release workflow makes (v + the version), and CHANGELOG.md has
    that version's section; LICENSE is the Apache-2.0 text that pyproject declares."""
    from pytest_regbudget import __version__

    tag = f"v{__version__}"
    for path in (DOCS / "cli.md", ROOT / ".pre-commit-hooks.yaml"):
        revs = re.findall(r"rev: (\S+)", path.read_text())
        assert revs == [tag], path
    assert 'tags: ["v*"]' in (ROOT / ".github" / "workflows" / "release.yml").read_text()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d\d-\d\d$", changelog, re.M)
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in license_text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    assert "docs/contributing.md" in (ROOT / "CONTRIBUTING.md").read_text()
    assert "## Releasing" in (DOCS / "contributing.md").read_text()
