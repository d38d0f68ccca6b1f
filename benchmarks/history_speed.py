"""What `regbudget history` costs on a long-lived baseline: a generated repository of --commits commits of a
baseline of --entries entries (each commit changes a few of them, as an update does), read cold (an empty
cache: every version parsed) and warm (each version taken from the cache by its blob), as the command runs.

    python benchmarks/history_speed.py                    # 200 commits x 1,200 entries
    python benchmarks/history_speed.py --commits 60 --entries 300 --repeat 5

The goal of issue 32: under 5 s cold and under 1 s warm on 2 cores. docs/speed.md quotes the output.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.history import entry, key  # noqa: E402

from pytest_regbudget.core.baseline import Baseline, dumps  # noqa: E402


def make_repo(root: Path, commits: int, entries: int, seed: int = 32) -> None:
    """`commits` versions of a baseline of `entries` entries, written with git fast-import (one process):
    each version changes 1-5 entries' registers or spills."""
    rng = random.Random(seed)
    names = [f"k{n:04d}" for n in range(entries // 2)]
    table = {key(n, arch=a): entry(32 + i % 64) for i, n in enumerate(names) for a in ("sm_80", "sm_90")}
    keys = sorted(table)
    stream: list[str | bytes] = []
    for n in range(commits):
        for k in rng.sample(keys, rng.randint(1, 5)):
            e = table[k]
            table[k] = entry(e.registers + rng.choice((-1, 1)), (rng.choice((0, 0, 64)),) * 2)
        data = dumps(Baseline(dict(table))).encode()
        stamp = 1767225600 + 3600 * n
        stream.append(
            f"commit refs/heads/main\ncommitter t <t@example.com> {stamp} +0000\ndata {len(f'update {n}')}\n"
            f"update {n}\n"
        )
        stream.append(f"M 100644 inline regbudget-baseline.toml\ndata {len(data)}\n")
        stream.append(data)
        stream.append(b"\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    body = b"".join(s if isinstance(s, bytes) else s.encode() for s in stream)
    subprocess.run(["git", "-C", str(root), "fast-import", "--quiet"], input=body, check=True)
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "main"], check=True)


def run(root: Path, cache: Path, checkout: Path) -> float:
    env = {**os.environ, "REGBUDGET_CACHE_DIR": str(cache), "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest_regbudget.cli", "history", "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stderr.decode())
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--entries", type=int, default=1200)
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the median is printed")
    parser.add_argument("--against", type=Path, help="another checkout, measured in the same run")
    args = parser.parse_args()
    checkouts = [("this", ROOT)] + ([("against", args.against.resolve())] if args.against else [])
    with tempfile.TemporaryDirectory(prefix="regbudget-history-") as tmp:
        root = Path(tmp) / "repo"
        start = time.perf_counter()
        make_repo(root, args.commits, args.entries)
        print(
            f"repository: {args.commits} commits x {args.entries} entries "
            f"({time.perf_counter() - start:.1f} s to make)"
        )
        for name, checkout in checkouts:
            colds, warms = [], []
            for n in range(args.repeat):
                cache = Path(tmp) / f"cache-{name}-{n}"
                colds.append(run(root, cache, checkout))
                warms.append(run(root, cache, checkout))
                shutil.rmtree(cache, ignore_errors=True)
            cold, warm = statistics.median(colds), statistics.median(warms)
            print(
                f"{name}: cold {cold:.2f} s, warm {warm:.2f} s "
                f"(goal: cold < 5 s, warm < 1 s; median of {args.repeat})"
            )


if __name__ == "__main__":
    main()
