"""The CI jobs a user copies run as printed: README's job and docs/ci.md's first recipe (compile-time checks
on CPU runners), each `run:` step in order, in a fresh virtual environment (no system site-packages, so a
missing install shows), in a copy of example_project, with the matrix's values for `${{ matrix.X }}`.

The one substitution: the plugin's install resolves to the wheel built from this checkout (README's
release-tag URL becomes the wheel's file URL; a plain `pytest-regbudget` finds it through PIP_FIND_LINKS).
The `uses:` steps are the runner's: the checkout is the copy, setup-python the fresh environment, and
actions/cache one compile cache directory that every job of the test shares, as a restored cache would be.

README's job installs the `[nvcc]` extra; the copy gains a file with host code and a `compiler = "nvcc"`
table, recorded with README's own `pytest --regbudget-update`, which the job's strict run then builds.

Downloads the CUDA wheels (hundreds of MB) into pip's cache on the first run; later runs reuse that cache.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

import pytest
import tomli
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "example_project"
HOST_CODE = ROOT / "tests" / "kernels" / "app.cu"
NVCC_TABLE = """
[[tool.regbudget.kernels]]         # a whole program with host code: nvcc builds it (the [nvcc] extra)
source = "host/app.cu"
compiler = "nvcc"
"""
RELEASE_TAG_URL = re.compile(r"git\+https://github\.com/[^\"\s]+/pytest-regbudget@v[\w.]+")


def block_after(text: str, heading: str, fence: str) -> str:
    section = text[text.index(heading) :]
    match = re.search(rf"```{fence}\n(.*?)```", section, re.S)
    assert match is not None, f"no ```{fence} block after {heading!r}"
    return match[1]


def the_job(workflow: str) -> dict[str, Any]:
    (job,) = yaml.safe_load(workflow)["jobs"].values()
    assert isinstance(job, dict)
    return job


def matrices(job: dict[str, Any]) -> list[dict[str, str]]:
    """Each combination of the job's matrix (one empty one without a matrix)."""
    combos: list[dict[str, str]] = [{}]
    for name, values in (job.get("strategy", {}).get("matrix") or {}).items():
        combos = [{**c, name: str(v)} for c in combos for v in values]
    return combos


def fill(script: str, matrix: dict[str, str]) -> str:
    """`${{ matrix.X }}` replaced by the matrix's value; any other expression is refused, since only the
    runner could give it."""
    filled = re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: matrix[m[1]], script)
    assert "${{" not in filled, f"an expression the test cannot fill: {filled}"
    return filled


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel under test: REGBUDGET_WHEEL (the release workflow's), else one built from this checkout."""
    given = os.environ.get("REGBUDGET_WHEEL")
    if given:
        return Path(given).resolve()
    pytest.importorskip("build", reason="`build` is in the test extra")
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = dist.glob("pytest_regbudget-*.whl")
    return built


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compile-cache")


def run_job(
    job: dict[str, Any],
    matrix: dict[str, str],
    project: Path,
    wheel: Path,
    cache: Path,
    before_last: str = "",
) -> dict[str, str]:
    """Every `run:` step of `job` in order, as a runner would (bash -eo pipefail, in the checkout), in a fresh
    virtual environment; `before_last` runs before the last step. Returns what the steps wrote to
    $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY."""
    where = project.parent / f"venv-{project.name}-{'-'.join(matrix.values()) or 'job'}"
    venv.create(where, with_pip=True, system_site_packages=False)
    github = project.parent / f"github-{where.name}"
    github.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(
        PATH=os.pathsep.join([str(where / "bin"), *outside_environments(os.environ["PATH"])]),
        VIRTUAL_ENV=str(where),
        PIP_FIND_LINKS=str(wheel.parent),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        REGBUDGET_CACHE_DIR=str(cache),
        GITHUB_ACTIONS="true",
        GITHUB_OUTPUT=str(github / "output"),
        GITHUB_STEP_SUMMARY=str(github / "summary"),
    )
    runs = [fill(step["run"], matrix) for step in job["steps"] if "run" in step]
    if before_last:
        runs.insert(len(runs) - 1, before_last)
    for n, script in enumerate(runs):
        path = github / f"step{n}.sh"
        path.write_text(script)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
        assert done.returncode == 0, f"step {script!r}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return {name: (github / name).read_text() for name in ("output", "summary") if (github / name).exists()}


def outside_environments(path: str) -> list[str]:
    """PATH's folders but those of a virtual environment (this test run's among them): a command that the
    job's install forgot must not be found in another environment."""
    return [d for d in path.split(os.pathsep) if d and not (Path(d).parent / "pyvenv.cfg").exists()]


def copy_example(tmp_path: Path, name: str) -> Path:
    project = tmp_path / name
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return project


def test_readme_job_runs_as_printed_and_builds_an_nvcc_table(
    wheel: Path, compile_cache: Path, tmp_path: Path
) -> None:
    readme = (ROOT / "README.md").read_text()
    job = the_job(block_after(readme, "## Add it to your repository", "yaml"))
    installs = [s["run"] for s in job["steps"] if "pip install" in s.get("run", "")]
    assert len(installs) == 1, installs
    assert "[nvcc]" in installs[0]
    # The one substitution: the release tag's URL becomes the built wheel's.
    assert len(RELEASE_TAG_URL.findall(installs[0])) == 1, installs[0]
    for step in job["steps"]:
        if "run" in step:
            step["run"] = RELEASE_TAG_URL.sub(wheel.as_uri(), step["run"])
    assert any(s.get("uses", "").startswith("actions/cache@") for s in job["steps"])

    project = copy_example(tmp_path, "readme-job")
    (project / "host").mkdir()
    shutil.copy(HOST_CODE, project / "host" / "app.cu")
    with (project / "pyproject.toml").open("a") as fh:
        fh.write(NVCC_TABLE)
    record = block_after(readme, "Record today's numbers once", "bash").splitlines()[0].split("#")[0].strip()
    assert record == "pytest --regbudget-update"
    baseline = project / "regbudget-baseline.toml"
    before = baseline.read_text()

    start = time.monotonic()
    github = run_job(job, {}, project, wheel, compile_cache, before_last=record)
    took = time.monotonic() - start

    # The update added the nvcc file's kernels and changed no entry the example had recorded.
    recorded, updated = tomli.loads(before)["kernels"], tomli.loads(after := baseline.read_text())["kernels"]
    added = updated.pop("host/app.cu")
    assert {"scale"} <= set(added), added
    assert {e["compiler"] for v in added["scale"].values() for a in v.values() for e in a.values()} == {
        "nvcc"
    }
    for source in recorded:
        assert updated[source] == recorded[source], "\n".join(
            difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        )
    assert updated.keys() == recorded.keys()
    # The strict run wrote the job summary, as on a runner.
    assert "pytest-regbudget" in github.get("summary", ""), github
    assert "hash=" in github.get("output", "")
    print(f"README job: {took:.0f} s")


def test_ci_md_first_recipe_runs_as_printed(wheel: Path, compile_cache: Path, tmp_path: Path) -> None:
    docs = (ROOT / "docs" / "ci.md").read_text()
    requirements = block_after(docs, "All recipes assume", "text")
    assert requirements.startswith("# requirements-test.txt\n")
    job = the_job(block_after(docs, "## Compile-time checks on CPU runners", "yaml"))
    assert not any(RELEASE_TAG_URL.search(s.get("run", "")) for s in job["steps"])
    combos = matrices(job)
    assert [c["arch"] for c in combos] == ["sm_80", "sm_90"]
    for matrix in combos:
        project = copy_example(tmp_path, f"ci-md-{matrix['arch']}")
        (project / "requirements-test.txt").write_text(requirements)
        start = time.monotonic()
        github = run_job(job, matrix, project, wheel, compile_cache)
        print(f"docs/ci.md recipe ({matrix['arch']}): {time.monotonic() - start:.0f} s")
        arch = matrix["arch"]
        assert (project / f"regbudget-{arch}.json").exists()
        assert f"pytest-regbudget ({arch})" in (project / f"regbudget-{arch}.md").read_text()
        assert "hash=" in github["output"]
