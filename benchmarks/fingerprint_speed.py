"""What the compile cache's NVRTC fingerprint costs on a large header tree.

Writes a project of N headers (default 3000, about 2 KB each, in 30 directories under include/) and a
kernel in kernels/ that includes a few of them, then times the cache key of that kernel (pytest-regbudget's
`cache_key`, which lists and fingerprints the kernel's directory tree and every include directory's tree):

  cold       - no stat cache: every file is read and hashed (from the OS page cache: the files were just
               written, so this is the CPU cost, not the disk's);
  warm disk  - a stat cache loaded from disk, as the next pytest run has it: the trees are listed and
               stat()ed, no file is read;
  warm       - the same stat cache again in the same process (every later kernel of a run).

It also times the nvcc side's directory listings (names only) of the same trees. No CUDA needed.

    python benchmarks/fingerprint_speed.py
    python benchmarks/fingerprint_speed.py --headers 10000 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_regbudget.cache.fingerprint import MAX_TREE_FILES, StatCache, walk_tree
from pytest_regbudget.cache.keys import cache_key
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Toolkit

TOOLKIT = Toolkit(
    origin="benchmark",
    ptxas=Path("/x/ptxas"),
    nvrtc=Path("/x/nvrtc"),
    nvrtc_version="12.9",
    ptxas_version="12.9",
)


def write_project(root: Path, headers: int) -> tuple[Path, str, CompileOptions]:
    per_dir = max(1, headers // 30)
    for i in range(headers):
        path = root / "include" / f"lib{i // per_dir}" / f"h{i}.h"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"__device__ inline float f{i}_{k}(float x) {{ return x * {k}.0f + {i}; }}\n" for k in range(30)
        )
        path.write_text(f"#pragma once\n{body}")
    (root / "kernels").mkdir()
    source = root / "kernels" / "k.cu"
    includes = "".join(f'#include "lib{j}/h{j * per_dir}.h"\n' for j in range(5))
    text = includes + 'extern "C" __global__ void k(float* y) { y[0] = f0_1(y[1]); }\n'
    source.write_text(text)
    return source, text, CompileOptions(include_dirs=(str(root / "include"),))


def best_ms(repeat: int, setup: Callable[[], object], run: Callable[[object], object]) -> float:
    times = []
    for _ in range(repeat):
        state = setup()
        start = time.perf_counter()
        run(state)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--headers", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.headers > MAX_TREE_FILES:
        raise SystemExit(f"--headers above {MAX_TREE_FILES}: the cache declines to fingerprint such a tree")
    with tempfile.TemporaryDirectory(prefix="regbudget-fp-") as tmp:
        root = Path(tmp)
        source, text, options = write_project(root, args.headers)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        # Files are remembered by their stat only once they have been still for 2 s.
        time.sleep(2.1)
        stat_file = root / "stat-cache"

        def key(digests: object, fresh: bool = True) -> str:
            # fresh: fingerprint the trees each time, as the first kernel of a run does (later kernels of
            # the run reuse a tree's digest: the last line).
            assert isinstance(digests, StatCache)
            return cache_key(source, text, "k", "sm_90", options, TOOLKIT, digests, fresh=fresh)

        cold = best_ms(args.repeat, lambda: StatCache(None), key)
        filled = StatCache(stat_file)
        key(filled)
        filled.save()

        warm_disk = best_ms(args.repeat, lambda: StatCache(stat_file), key)
        warm = best_ms(args.repeat, lambda: filled, key)
        again = best_ms(args.repeat, lambda: filled, lambda d: key(d, fresh=False))
        listing = best_ms(
            args.repeat,
            lambda: None,
            lambda _: [walk_tree(str(d), frozenset()) for d in (root / "include", source.parent)],
        )
        stat_kb = stat_file.stat().st_size / 1024
    print(f"{args.headers} headers ({size / 1e6:.1f} MB) in 30 include directories, median of {args.repeat}")
    print(f"  NVRTC key, cold (read + hash every file)   : {cold:8.1f} ms")
    print(f"  NVRTC key, warm (stat cache from disk)     : {warm_disk:8.1f} ms   stat cache {stat_kb:.0f} KB")
    print(f"  NVRTC key, warm (stat cache in memory)     : {warm:8.1f} ms")
    print(f"  NVRTC key, another kernel of the same run  : {again:8.1f} ms")
    print(f"  nvcc directory listings (names only)       : {listing:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
