"""KernelResources + Limits -> a KernelReport whose violations are sentences a user can act on.

Owns the wording of every budget verdict: which number, which limit, which arch, and the next step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .baseline import Entry
from .markers import Launch, Level, Limits
from .occupancy import Occupancy, occupancy
from .ptxas import KernelResources

Outcome = Literal["passed", "failed", "warned", "error"]
DeltaVerdict = Literal["worse", "better", "same", "tolerated"]
BaselineStatus = Literal["none", "new", "compared", "toolkit-mismatch"]

# Metrics the ratchet compares: for all but occupancy, more is worse.
RATCHET_METRICS = ("registers", "spill_stores", "spill_loads", "stack", "smem", "occupancy")


@dataclass(frozen=True)
class Delta:
    metric: str
    baseline: float
    now: float
    verdict: DeltaVerdict
    tolerance: float = 0

    @property
    def change(self) -> float:
        return self.now - self.baseline

    def text(self) -> str:
        """`registers 72 -> 80 (+8)`; occupancy in percent."""
        if self.metric == "occupancy":
            return f"occupancy {self.baseline:.1%} -> {self.now:.1%} ({self.change * 100:+.1f} pts)"
        return f"{self.metric} {self.baseline:g} -> {self.now:g} ({self.change:+g})"


def compare(old: Entry, new: Entry, tolerance: Mapping[str, float]) -> list[Delta]:
    """Every ratchet metric that differs between `old` and `new`, judged with `tolerance`."""
    deltas = []
    for metric in RATCHET_METRICS:
        if metric == "occupancy":
            if old.occupancy is None or new.occupancy is None or old.occupancy_at != new.occupancy_at:
                continue
            # Lower occupancy is worse: flip the sign so "worse" means a positive change below.
            before, after = -old.occupancy, -new.occupancy
            was, now = old.occupancy, new.occupancy
        else:
            before = was = float(getattr(old, metric))
            after = now = float(getattr(new, metric))
        if was == now:
            continue
        allowed = tolerance.get(metric, tolerance.get("spills", 0.0) if metric.startswith("spill") else 0.0)
        if after < before:
            verdict: DeltaVerdict = "better"
        elif after - before <= allowed + 1e-9:
            verdict = "tolerated"
        else:
            verdict = "worse"
        deltas.append(Delta(metric, was, now, verdict, allowed))
    return deltas


@dataclass
class KernelReport:
    """One kernel on one arch in one test: what ptxas said, what it means, and the verdict."""

    nodeid: str
    kernel: str
    arch: str
    source: str
    resources: KernelResources | None
    launch: Launch | None = None
    dynamic_smem: int = 0
    occupancy: Occupancy | None = None
    violations: list[str] = field(default_factory=list)
    level: Level = "fail"
    error: str | None = None  # a compile error, when there are no resources
    ptxas_version: str = ""
    nvrtc_version: str = ""
    options_hash: str = ""
    line: int | None = None  # the kernel's __global__ line in `source`, for annotations
    baseline: Entry | None = None
    baseline_status: BaselineStatus = "none"
    deltas: list[Delta] = field(default_factory=list)

    @property
    def registers(self) -> int | None:
        return self.resources.registers if self.resources else None

    @property
    def spill_stores(self) -> int | None:
        return self.resources.spill_stores if self.resources else None

    @property
    def spill_loads(self) -> int | None:
        return self.resources.spill_loads if self.resources else None

    @property
    def stack_frame(self) -> int | None:
        return self.resources.stack_frame if self.resources else None

    @property
    def shared_mem(self) -> int | None:
        return self.resources.shared_mem if self.resources else None

    @property
    def outcome(self) -> Outcome:
        if self.error is not None:
            return "error"
        if not self.violations:
            return "passed"
        return "warned" if self.level == "warn" else "failed"

    @property
    def label(self) -> str:
        return f"{self.kernel} [{self.arch}]"

    def failure_text(self) -> str:
        """The lines a failing test shows: one per violated budget, then ptxas's own line."""
        lines = [f"{self.label}: {v}" for v in self.violations]
        if self.resources is not None:
            lines.append(f"    ptxas: {self.resources.ptxas_line}")
        return "\n".join(lines)


def _bytes(n: int) -> str:
    return f"{n:,} bytes"


def _occupancy(
    arch: str, r: KernelResources, threads: int, dynamic_smem: int, regs: int | None = None
) -> Occupancy:
    return occupancy(
        arch,
        r.registers if regs is None else regs,
        threads,
        r.shared_mem,
        dynamic_smem,
        r.max_threads,
        barriers=r.barriers,
    )


def _register_cap(arch: str, r: KernelResources, launch: Launch, dynamic_smem: int) -> int | None:
    """The most registers per thread at which `launch` fits: what __launch_bounds__ makes ptxas aim for."""
    need = launch.blocks or 1
    for regs in range(255, 0, -1):
        if _occupancy(arch, r, launch.threads, dynamic_smem, regs).active_blocks >= need:
            return regs
    return None


def _launch_violation(arch: str, r: KernelResources, launch: Launch, occ: Occupancy) -> str | None:
    problem = occ.shortfall(launch.blocks or 1)
    if problem is None:
        return None
    bounds = f"{launch.threads}" if launch.blocks is None else f"{launch.threads}, {launch.blocks}"
    cap = _register_cap(arch, r, launch, occ.dynamic_shared_mem)
    cap_text = f" (ptxas then keeps it to {cap} registers)" if cap and cap < r.registers else ""
    fixes = (
        f"Fix: a smaller block, __launch_bounds__({bounds}){cap_text}, or fewer live values "
        "(less unrolling, smaller per-thread arrays)."
    )
    if occ.failure is not None:
        return (
            f"launch={launch} cannot launch on {arch}: {occ.failure}; at run time this is "
            f"cudaErrorLaunchOutOfResources. {fixes}"
        )
    return f"launch={launch}: {problem}. {fixes}"


def check(
    nodeid: str,
    kernel: str,
    arch: str,
    source: str,
    resources: KernelResources,
    limits: Limits,
    level: Level = "fail",
) -> KernelReport:
    """Every budget of `limits` against ptxas's numbers; occupancy at the launch size when one is given."""
    r = limits
    res = resources
    violations: list[str] = []
    if r.max_regs is not None and res.registers > r.max_regs:
        violations.append(f"registers {res.registers} > max_regs {r.max_regs}")
    for metric, value in (("spill stores", res.spill_stores), ("spill loads", res.spill_loads)):
        if r.spills is not None and value > r.spills:
            violations.append(f"{metric} {_bytes(value)} > spills {r.spills}")
    if r.spill_stores is not None and res.spill_stores > r.spill_stores:
        violations.append(f"spill stores {_bytes(res.spill_stores)} > spill_stores {r.spill_stores}")
    if r.spill_loads is not None and res.spill_loads > r.spill_loads:
        violations.append(f"spill loads {_bytes(res.spill_loads)} > spill_loads {r.spill_loads}")
    if r.stack is not None and res.stack_frame > r.stack:
        violations.append(f"stack frame {_bytes(res.stack_frame)} > stack {r.stack}")
    if r.smem is not None and res.shared_mem > r.smem:
        violations.append(f"static shared memory {_bytes(res.shared_mem)} > smem {r.smem}")
    occ = None
    if r.launch is not None:
        occ = _occupancy(arch, res, r.launch.threads, r.dynamic_smem)
        launch_problem = _launch_violation(arch, res, r.launch, occ)
        if launch_problem:
            violations.append(launch_problem)
        if r.min_occupancy is not None and occ.occupancy < r.min_occupancy:
            violations.append(
                f"occupancy {occ.occupancy:.1%} at {r.launch.threads} threads < min_occupancy "
                f"{r.min_occupancy:.1%} ({occ.summary})"
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
    )
