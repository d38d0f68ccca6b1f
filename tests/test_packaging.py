"""What the package index shows and a maintainer expects, read from pyproject.toml and the files that quote
it: one project address (`[project.urls]`, the placeholder OWNER until the project has its public one) that
every example uses and that the release workflow refuses to publish; a Python classifier for each version the
release workflow tests; README links that work on the index page. tests/integration/test_wheel.py checks the
built wheel's METADATA."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from helpers.packaging import PROJECT, RELATIVE_LINK, URL_KEYS, python_classifiers, release_pythons

ROOT = Path(__file__).parent.parent
# Every file that names the repository's address for a user to copy or follow.
QUOTING = ["README.md", "CHANGELOG.md", ".pre-commit-hooks.yaml", "docs", "example_project"]
ADDRESS = re.compile(r"https://github\.com/([\w.-]+)/pytest-regbudget\b")


def release_workflow() -> dict[str, Any]:
    workflow: dict[str, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    return workflow


def quoting_files(root: Path) -> list[Path]:
    files = []
    for name in QUOTING:
        path = root / name
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return files


def test_a_python_classifier_for_each_version_the_release_tests() -> None:
    workflow = release_workflow()["jobs"]["test"]["strategy"]["matrix"]["python"]
    assert release_pythons() == [str(v) for v in workflow]  # the helper reads the line YAML reads
    classifiers = PROJECT["classifiers"]
    versions = python_classifiers(classifiers)
    assert versions == release_pythons()
    assert len(versions) >= 4
    # requires-python starts at the oldest of them.
    assert PROJECT["requires-python"] == f">={versions[0]}"


def test_the_classifiers_and_people_a_maintainer_expects() -> None:
    classifiers = PROJECT["classifiers"]
    assert "Framework :: Pytest" in classifiers
    assert [c for c in classifiers if c.startswith("Development Status :: ")]
    assert PROJECT.get("authors") or PROJECT.get("maintainers")


def test_one_address_names_the_project_everywhere() -> None:
    urls = PROJECT["urls"]
    assert set(urls) == URL_KEYS
    repository = urls["Repository"]
    match = ADDRESS.fullmatch(repository)
    assert match is not None, repository
    assert all(url.startswith(repository) for url in urls.values()), urls
    owners: dict[str, str] = {}
    for path in quoting_files(ROOT):
        for owner in ADDRESS.findall(path.read_text(errors="replace")):
            owners.setdefault(owner, str(path.relative_to(ROOT)))
    assert owners.keys() == {match[1]}, owners
    assert len([p for p in quoting_files(ROOT) if repository in p.read_text(errors="replace")]) >= 5


def test_readme_links_work_on_the_index_page() -> None:
    """README.md is the long description: its links must be absolute (GitHub's blob pages)."""
    readme = (ROOT / "README.md").read_text()
    assert RELATIVE_LINK.findall(readme) == []
    assert RELATIVE_LINK.findall("see [the docs](docs/ci.md) and [x](#a) and [y](https://e.org)") == [
        ("docs/ci.md", "")
    ]
    repository = PROJECT["urls"]["Repository"]
    for target in re.findall(r"\]\((https?://[^)\s]+)\)", readme):
        if target.startswith(repository + "/blob/main/"):
            local = target.removeprefix(repository + "/blob/main/").split("#")[0]
            assert (ROOT / local).exists(), target


def test_the_release_refuses_the_placeholder_address(tmp_path: Path) -> None:
    """The release workflow's step, run as GitHub would run it, on a copy of the files it reads: it fails
    while OWNER is the address, and passes once the address is set everywhere."""
    (step,) = [s for s in release_workflow()["jobs"]["build"]["steps"] if "placeholder" in s.get("name", "")]
    assert step["if"] == "github.ref_type == 'tag'"
    copy = tmp_path / "checkout"
    for name in ["pyproject.toml", *QUOTING]:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, copy / name, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
            )
        else:
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    script = tmp_path / "step.sh"
    script.write_text(step["run"])

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=copy,
            capture_output=True,
            text=True,
            check=False,
        )

    refused = run()
    if "github.com/OWNER/" in (ROOT / "pyproject.toml").read_text():
        assert refused.returncode == 1
        assert "::error::" in refused.stdout
        assert "pyproject.toml:" in refused.stdout  # it lists where the placeholder is
    for path in [*quoting_files(copy), copy / "pyproject.toml"]:
        text = path.read_text(errors="replace")
        if "github.com/OWNER/" in text:
            path.write_text(text.replace("github.com/OWNER/", "github.com/example-org/"))
    assert run().returncode == 0
