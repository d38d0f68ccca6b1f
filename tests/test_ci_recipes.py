"""The CI recipes as a user copies them: every `uses:` in README.md, docs/, example_project/ and .github/
at the action's current major (ACTION_MAJORS, checked on the date it names), every `cache: pip` with the
file that keys it, Dependabot watching the repository's own workflows, and `.ci/run` running exactly
README's two commands. tests/integration/test_ci_recipes_run.py runs the README job and docs/ci.md's first
recipe."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli
import yaml

ROOT = Path(__file__).parent.parent
EXAMPLE_WORKFLOWS = ROOT / "example_project" / ".github" / "workflows"

# The newest major of each action, read from its repository's tags and its action.yml (`using: node24` in
# every one) on the date below. A `uses:` may name the major (`@v7`) or a full commit SHA followed by a
# `# vX.Y.Z` comment of that major. Dependabot (.github/dependabot.yml) proposes the bumps; move this table
# and the docs with them.
ACTION_MAJORS_CHECKED = "2026-12-06"
ACTION_MAJORS = {
    "actions/checkout": "v7",  # v7.0.1
    "actions/setup-python": "v7",  # v7.0.0
    "actions/cache": "v5",  # v5.0.5
    "actions/upload-artifact": "v7",  # v7.0.0
    "actions/download-artifact": "v8",  # v8.0.1
    "actions/github-script": "v8",
    "marocchino/sticky-pull-request-comment": "v3",  # v3.0.5
    "peter-evans/create-pull-request": "v8",  # v8.1.1
    # PyPA's documented ref: a branch that follows the v1 releases.
    "pypa/gh-action-pypi-publish": "release/v1",
}
SHA_PIN = re.compile(r"[0-9a-f]{40}")


def workflow_texts() -> Iterator[tuple[str, str]]:
    """(where, YAML text) of every workflow file and every ```yaml block of the Markdown that users copy."""
    for path in sorted([*(ROOT / ".github").rglob("*.yml"), *(ROOT / "example_project").rglob("*.yml")]):
        yield str(path.relative_to(ROOT)), path.read_text()
    for path in sorted(
        [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "example_project").rglob("*.md")]
    ):
        text = path.read_text()
        for n, match in enumerate(re.finditer(r"^( *)```ya?ml\n(.*?)^\1```", text, re.S | re.M)):
            yield f"{path.relative_to(ROOT)} block {n + 1}", textwrap.dedent(match[2])


def steps_with(node: Any, key: str) -> Iterator[dict[str, Any]]:
    """Every mapping under `node` that has `key`."""
    if isinstance(node, dict):
        if key in node:
            yield node
        for value in node.values():
            yield from steps_with(value, key)
    elif isinstance(node, list):
        for value in node:
            yield from steps_with(value, key)


def uses_lines() -> list[tuple[str, str, str]]:
    """(where, action, ref and comment) of every `uses:` line."""
    found = []
    for where, text in workflow_texts():
        for match in re.finditer(r"^\s*(?:- )?uses:\s*(\S+?)@(\S+)(.*)$", text, re.M):
            found.append((where, match[1], match[2] + match[3]))
    return found


def test_the_recipes_parse_as_yaml() -> None:
    for where, text in workflow_texts():
        assert yaml.safe_load(text) is not None, where


def test_every_uses_is_at_the_actions_current_major() -> None:
    found = uses_lines()
    assert len(found) > 40  # the recipes are all read
    stale = []
    for where, action, ref in found:
        major = ACTION_MAJORS.get(action)
        assert major is not None, (
            f"{where}: {action} is not in ACTION_MAJORS: check its newest major and add it"
        )
        pinned = ref.split()[0]
        if SHA_PIN.fullmatch(pinned):
            comment = re.search(r"#\s*(v\d+)[.\d]*", ref)
            ok = comment is not None and comment[1] == major
        else:
            ok = pinned == major
        if not ok:
            stale.append(f"{where}: {action}@{ref} (current: {major}, checked {ACTION_MAJORS_CHECKED})")
    assert stale == []


def test_a_stale_major_is_found() -> None:
    """The check reads the lines the way they are written: an older major is reported."""
    line = "      - uses: actions/checkout@v4\n"
    match = re.search(r"^\s*(?:- )?uses:\s*(\S+?)@(\S+)(.*)$", line, re.M)
    assert match is not None
    assert (match[1], match[2]) == ("actions/checkout", "v4") != ("actions/checkout", ACTION_MAJORS[match[1]])


def test_every_pip_cache_names_the_file_that_keys_it() -> None:
    """setup-python's `cache: pip` looks for **/requirements.txt or **/pyproject.toml unless
    `cache-dependency-path` names a file, and fails the step where neither exists."""
    caches = []
    for where, text in workflow_texts():
        for step in steps_with(yaml.safe_load(text), "uses"):
            given = step.get("with") or {}
            if given.get("cache") == "pip":
                caches.append(where)
                assert given.get("cache-dependency-path"), (
                    f"{where}: cache: pip without cache-dependency-path"
                )
    assert len(caches) >= 4


def test_dependabot_watches_the_repositorys_workflows() -> None:
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    (update,) = (u for u in config["updates"] if u["package-ecosystem"] == "github-actions")
    directories = set(update.get("directories", [])) | {update.get("directory")} - {None}
    # A directory is scanned at its .github/workflows, or is the workflows folder itself.
    scanned = set()
    for folder in directories:
        where = ROOT / folder.lstrip("/")
        scanned |= set((where / ".github" / "workflows").glob("*.yml")) | set(where.glob("*.yml"))
    workflows = {*(ROOT / ".github" / "workflows").glob("*.yml"), *EXAMPLE_WORKFLOWS.glob("*.yml")}
    assert workflows <= scanned, sorted(map(str, workflows - scanned))
    # And docs/ci.md tells users to add one for theirs.
    assert "package-ecosystem: github-actions" in (ROOT / "docs" / "ci.md").read_text()


def readme_commands() -> list[str]:
    """The install-and-test command lines of README's "Two commands" section, in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Two commands") : readme.index("## Outside pytest")]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_ci_runs_exactly_the_readmes_two_commands() -> None:
    commands = readme_commands()
    assert commands[:2] == [
        "pip install -e . && pytest example_project",
        'pip install -e ".[test]" && pytest tests -n 2',
    ]
    script = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip().startswith(("pip install", "pytest"))
    ]
    assert script == commands[:2]
    # The contributor loop README gives beside them leaves out the slow tests that pyproject marks.
    assert commands[2:] == ['pytest tests -m "not slow" -n 2']
    assert any(m.startswith("slow:") for m in _markers())


def _markers() -> list[str]:
    config = tomli.loads((ROOT / "pyproject.toml").read_text())
    markers: list[str] = config["tool"]["pytest"]["ini_options"]["markers"]
    return markers


@pytest.mark.parametrize("name", ["README.md", "docs/ci.md"])
def test_the_recipes_name_no_stale_action_in_prose(name: str) -> None:
    """Prose that names an action with a ref (`actions/checkout@v4`) is held to the table too."""
    text = (ROOT / name).read_text()
    for action, ref in re.findall(r"`([\w-]+/[\w-]+)@([^`\s]+)`", text):
        if action in ACTION_MAJORS and not SHA_PIN.fullmatch(ref):
            assert ref == ACTION_MAJORS[action], f"{name}: {action}@{ref}"
