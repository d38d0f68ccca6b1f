"""What an expert asks next about a kernel's local memory, answered from ptxas's report and the SASS.

Owns the diagnosis sentences, in the order an expert works: how much of what a thread runs is local
traffic (the estimate of core/estimate.py, in bands), a local array demoted to local memory, spills inside
loops, spills only outside loops, spills in the functions a kernel calls, a launch-bounds minimum that shared
memory makes unreachable, and a -maxrregcount that launch bounds override. Pure: no toolchain, no pytest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from . import names
from .metrics import SPLIT_BY_CALLEE, KernelResources, Metric
from .occupancy import occupancy
from .sass_report import DEFAULT_TRIPS, Call, LocalAccess, Loop, Role, SassReport

# The bands of the estimated local share (the part of a thread's executed instructions that are LDL/STL).
# Nsight Compute measured 55 % and 63 % on poly_eval squeezed to 64 and 32 registers (19x and 37x slower), and
# 1.2 % for spills on a branch a flag never takes: under 1 % costs little, above 10 % dominates the kernel.
NEGLIGIBLE, MODERATE = 0.01, 0.10


def band(share: float) -> str:
    return "negligible" if share < NEGLIGIBLE else "moderate" if share <= MODERATE else "costly"


def share_sentence(sass: SassReport) -> str | None:
    """`local loads/stores: about 63 % of executed instructions (estimated from the SASS): costly; hottest
    poly.cu:19 (91 %), ...`; None without local traffic."""
    if not sass.local_executed:
        return None
    hottest = ", ".join(
        f"{where} ({executed / sass.local_executed:.0%})" for where, executed in sass.local_lines()[:3]
    )
    unknown = [lp for lp in sass.loops if lp.trips and not lp.known]
    assumed = sorted({lp.where() for lp in unknown})
    first = min(unknown, key=lambda lp: lp.where(), default=None)
    example = f"{Path(first.file).name}:{first.lines[0]}" if first and first.file and first.lines else None
    state = f'; state the count with loop_trips={{"{example}": N}}' if example else ""
    trips = (
        f"; assumed {DEFAULT_TRIPS} trips where the code does not fix the count (loop at "
        f"{', '.join(assumed)}{state})"
        if assumed
        else ""
    )
    return (
        f"local loads/stores: about {percent(sass.local_share)} of executed instructions (estimated from "
        f"the SASS): {band(sass.local_share)}; hottest {hottest}{trips}."
    )


def percent(share: float) -> str:
    """`63%`, and a share under the lowest band with its tenths (`0.4%`); none at all is `0%`."""
    return f"{share:.1%}" if 0 < share < NEGLIGIBLE else f"{share:.0%}"


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
    spills = r.spill_bytes
    # 0. How much of what a thread runs is local traffic: the estimate's band, before where it is.
    if sass is not None and (first := share_sentence(sass)) is not None:
        out.append(first)
    # 1. Stack without spills: a local array the compiler could not keep in registers.
    if r.stack and not spills:
        arrays = [a for a in sass.local if not a.spill] if sass else []
        where = f" at {_lines(arrays)}" if sass else " (run with --regbudget-sass to name the line)"
        out.append(
            f"a local array lives in local memory ({r.stack} bytes of stack, no spills), "
            f"accessed{where}: almost always an index the compiler cannot fold. Fix: a compile-time "
            "trip count so the loop unrolls and the array becomes registers, or move the array to "
            "shared memory."
        )
    # 2./3. Where the spills are.
    if spills and sass is not None:
        out += _spill_sentences(sass)
    elif spills:
        stores, loads = r.spills
        out.append(
            f"{stores} bytes of spill stores and {loads} bytes of loads: run with --regbudget-sass (or give "
            "max_local_share) to estimate what share of the executed instructions they are, and where."
        )
    # 3b. Spills that ptxas reports under the functions the kernel calls.
    if r.spilling_callees:
        out.append(_callee_sentence(r))
    # 4. A minimum of resident blocks that shared memory already rules out.
    if r.min_blocks_per_sm and r.max_threads:
        occ = occupancy(arch, r.registers, r.max_threads, r.smem, dynamic_smem, r.max_threads)
        if occ.blocks_by_smem is not None and occ.blocks_by_smem < r.min_blocks_per_sm:
            out.append(
                f"__launch_bounds__({r.max_threads}, {r.min_blocks_per_sm}) asks for {r.min_blocks_per_sm} "
                f"blocks per SM, but {r.smem + dynamic_smem:,} bytes of shared memory per block allow "
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


# What an extern call in a kernel is, and how it goes away.
_KNOWN_CALLS = {
    "__assertfail": (
        "assert() compiled without NDEBUG",
        'build with -DNDEBUG (defines={"NDEBUG": 1}, or -DNDEBUG in the nvcc flags)',
    ),
    "vprintf": (
        "printf() in device code",
        "take the printf out of the kernel, or compile it out of production builds",
    ),
    "malloc": ("device-side malloc()", "allocate on the host and pass the buffer in"),
    "free": ("device-side free()", "allocate on the host and pass the buffer in"),
}


def callee_names(sass: SassReport | None, callees: Sequence[str] = ()) -> list[str]:
    """The extern functions a kernel calls: the ELF's call graph where known, else what nvdisasm declares."""
    return list(callees) or (list(sass.externs) if sass else [])


def explain_callees(names: Sequence[str]) -> str:
    """`__assertfail (assert() compiled without NDEBUG; fix: build with -DNDEBUG ...)`, one per callee."""
    parts = []
    for name in names:
        what, fix = _KNOWN_CALLS.get(name, (None, None))
        parts.append(f"{name} ({what}; fix: {fix})" if what else name)
    return ", ".join(parts)


def function_name(name: str) -> str:
    """A function as ptxas names it, readable: `_Z5heavyPKfiii` -> `heavy(float const*, int, int, int)`; a
    relocatable build's clone (`_Z6middlePKfiii$5`) by its function's name."""
    return names.demangle(name.partition("$")[0]) if name.startswith("_Z") else name


def callees_part(r: KernelResources, metric: Metric) -> str:
    """`996 bytes of them in the __noinline__ callee heavy(float const*, int, int, int)`: the callees' part of
    a spill figure (`metric`, one of SPLIT_BY_CALLEE), by callee; "" where they have none of it."""
    parts = [(c.name, n) for c in r.spilling_callees if (n := c.count(metric))]
    if not parts:
        return ""
    total = sum(n for _, n in parts)
    if len(parts) == 1:
        return f"{total:,} bytes of them in the __noinline__ callee {function_name(parts[0][0])}"
    listed = ", ".join(f"{n:,} in {function_name(name)}" for name, n in parts)
    return f"{total:,} bytes of them in __noinline__ callees: {listed}"


def _callee_sentence(r: KernelResources) -> str:
    # The metrics table's spill rows, stores then loads, rather than each spelled out here.
    stores, loads = SPLIT_BY_CALLEE
    listed = ", ".join(
        f"{function_name(c.name)} {c.count(stores):,}/{c.count(loads):,}" for c in r.spilling_callees
    )
    return (
        f"{r.callees_count(stores):,} of the {r.count(stores):,} bytes of spill stores and "
        f"{r.callees_count(loads):,} of the {r.count(loads):,} bytes of loads are in the __noinline__ "
        f"functions the kernel calls (stores/loads: {listed}), which ptxas reports under each function; "
        "they run on every call. Fix: let the compiler inline the function (drop __noinline__) or lower its "
        "register need: ptxas holds a function to the register limit of the kernel it is compiled with "
        "(__launch_bounds__, -maxrregcount)."
    )


def _spill_sentences(sass: SassReport) -> list[str]:
    """The spills grouped by the innermost loop that holds them and the warpgroup role they run in, the
    costliest first, each with the fix its cause calls for."""
    spilled = [a for a in sass.local if a.spill]
    in_loops = [a for a in spilled if a.loop is not None]
    out: list[str] = []
    groups: dict[tuple[str, Role | None], list[LocalAccess]] = {}
    for a in in_loops:
        assert a.loop is not None
        # One source loop may be several SASS loops (an unrolled body and its remainder): named once.
        groups.setdefault((a.loop.where(), a.role), []).append(a)
    for (where, role), accesses in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0][0])):
        loops = {a.loop for a in accesses if a.loop is not None}
        # A library's small loop (a pipeline's barrier wait) is named with the loop of the user's around it.
        around = _enclosing(sass, loops, where)
        within = f" (within the loop at {around})" if around else ""
        # The instructions' own lines where they are in another file than the loop (a helper it calls).
        elsewhere = [a for a in accesses if a.line and a.loop is not None and a.file != a.loop.file]
        at = f", at {_lines(elsewhere)}" if elsewhere else ""
        in_role = f", in the {role.describe()}," if role else ""
        # One source loop that became several SASS loops (an inlined helper's loop in each branch that calls
        # it, an unrolled body and its remainder): each copy's count, as each iteration runs one of them.
        copies = sass.source_loops()[where]
        counts = sorted(sum(1 for a in accesses if a.loop == lp) for lp in copies)
        in_copies = (
            f", in {len(copies)} copies ({', '.join(map(str, counts[:-1]))} and {counts[-1]} per iteration),"
            if len(copies) > 1
            else ""
        )
        out.append(
            f"{len(accesses)} spill/refill instruction(s) inside the loop at {where}{within}{at}{in_role}"
            f"{in_copies} "
            f"run on every iteration ({len(in_loops)} of {len(spilled)} spill instructions are in loops): "
            f"this is where the spills cost. {_loop_fix(sass, loops, role)}"
        )
    outside = [a for a in spilled if a.loop is None]
    if outside:
        roles = sorted({a.role.describe() for a in outside if a.role})
        in_roles = f"; in the {' and the '.join(roles)}" if roles else ""
        # Once per thread is cheap only where little else runs than them: a fully unrolled kernel's
        # straight-line spills can be most of what it executes (poly_eval: 63 %).
        share = sass.local_share
        cost = (
            "and cost little"
            if band(share) == "negligible"
            else f"but local traffic is about {percent(share)} of what the thread runs ({band(share)})"
        )
        out.append(
            f"{'all ' if not in_loops else ''}{len(outside)} spill instruction(s) are outside loops (at "
            f"{_lines(outside)}{in_roles}): they run at most once per thread, {cost}."
        )
    explained = {c.address for a in in_loops for c in _calls_in(sass, {a.loop} if a.loop else set())}
    # A call in another role than the spills' (a consumer's assert, the producer's spills) saves none of them.
    spill_roles = {a.role for a in spilled}
    others = [
        c for c in sass.calls if c.address not in explained and (c.role is None or c.role in spill_roles)
    ]
    if others and spilled:
        names = callee_names(sass)
        out.append(
            f"the kernel also calls {' or '.join(names) or 'an extern function'} at "
            f"{', '.join(sorted({c.where() for c in others}, key=_place_key))}: each call saves the "
            f"registers live across it to local memory. {_call_fix(names)}"
        )
    return out


def _enclosing(sass: SassReport, loops: set[Loop], where: str) -> str | None:
    """Where the innermost loop around all of `loops` that is written elsewhere than `where` is."""
    around = [
        lp
        for lp in sass.loops
        if lp.where() != where and all(lp.contains(inner.start) and lp.size > inner.size for inner in loops)
    ]
    return min(around, key=lambda lp: lp.size).where() if around else None


def _calls_in(sass: SassReport, loops: set[Loop]) -> list[Call]:
    return [c for c in sass.calls if any(lp.contains(c.address) for lp in loops)]


def _call_fix(names: Sequence[str]) -> str:
    fixes = [_KNOWN_CALLS[n][1] for n in names if n in _KNOWN_CALLS]
    return (
        f"Fix: {'; '.join(fixes)}." if fixes else "Fix: inline the callee or move the call out of the kernel."
    )


def _loop_fix(sass: SassReport, loops: set[Loop], role: Role | None) -> str:
    """The fix for spills in `loops`: the call they save registers around, else the role's budget, else the
    loop's live values."""
    calls = _calls_in(sass, loops)
    if calls:
        names = callee_names(sass)
        what = " or ".join(f"{n} ({_KNOWN_CALLS[n][0]})" if n in _KNOWN_CALLS else n for n in names)
        return (
            f"The loop calls {what or 'an extern function'} at "
            f"{', '.join(sorted({c.where() for c in calls}, key=_place_key))}, and the registers live across "
            f"the call are saved to local memory around it. {_call_fix(names)}"
        )
    if role is not None and role.direction == "dec":
        return (
            f"The producer runs on {role.count} registers after setmaxnreg.dec {role.count}. Fix: raise the "
            f"dec target (to {role.count + 8} or more; the consumers' inc must still fit the block's pool, "
            "see setmaxnreg_threads), or keep fewer values live in the producer's loop."
        )
    if role is not None:
        return (
            f"Register pressure in the consumers' mainloop at {role.count} registers (setmaxnreg.inc "
            f"{role.count}). Fix: fewer live values in that loop (a smaller tile or accumulator fragment, "
            "fewer stages in flight), or a higher inc target if the producer's dec leaves room."
        )
    return (
        "Fix: fewer live values in that loop (less unrolling, smaller per-thread arrays) or a looser "
        "__launch_bounds__/maxrregcount."
    )
