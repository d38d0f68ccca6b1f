"""pre-commit runs the repository's `regbudget-baseline-check` hook (.pre-commit-hooks.yaml) as a user's
.pre-commit-config.yaml asks for it: from a clone of this checkout at a commit, on a project's baseline. The
example's baseline passes, a baseline with `registers = "x"` fails naming the key, and the hook's environment
under PRE_COMMIT_HOME is the clone alone: well under 50 MB, no `nvidia` package (a `language: python` hook
installed the plugin with every CUDA wheel, 380 MB).

Needs pre-commit >= 4.4 (the test extra installs it) and git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
EXAMPLE_BASELINE = ROOT / "example_project" / "regbudget-baseline.toml"
HOOK_ID = "regbudget-baseline-check"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git repository of this checkout's files (what git tracks and would track) at one commit: the `repo`
    and `rev` a user's config names."""
    repo = tmp_path_factory.mktemp("hook-repo")
    listed = git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hook")
    return repo, git(repo, "rev-parse", "HEAD").strip()


def project(where: Path, repo: Path, rev: str, baseline: str) -> Path:
    where.mkdir()
    git(where, "init", "-q")
    (where / "regbudget-baseline.toml").write_text(baseline)
    config = {"repos": [{"repo": str(repo), "rev": rev, "hooks": [{"id": HOOK_ID}]}]}
    (where / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git(where, "add", "-A")
    return where


def pre_commit(cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV"))}
    env["PRE_COMMIT_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", HOOK_ID, "--all-files", "--color=never"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_hook_installs_no_cuda_and_checks_the_baseline(
    hook_repo: tuple[Path, str], tmp_path: Path
) -> None:
    pytest.importorskip("pre_commit", reason="pre-commit is in the test extra")
    repo, rev = hook_repo
    home = tmp_path / "pre-commit-home"
    good = project(tmp_path / "good", repo, rev, EXAMPLE_BASELINE.read_text())
    start = time.monotonic()
    done = pre_commit(good, home)
    first_install = time.monotonic() - start
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout
    size = size_of(home)
    assert size < 50 * 2**20, size
    assert not list(home.rglob("*nvidia*"))
    assert not list(home.rglob("site-packages"))  # no environment was made: the hook is the clone's script
    print(
        f"pre-commit hook: first install and run {first_install:.1f} s, PRE_COMMIT_HOME {size / 2**20:.2f} MB"
    )

    bad_text = EXAMPLE_BASELINE.read_text().replace("registers = 10", 'registers = "x"', 1)
    bad = project(tmp_path / "bad", repo, rev, bad_text)
    done = pre_commit(bad, home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Failed" in done.stdout
    assert "registers = 'x', expected a whole number >= 0" in done.stdout
    assert "exit code: 2" in done.stdout  # the command's status for a file that does not load
