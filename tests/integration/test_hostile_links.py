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


# -- links planted in the compile cache --------------------------------------------------------------------
def cache_names(cache: Path) -> tuple[list[str], list[str]]:
    """The files and the folders a run wrote in `cache`, relative to it (a lock's pid file too: it is there
    only while the lock is held)."""
    files = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
    files += [f"{name}.pid" for name in files if name.endswith(".lock")]
    folders = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_dir())
    return files, folders


RUN = ("-p", "no:cacheprovider", "--regbudget-update", "--regbudget-sass")


@pytest.mark.parametrize("where", ["files", "top folders", "inner folders"])
def test_links_planted_in_the_cache_are_replaced_never_followed(
    pytester: pytest.Pytester, outside: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Whoever can write the cache plants a link at each name a run writes (entries and bodies, the stat
    cache, the tools memo, SASS documents, the parsed baseline, locks and their pid files), or at each folder:
    the run passes and no file outside the cache changes."""
    cache = outside.parent / f"{outside.name}-cache"
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(cache))
    # Fresh processes: what one process remembers (a cubin's SASS, a tool's digest) would skip the cache.
    for _ in range(2):  # the second reads the baseline the first wrote, and keeps it parsed
        result = pytester.runpytest_subprocess(*RUN)
        assert result.ret == 0, result.outlines
    files, folders = cache_names(cache)
    kinds = {name.split(os.sep)[0] for name in files}
    assert {"v7", "locks", "baselines", "sass"} <= kinds, files  # what the run writes is what is planted
    assert any(name.endswith("/tools") for name in files), files
    assert any(name.endswith("/stat-cache") for name in files), files
    for path in sorted(cache.iterdir()):
        if path.is_dir():
            for inner in sorted(path.rglob("*"), reverse=True):
                inner.rmdir() if inner.is_dir() else inner.unlink()
            path.rmdir()
    victims = outside / "victims"
    victims.mkdir()
    if where == "files":
        planted = [(name, victims / f"{n}") for n, name in enumerate(files)]
        for n, (_, victim) in enumerate(planted):
            if n % 2:  # every other one dangling: a run must not create it either
                victim.write_bytes(f"victim {n}\n".encode())
    else:
        top = [name for name in folders if os.sep not in name]
        chosen = top if where == "top folders" else [name for name in folders if name.count(os.sep) == 1]
        planted = [(name, victims / f"{n}") for n, name in enumerate(chosen)]
        for _, victim in planted:
            victim.mkdir()
    for name, victim in planted:
        (cache / name).parent.mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(victim)
    before = snapshot(outside)
    result = pytester.runpytest_subprocess(*RUN)
    assert result.ret == 0, result.outlines
    result.stdout.fnmatch_lines(["*baseline regbudget-baseline.toml updated*"])
    assert snapshot(outside) == before
    # Each planted file link was replaced by the run's own file (a folder link only stops the writes).
    if where == "files":
        written = [name for name, _ in planted if not name.endswith((".lock", ".pid"))]
        assert [name for name in written if (cache / name).is_symlink()] == []


# Another user, for the ownership case: made by chown, which only root may do.
STRANGER = 54321


@pytest.mark.parametrize("how", ["writable by others", "another user's"])
def test_a_cache_directory_others_could_write_turns_caching_off(
    pytester: pytest.Pytester, outside: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """As pip does with its cache: one line says why, the run builds everything itself and passes, and
    nothing in that directory is read or written."""
    cache = outside.parent / f"{outside.name}-cache"
    cache.mkdir()
    (cache / "v7").mkdir()
    (cache / "v7" / "tools").write_text("whatever another user left here\n")
    if how == "writable by others":
        os.chmod(cache, 0o777)  # no sticky bit
        why = f"{cache} is writable by others (mode 777). Fix: chmod go-w {cache}"
    else:
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            pytest.skip("handing a folder to another user (chown) takes root")
        os.chown(cache, STRANGER, STRANGER)
        why = f"{cache} belongs to uid {STRANGER}, not to you. Fix: use a directory of your own"
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(cache))
    before = snapshot(cache)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    assert result.ret == 0, result.outlines
    refused = [line for line in result.outlines if "not safe to use" in line]
    assert refused == [f"compile cache {cache} is not safe to use, caching off for this run: {why}"]
    assert not any(" hits, " in line for line in result.outlines)
    assert snapshot(cache) == before
