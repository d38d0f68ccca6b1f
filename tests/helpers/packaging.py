"""What the package says of itself, for tests/test_packaging.py and the wheel's METADATA test: pyproject's
[project] table, the Pythons the release workflow tests, and what a relative Markdown link looks like. Needs
only the package's own dependencies (tomli): the release workflow runs test_wheel.py with the wheel alone."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import tomli

ROOT = Path(__file__).parents[2]
PROJECT: dict[str, Any] = tomli.loads((ROOT / "pyproject.toml").read_text())["project"]
URL_KEYS = {"Homepage", "Documentation", "Repository", "Issues", "Changelog"}
# A Markdown link or image whose target is relative: on the package index it leads nowhere.
RELATIVE_LINK = re.compile(
    r"\]\((?!https?://|#|mailto:)([^)\s]+)\)|^\[[^\]]+\]:\s*(?!https?://|#)(\S+)", re.M
)
RELEASE = ROOT / ".github" / "workflows" / "release.yml"


def release_pythons() -> list[str]:
    """The `python:` list of the release workflow's test matrix (one flow-style line, as written there)."""
    (line,) = re.findall(r"^\s+python:\s*(\[.*\])\s*$", RELEASE.read_text(), re.M)
    versions: list[str] = ast.literal_eval(line)
    return versions


def python_classifiers(classifiers: list[str]) -> list[str]:
    """`3.10` for each `Programming Language :: Python :: 3.10`, in order."""
    return [
        c.rsplit(" :: ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
