"""What an expert asks next about a kernel's local memory, answered from ptxas's report and the SASS.

Owns the diagnosis sentences, in the order an expert works: a local array demoted to local memory, spills
inside loops, spills only outside loops, a launch-bounds minimum that shared memory makes unreachable, and a
-maxrregcount that launch bounds override. Pure: no toolchain, no pytest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .occupancy import occupancy
from .ptxas import KernelResources
from .sass import LocalAccess, SassReport


def _lines(accesses: Sequence[LocalAccess], limit: int = 4) -> str:
    places = sorted({a.where() for a in accesses if a.line}, key=_place_key)
    if not places:
        return "an unknown line"
    more = f" and {len(places) - limit} more" if len(places) > limit else ""
    return ", ".join(places[:limit]) + more


def _place_key(place: str) -> tuple[str, int]:
    name, _, line = place.rpartition(":")
    return (name, int(line.split("-")[0])) if line.split("-")[0].isdigit() else (place, 0)


def diagnose(
    resources: KernelResources,
    arch: str,
    sass: SassReport | None,
    ptxas_options: Sequence[str] = (),
    dynamic_smem: int = 0,
) -> list[str]:
    """Sentences that name file:line where the SASS is known, each with the fix to try."""
    out: list[str] = []
    r = resources
    if not r.spills_known:
        return []  # a binary: without spill figures no rule can tell arrays from spills
    spills = r.spill_stores + r.spill_loads
    # 1. Stack without spills: a local array the compiler could not keep in registers.
    if r.stack_frame and not spills:
        arrays = [a for a in sass.local if not a.spill] if sass else []
        where = f" at {_lines(arrays)}" if sass else " (run with --regbudget-sass to name the line)"
        out.append(
            f"a local array lives in local memory ({r.stack_frame} bytes of stack, no spills), "
            f"accessed{where}: almost always an index the compiler cannot fold. Fix: a compile-time "
            "trip count so the loop unrolls and the array becomes registers, or move the array to "
            "shared memory."
        )
    # 2./3. Where the spills are.
    if spills and sass is not None:
        spilled = [a for a in sass.local if a.spill]
        in_loops = [a for a in spilled if a.loop is not None]
        if in_loops:
            # One source loop may be several SASS loops (an unrolled body and its remainder): named once, by
            # its own lines, innermost (deepest) nest first.
            by_source: dict[str, list[LocalAccess]] = {}
            depth: dict[str, int] = {}
            for a in in_loops:
                assert a.loop is not None
                by_source.setdefault(a.loop.where(), []).append(a)
                depth[a.loop.where()] = max(depth.get(a.loop.where(), 0), a.loop.depth)
            for where in sorted(by_source, key=lambda w: (-depth[w], w)):
                count = len(by_source[where])
                nest = f" (nesting depth {depth[where]})" if depth[where] > 1 else ""
                out.append(
                    f"{count} spill/refill instruction(s) inside the loop at {where}{nest} run on every "
                    f"iteration ({len(in_loops)} of {len(spilled)} spill instructions are in loops): this is "
                    "where the spills cost. Fix: fewer live values in that loop (less unrolling, smaller "
                    "per-thread arrays) or a looser __launch_bounds__/maxrregcount."
                )
        elif spilled:
            out.append(
                f"all {len(spilled)} spill instruction(s) are outside loops (at {_lines(spilled)}): they run "
                "at most once per thread and are probably cheap."
            )
    elif spills:
        out.append(
            f"{r.spill_stores} bytes of spill stores and {r.spill_loads} bytes of loads: run with "
            "--regbudget-sass to see whether they sit in a loop (costly) or not (probably cheap)."
        )
    # 4. A minimum of resident blocks that shared memory already rules out.
    if r.min_blocks_per_sm and r.max_threads:
        occ = occupancy(arch, r.registers, r.max_threads, r.shared_mem, dynamic_smem, r.max_threads)
        if occ.blocks_by_smem is not None and occ.blocks_by_smem < r.min_blocks_per_sm:
            out.append(
                f"__launch_bounds__({r.max_threads}, {r.min_blocks_per_sm}) asks for {r.min_blocks_per_sm} "
                f"blocks per SM, but {r.shared_mem + dynamic_smem:,} bytes of shared memory per block allow "
                f"only {occ.blocks_by_smem} on {arch}: the minimum is unreachable and only caps registers"
                + (f" (and causes {spills} bytes of spills)" if spills else "")
                + f". Fix: lower it to {occ.blocks_by_smem} or drop it."
            )
    # 5. -maxrregcount against launch bounds: the bounds win, and ptxas says so.
    cap = next(
        (int(m.group(1)) for o in ptxas_options if (m := re.search(r"maxrregcount[= ](\d+)", o))), None
    )
    if cap is not None and (r.max_threads or r.min_blocks_per_sm):
        evidence = (
            f"it uses {r.registers} > {cap} registers"
            if r.registers > cap
            else f"its own limit decides its {r.registers} registers"
        )
        out.append(
            f"-maxrregcount={cap} does not apply: the kernel's __launch_bounds__ win and ptxas computes the "
            f"register limit from them ({evidence}). To cap it, use __launch_bounds__'s minimum-blocks "
            "argument or __maxnreg__."
        )
    return out
