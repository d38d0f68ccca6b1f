"""A kernel's numbers against its budgets: registers, spills, stack, shared memory, launchability and
occupancy (`check`), each broken budget a sentence that names the number, the limit, the arch and the fix (a
launch bound, a register cap, less shared memory); and the driver's view against ptxas's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from msgspec.structs import replace

from .arch import get_arch
from .blackwell import (
    cluster_notes,
    cluster_violations,
    driver_cluster_violations,
    launch_cluster,
    tmem_bound,
    tmem_budget,
    tmem_launch,
    tmem_note,
    tmem_use,
)
from .diagnosis import callees_part, diagnose
from .gpu_facts import GpuFacts
from .kernel_report import KernelReport
from .limits import Launch, Level, Limits
from .liveness import PeakLive
from .metrics import CAP_KEYS, CAPPED, KernelResources
from .occupancy import (
    BARRIERS,
    BLOCKS,
    LAUNCH,
    REGISTERS,
    SHARED_MEMORY,
    WARPS,
    Occupancy,
    occupancy,
    register_cliff,
)
from .ptx import TmemAlloc
from .sass_report import SassReport, unmatched_trips


def _bytes(n: int) -> str:
    return f"{n:,} bytes"


def _occupancy(
    arch: str, r: KernelResources, threads: int, dynamic_smem: int, regs: int | None = None
) -> Occupancy:
    return occupancy(
        arch,
        r.registers if regs is None else regs,
        threads,
        r.smem,
        dynamic_smem,
        r.max_threads,
        barriers=r.barriers,
    )


def _register_cap(arch: str, r: KernelResources, launch: Launch, dynamic_smem: int) -> int | None:
    """The most registers per thread at which the registers alone let `launch` fit: what
    __launch_bounds__(threads, blocks) makes ptxas aim for."""
    need = launch.blocks or 1
    for regs in range(255, 0, -1):
        by_regs = _occupancy(arch, r, launch.threads, dynamic_smem, regs).blocks_by_registers
        if by_regs is None or by_regs >= need:
            return regs
    return None


def _smem_room(arch: str, r: KernelResources, threads: int, need: int) -> int:
    """The most static + dynamic shared memory per block at which `need` blocks fit by shared memory."""
    lim = get_arch(arch)

    def fits(total: int) -> bool:
        occ = occupancy(arch, 0, threads, total, 0, r.max_threads, barriers=r.barriers)
        return occ.blocks_by_smem is None or occ.blocks_by_smem >= need

    low, high = 0, lim.smem_per_block_optin
    if not fits(low):
        return 0
    while low < high:  # fits() only turns false as the size grows
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


def _launch_fixes(arch: str, r: KernelResources, launch: Launch, occ: Occupancy) -> list[str]:
    """One way out per limit that holds the launch back: easing any other limit would not help."""
    lim = occ.limits
    need = launch.blocks or 1
    per_sm = f"for {need} blocks per SM" if need > 1 else "for one block"
    if launch.threads > lim.max_threads_per_block:
        return [
            f"a block of at most {lim.max_threads_per_block:,} threads, the most {arch} allows (launch more "
            "blocks to cover the same work)"
        ]
    short = occ.short_of(need)
    if WARPS in short or BLOCKS in short:
        # The launch's shape cannot fit whatever the kernel uses; fix it first, then its resources.
        short = tuple(limit for limit in short if limit in (WARPS, BLOCKS))
    fixes = []
    for limit in short:
        if limit == LAUNCH:
            fixes.append(
                f"a block of at most {occ.max_threads:,} threads, the kernel's own bound "
                f"(__launch_bounds__/.maxntid), or __launch_bounds__({launch.threads}) in the kernel"
            )
        elif limit == WARPS:
            most = lim.max_warps_per_sm // need * lim.warp_size
            fixes.append(
                f"a block of at most {most:,} threads {per_sm} ({lim.max_warps_per_sm} warps per SM on "
                f"{arch}), or fewer blocks per SM in launch="
            )
        elif limit == REGISTERS:
            fixes.append(_register_fix(arch, r, launch, occ))
        elif limit == SHARED_MEMORY:
            room = _smem_room(arch, r, launch.threads, need)
            fixes.append(
                f"at most {room:,} bytes of shared memory per block {per_sm} (now {r.smem:,} static + "
                f"{occ.dynamic_shared_mem:,} dynamic): less static or dynamic shared memory, or a smaller "
                "block if its shared memory shrinks with it"
            )
        elif limit == BLOCKS:
            fixes.append(
                f"at most {lim.max_blocks_per_sm} blocks per SM in launch=, the most {arch} keeps resident "
                "whatever their size (bigger blocks reach the same threads per SM)"
            )
        elif limit == BARRIERS and lim.block_barriers_per_sm is not None:
            most = lim.block_barriers_per_sm // need
            fixes.append(
                f"at most {most} barriers per block {per_sm} (now {r.barriers}; {lim.block_barriers_per_sm} "
                f"per SM on {arch}): fewer named barriers (bar.sync ids)"
            )
    return fixes


def _register_fix(arch: str, r: KernelResources, launch: Launch, occ: Occupancy) -> str:
    bounds = f"{launch.threads}" if launch.blocks is None else f"{launch.threads}, {launch.blocks}"
    cap = _register_cap(arch, r, launch, occ.dynamic_shared_mem)
    lower = "" if cap is None else f"__launch_bounds__({bounds}) (ptxas then keeps it to {cap} registers), "
    fix = f"a smaller block, {lower}or fewer live values (less unrolling, smaller per-thread arrays)"
    if cap is not None and r.max_threads is None and r.min_blocks_per_sm is None:
        # With __launch_bounds__ in the source, ptxas ignores -maxrregcount (see diagnosis.py).
        fix += f"; -maxrregcount={cap} in ptxas_options caps every kernel of the file the same way"
    return fix


def _launch_violation(arch: str, r: KernelResources, launch: Launch, occ: Occupancy) -> str | None:
    problem = occ.shortfall(launch.blocks or 1)
    if problem is None:
        return None
    fixes = f"Fix: {'; and '.join(_launch_fixes(arch, r, launch, occ) or ['a smaller block'])}."
    if occ.failure is not None:
        return (
            f"launch={launch} cannot launch on {arch}: {occ.failure}; at run time this is "
            f"{_launch_error(occ)}. {fixes}"
        )
    return f"launch={launch}: {problem}. {fixes}"


def _launch_error(occ: Occupancy) -> str:
    """What the runtime answers a launch that no SM can hold."""
    if occ.block_size > occ.limits.max_threads_per_block:
        return "cudaErrorInvalidConfiguration"
    if occ.block_size > occ.max_threads or occ.blocks_by_registers == 0:
        return "cudaErrorLaunchOutOfResources"
    return "a launch failure"


def check(
    nodeid: str,
    kernel: str,
    arch: str,
    source: str,
    resources: KernelResources,
    limits: Limits,
    level: Level = "fail",
    gpu: GpuFacts | None = None,
    sass: SassReport | None = None,
    ptxas_options: Sequence[str] = (),
    tmem: TmemAlloc | None = None,
    peak: PeakLive | None = None,
) -> KernelReport:
    """Every budget of `limits` against ptxas's numbers; occupancy at the launch size when one is given.

    With `gpu` (the driver's view of this very cubin), the driver must agree with ptxas, and
    `min_occupancy` is judged on the occupancy the driver grants. With `tmem` (the PTX's tcgen05.alloc),
    the launch and `min_occupancy` are judged on no more blocks than hold their tensor memory at once.
    `peak` (the most registers live at one instruction, core/liveness.py) ends a register budget's failure.
    """
    r = limits
    # The SASS, where it was read, counts the local-memory instructions that the build could not.
    res = resources if sass is None else replace(resources, local_instructions=sass.local_instructions)
    violations: list[str] = []
    defects: list[str] = []
    use = tmem_use(tmem, r.tmem_cols)
    # A cluster= that contradicts the kernel or its arch is a wrong marker, not a budget a level can relax.
    misdeclared = cluster_violations(arch, get_arch(arch).major, res, r)
    if misdeclared:
        level = "fail"
    if r.max_regs is not None and res.registers > r.max_regs:
        where = f"; {peak.text()}" if peak else ""
        violations.append(f"registers {res.registers} > max_regs {r.max_regs}{where}")
    violations += _caps(res, r)
    violations += tmem_budget(use, r)
    occ = None
    if r.launch is not None:
        occ = _occupancy(arch, res, r.launch.threads, r.dynamic_smem)
        launch_problem = _launch_violation(arch, res, r.launch, occ)
        if launch_problem:
            violations.append(launch_problem)
        if tmem_problem := tmem_launch(use, r.launch):
            violations.append(tmem_problem)
        driver_occ: float | None = None
        if gpu is not None and gpu.driver_blocks is not None:
            driver_occ = occ.of_blocks(gpu.driver_blocks)
            if gpu.driver_blocks != occ.active_blocks:
                defects.append(
                    f"the driver grants {gpu.driver_blocks} blocks of {r.launch.threads} threads per SM on "
                    f"{gpu.device}, the static calculator {occ.active_blocks} ({occ.summary}): a defect of "
                    "pytest-regbudget's occupancy model, please report it with this line"
                )
        if r.min_occupancy is not None:
            achieved = occ.occupancy if driver_occ is None else driver_occ
            source_name = occ.summary if gpu is None else f"as the driver of {gpu.device} grants it"
            granted = occ.active_blocks if gpu is None or gpu.driver_blocks is None else gpu.driver_blocks
            working = tmem_bound(granted, use)
            if use is not None and working < granted:
                achieved = occ.of_blocks(working)
                source_name += f"; TMEM-bound: {use.arithmetic()}"
            if achieved < r.min_occupancy:
                violations.append(
                    f"occupancy {achieved:.1%} at {r.launch.threads} threads < min_occupancy "
                    f"{r.min_occupancy:.1%} ({source_name})"
                )
    cliff = None
    if r.launch is not None:
        cliff = register_cliff(
            arch,
            res.registers,
            r.launch.threads,
            res.smem,
            r.dynamic_smem,
            res.max_threads,
            barriers=res.barriers,
        )
    if r.hot_spills is not None and sass is not None and sass.spill_instructions_in_loops > r.hot_spills:
        loops = sorted({a.loop.where() for a in sass.local if a.spill and a.loop is not None})
        violations.append(
            f"spill instructions in loops {sass.spill_instructions_in_loops} > hot_spills {r.hot_spills} "
            f"(loop at {', '.join(loops)})"
        )
    if r.max_local_share is not None and sass is not None and sass.local_share > r.max_local_share:
        hottest = sass.local_lines()[:1]
        where = f"; hottest: {hottest[0][0]}, {hottest[0][1] / sass.local_executed:.0%}" if hottest else ""
        violations.append(
            f"local_share {sass.local_share:.1%} > max_local_share {r.max_local_share:.1%} (estimated from "
            f"the SASS{where})"
        )
    unmatched = (
        [] if sass is None else unmatched_trips([(lp.file, lp.lines) for lp in sass.loops], r.loop_trips)
    )
    if unmatched and sass is not None:
        found = ", ".join(sorted({lp.where() for lp in sass.loops})) or "none"
        violations.append(
            f"loop_trips names {', '.join(unmatched)}, where the SASS has no loop (its loops: {found}); "
            "fix: name a loop as the diagnosis does, or give the count on the archs where the loop is one"
        )
    violations += misdeclared + driver_cluster_violations(res, r, gpu, occ)
    if gpu is not None:
        violations += _driver_disagreements(res, gpu)
        top = max_block(arch, res)
        if gpu.view.max_threads != top:
            defects.append(
                f"the driver allows blocks of up to {gpu.view.max_threads} threads on {gpu.device}, the "
                f"static calculator {top}: a defect of pytest-regbudget's occupancy model, please report it"
            )
    return KernelReport(
        nodeid=nodeid,
        kernel=kernel,
        arch=arch,
        source=source,
        resources=res,
        launch=r.launch,
        dynamic_smem=r.dynamic_smem,
        occupancy=occ,
        violations=violations,
        level=level,
        gpu=gpu,
        model_defects=defects,
        sass=sass,
        peak_live=peak,
        diagnosis=[
            *diagnose(res, arch, sass, ptxas_options, r.dynamic_smem),
            *tmem_note(use, r),
            *cluster_notes(res, r),
        ],
        cliff=cliff,
        tmem=use,
        cluster=launch_cluster(res, r),
    )


def _caps(res: KernelResources, r: Limits) -> list[str]:
    """A sentence per metric over its cap: a group's cap (spills=) for each of its metrics first, then each
    metric's own. A binary that does not record spills cannot be held to a spill budget, which says so."""
    out = []
    unknown = [m for m in CAPPED if res.recorded(m) is None]
    if any(key in r.caps for m in unknown for key in (m.group, m.name)):
        out.append(
            "spill budgets cannot be checked: this binary does not record spill bytes. Check them where the "
            'kernel is compiled (source= with compiler="nvcc"), or drop the spill budget for the binary'
        )
    for key in CAP_KEYS:
        cap = r.caps.get(key)
        if cap is None:
            continue  # most kernels have a cap or two: a library's thousands are judged on every run
        for m in CAPPED:
            value = res.recorded(m) if key in (m.group, m.name) else None
            if value is not None and value > cap:
                # A callee's spills, which ptxas reports under the callee, are named: the kernel's own
                # "Function properties" line does not show them.
                part = callees_part(res, m) if m.callees else ""
                out.append(f"{m.label} {_bytes(value)} > {key} {cap}" + (f" ({part})" if part else ""))
    return out


def _driver_disagreements(res: KernelResources, gpu: GpuFacts) -> list[str]:
    """The driver loaded the cubin ptxas measured: any difference means the numbers are not this binary's."""
    out = []
    for what, ptxas_value, driver_value in (
        ("registers", res.registers, gpu.view.registers),
        ("local memory bytes", res.stack, gpu.view.local_bytes),
        ("static shared memory bytes", res.smem, gpu.view.shared_bytes),
    ):
        if ptxas_value != driver_value:
            out.append(
                f"the driver reports {driver_value} {what} for this cubin on {gpu.device}, ptxas reported "
                f"{ptxas_value}: the binary the driver runs is not the one measured"
            )
    return out


def max_block(arch: str, res: KernelResources) -> int:
    """The largest block that launches, as cuFuncGetAttribute(MAX_THREADS_PER_BLOCK) reports it.

    The driver folds .maxntid into that attribute but not .reqntid (seen on an H200 with Triton kernels,
    which declare .reqntid): a required block size is a launch rule, not a register limit.
    """
    lim = get_arch(arch)
    bound = math.prod(res.maxntid) if res.maxntid else None
    res = replace(res, max_threads=bound)
    top = min(lim.max_threads_per_block, bound or lim.max_threads_per_block)
    for threads in range(top, 0, -lim.warp_size if top % lim.warp_size == 0 else -1):
        if _occupancy(arch, res, threads, 0).active_blocks >= 1:
            return threads
    return 0
