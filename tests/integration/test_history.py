"""`regbudget history` and `blame` on a generated repository of 60 commits of a baseline file, written by the
plugin's own writer and committed with real git: one kernel's spills go 0 -> 0 -> 128 -> 704 -> 0 at known
commits, a CUDA release adds entries for every kernel at one commit (half of them with other numbers), one
commit leaves a damaged file, the file is renamed, and a shallow clone is said to be one."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from helpers.history import commit_versions, entry, git, key
from helpers.runs import regbudget, regbudget_argv
from msgspec.structs import replace

from pytest_regbudget.core.baseline import BaselineEntry, Key
from pytest_regbudget.history.git import versions

HOT = "hot"
KERNELS = [f"k{n:02d}" for n in range(10)]
SPILLS = {10: (0, 0), 20: (64, 64), 30: (352, 352), 40: (0, 0)}  # commit number -> hot's (stores, loads)
RELEASE_AT, DAMAGED_AT, RENAMED_AT = 50, 45, 55


def steps() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []

    def first(entries: dict[Key, BaselineEntry]) -> None:
        entries[key(HOT)] = entry(40)
        for n, name in enumerate(KERNELS):
            entries[key(name)] = entry(32 + n)

    out.append(("initial baseline", first))
    for n in range(1, 60):
        if n == DAMAGED_AT:
            out.append(("a bad merge", lambda e: "<<<<<<< HEAD\nversion = 3\n=======\n>>>>>>> theirs\n"))
        elif n in SPILLS:
            spills = SPILLS[n]
            regs = 40 + n  # 0 -> 0 at commit 10: registers move, spills do not

            def hot(
                entries: dict[Key, BaselineEntry], spills: tuple[int, int] = spills, regs: int = regs
            ) -> None:
                entries[key(HOT)] = entry(regs, spills)

            out.append((f"hot: spills {sum(spills)}", hot))
        elif n == RELEASE_AT:

            def release(entries: dict[Key, BaselineEntry]) -> None:
                for k, e in list(entries.items()):
                    if k[4] == "12.9":
                        changed = k[1] in KERNELS[:5] or k[1] == HOT
                        entries[(k[0], k[1], k[2], k[3], "13.0")] = replace(
                            e, registers=e.registers + (8 if changed else 0)
                        )

            out.append(("CUDA 13.0", release))
        else:
            name = KERNELS[n % 10]

            def bump(entries: dict[Key, BaselineEntry], name: str = name) -> None:
                entries[key(name)] = replace(entries[key(name)], registers=entries[key(name)].registers + 1)

            out.append((f"{name}: one more register", bump))
    return out


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("history")
    plan = steps()
    entries: dict[Key, BaselineEntry] = {}
    hashes = commit_versions(root, plan[:RENAMED_AT], entries=entries)  # type: ignore[arg-type]
    git(root, "mv", "regbudget-baseline.toml", "baseline.toml")
    git(root, "commit", "-q", "-m", "rename the baseline")
    hashes.append(git(root, "rev-parse", "HEAD").strip())
    later = plan[RENAMED_AT + 1 :]  # the rename took step 55's place: 60 commits in all
    hashes += commit_versions(root, later, path="baseline.toml", entries=entries, first=RENAMED_AT + 1)  # type: ignore[arg-type]
    return root, hashes


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return regbudget(*args, cwd=cwd)


def test_history_prints_exactly_the_changes(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, hashes = repo
    assert len(hashes) == 60
    done = cli(root, "history", "hot", "--baseline", "baseline.toml", "--release", "12.9")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "baseline.toml: 60 version(s) on this branch, 59 readable; 1 kernel(s) match" in out
    rows = [line for line in out.splitlines() if line[:10] in {h[:10] for h in hashes}]
    # added, registers only (0 -> 0 spills), 0 -> 128, 128 -> 704, 704 -> 0: nothing else, the rename and the
    # restored file after the damaged one included.
    assert [r[:10] for r in rows] == [hashes[0][:10], *(hashes[n][:10] for n in sorted(SPILLS))]
    assert rows[0].endswith("added")
    assert rows[1].endswith("registers 40 -> 50")
    assert rows[2].endswith("registers 50 -> 60, spills 0/0 -> 64/64, stack 0 -> 64")
    assert rows[3].endswith("registers 60 -> 70, spills 64/64 -> 352/352, stack 64 -> 352")
    assert rows[4].endswith("registers 70 -> 80, spills 352/352 -> 0/0, stack 352 -> 0")
    # The damaged version is listed, never guessed.
    assert f"unreadable, skipped: {hashes[DAMAGED_AT][:10]}" in out
    assert "is not valid TOML" in out


def test_a_release_adds_every_kernel_and_changes_half(repo: tuple[Path, list[str]]) -> None:
    root, hashes = repo
    done = cli(root, "history", "--baseline", "baseline.toml", "--release", "13.0", "--json")
    doc = json.loads(done.stdout)
    assert len(doc["kernels"]) == 11
    assert all([r["commit"] for r in k["rows"]] == [hashes[RELEASE_AT]] for k in doc["kernels"])
    assert all(k["rows"][0]["kind"] == "added" for k in doc["kernels"])
    base = json.loads(
        cli(root, "history", "--baseline", "baseline.toml", "--release", "12.9", "--json").stdout
    )
    upto = set(hashes[: RELEASE_AT + 1])  # 12.9's registers as the release's commit found them
    last_129 = {
        k["kernel"]: [r for r in k["rows"] if r["commit"] in upto][-1]["registers"] for k in base["kernels"]
    }
    differ = sorted(k["kernel"] for k in doc["kernels"] if k["rows"][0]["registers"] != last_129[k["kernel"]])
    assert differ == sorted([*KERNELS[:5], HOT])


def test_blame_names_where_spills_started_and_where_they_went(repo: tuple[Path, list[str]]) -> None:
    root, hashes = repo
    done = cli(
        root,
        "blame",
        "hot",
        "--metric",
        "spills",
        "--baseline",
        "baseline.toml",
        "--arch",
        "sm_90",
        "--release",
        "12.9",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "kernels/k.cu::hot [sm_90] 12.9"
    assert lines[1].startswith(f"  last changed: spills 352/352 -> 0/0 in {hashes[40][:10]} ")
    assert lines[2].startswith(f"  changed: spills 64/64 -> 352/352 in {hashes[30][:10]} ")
    assert lines[3].startswith(f"  changed: spills 0/0 -> 64/64 in {hashes[20][:10]} ")
    assert lines[4].startswith(f"  changed: spills (new) -> 0/0 in {hashes[0][:10]} ")
    missing = cli(root, "blame", "nope", "--baseline", "baseline.toml")
    assert missing.returncode == 2
    assert "no kernel matching 'nope' in any version of baseline.toml" in missing.stderr


def test_the_json_holds_the_terminal_rows(repo: tuple[Path, list[str]]) -> None:
    root, _ = repo
    text = cli(root, "history", "--baseline", "baseline.toml").stdout
    doc = json.loads(cli(root, "history", "--baseline", "baseline.toml", "--json").stdout)
    printed = [
        line.split()[0]
        for line in text.splitlines()
        if line[:1].isalnum() and len(line.split()[0]) == 10 and line.split()[1][:2] == "20"
    ]
    in_json = [r["commit"][:10] for k in doc["kernels"] for r in k["rows"]]
    assert printed == in_json
    assert sum(len(k["rows"]) for k in doc["kernels"]) > 60


def test_since_and_until_take_revisions_and_dates(repo: tuple[Path, list[str]]) -> None:
    root, hashes = repo

    def hot(*extra: str) -> list[dict[str, object]]:
        out = cli(
            root, "history", "hot", "--baseline", "baseline.toml", "--release", "12.9", "--json", *extra
        )
        (series,) = json.loads(out.stdout)["kernels"]
        return list(series["rows"])

    # The file had its old name at both ends of this range: followed from HEAD, it is found. The first row
    # compares with the version before the range: the kernel is not "added" in it.
    (ranged,) = hot("--since", hashes[25], "--until", hashes[35])
    assert (ranged["commit"], ranged["kind"]) == (hashes[30], "changed")
    assert (ranged["before"]["spills"], ranged["spills"]) == ([64, 64], [352, 352])  # type: ignore[index]
    # The commits are an hour apart from midnight: 19:30 falls between the 19th and the 20th; 02:30 the next
    # day is commit 26, before the rename at 55, which is still followed.
    assert hot("--since", "2026-01-01T19:30:00+00:00")[0]["commit"] == hashes[20]
    assert [r["commit"] for r in hot("--until", "2026-01-02T02:30:00+00:00")] == [
        hashes[0],
        hashes[10],
        hashes[20],
    ]
    wrong = cli(root, "history", "--baseline", "baseline.toml", "--since", "nosuchref")
    assert wrong.returncode == 2
    assert (
        "--since 'nosuchref' is neither a revision of this repository nor a date (a commit, a tag"
        in wrong.stderr
    )


def test_a_shallow_clone_says_so(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, _ = repo
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "3", f"file://{root}", str(clone)], check=True)
    done = cli(clone, "history", "hot", "--baseline", "baseline.toml")
    assert done.returncode == 0, done.stderr
    assert "shallow clone: the history stops where the clone does" in done.stdout
    assert "fetch-depth: 0" in done.stdout
    # The clone's first version is where its history starts, not where the kernel was added.
    assert "first seen (the history read starts here)" in done.stdout
    assert " added" not in done.stdout


def test_outside_a_repository_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "regbudget-baseline.toml").write_text("version = 3\n")
    done = cli(tmp_path, "history")
    assert done.returncode == 2
    assert "is not in a git repository" in done.stderr


def test_a_limit_reads_only_the_last_commits(repo: tuple[Path, list[str]]) -> None:
    """What the HTML report's charts ask for: the last so many commits, not the whole history."""
    root, hashes = repo
    found = versions(root / "baseline.toml", limit=5)
    assert [v.commit.sha for v in found.versions] == hashes[-5:]


def test_bad_input_and_a_closed_pipe(repo: tuple[Path, list[str]]) -> None:
    root, _ = repo
    nothing = cli(root, "history", "nosuch", "--baseline", "baseline.toml")
    assert nothing.returncode == 2
    assert "no kernel matching 'nosuch' in any version of baseline.toml" in nothing.stderr
    # The file's old name, gone from the work tree since the rename: named, not read as empty.
    gone = cli(root, "history")
    assert gone.returncode == 2
    assert "regbudget-baseline.toml: no such file. Fix: name the baseline with --baseline" in gone.stderr
    piped = subprocess.run(
        shlex.join(regbudget_argv("history", "--baseline", "baseline.toml")) + " | head -3",
        shell=True,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert len(piped.stdout.splitlines()) == 3
    assert "Traceback" not in piped.stderr
    assert "BrokenPipeError" not in piped.stderr
    blamed = json.loads(
        cli(root, "blame", "hot", "--baseline", "baseline.toml", "--release", "12.9", "--json").stdout
    )
    assert [r["kind"] for r in blamed[0]["rows"]] == ["changed", "changed", "changed", "added"]


def test_a_damaged_or_shared_cache_gives_the_same_history(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """The parsed versions kept by blob: cut short, emptied or rewritten by two runs at once, they are read
    again from git, never trusted."""
    root, _ = repo
    truth = versions(root / "baseline.toml").versions  # no cache
    cache = tmp_path / "cache"
    assert versions(root / "baseline.toml", cache_dir=cache).versions == truth
    docs = sorted((cache / "history").glob("*.json"))
    assert len(docs) > 50
    docs[0].write_bytes(docs[0].read_bytes()[:40])  # cut short
    docs[1].write_text("")
    edited = docs[2].read_text().replace("[[", "[ [", 1)  # one blank in its payload: its checksum fails
    assert edited != docs[2].read_text()
    docs[2].write_text(edited)
    assert versions(root / "baseline.toml", cache_dir=cache).versions == truth
    # Two processes filling one cache at once: both print the whole history.
    shared = tmp_path / "shared"
    env = {**os.environ, "REGBUDGET_CACHE_DIR": str(shared)}
    command = regbudget_argv("history", "--baseline", "baseline.toml", "--json")
    runs = [subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [json.loads(p.communicate(timeout=300)[0]) for p in runs]
    alone = json.loads(cli(root, "history", "--baseline", "baseline.toml", "--json", "--no-cache").stdout)
    assert outputs[0] == outputs[1] == alone
