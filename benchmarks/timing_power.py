"""Detection power and cost of the GPU time ceilings (max_time_ratio), on a real GPU.

Five kernels of about 5 us, 20 us (compute), 70 us (a memory-bound float4 copy), 170 us (compute) and 20 ms,
each a marked test timed with `regbudget.benchmark`, all five in each pytest process, against one baseline:

  1. one `pytest --regbudget-update` records the baseline times (with their intervals);
  2. --runs processes with the kernels unchanged: a failure is a false alarm;
  3. --runs processes with more work (3 %; 10 % for the 5 us kernel, whose ceiling is 1.05): a failure is a
     detection.

Prints per kernel: the median time, how it was timed (events, or a CUDA graph of K launches), false alarms,
detections, and the median wall time spent timing it per process. With --record FILE, the raw sample sets of
the first processes are appended to FILE (test data for the stopping rule).

    python benchmarks/timing_power.py --runs 20          # on a GPU runner with CuPy
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import cast

KERNELS = """
// Compute-bound: two dependent FMA chains per thread, time linear in the iterations.
#define ITERS_5US {i5}
#define ITERS_20US {i20}
#define ITERS_170US {i170}
#define ITERS_20MS {i20ms}

__device__ float chain(int i, int iters) {{
    float a = i * 1e-7f, b = 1.0001f;
    for (int k = 0; k < iters; ++k) {{
        a = fmaf(a, b, 1e-7f);
        b = fmaf(b, 0.9999f, 1e-6f);
    }}
    return a + b;
}}

// One kernel per size, each its own entry (a macro: the four differ in their iterations only).
#define SPIN(NAME, ITERS) \\
    extern "C" __global__ void NAME(float* out, int n) {{ \\
        int i = blockIdx.x * blockDim.x + threadIdx.x; \\
        float v = chain(i, ITERS); \\
        if (i < n) out[i] = v; \\
    }}
SPIN(k5us, ITERS_5US)
SPIN(k20us, ITERS_20US)
SPIN(k170us, ITERS_170US)
SPIN(k20ms, ITERS_20MS)
// Memory-bound: a float4 copy, time linear in n.
extern "C" __global__ void copy70us(const float4* __restrict__ x, float4* __restrict__ y, int n) {{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i];
}}
"""

TESTS = """
import numpy as np
import pytest

WAVE = 132 * 2048  # resident threads of an H200 (132 SMs x 2,048)


def spin(regbudget, name, threads):
    cp = regbudget.gpu.cupy
    out = cp.empty(threads, dtype=cp.float32)
    regbudget.benchmark(name, (threads + 255) // 256, 256, (out, np.int32(threads)))


@pytest.mark.regbudget(source="kernels.cu", kernel="k5us", launch=(256,), max_time_ratio=1.05)
def test_k5us(regbudget):
    spin(regbudget, "k5us", WAVE)


@pytest.mark.regbudget(source="kernels.cu", kernel="k20us", launch=(256,), max_time_ratio=1.02)
def test_k20us(regbudget):
    spin(regbudget, "k20us", WAVE)


@pytest.mark.regbudget(source="kernels.cu", kernel="copy70us", launch=(256,), max_time_ratio=1.02)
def test_copy70us(regbudget):
    cp = regbudget.gpu.cupy
    n = {copy_n}
    x = cp.ones(4 * n, dtype=cp.float32)
    y = cp.empty(4 * n, dtype=cp.float32)
    regbudget.benchmark("copy70us", 132 * 8, 256, (x, y, np.int32(n)))


@pytest.mark.regbudget(source="kernels.cu", kernel="k170us", launch=(256,), max_time_ratio=1.02)
def test_k170us(regbudget):
    spin(regbudget, "k170us", 4 * WAVE)


@pytest.mark.regbudget(source="kernels.cu", kernel="k20ms", launch=(256,), max_time_ratio=1.02)
def test_k20ms(regbudget):
    spin(regbudget, "k20ms", 95 * WAVE)
"""

BASE = {"i5": 475, "i20": 1900, "i170": 4000, "i20ms": 20000, "copy_n": 10_000_000}
NAMES = ("k5us", "k20us", "copy70us", "k170us", "k20ms")


def write(root: Path, scale: float, scale_5us: float) -> None:
    sizes = {k: int(v * scale) for k, v in BASE.items()}
    sizes["i5"] = int(BASE["i5"] * scale_5us)
    (root / "kernels.cu").write_text(KERNELS.format(**sizes))
    (root / "test_timing.py").write_text(TESTS.format(copy_n=sizes["copy_n"]))


def run(root: Path, *args: str, env: dict[str, str]) -> dict[str, dict[str, object]]:
    out = root / "report.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--regbudget-json={out}", *args]
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if not out.exists():
        raise SystemExit(f"pytest wrote no report:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return {r["kernel"]: r for r in json.loads(out.read_text())["kernels"]}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--record", help="append the raw sample sets of the first processes to this file")
    args = parser.parse_args()
    outcomes: dict[str, dict[str, list[bool]]] = {n: {"false": [], "detect": []} for n in NAMES}
    ratios: dict[str, dict[str, list[float]]] = {n: {"false": [], "detect": []} for n in NAMES}
    spent: dict[str, list[float]] = {n: [] for n in NAMES}
    with tempfile.TemporaryDirectory(prefix="regbudget-timing-") as tmp:
        root = Path(tmp)
        env = {**os.environ}
        write(root, 1.0, 1.0)
        first = run(root, "--regbudget-update", env=env)
        for label, scale, scale_5 in (("false", 1.0, 1.0), ("detect", 1.03, 1.10)):
            write(root, scale, scale_5)
            for i in range(args.runs):
                run_env = {**env}
                if args.record and i < 2:
                    run_env["REGBUDGET_RECORD_SAMPLES"] = args.record
                recs = run(root, env=run_env)
                for name in NAMES:
                    rec = recs[name]
                    failed = rec["outcome"] == "failed"
                    outcomes[name][label].append(failed)
                    ratios[name][label].append(float(cast(float, rec["time_ratio"] or 0.0)))
                    spent[name].append(float(cast(float, rec["timing_spent_s"] or 0.0)))
                    if failed != (label == "detect"):  # a false alarm or a miss: say what it saw
                        print(
                            f"  {label} run {i}: {name}: {rec['time_status']} ratio {rec['time_ratio']}, "
                            f"[{rec['ci_low_ms']}, {rec['ci_high_ms']}] ms, {rec['samples']} samples, "
                            f"clock {rec['sm_clock_mhz']} MHz; {rec['violations']}"
                        )
    print(
        f"{args.runs} processes each, unchanged and with more work (3 %; 10 % for k5us, max_time_ratio 1.05)"
    )
    head = ("kernel", "median", "timed as", "false alarms", "detections", "spent/kernel")
    print(f"{head[0]:9s} {head[1]:>10s} {head[2]:>16s} {head[3]:>13s} {head[4]:>11s} {head[5]:>13s}")
    for name in NAMES:
        base = first[name]
        launches = int(cast(int, base["timing_launches"] or 1))
        how = (
            "too short"
            if base["too_short"]
            else f"graph of {launches}"
            if launches > 1
            else "events, L2 flush"
        )
        alarms, found = sum(outcomes[name]["false"]), sum(outcomes[name]["detect"])
        median_us = float(cast(float, base["time_ms"])) * 1000
        print(
            f"{name:9s} {median_us:8.1f} us {how:>16s} {alarms:>6d} of {args.runs:<3d} "
            f"{found:>4d} of {args.runs:<3d} {statistics.median(spent[name]):>10.3f} s"
        )
        same, slow = ratios[name]["false"], ratios[name]["detect"]
        unchanged, more = f"{min(same):.4f}-{max(same):.4f}", f"{min(slow):.4f}-{max(slow):.4f}"
        print(f"{'':9s} ratios unchanged {unchanged}, more work {more}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
