"""What reading a built library costs: cuBLAS's libraries from the `nvidia-cublas` wheel, as a manifest's
`binary = [...]`, cold (an empty cache: --regbudget-update), warm (a rerun of the unchanged file), a plain
pytest run of as many trivial items, and the floor (`cuobjdump -res-usage` of the whole file), in one run.

    pip download --no-deps "nvidia-cublas==13.*" -d /tmp/cublas
    unzip -q -o /tmp/cublas/*.whl -d /tmp/cublas
    python benchmarks/binary_speed.py /tmp/cublas/nvidia/cu13/lib/libcublas.so.13 [--archs sm_80,sm_90]
    python benchmarks/binary_speed.py LIB --against ../old       # another checkout too, in the same run

Each figure is the median of --repeat runs (the cold one is run once per checkout: it is minutes), the warm
and plain runs interleaved so that a busy machine slows both alike. docs/speed.md quotes its output.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runs import timed_pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_run(project: Path, checkout: Path, cache: Path, *args: str) -> tuple[float, str]:
    seconds, done = timed_pytest(project, checkout, cache, *args, ok=(0, 1))
    return seconds, done.stdout.strip().splitlines()[-1]


def cuobjdump() -> str:
    sys.path.insert(0, str(ROOT))
    from pytest_regbudget.tools.cuobjdump import find_cuobjdump

    found = find_cuobjdump(None)
    if found is None:
        sys.exit("no cuobjdump: pip install nvidia-cuda-cuobjdump")
    return str(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", type=Path, help="a built library, e.g. libcublas.so.13")
    parser.add_argument("--archs", default="sm_80,sm_90")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout of pytest-regbudget")
    args = parser.parse_args()
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    library = args.library.resolve()
    tool = cuobjdump()
    floors = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        subprocess.run([tool, "-res-usage", str(library)], capture_output=True, check=True)
        floors.append(time.perf_counter() - start)
    size = library.stat().st_size / 1e6
    print(f"{library.name} ({size:.0f} MB), archs {','.join(archs)}, {os.cpu_count()} cores")
    print(f"  cuobjdump -res-usage of the whole file: {statistics.median(floors):.2f} s")
    checkouts = [("this checkout", ROOT)] + ([("--against", args.against.resolve())] if args.against else [])
    with tempfile.TemporaryDirectory(prefix="regbudget-binary-speed-") as tmp:
        for label, checkout in checkouts:
            project, cache, plain = Path(tmp) / "project", Path(tmp) / "cache", Path(tmp) / "plain"
            for folder in (project, cache, plain):
                shutil.rmtree(folder, ignore_errors=True)
            (project / "lib").mkdir(parents=True)
            (project / "lib" / library.name).symlink_to(library)
            (project / "pytest.ini").write_text("[pytest]\n")
            (project / "regbudget.toml").write_text(
                f'arch = {archs!r}\n[[kernels]]\nbinary = ["lib/{library.name}"]\n'.replace("'", '"')
            )
            cold, line = pytest_run(project, checkout, cache, "--regbudget-update")
            items = int(line.split()[0])
            plain.mkdir()
            (plain / "pytest.ini").write_text("[pytest]\n")
            (plain / "test_plain.py").write_text(
                "import pytest\n"
                f"@pytest.mark.parametrize('i', range({items}))\n"
                "def test_plain(i):\n    pass\n"
            )
            warm, plains = [], []
            for _ in range(args.repeat):
                warm.append(pytest_run(project, checkout, cache)[0])
                plains.append(pytest_run(plain, checkout, cache)[0])
            w, p = statistics.median(warm), statistics.median(plains)
            print(f"  {label} ({checkout}): {items} items")
            print(f"    cold --regbudget-update: {cold:.1f} s")
            print(f"    warm rerun:              {w:.2f} s")
            print(f"    plain pytest, {items} items: {p:.2f} s (warm / plain: {w / p:.2f}x)")


if __name__ == "__main__":
    main()
