"""How much does pytest-regbudget cost over running NVRTC + ptxas by hand?

Generates N kernel variants x M archs and times, in one run:
  raw   - serial NVRTC + `ptxas -v`, one kernel after another: the floor a careful script would pay;
  cold  - `pytest` with the plugin and an empty compile cache (the compile pool uses the free cores);
  warm  - the same `pytest` again, every compile a cache hit.
Prints the times, the ratios against the goals, and the peak memory of each pytest run.

    python benchmarks/compile_speed.py            # 20 variants x sm_80,sm_90
    python benchmarks/compile_speed.py -n 8 --archs sm_90
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_regbudget.compiler import CompileOptions, compile_ptx, run_ptxas
from pytest_regbudget.toolchain import discover

KERNEL = """
// Variant {i}: {nacc} live accumulators per thread, unrolled {unroll} times.
extern "C" __global__ void __launch_bounds__(256)
poly_{i}(const float* __restrict__ x, const float* __restrict__ c, float* __restrict__ y, int n,
         int degree) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v[{nacc}], acc[{nacc}];
#pragma unroll
    for (int k = 0; k < {nacc}; ++k) {{ v[k] = x[(i + k * {stride}) % n]; acc[k] = 0.0f; }}
#pragma unroll {unroll}
    for (int d = 0; d < degree; ++d) {{
        float cd = c[d];
#pragma unroll
        for (int k = 0; k < {nacc}; ++k) acc[k] = fmaf(acc[k], v[k], cd + k);
    }}
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < {nacc}; ++k) s += acc[k] * acc[(k + 1) % {nacc}];
    if (i < n) y[i] = s;
}}
"""

GOALS = {"cold / raw": 0.75, "warm / cold": 0.10}
PEAK_MB_GOAL = 300


def write_project(root: Path, variants: int) -> list[tuple[Path, str]]:
    kernels = []
    body = ["import pytest\n"]
    for i in range(variants):
        source = root / f"poly_{i}.cu"
        source.write_text(KERNEL.format(i=i, nacc=64 + 4 * i, unroll=4 + i % 4, stride=977 + i))
        kernels.append((source, f"poly_{i}"))
        body.append(
            f'@pytest.mark.regbudget(source="{source.name}", kernel="poly_{i}", launch=(256,))\n'
            f"def test_poly_{i}():\n    pass\n\n"
        )
    (root / "test_kernels.py").write_text("".join(body))
    return kernels


def raw_serial(kernels: list[tuple[Path, str]], archs: list[str]) -> float:
    toolkit = discover()
    start = time.perf_counter()
    for source, kernel in kernels:
        for arch in archs:
            module = compile_ptx(source.read_text(), str(source), arch, CompileOptions(), toolkit, [kernel])
            run_ptxas(module.ptx, arch, (), toolkit)
    return time.perf_counter() - start


def run_pytest(root: Path, archs: list[str], cache: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one pytest run in a fresh process."""
    env = {**os.environ, "REGBUDGET_CACHE_DIR": str(cache)}
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:]).returncode\n"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)\n"
    )
    cmd = [sys.executable, "-c", probe, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd.append(f"--regbudget-arch={','.join(archs)}")
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=True).stdout
    seconds, peak_kb, rc = out.strip().splitlines()[-1].split()
    if rc != "0":
        raise SystemExit(f"pytest failed (exit {rc}) in {root}")
    return float(seconds), int(peak_kb) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--variants", type=int, default=20)
    parser.add_argument("--archs", default="sm_80,sm_90")
    args = parser.parse_args()
    archs = args.archs.split(",")
    with tempfile.TemporaryDirectory(prefix="regbudget-bench-") as tmp:
        root = Path(tmp)
        kernels = write_project(root, args.variants)
        cache = root / "cache"
        raw = raw_serial(kernels, archs)
        cold, cold_mb = run_pytest(root, archs, cache)
        warm, warm_mb = run_pytest(root, archs, cache)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{args.variants} kernels x {len(archs)} archs ({','.join(archs)}), {cores} cores")
    print(f"  raw serial NVRTC + ptxas -v : {raw:7.2f} s")
    print(f"  plugin, cold cache          : {cold:7.2f} s   peak RSS {cold_mb:6.1f} MB")
    print(f"  plugin, warm cache          : {warm:7.2f} s   peak RSS {warm_mb:6.1f} MB")
    ratios = {"cold / raw": cold / raw, "warm / cold": warm / cold}
    missed = 0
    for name, value in ratios.items():
        ok = value <= GOALS[name]
        missed += not ok
        print(f"  {name:12s} = {value:5.3f}   goal <= {GOALS[name]:.2f}   {'met' if ok else 'MISSED'}")
    peak = max(cold_mb, warm_mb)
    ok = peak < PEAK_MB_GOAL
    missed += not ok
    print(f"  peak memory  = {peak:5.1f} MB  goal <  {PEAK_MB_GOAL} MB  {'met' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    raise SystemExit(main())
