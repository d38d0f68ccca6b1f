"""How many kernel checks the pull-request comment lists before GitHub's limit, for this checkout and, with
--against, another one, on one generated suite.

    python benchmarks/comment_capacity.py                        # this checkout
    python benchmarks/comment_capacity.py --against /work/main   # and another checkout, in the same run

The suite: 500 kernels in 50 files, each checked on sm_80 and sm_90 (1,000 checks), every one regressed as
example_project's median7x7 is by MIN_BLOCKS 8 (fewer registers, spill stores and loads and stack grown,
occupancy up), so that each fails. Two shapes: `same`, where a kernel's changes are the same on both archs,
and `differ`, where they differ (sm_80 keeps 8 more registers), so no two checks can share a row. The records
are made by the package's own judging (core/checks.py, core/ratchet.py, report/record.py), in a child
process of each checkout, and the comment by its `markdown_comment`, off GitHub Actions and, where the
checkout links files, on it (a pull request's event). A check is listed when a table row names its kernel
and its arch.

docs/ci.md ("The Markdown report") quotes its output.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KERNELS, ARCHS, PER_FILE = 500, ("sm_80", "sm_90"), 10
PTXAS = """\
ptxas info    : Compiling entry function '{kernel}' for '{arch}'
ptxas info    : Function properties for {kernel}
    {stack} bytes stack frame, {stores} bytes spill stores, {loads} bytes spill loads
ptxas info    : Used {regs} registers, used 0 barriers
"""


def _judged(kernel: str, source: str, arch: str, line: int, numbers: tuple[int, int, int, int]) -> Any:
    """The KernelReport of `kernel` with (registers, spill stores, spill loads, stack), as the plugin makes
    it from ptxas's lines."""
    from msgspec.structs import replace

    from pytest_regbudget.core.checks import check
    from pytest_regbudget.core.limits import Launch, Limits
    from pytest_regbudget.core.ptxas import parse_ptxas_output

    regs, stores, loads, stack = numbers
    text = PTXAS.format(kernel=kernel, arch=arch, regs=regs, stores=stores, loads=loads, stack=stack)
    nodeid = f"tests/test_filters.py::test_{kernel}[{arch}]"
    report = check(
        nodeid, kernel, arch, source, parse_ptxas_output(text)[kernel], Limits(launch=Launch(256)), "fail"
    )
    key = (source.removeprefix("/ci/project/"), kernel, "-", arch, "12.9")
    return replace(report, ptxas_version="12.9.86", compiler="nvrtc", release="12.9", key=key, line=line)


def records(shape: str) -> list[Any]:
    """The suite's records, judged as the plugin judges them (run in the checkout being measured)."""
    from pytest_regbudget.core.ratchet import BaselineRule, entry_of_report, ratchet
    from pytest_regbudget.report.record import to_record

    out = []
    for i in range(KERNELS):
        kernel, source = f"median_filter_{i:04d}", f"/ci/project/kernels/filters_{i // PER_FILE:02d}.cu"
        line = 22 + 40 * (i % PER_FILE)
        for arch in ARCHS:
            extra = 8 if shape == "differ" and arch == "sm_80" else 0
            old = entry_of_report(_judged(kernel, source, arch, line, (40 + extra, 112, 80, 120)))
            rule = BaselineRule(old, recorded=True, name="regbudget-baseline.toml")
            now = _judged(kernel, source, arch, line, (32 + extra, 584, 584, 296))
            out.append(to_record(ratchet(now, rule)))
    return out


def listed(comment: str) -> int:
    """The checks the comment's table rows name: (kernel, arch) pairs."""
    pairs: set[tuple[str, str]] = set()
    for line in comment.splitlines():
        found = re.match(r"\| [^|]* \| `(median_filter_\d{4})` \| ([^|]*) \|", line)
        if found:
            pairs.update((found[1], arch) for arch in re.findall(r"sm_\d+", found[2]))
    return len(pairs)


def child() -> None:
    """Measure the checkout this process imports: one JSON line per shape and place."""
    from pytest_regbudget.report import writers

    links_of = None
    try:
        from pytest_regbudget.report.links import github_links

        links_of = github_links
    except ImportError:  # a checkout that links nothing
        pass
    takes = inspect.signature(writers.markdown_comment).parameters
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        event = Path(tmp) / "event.json"
        event.write_text(json.dumps({"pull_request": {"head": {"sha": "0123456789abcdef" * 2 + "01234567"}}}))
        github = {
            "GITHUB_ACTIONS": "true",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": "someone/cuda-filters",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_RUN_ID": "12345678901",
        }
        for shape in ("same", "differ"):
            recs = records(shape)
            places: dict[str, dict[str, Any]] = {"local": {}}
            if links_of is not None:
                places["github"] = {"links": links_of(github)}
            for place, extra in places.items():
                kwargs = {"rootdir": "/ci/project", **extra} if "rootdir" in takes else {}
                comment = writers.markdown_comment(recs, **kwargs)
                result[f"{shape}/{place}"] = {
                    "chars": len(comment),
                    "listed": listed(comment),
                    "checks": len(recs),
                    "linked": len(re.findall(r"^\|.*\]\(http", comment, re.M)),  # rows whose file links
                }
    print(json.dumps(result))


def measure(tree: Path) -> dict[str, dict[str, int]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr}")
    measured: dict[str, dict[str, int]] = json.loads(done.stdout)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout of pytest-regbudget")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    trees = [("this checkout", ROOT)] + ([("--against", args.against.resolve())] if args.against else [])
    print(f"{KERNELS} kernels x {len(ARCHS)} archs, every check regressed (failing)")
    for name, tree in trees:
        for case, m in measure(tree).items():
            shown = f"{m['listed']:5,} of {m['checks']:,} checks listed in {m['chars']:,} chars"
            print(f"{name:14} {case:14} {shown}, {m['linked']} rows linked")


if __name__ == "__main__":
    main()
