"""A git repository whose baseline file has a known history, for the history tests and the benchmark: real
git, real baseline files written by the plugin's own writer."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pytest_regbudget.core.baseline import Baseline, BaselineEntry, Key, dumps

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=ENV
    ).stdout


def entry(registers: int, spills: tuple[int, int] = (0, 0), occupancy: float = 0.5) -> BaselineEntry:
    return BaselineEntry(
        registers=registers,
        spill_stores=spills[0],
        spill_loads=spills[1],
        stack=spills[0],
        smem=0,
        const_mem=380,
        ptxas="12.9.86",
        nvrtc="12.9.86",
        compiler="nvrtc",
        options_hash="8337958eb89f",
        occupancy={"256 threads": occupancy},
        tests=("tests/test_k.py::test_k[sm_90]",),
    )


def key(kernel: str, release: str = "12.9", arch: str = "sm_90") -> Key:
    return ("kernels/k.cu", kernel, "-", arch, release)


def commit_versions(
    root: Path,
    steps: list[tuple[str, Callable[[dict[Key, BaselineEntry]], str | None]]],
    path: str = "regbudget-baseline.toml",
    entries: dict[Key, BaselineEntry] | None = None,
    first: int = 0,
) -> list[str]:
    """Apply each step (subject, edit) to `entries` and commit the file; an edit may return the text to
    write instead (a damaged file). `first`: the number of the first step (it sets the commit's date).
    Returns the commits' hashes, in order."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / ".git").exists():
        git(root, "init", "-q", "-b", "main")
    entries = {} if entries is None else entries
    hashes = []
    for n, (subject, edit) in enumerate(steps, start=first):
        text = edit(entries)
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text if text is not None else dumps(Baseline(dict(entries))))
        git(root, "add", "-A")
        # One hour apart, in order: --since and --until take dates too.
        stamp = (datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(hours=n)).isoformat()
        subprocess.run(
            ["git", "-C", str(root), "commit", "-q", "-m", subject],
            check=True,
            capture_output=True,
            env={**ENV, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
        )
        hashes.append(git(root, "rev-parse", "HEAD").strip())
    return hashes
