"""No write outside the project or the cache (issue 44): a baseline path that a repository brings (a committed
link, an ini setting) may not lead `--regbudget-update` or `regbudget merge --update` out of the project, and
links planted in the compile cache are replaced, never written through.

Each case snapshots a tree beside the scratch project ("outside") before and after the run and compares every
file, folder and link in it byte for byte. The compile cache is the session's (tests/conftest.py), but where a
case plants links in it: then it is a cache of the case's own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.runs import regbudget, run_json

from pytest_regbudget.core.baseline_write import lock_path

KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
TESTS = """
import pytest

@pytest.mark.regbudget(source="k.cu", kernel="k")
def test_k():
    pass
"""
KEPT = b"# not a baseline: a file the update must leave alone\n"


def snapshot(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under `root`, by its path relative to it: (kind, contents or link target); links are
    not followed."""
    found: dict[str, tuple[str, bytes]] = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here, name)
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = ("link", os.readlink(path).encode())
            elif path.is_dir():
                found[key] = ("dir", b"")
            else:
                found[key] = ("file", path.read_bytes())
    return found


@pytest.fixture
def outside(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder beside the scratch project, holding a file and a folder that no case may touch."""
    folder = tmp_path_factory.mktemp("outside")
    (folder / "b.toml").write_bytes(KEPT)
    (folder / "dir").mkdir()
    (folder / "dir" / "b.toml").write_bytes(KEPT)
    pytester.makefile(".cu", k=KERNEL)
    pytester.makepyfile(test_k=TESTS)
    return folder


def plant(pytester: pytest.Pytester, outside: Path, case: str) -> None:
    """The repository's side of each case: a committed link, or an ini setting."""
    project = pytester.path
    if case == "link to a file outside":
        (project / "regbudget-baseline.toml").symlink_to(outside / "b.toml")
    elif case == "dangling link outside":
        (project / "regbudget-baseline.toml").symlink_to(outside / "new" / "deep" / "b.toml")
    elif case == "directory link outside":
        (project / "records").symlink_to(outside / "dir")
        pytester.makeini("[pytest]\nregbudget_baseline = records/b.toml\n")
    elif case == "ini path outside":
        relative = os.path.relpath(outside / "b.toml", project)
        pytester.makeini(f"[pytest]\nregbudget_baseline = {relative}\n")
    elif case == "addopts outside":
        pytester.makeini(f"[pytest]\naddopts = --regbudget-baseline={outside / 'b.toml'}\n")


CASES = [
    "link to a file outside",
    "dangling link outside",
    "directory link outside",
    "ini path outside",
    "addopts outside",
]


@pytest.mark.parametrize("case", CASES)
def test_an_update_never_follows_the_repository_out_of_the_project(
    pytester: pytest.Pytester, outside: Path, case: str
) -> None:
    plant(pytester, outside, case)
    before = snapshot(outside)
    result, _ = run_json(pytester, "--regbudget-update")
    assert result.ret != 0
    lines = [line for line in result.outlines if "baseline NOT updated" in line]
    assert len(lines) == 1, result.outlines
    assert f"leads to {outside.resolve()}{os.sep}" in lines[0], lines[0]
    assert "nothing written" in lines[0]
    assert snapshot(outside) == before
    # Not even the update's lock was taken.
    target = Path(lines[0].split(" leads to ")[1].split(", outside the project")[0])
    assert not lock_path(target, Path(os.environ["REGBUDGET_CACHE_DIR"])).exists()


def test_a_link_inside_the_project_updates_its_target(pytester: pytest.Pytester, outside: Path) -> None:
    (pytester.path / "records").mkdir()
    (pytester.path / "regbudget-baseline.toml").symlink_to(Path("records", "b.toml"))
    before = snapshot(outside)
    result, _ = run_json(pytester, "--regbudget-update")
    assert result.ret == 0, result.outlines
    result.stdout.fnmatch_lines(["*baseline regbudget-baseline.toml updated: 1 added*"])
    assert (pytester.path / "regbudget-baseline.toml").is_symlink()  # the link kept, its target written
    assert "[kernels" in (pytester.path / "records" / "b.toml").read_text()
    assert snapshot(outside) == before


def test_a_path_the_user_types_may_lead_anywhere(pytester: pytest.Pytester, outside: Path) -> None:
    """--regbudget-baseline on the command line is the user's choice, outside the project too; a committed
    link that the typed path goes through is still the repository's."""
    result, _ = run_json(pytester, "--regbudget-update", f"--regbudget-baseline={outside / 'mine.toml'}")
    assert result.ret == 0, result.outlines
    assert "[kernels" in (outside / "mine.toml").read_text()
    (pytester.path / "regbudget-baseline.toml").symlink_to(outside / "b.toml")
    before = snapshot(outside)
    result, _ = run_json(pytester, "--regbudget-update", "--regbudget-baseline=regbudget-baseline.toml")
    assert result.ret != 0
    result.stdout.fnmatch_lines([f"*baseline NOT updated: *leads to {outside.resolve() / 'b.toml'}*"])
    assert snapshot(outside) == before


def test_merge_update_refuses_a_link_out_of_the_project(pytester: pytest.Pytester, outside: Path) -> None:
    report = pytester.path / "shard.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={report}")
    assert result.ret == 0, result.outlines
    (pytester.path / "regbudget-baseline.toml").symlink_to(outside / "new" / "b.toml")
    before = snapshot(outside)
    done = regbudget("merge", str(report), "--update", "regbudget-baseline.toml", cwd=pytester.path)
    assert done.returncode != 0
    assert f"leads to {outside.resolve() / 'new' / 'b.toml'}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert snapshot(outside) == before
