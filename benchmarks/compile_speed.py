"""How much does pytest-regbudget cost: over running NVRTC + ptxas by hand, and over pytest alone?

Two measurements, each over generated projects ("cases"):

  compile   N kernel variants x M archs, in one run:
              raw  - serial NVRTC + `ptxas -v`, one kernel after another: the floor a careful script pays;
              cold - `pytest` with the plugin and an empty compile cache (the pool uses the free cores);
              warm - the same `pytest` again, every compile a cache hit;
            with the ratios against the goals and the peak memory of each pytest run.
  overhead  what a warm (fully cached) run, judging every kernel against a baseline entry, costs over an
            empty `pytest` (no plugin, no tests), for each case in CASES at two sizes: `fixed` (per run)
            and `per item` (per kernel item), from the line through the two sizes, best of --repeat turns
            each; and, where the case has a plain twin (the same items as tests without the plugin), how
            much of each is pytest's own (importing and collecting the test module, running its tests).
            The goals are <= 60 ms fixed and <= 1 ms per item (2 cores, 40 items). The script exits 1 if
            one is missed.

    python benchmarks/compile_speed.py                    # both, 20 variants x sm_80,sm_90
    python benchmarks/compile_speed.py -n 8 --archs sm_90
    python benchmarks/compile_speed.py --only overhead --repeat 9 --case small
    git worktree add ../old HEAD~4 && python benchmarks/compile_speed.py --only overhead --against ../old

A case is a function that writes a project with a given number of kernel items (kernels x archs), and an
entry in CASES: add one there to time another layout (a manifest, one file of many kernels).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_regbudget.tools.nvrtc import compile_ptx
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.ptxas import run_ptxas
from pytest_regbudget.tools.toolkit import discover

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
FIXED_MS_GOAL = 60.0
PER_ITEM_MS_GOAL = 1.0


def write_project(
    root: Path, variants: int, small: bool = False, plain_archs: Sequence[str] = ()
) -> list[tuple[Path, str]]:
    """`variants` .cu files of one kernel each, and one marked test per kernel. The kernels are register
    hungry (64 + 4i accumulators: 100 to 300 KB of PTX and cubin each), or `small` ones (2 to 5).

    With `plain_archs`, the tests carry no marker and are parametrized over those archs instead: the same
    pytest items, for pytest alone.
    """
    kernels = []
    body = ["import pytest\n"]
    for i in range(variants):
        source = root / f"poly_{i}.cu"
        nacc = 2 + i % 4 if small else 64 + 4 * i
        source.write_text(KERNEL.format(i=i, nacc=nacc, unroll=4 + i % 4, stride=977 + i))
        kernels.append((source, f"poly_{i}"))
        if plain_archs:
            body.append(
                f"@pytest.mark.parametrize('arch', {list(plain_archs)!r})\n"
                f"def test_poly_{i}(arch):\n    pass\n\n"
            )
            continue
        body.append(
            f'@pytest.mark.regbudget(source="{source.name}", kernel="poly_{i}", launch=(256,))\n'
            f"def test_poly_{i}():\n    pass\n\n"
        )
    (root / "test_kernels.py").write_text("".join(body))
    return kernels


# -- cases ------------------------------------------------------------------------------------------------
Writer = Callable[[Path, int, Sequence[str]], None]


@dataclass(frozen=True)
class Case:
    """A project layout to time: `write(root, items, archs)` lays out one with `items` kernel items (kernels
    x archs) in the empty directory `root`; `sizes` are the two item counts the overhead is fitted on.
    `plain` writes the same items as tests that pytest runs without the plugin, to tell pytest's own cost
    per item from the plugin's (None where the items exist only with the plugin, as a manifest's do).
    `name` is what --case picks it by."""

    name: str
    title: str
    write: Writer
    sizes: tuple[int, int] = (4, 40)
    plain: Writer | None = None


def _hungry(root: Path, items: int, archs: Sequence[str]) -> None:
    write_project(root, max(1, items // len(archs)))


def _small(root: Path, items: int, archs: Sequence[str]) -> None:
    write_project(root, max(1, items // len(archs)), small=True)


def _plain(root: Path, items: int, archs: Sequence[str]) -> None:
    write_project(root, max(1, items // len(archs)), small=True, plain_archs=archs)


MANIFEST_KERNEL = """
extern "C" __global__ void __launch_bounds__(256) k_{f}_{j}(const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[i % n], b = 0.0f;
#pragma unroll
    for (int k = 0; k < {nacc}; ++k) b = fmaf(a, b, {j}.0f + k);
    if (i < n) y[i] = b;
}}
"""
MANIFEST_PER_FILE = 20


def _manifest(root: Path, items: int, archs: Sequence[str]) -> None:
    """A kernel manifest (regbudget.toml) over files of 20 small kernels each, and no test file: every
    item is a manifest item, as in a repository adopted without writing tests."""
    kernels = max(1, items // len(archs))
    (root / "kernels").mkdir()
    for f in range(-(-kernels // MANIFEST_PER_FILE)):
        count = min(MANIFEST_PER_FILE, kernels - f * MANIFEST_PER_FILE)
        text = "".join(MANIFEST_KERNEL.format(f=f, j=j, nacc=2 + j % 6) for j in range(count))
        (root / "kernels" / f"k_{f}.cu").write_text(text)
    (root / "regbudget.toml").write_text(
        '[[kernels]]\nsource = ["kernels/*.cu"]\nspills = 0\nlaunch = [256]\n'
    )


CASES: list[Case] = [
    Case("hungry", "marked tests, register-hungry kernels, one per file", _hungry, (4, 40), _plain),
    Case("small", "marked tests, small kernels, one per file", _small, (20, 400), _plain),
    Case("manifest", "manifest items, 20 small kernels per file", _manifest, (40, 400)),
    Case("manifest-1000", "manifest items, 1,000 kernels (20 per file)", _manifest, (200, 2000)),
]


# -- running pytest ---------------------------------------------------------------------------------------
def run_pytest(root: Path, archs: Sequence[str], cache: Path) -> tuple[float, float]:
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


def timed_run(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall seconds of one run."""
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 5):  # 5: no tests collected (the empty pytest)
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}) in {cwd}:\n{done.stdout}")
    return elapsed


@dataclass(frozen=True)
class Overhead:
    title: str
    sizes: tuple[int, int]
    fixed_ms: float
    per_item_ms: float
    pytest_per_item_ms: float | None  # pytest's own share of per_item_ms, where the case has a plain twin
    pytest_fixed_ms: float | None = None  # ... and of fixed_ms (importing and collecting the test module)

    def lines(self) -> list[str]:
        def row(name: str, value: float, goal: float, digits: int, note: str = "") -> str:
            verdict = "met" if value <= goal else "MISSED"
            return (
                f"  {name:9s}: {value:7.{digits}f} ms   / goal {goal:g} ms = {value / goal:5.2f}   {verdict}"
                + note
            )

        share = fixed_share = ""
        if self.pytest_per_item_ms is not None:
            plugin = self.per_item_ms - self.pytest_per_item_ms
            share = f"   (pytest itself {self.pytest_per_item_ms:.2f} ms, the plugin {plugin:.2f} ms)"
        if self.pytest_fixed_ms is not None:
            plugin = self.fixed_ms - self.pytest_fixed_ms
            fixed_share = f"   (pytest itself {self.pytest_fixed_ms:.1f} ms, the plugin {plugin:.1f} ms)"
        return [
            f"{self.title} ({self.sizes[0]} and {self.sizes[1]} items), warm cache, over an empty pytest",
            row("fixed", self.fixed_ms, FIXED_MS_GOAL, 1, fixed_share),
            row("per item", self.per_item_ms, PER_ITEM_MS_GOAL, 2, share),
        ]

    @property
    def met(self) -> bool:
        return self.fixed_ms <= FIXED_MS_GOAL and self.per_item_ms <= PER_ITEM_MS_GOAL


def overhead(case: Case, archs: Sequence[str], repeat: int, tmp: Path) -> Overhead:
    """A warm run's time over an empty pytest at both sizes, as fixed + per item (the line through them).

    The runs (an empty pytest without the plugin, the case at both sizes, and its plain twin) take turns,
    `repeat` times, and each counts its fastest: on a shared machine the minimum is the cost, and taking
    turns exposes them all to the same load.
    """
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    plugin_cmd = [*pytest_cmd, f"--regbudget-arch={','.join(archs)}"]
    env = {**os.environ, "REGBUDGET_CACHE_DIR": str(tmp / f"{case.name}-cache")}
    # As a user's pytest runs: with bytecode (and pytest's rewritten test modules) cached between runs.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    runs: list[tuple[list[str], Path]] = []

    def project(name: str, write: Writer | None, items: int, cmd: list[str]) -> None:
        root = tmp / f"{case.name}-{name}"
        root.mkdir()
        if write is not None:
            write(root, items, archs)
        runs.append((cmd, root))
        # Fills the cache and, where the plugin runs, writes a baseline: the timed runs read it and judge
        # every kernel against its entry, as an adopted project's runs do.
        timed_run([*cmd, "--regbudget-update"] if cmd is plugin_cmd else cmd, root, env)

    project("empty", None, 0, [*pytest_cmd, "-p", "no:regbudget"])
    for items in case.sizes:
        project(str(items), case.write, items, plugin_cmd)
    if case.plain is not None:
        for items in case.sizes:
            project(f"plain-{items}", case.plain, items, [*pytest_cmd, "-p", "no:regbudget"])
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, (cmd, cwd) in enumerate(runs):
            best[i] = min(best[i], timed_run(cmd, cwd, env))
    (small, large), empty = case.sizes, best[0]
    per_item = (best[2] - best[1]) / (large - small)
    fixed = best[1] - empty - small * per_item
    pytest_per_item = pytest_fixed = None
    if case.plain is not None:  # the plain twin's own line: what pytest alone spends on the same tests
        plain_per_item = (best[4] - best[3]) / (large - small)
        pytest_per_item = plain_per_item * 1000
        pytest_fixed = (best[3] - empty - small * plain_per_item) * 1000
    return Overhead(case.title, case.sizes, fixed * 1000, per_item * 1000, pytest_per_item, pytest_fixed)


def against(case: Case, archs: Sequence[str], repeat: int, tmp: Path, other: Path) -> list[str]:
    """A warm run of `case` with this checkout's plugin and with `other`'s (another checkout, put first on
    PYTHONPATH), taking turns on the same projects, each with its own cache and baseline: the runs at both
    sizes and an empty pytest, best of `repeat` turns, as fixed + per item."""
    trees = {"this": Path(__file__).resolve().parent.parent, str(other): other.resolve()}
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    plugin_cmd = [*pytest_cmd, f"--regbudget-arch={','.join(archs)}"]
    runs: list[tuple[list[str], Path, dict[str, str]]] = []
    for n, tree in enumerate(trees.values()):
        env = {**os.environ, "PYTHONPATH": str(tree), "REGBUDGET_CACHE_DIR": str(tmp / f"against-cache-{n}")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        nothing = tmp / f"against-{case.name}-{n}-empty"
        nothing.mkdir()
        runs.append(([*pytest_cmd, "-p", "no:regbudget"], nothing, env))
        for items in case.sizes:
            root = tmp / f"against-{case.name}-{n}-{items}"
            root.mkdir()
            case.write(root, items, archs)
            timed_run([*plugin_cmd, "--regbudget-update"], root, env)  # the cache and a baseline
            runs.append((plugin_cmd, root, env))
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, (cmd, cwd, env) in enumerate(runs):
            best[i] = min(best[i], timed_run(cmd, cwd, env))
    (small, large), lines = case.sizes, [f"{case.title}, this checkout and another, best of {repeat} turns"]
    for n, name in enumerate(trees):
        empty, a, b = best[3 * n : 3 * n + 3]
        per = (b - a) / (large - small)
        lines.append(
            f"  {name}: fixed {(a - empty - small * per) * 1000:6.1f} ms   per item {per * 1000:5.2f} ms   "
            f"(empty {empty:.3f} s, {small} items {a:.3f} s, {large} items {b:.3f} s)"
        )
    return lines


# -- compile --------------------------------------------------------------------------------------------
def raw_serial(kernels: list[tuple[Path, str]], archs: Sequence[str]) -> float:
    toolkit = discover()
    start = time.perf_counter()
    for source, kernel in kernels:
        for arch in archs:
            module = compile_ptx(source.read_text(), str(source), arch, CompileOptions(), toolkit, [kernel])
            run_ptxas(module.ptx, arch, (), toolkit)
    return time.perf_counter() - start


def compile_times(variants: int, archs: Sequence[str], tmp: Path) -> int:
    root = tmp / "compile"
    root.mkdir()
    kernels = write_project(root, variants)
    cache = root / "cache"
    raw = raw_serial(kernels, archs)
    cold, cold_mb = run_pytest(root, archs, cache)
    warm, warm_mb = run_pytest(root, archs, cache)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{variants} kernels x {len(archs)} archs ({','.join(archs)}), {cores} cores")
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
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--variants", type=int, default=20)
    parser.add_argument("--archs", default="sm_80,sm_90")
    parser.add_argument("--only", choices=("compile", "overhead"), default=None)
    parser.add_argument("--repeat", type=int, default=7, help="turns per overhead figure (the best counts)")
    parser.add_argument("--case", action="append", default=None, help="overhead cases to run (by name)")
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        help="another checkout (an older commit, say): time each overhead case with both, in turns",
    )
    args = parser.parse_args()
    archs = args.archs.split(",")
    missed = 0
    with tempfile.TemporaryDirectory(prefix="regbudget-bench-") as tmp:
        if args.only in (None, "compile"):
            missed += compile_times(args.variants, archs, Path(tmp))
        if args.only in (None, "overhead"):
            for case in CASES:
                if args.case and case.name not in args.case:
                    continue
                if args.against is not None:
                    print("\n".join(against(case, archs, args.repeat, Path(tmp), args.against)), flush=True)
                    continue
                result = overhead(case, archs, args.repeat, Path(tmp))
                print("\n".join(result.lines()), flush=True)
                missed += not result.met
    return 1 if missed else 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    raise SystemExit(main())
