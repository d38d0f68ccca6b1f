"""A pytest run timed as a user's run, shared by the benchmarks of run cost (import_speed.py and
binary_speed.py): the checkout under test on PYTHONPATH, a compile cache of the benchmark's own, and bytecode
caches on (this project's machines set PYTHONDONTWRITEBYTECODE; users' do not)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path


def timed_pytest(
    project: Path, checkout: Path, cache: Path, *args: str, ok: Collection[int] = (0,)
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """`pytest -q -p no:cacheprovider ARGS` in `project`, and the seconds it took; exits naming the project
    when pytest ends with a code not in `ok`."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "REGBUDGET_CACHE_DIR": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode not in ok:
        sys.exit(
            f"pytest failed in {project} ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
        )
    return seconds, done
