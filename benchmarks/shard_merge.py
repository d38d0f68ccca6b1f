"""A sharded baseline update at scale: a generated project of N kernels (a kernel manifest over files of
20 kernels each) x 3 archs, run as S pytest shards (each a share of the kernel files, on a cold compile cache
of its own, as CI shards are) plus one `regbudget merge --update`, against one serial update.

Prints the wall time of the slowest shard, the merge's wall time and peak memory, and whether the merged
baseline equals the serial update's byte for byte (the script exits 1 if not).

    python benchmarks/shard_merge.py                       # 5,000 kernels x sm_80,sm_90,sm_100, 4 shards
    python benchmarks/shard_merge.py --kernels 400 --shards 2
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The manifest case's kernels of compile_speed.py (this directory is on sys.path when run as a script).
from compile_speed import MANIFEST_KERNEL as KERNEL
from compile_speed import MANIFEST_PER_FILE as PER_FILE


def write_project(root: Path, kernels: int, archs: list[str]) -> list[str]:
    """The kernel files (relative paths) of a manifest project, and its pyproject.toml."""
    files = []
    (root / "kernels").mkdir(parents=True)
    for f in range(-(-kernels // PER_FILE)):
        count = min(PER_FILE, kernels - f * PER_FILE)
        text = "".join(KERNEL.format(f=f, j=j, nacc=2 + j % 6) for j in range(count))
        name = f"kernels/k_{f:04d}.cu"
        (root / name).write_text(text)
        files.append(name)
    (root / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\n"
        f'regbudget_arch = "{",".join(archs)}"\n\n'
        '[[tool.regbudget.kernels]]\nsource = ["kernels/*.cu"]\nspills = 0\nlaunch = [256]\n'
    )
    return files


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the child, and its output."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(p.stdout[-3000:] + p.stderr[-3000:])\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print('@@', time.perf_counter() - t, peak, p.returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *cmd], cwd=cwd, env=env, capture_output=True, text=True
    )
    body, _, tail = done.stdout.rpartition("@@ ")
    seconds, peak_kb, rc = tail.split()
    if rc not in ("0",):
        raise SystemExit(f"{' '.join(cmd)} failed (exit {rc}) in {cwd}:\n{body}")
    return float(seconds), int(peak_kb) / 1024, body


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernels", type=int, default=5000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--archs", default="sm_80,sm_90,sm_100")
    args = parser.parse_args()
    archs = args.archs.split(",")
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory(prefix="regbudget-shards-") as tmp:
        root = Path(tmp) / "project"
        files = write_project(root, args.kernels, archs)
        env = {**os.environ}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        shards = [files[i :: args.shards] for i in range(args.shards)]
        times = []
        for i, part in enumerate(shards):
            # Each shard on a cold cache of its own, as a CI shard on a fresh runner.
            shard_env = {**env, "REGBUDGET_CACHE_DIR": str(Path(tmp) / f"cache-{i}")}
            seconds, peak, _ = run([*pytest, f"--regbudget-json={tmp}/shard{i}.json", *part], root, shard_env)
            times.append((seconds, peak))
            what = f"{len(part) * PER_FILE} kernels x {len(archs)} archs"
            print(f"  shard {i}: {what}: {seconds:7.1f} s, peak {peak:6.1f} MB")
        merge_cmd = [sys.executable, "-m", "pytest_regbudget", "merge"]
        merge_cmd += [f"{tmp}/shard{i}.json" for i in range(args.shards)]
        merge_cmd += ["-o", f"{tmp}/merged.json", "--update", "merged-baseline.toml"]
        merge_s, merge_mb, _ = run(merge_cmd, root, env)
        # The serial update, on the shards' caches merged (its compile time is not what is measured here).
        cache = Path(tmp) / "cache-serial"
        for i in range(args.shards):
            shutil.copytree(Path(tmp) / f"cache-{i}", cache, dirs_exist_ok=True)
        serial_env = {**env, "REGBUDGET_CACHE_DIR": str(cache)}
        serial_s, serial_mb, _ = run([*pytest, "--regbudget-update"], root, serial_env)
        same = (root / "merged-baseline.toml").read_bytes() == (root / "regbudget-baseline.toml").read_bytes()
        entries = (root / "regbudget-baseline.toml").read_text().count("\nregisters = ")
    slowest = max(t for t, _ in times)
    cores = os.cpu_count()
    print(f"{args.kernels} kernels x {len(archs)} archs ({args.archs}), {args.shards} shards, {cores} cores")
    print(f"  slowest shard (cold cache) : {slowest:7.1f} s")
    print(
        f"  merge + baseline update    : {merge_s:7.2f} s   peak RSS {merge_mb:6.1f} MB   ({entries} entries)"
    )
    print(f"  serial update (warm cache) : {serial_s:7.1f} s   peak RSS {serial_mb:6.1f} MB")
    print(f"  merged baseline == serial  : {'yes, byte for byte' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    raise SystemExit(main())
