"""What the local-share estimate (core/estimate.py) costs a run: issue 43 asks for the run's wall time against
a run without the estimate, warm, at 100 kernels.

Two measurements:

1. Whole runs of a generated project of 100 kernels (25 files of 4 spilling kernels, sm_90, a manifest),
   after one cold run that fills the compile cache:
   - `plain`: warm, the SASS not read (no --regbudget-sass): the run without the estimate;
   - `sass`: warm, --regbudget-sass, the SASS readings cached by an earlier run (what a CI run with a
     restored cache pays);
   - `sass, unread`: --regbudget-sass with the SASS cache emptied before each run: nvdisasm, the parse and the
     estimate of every kernel again (the most a warm compile cache leaves to the estimate).
2. The parse alone, in process, over the 17 profiled cubins of tests/data/local_share: `parse_sass_functions`
   as it is, against the same parse with the estimate's walk (`estimate.frequencies`) replaced by zeros. The
   difference is what the estimate itself costs per kernel.

    python benchmarks/estimate_cost.py [--repeat 5] [--keep DIR]

Prints seconds (best and median of --repeat) and ratios. Needs the wheels' NVRTC, ptxas and nvdisasm.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from runs import timed_pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_regbudget.core import estimate, sass  # noqa: E402
from pytest_regbudget.tools.nvdisasm import find_nvdisasm  # noqa: E402

FILES = 25  # x 4 kernels = 100
KERNELS = """\
#define NV {nv}
extern "C" __global__ void __launch_bounds__(1024, 2) hot{k}(const float* __restrict__ x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) v[j] = x[(i + j * 131) & 1023];
    for (int d = 0; d < n; ++d) {{
#pragma unroll
        for (int j = 0; j < NV; ++j) v[j] = fmaf(v[j], v[(j + 1) % NV], x[d]);
    }}
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; ++j) s += v[j];
    y[i] = s;
}}
extern "C" __global__ void __launch_bounds__(1024, 2) cold{k}(const float* x, float* y, int n, int flag) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = x[i & 1023];
    for (int d = 0; d < n; ++d) s = fmaf(s, 0.5f, x[d]);
    if (flag == 12345) {{
        float v[NV];
#pragma unroll
        for (int j = 0; j < NV; ++j) v[j] = x[(i + j * 131) & 1023];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int j = 0; j < NV; ++j) v[j] = fmaf(v[j], v[(j + 1) % NV], s);
#pragma unroll
        for (int j = 0; j < NV; ++j) s += v[j];
    }}
    y[i] = s;
}}
extern "C" __global__ void __launch_bounds__({threads}) poly{k}(const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float acc[2 * NV];
#pragma unroll
    for (int j = 0; j < 2 * NV; ++j) acc[j] = v * (j + 1);
#pragma unroll
    for (int it = 0; it < 4; ++it)
#pragma unroll
        for (int j = 0; j < 2 * NV; ++j) acc[j] = fmaf(acc[j], v, acc[(j + 7) % (2 * NV)]);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 2 * NV; ++j) s += acc[j];
    y[i] = s;
}}
extern "C" __global__ void hist{k}(const int* __restrict__ x, int* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int bins[16] = {{0}};
    for (int d = 0; d < n; ++d) bins[(x[(i + d) & 1023] + {k}) & 15]++;
    int s = 0;
    for (int b = 0; b < 16; ++b) s += bins[b] * b;
    y[i] = s;
}}
"""
MANIFEST = '[tool.regbudget]\narch = ["sm_90"]\n[[tool.regbudget.kernels]]\nsource = "k/*.cu"\n'


def project(folder: Path) -> Path:
    for k in range(FILES):
        path = folder / "k" / f"k{k:02}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(KERNELS.format(k=k, nv=40 + k % 9, threads=(256, 512, 1024)[k % 3]))
    (folder / "pyproject.toml").write_text(MANIFEST)
    return folder


def runs(folder: Path, repeat: int) -> None:
    checkout = ROOT
    cache = folder / "cache"
    sass_cache = cache / "sass"
    print(f"{FILES * 4} kernels in {FILES} files, sm_90; cold run to fill the compile cache ...", flush=True)
    seconds, done = timed_pytest(folder, checkout, cache, "-x", "-n", "2")
    print(f"  cold: {seconds:.1f} s ({done.stdout.strip().splitlines()[-1]})")
    timed_pytest(folder, checkout, cache, "--regbudget-sass")  # the SASS readings cached once

    def unread() -> float:
        shutil.rmtree(sass_cache, ignore_errors=True)
        return timed_pytest(folder, checkout, cache, "--regbudget-sass")[0]

    shapes: dict[str, Callable[[], float]] = {
        "plain": lambda: timed_pytest(folder, checkout, cache)[0],
        "sass": lambda: timed_pytest(folder, checkout, cache, "--regbudget-sass")[0],
        "sass, unread": unread,
    }
    times: dict[str, list[float]] = {name: [] for name in shapes}
    for _ in range(repeat):  # in turns, so that a slow moment of the machine hits every shape alike
        for name, run in shapes.items():
            times[name].append(run())
    base = statistics.median(times["plain"])
    for name, seconds_of in times.items():
        median = statistics.median(seconds_of)
        print(f"  {name:13s} best {min(seconds_of):6.2f} s  median {median:6.2f} s  x{median / base:.2f}")


def parse_only(repeat: int) -> None:
    nvdisasm = find_nvdisasm(None)
    if nvdisasm is None:
        sys.exit("no nvdisasm (pip install 'pytest-regbudget[sass]')")
    cubins = sorted((ROOT / "tests" / "data" / "local_share" / "cubins").glob("*.cubin"))
    listings = [
        subprocess.run(
            [str(nvdisasm), "-c", "-gi", str(c)], capture_output=True, text=True, check=True
        ).stdout
        for c in cubins
    ]
    instructions = sum(r.instructions for t in listings for r in sass.parse_sass_functions(t).values())

    def timed(parse: Callable[[str], object]) -> list[float]:
        out = []
        for _ in range(repeat):
            start = time.perf_counter()
            for text in listings:
                parse(text)
            out.append(time.perf_counter() - start)
        return out

    real = estimate.frequencies
    with_estimate = timed(sass.parse_sass_functions)
    estimate.frequencies = lambda texts, *rest: [0.0] * len(texts)
    try:
        without = timed(sass.parse_sass_functions)
    finally:
        estimate.frequencies = real
    a, b = statistics.median(with_estimate), statistics.median(without)
    per = (a - b) / len(listings) * 1000
    print(
        f"parse of {len(listings)} profiled cubins ({instructions} SASS instructions): with the estimate "
        f"{a * 1000:.1f} ms, without {b * 1000:.1f} ms (x{a / b:.2f}); the estimate "
        f"{per:.2f} ms per kernel"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build the project here and keep it (else a temp dir)")
    args = parser.parse_args(argv)
    parse_only(max(args.repeat, 5))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        runs(project(args.keep), args.repeat)
    else:
        with tempfile.TemporaryDirectory(prefix="regbudget-estimate-") as tmp:
            runs(project(Path(tmp)), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
