"""How long does importing the plugin take, and how many dataclasses does it define?

Importing is most of a warm run's fixed cost (docs/speed.md): this times what a warm run on a CPU imports (the
plugin, the session, the NVRTC source and the GPU probe) in a fresh interpreter, with pytest imported first,
as a run has it, and counts the dataclasses defined meanwhile and their time. With --against, another
checkout is timed too, the two taking turns, so that the machine's wander hits both alike.

    python benchmarks/import_speed.py
    git worktree add ../old HEAD~2 && python benchmarks/import_speed.py --against ../old --repeat 21
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", type=Path, help="another checkout, timed in turns with this one")
    parser.add_argument("--repeat", type=int, default=15, help="turns (the best and the median are shown)")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
