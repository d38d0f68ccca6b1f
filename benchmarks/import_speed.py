"""How long does importing the plugin take, and what does it add to a whole pytest run?

Importing is most of a warm run's fixed cost (docs/speed.md): this times what a warm run on a CPU imports (the
plugin, the session, the NVRTC source and the GPU probe) in a fresh interpreter, with pytest imported first,
as a run has it, and counts the dataclasses defined meanwhile and their time. With --against, another
checkout is timed too, the two taking turns, so that the machine's wander hits both alike.

With --runs, whole pytest runs are timed too (best and median of --repeat, bytecode caches on), each against
plain pytest: an empty project with the plugin installed against `-p no:regbudget`, and two marked items on a
warm compile cache against two plain tests. Every pytest run in a venv that has the plugin pays the first
figure.

    python benchmarks/import_speed.py
    python benchmarks/import_speed.py --runs --repeat 15
    python benchmarks/import_speed.py --runs --repeat 15 --gpu-off   # on a GPU machine
    git worktree add ../old HEAD~2 && python benchmarks/import_speed.py --against ../old --repeat 21
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from runs import timed_pytest

HERE = Path(__file__).resolve().parent.parent

# Run in the child: dataclass definitions timed through dataclasses._process_class, which every
# @dataclass goes through on Python 3.9 to 3.13.
CHILD = """
import time, dataclasses, pytest
made, spent = 0, 0.0
process = dataclasses._process_class
def timed(cls, *args, **kwargs):
    global made, spent
    start = time.perf_counter()
    try:
        return process(cls, *args, **kwargs)
    finally:
        made += 1
        spent += time.perf_counter() - start
dataclasses._process_class = timed
start = time.perf_counter()
import pytest_regbudget.plugin, pytest_regbudget.sources.nvrtc, pytest_regbudget.gpu
try:  # the layered package: gpu/ is a folder (an older checkout has gpu.py)
    import pytest_regbudget.gpu.device
except ImportError:
    pass
try:  # the engine's hooks, which a run with kernels loads (before issue 42, the entry point imported them)
    import pytest_regbudget.plugin.hooks
except ImportError:
    pass
print((time.perf_counter() - start) * 1000, spent * 1000, made, pytest_regbudget.__file__)
"""


def once(checkout: Path) -> tuple[float, float, int]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's run reads the bytecode pytest_regbudget wrote before
    # cwd: the checkout's parent, so that neither the cwd nor an editable install shadows PYTHONPATH.
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=env,
        cwd=checkout.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not Path(out[3]).resolve().is_relative_to(checkout.resolve()):
        raise SystemExit(f"imported {out[3]}, not the checkout {checkout}")
    return float(out[0]), float(out[1]), int(out[2])


KERNEL = 'extern "C" __global__ void scale(float* y, float a) { y[threadIdx.x] *= a; }\n'
MARKED = """import pytest

@pytest.mark.regbudget(source="k.cu", kernel="scale", max_regs=64)
def test_one():
    pass

@pytest.mark.regbudget(source="k.cu", kernel="scale", max_regs=32)
def test_two():
    pass
"""
PLAIN = "def test_one():\n    pass\n\ndef test_two():\n    pass\n"


def pytest_seconds(project: Path, checkout: Path, *args: str) -> float:
    # 5: no tests collected (the empty project)
    return timed_pytest(project, checkout, project.parent / "cache", *args, ok=(0, 5))[0]


def whole_runs(checkouts: list[Path], repeat: int, gpu_off: bool = False) -> None:
    """Whole runs against plain pytest, best and median of `repeat`, each turn's runs one after another: with
    two checkouts (--against), each one's runs with the plugin are timed in the same turns."""
    with tempfile.TemporaryDirectory(prefix="regbudget-import-speed-") as tmp:
        projects = {name: Path(tmp) / name for name in ("empty", "marked", "plain")}
        for project in projects.values():
            project.mkdir()
            (project / "pytest.ini").write_text("[pytest]\n")
        (projects["marked"] / "k.cu").write_text(KERNEL)
        if gpu_off:  # on a GPU machine a warm run would otherwise time the kernels on the GPU
            (projects["marked"] / "pytest.ini").write_text("[pytest]\nregbudget_gpu = off\n")
        (projects["marked"] / "test_marked.py").write_text(MARKED)
        (projects["plain"] / "test_plain.py").write_text(PLAIN)
        for checkout in checkouts:
            pytest_seconds(projects["marked"], checkout)  # fills the compile cache, writes the bytecode
        plain = ("-p", "no:regbudget")
        pairs = {
            "empty project": ((projects["empty"],), (projects["empty"], *plain)),
            "two marked items, warm cache": ((projects["marked"],), (projects["plain"], *plain)),
        }
        for label, (mine, theirs) in pairs.items():
            with_plugin: dict[Path, list[float]] = {c: [] for c in checkouts}
            without = []
            for _ in range(repeat):
                for checkout in checkouts:
                    with_plugin[checkout].append(pytest_seconds(mine[0], checkout, *mine[1:]))
                without.append(pytest_seconds(theirs[0], checkouts[0], *theirs[1:]))
            b, mb = min(without) * 1000, statistics.median(without) * 1000
            for checkout, times in with_plugin.items():
                # The median too: on a loaded machine the best of a few turns is luck, the median is steadier.
                a, ma = min(times) * 1000, statistics.median(times) * 1000
                named = f" ({checkout})" if len(checkouts) > 1 else ""
                print(
                    f"{label}{named}: {a:.0f} ms against {b:.0f} ms plain (+{a - b:.0f} ms), best of "
                    f"{repeat}; median {ma:.0f} against {mb:.0f} ms (+{ma - mb:.0f} ms)"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", type=Path, help="another checkout, timed in turns with this one")
    parser.add_argument("--repeat", type=int, default=15, help="turns (the best and the median are shown)")
    parser.add_argument("--runs", action="store_true", help="time whole pytest runs against plain pytest too")
    parser.add_argument(
        "--gpu-off",
        action="store_true",
        help="with --runs, on a GPU machine: the marked items' GPU checks off",
    )
    args = parser.parse_args(argv)
    checkouts = [HERE] + ([args.against.resolve()] if args.against else [])
    for checkout in checkouts:
        once(checkout)  # writes the bytecode, so that every timed turn reads it as a user's run does
    runs: dict[Path, list[tuple[float, float, int]]] = {c: [] for c in checkouts}
    for _ in range(args.repeat):
        for checkout in checkouts:
            runs[checkout].append(once(checkout))
    for checkout in checkouts:
        times = [r[0] for r in runs[checkout]]
        made = runs[checkout][0][2]
        print(
            f"{checkout}: import best {min(times):.1f} ms, median {statistics.median(times):.1f} ms "
            f"({args.repeat} turns); {made} dataclasses defined, {min(r[1] for r in runs[checkout]):.1f} ms "
            "of it at best"
        )
    if args.against:
        this, other = (min(r[0] for r in runs[c]) for c in checkouts)
        print(f"this / other (best) = {this / other:.2f}")
    if args.runs:
        whole_runs(checkouts, args.repeat, args.gpu_off)
    return 0


if __name__ == "__main__":
    sys.exit(main())
