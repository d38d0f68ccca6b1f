"""Where a JSON report's numbers came from, for trend tools that read many reports: the commit, the date, the
host, the GPU, this plugin's version, and the compilers and toolkits that built the kernels.

Every field is read, never guessed: a checkout that is not a git repository (or a machine without git) has
`commit: null`, a run without a GPU `gpu: []`.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from .._version import __version__
from ..report.record import ReportRecord

# `git rev-parse` answers at once; a git that does not is hung on a lock or a network file system.
GIT_TIMEOUT = 10.0


def _git(rootdir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(rootdir), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit(rootdir: Path) -> dict[str, object] | None:
    """`{"sha": ..., "dirty": bool}` of the checkout holding `rootdir`; from $GITHUB_SHA where git cannot
    tell (a source archive in CI); None outside any."""
    sha = _git(rootdir, "rev-parse", "--verify", "HEAD")
    if sha:
        # Tracked files only: a build directory of untracked outputs does not make the numbers suspect.
        status = _git(rootdir, "status", "--porcelain", "--untracked-files=no")
        return {"sha": sha, "dirty": None if status is None else bool(status), "from": "git"}
    env = os.environ.get("GITHUB_SHA", "").strip()
    return {"sha": env, "dirty": None, "from": "GITHUB_SHA"} if env else None


def compilers(records: Sequence[ReportRecord]) -> list[dict[str, object]]:
    """Each (compiler, front end, ptxas) that made numbers in this run, with how many kernels it built."""
    made: dict[tuple[str, str, str], int] = {}
    for rec in records:
        if rec["nvrtc_version"]:
            key = (rec["compiler"], rec["nvrtc_version"], rec["ptxas_version"])
            made[key] = made.get(key, 0) + 1
    return [
        {"compiler": c, "frontend": front, "ptxas": ptxas, "kernels": n}
        for (c, front, ptxas), n in sorted(made.items())
    ]


def provenance(
    records: Sequence[ReportRecord], rootdir: Path, *, toolkits: Sequence[str], nvcc: str | None
) -> dict[str, object]:
    """The report's `provenance` object (docs/reports.md lists its fields). `toolkits`: each toolkit the run
    found, described; `nvcc`: the nvcc it found, if any test asked for one."""
    return {
        "plugin_version": __version__,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": commit(rootdir),
        "host": platform.node() or None,
        "platform": f"{platform.system()} {platform.machine()}",
        "python": sys.version.split()[0],
        "gpu": sorted({r["gpu_device"] for r in records if r["gpu_device"]}),
        "toolkits": list(toolkits),
        "nvcc": nvcc,
        "compilers": compilers(records),
    }
