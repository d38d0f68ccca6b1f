"""What an edit costs: the builds (cache misses) and the seconds of the run after one edit, for this checkout
and, with --against, another one, in one run.

    python benchmarks/edit_costs.py                          # this checkout
    git worktree add ../old HEAD~5 && python benchmarks/edit_costs.py --against ../old
    python benchmarks/edit_costs.py --only six-kernels --compiler nvcc

Scenarios (each warms its own cache, then applies its edits one after another):
  example      example_project: `// a comment` in kernels/stencil.cu
  six-kernels  6 kernels x sm_80,sm_90 with one shared header and include dirs inc1 then inc2: a comment in
               one kernel, a new header nobody includes, a header in inc1 that shadows k4's cfg4.h, an edit
               of the shared header
  forty-nvcc   40 nvcc files with include_dirs = ["src"]: a new header in src/, one .cu renamed

docs/speed.md ("What an edit costs") quotes its output; tests/integration/test_cache_precision.py asserts the
same counts (and that each cached run equals a --regbudget-no-cache one).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The six kernels of tests/integration/test_cache_precision.py (str.format: {i}).
KERNEL = (ROOT / "tests" / "data" / "edits" / "kernel.cu.in").read_text()
Edit = tuple[str, Callable[[Path], object]]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def prepend(path: str, text: str) -> Callable[[Path], object]:
    return lambda root: (root / path).write_text(text + (root / path).read_text())


def example(root: Path, compiler: str) -> list[Edit]:
    shutil.copytree(ROOT / "example_project", root, dirs_exist_ok=True)
    return [("a comment in kernels/stencil.cu", prepend("kernels/stencil.cu", "// a comment\n"))]


def six_kernels(root: Path, compiler: str) -> list[Edit]:
    files = {f"kernels/k{i}.cu": KERNEL.format(i=i) for i in range(1, 7)}
    files |= {f"inc2/cfg{i}.h": "#define N 2\n" for i in range(1, 7)}
    files["inc2/shared.h"] = "#define SCALE 1.0f\n"
    files["inc1/.keep"] = ""
    files["regbudget.toml"] = (
        'arch = ["sm_80", "sm_90"]\n[[kernels]]\nsource = ["kernels/*.cu"]\n'
        f'include_dirs = ["inc1", "inc2"]\ncompiler = "{compiler}"\n'
    )
    write(root, files)
    return [
        ("a comment in one kernel", prepend("kernels/k1.cu", "// a comment\n")),
        ("a new header nobody includes", lambda r: write(r, {"inc1/unused.h": "#define UNUSED 1\n"})),
        ("a header shadowing k4's cfg4.h", lambda r: write(r, {"inc1/cfg4.h": "#define N 9\n"})),
        ("an edit of the shared header", lambda r: write(r, {"inc2/shared.h": "#define SCALE 2.0f\n"})),
    ]


def forty_nvcc(root: Path, compiler: str) -> list[Edit]:
    files = {"src/common.h": "#define SCALE 2.0f\n"}
    for i in range(40):
        files[f"src/backend/op{i}.cu"] = (
            f'#include "common.h"\n__global__ void op{i}(float* x) {{ x[threadIdx.x] *= SCALE + {i}; }}\n'
        )
    files["regbudget.toml"] = (
        'arch = ["sm_90"]\n[[kernels]]\nsource = ["src/**/*.cu"]\ninclude_dirs = ["src"]\ncompiler = "nvcc"\n'
    )
    write(root, files)
    op7 = root / "src" / "backend" / "op7.cu"
    return [
        ("a new header in src/", lambda r: write(r, {"src/new_backend.h": "#define NEW 1\n"})),
        ("one .cu renamed", lambda r: op7.rename(op7.with_name("op7b.cu"))),
    ]


SCENARIOS = {"example": example, "six-kernels": six_kernels, "forty-nvcc": forty_nvcc}


def run(root: Path, tree: Path, cache: Path) -> tuple[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "REGBUDGET_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "regbudget_strict=false",
         "--regbudget-gpu=off"],
        cwd=root, env=env, capture_output=True, text=True,
    )  # fmt: skip
    spent = time.perf_counter() - start
    found = re.search(r"compile cache .*?: (\d+) hits, (\d+) misses", done.stdout)
    if found is None:
        raise SystemExit(f"no cache line in the run in {root}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return f"{found.group(2)} builds", spent


def scenario(name: str, tree: Path, compiler: str, tmp: Path) -> list[str]:
    root = tmp / f"{name}-{abs(hash(str(tree)))}"
    root.mkdir()
    edits = SCENARIOS[name](root, compiler)
    cache = tmp / f"cache-{root.name}"
    cold, cold_s = run(root, tree, cache)
    lines = [f"  cold: {cold}, {cold_s:.1f} s"]
    for label, edit in edits:
        edit(root)
        built, spent = run(root, tree, cache)
        lines.append(f"  {label}: {built}, {spent:.1f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=list(SCENARIOS), action="append")
    parser.add_argument("--compiler", choices=["nvrtc", "nvcc"], default="nvrtc", help="for six-kernels")
    parser.add_argument("--against", type=Path, help="another checkout, run the same way")
    args = parser.parse_args()
    trees = [("this checkout", ROOT)] + (
        [("against " + str(args.against), args.against)] if args.against else []
    )
    with tempfile.TemporaryDirectory(prefix="regbudget-edits-") as tmp:
        for name in args.only or list(SCENARIOS):
            for label, tree in trees:
                print(f"{name} ({label}):", flush=True)
                print("\n".join(scenario(name, tree.resolve(), args.compiler, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
