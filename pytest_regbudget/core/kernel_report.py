"""What the verdict says about one kernel on one arch: the `KernelReport` (its facts, the budgets it broke,
its baseline deltas, its GPU figures), and the comparison of two sets of numbers (`Delta`, `compare`).
Plain, frozen data; the checks that fill it are checks.py, ratchet.py and verdict.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from msgspec import Struct, field

from .baseline import BaselineEntry, Key
from .blackwell import TmemUse
from .gpu_facts import GpuFacts, Timing
from .limits import Launch, Level
from .liveness import PeakLive
from .metrics import BY_NAME, RATCHETED, Figures, KernelResources, Metric, tolerance_of
from .occupancy import (
    Cliff,
    Occupancy,
)
from .sass_report import SassReport
from .text import one_line, safe_block
from .timing import Verdict as TimeStatus

Outcome = Literal["passed", "failed", "warned", "error"]
DeltaVerdict = Literal["worse", "better", "same", "tolerated"]
# none: no baseline file; new: no entry; new-release: entries for other toolkit releases only (a CUDA
# upgrade); compared: judged against its entry; toolkit-mismatch: an entry whose ptxas is of another release
# than its key says (a hand-edited file).
BaselineStatus = Literal["none", "new", "new-release", "compared", "toolkit-mismatch"]

# Metrics the ratchet compares, by name: the metrics table's (metrics.RATCHETED).
RATCHET_METRICS = tuple(m.name for m in RATCHETED)


class Delta(Struct, frozen=True):
    metric: str
    baseline: float
    now: float
    verdict: DeltaVerdict
    tolerance: float = 0

    @property
    def change(self) -> float:
        return self.now - self.baseline

    def text(self) -> str:
        return delta_text(self.metric, self.baseline, self.now)


def delta_text(metric: str, baseline: float, now: float) -> str:
    """`registers 72 -> 80 (+8)`; a fraction (occupancy) in percent."""
    found = BY_NAME.get(metric)
    if found is not None and found.unit == "fraction":
        return f"{metric} {baseline:.1%} -> {now:.1%} ({(now - baseline) * 100:+.1f} pts)"
    return f"{metric} {baseline:g} -> {now:g} ({now - baseline:+g})"


def compare(old: BaselineEntry, new: BaselineEntry, tolerance: Mapping[str, float]) -> list[Delta]:
    """Every ratchet metric that differs between `old` and `new`, judged with `tolerance`."""
    deltas = []
    for m in RATCHETED:
        pair = _values(old, new, m)
        if pair is None:
            continue  # unknown on either side (a binary's spills, an unread SASS): nothing to compare
        was, now = pair
        if was == now:
            continue
        # Where lower is worse, flip the signs so that "worse" means a positive change below.
        before, after = (was, now) if m.worse == "higher" else (-was, -now)
        allowed = tolerance_of(m, tolerance)
        if after < before:
            verdict: DeltaVerdict = "better"
        elif after - before <= allowed + 1e-9:
            verdict = "tolerated"
        else:
            verdict = "worse"
        deltas.append(Delta(m.name, was, now, verdict, allowed))
    return deltas


def _values(old: BaselineEntry, new: BaselineEntry, m: Metric) -> tuple[float, float] | None:
    """`m` in both entries; None where either does not know it. A fraction (occupancy) is compared at the same
    launch only: a kernel's occupancy is a property of (kernel, block size)."""
    if m.unit == "fraction":
        common = [at for at in new.occupancy if at in old.occupancy]
        return (old.occupancy[common[0]], new.occupancy[common[0]]) if common else None
    was, now = getattr(old, m.name), getattr(new, m.name)
    return None if was is None or now is None else (float(was), float(now))


class KernelReport(Struct, Figures, frozen=True):
    """One kernel on one arch in one test: what ptxas said, what it means, and the verdict. Its figures
    (`registers`, `spill_stores`, ...) are the Figures mixin's.

    Immutable: `verdict()` makes it whole, and `timed()` makes the final one of a timed kernel.
    """

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
    compiler: str = ""  # the source kind that produced the numbers: nvrtc, nvcc, triton, numba, binary...
    release: str = ""  # the toolkit release of those numbers ("12.9"): the baseline entry's
    options_hash: str = ""
    line: int | None = None  # the kernel's __global__ line in `source`, for annotations
    baseline: BaselineEntry | None = None
    baseline_status: BaselineStatus = "none"
    deltas: list[Delta] = field(default_factory=list)
    gpu: GpuFacts | None = None
    model_defects: list[str] = field(default_factory=list)
    timing: Timing | None = None
    baseline_time_ms: float | None = None
    gpu_note: str | None = None  # why GPU checks did not run, or what they lacked
    sass: SassReport | None = None
    # The most registers live at one instruction: its SASS's, or read for a failing register budget alone.
    peak_live: PeakLive | None = None
    diagnosis: list[str] = field(default_factory=list)
    cliff: Cliff | None = None
    key: Key | None = None  # the baseline's (source, kernel, variant, arch, release)
    options_changed: bool = False  # built with other options than its baseline entry (still enforced)
    build_settings: tuple[str, ...] = ()  # every flag but the variant's defines (KernelFacts.build_settings)
    settings_change: str | None = None  # what changed in them since the entry (ratchet.settings_change)
    found_under: Key | None = None  # the older key its entry was read under (BaselineRule.found_under)
    package: str | None = None  # the installed distribution its file belongs to ("liger_kernel 0.8.5")
    time_status: TimeStatus | None = None  # pass, fail, or ambiguous (noisy, decided on the median)
    messages: tuple[str, ...] = ()  # ptxas's warnings and performance-loss notes for this kernel
    setmaxnreg: tuple[tuple[str, int], ...] = ()  # its warpgroups' register targets, by direction
    # The PTX asks for roles the machine code does not keep: no USETMAXREG in its SASS where that was read,
    # else ptxas's C7508 for this kernel. The kernel then runs at its entry count throughout.
    setmaxnreg_dropped: bool = False
    other_releases: tuple[str, ...] = ()  # releases with an entry for this kernel, when its own has none
    tmem: TmemUse | None = None  # the tensor memory a block holds (tcgen05.alloc); None without one
    # The cluster (x, y, z) the kernel runs with: its compiled __cluster_dims__, else the marker's cluster=.
    cluster: tuple[int, int, int] | None = None
    # A Triton kernel's parameters as compiled and its autotune config (KernelFacts.triton_signature).
    triton_signature: tuple[tuple[str, str], ...] = ()
    triton_config: str | None = None

    @property
    def enforced(self) -> bool:
        """Held to a baseline entry of its own release, every number comparable (strict mode's test)."""
        r = self.resources
        return self.baseline_status == "compared" and r is not None and r.spills_known

    def unenforced_reason(self) -> str:
        """Why this kernel is not `enforced`, for strict mode's failure."""
        if self.resources is None:
            return "it did not build"
        if self.baseline_status == "new-release":
            others = ", ".join(self.other_releases)
            return f"the baseline has no CUDA {self.release} entry for it (only {others})"
        if self.baseline_status == "toolkit-mismatch" and self.baseline is not None:
            old, now = self.baseline.ptxas, self.ptxas_version
            return f"its entry was recorded with ptxas {old}, this build used {now}"
        if self.baseline_status in ("new", "none"):
            return "the baseline has no entry for it" if self.baseline_status == "new" else "no baseline file"
        if not self.resources.spills_known:
            return "its spills are unknown (a prebuilt binary records none)"
        return "it was not compared"

    @property
    def occupancy_at(self) -> str | None:
        """The launch the occupancy figure is for ("256 threads, 4096 B dynamic smem"), if there is one."""
        if self.occupancy is None or self.launch is None:
            return None
        dynamic = f", {self.dynamic_smem} B dynamic smem" if self.dynamic_smem else ""
        return f"{self.launch.threads} threads{dynamic}"

    @property
    def driver_occupancy(self) -> float | None:
        """The occupancy the driver grants at the launch size, where GPU checks ran."""
        if self.gpu is None or self.gpu.driver_blocks is None or self.occupancy is None:
            return None
        return self.occupancy.of_blocks(self.gpu.driver_blocks)

    @property
    def outcome(self) -> Outcome:
        if self.error is not None:
            return "error"
        if not self.violations:
            return "passed"
        return "warned" if self.level == "warn" else "failed"

    @property
    def label(self) -> str:
        return f"{one_line(self.kernel)} [{self.arch}]"

    def failure_text(self) -> str:
        """The lines a failing test shows: one per violated budget, then ptxas's own line.

        pytest prints them as they are, so no line may read as a GitHub workflow command.
        """
        # Two regressions of one kernel share their fix ("if intended, accept it with ..."), the last clause:
        # said once, last.
        fixes = [v.rpartition("; ")[2] if "; " in v else "" for v in self.violations]
        lines = [
            f"{self.label}: {v.rpartition('; ')[0] if fix and fix in fixes[i + 1 :] else v}"
            for i, (v, fix) in enumerate(zip(self.violations, fixes, strict=True))
        ]
        if self.resources is not None:
            lines.append(f"    ptxas: {self.resources.ptxas_line}")
        if self.triton_signature:
            lines.append(f"    triton signature: {triton_signature_text(self.triton_signature)}")
        lines += [f"    diagnosis: {d}" for d in self.diagnosis]
        return safe_block("\n".join(lines))


def triton_signature_text(signature: tuple[tuple[str, str], ...]) -> str:
    """`X: *fp16:16, N: i32, BLOCK: constexpr 1024`: a Triton kernel's parameters as compiled."""
    return ", ".join(f"{name}: {ty}" for name, ty in signature)


# Triton's Config.__str__ parts that are its defaults: left out of the name a report shows.
_CONFIG_DEFAULTS = frozenset({"num_ctas: 1", "maxnreg: None", "ir_override: None"})


def config_label(config: str) -> str:
    """`BLOCK: 256, num_warps: 2, num_stages: 3`: a Triton config (its str()) as a report names its build;
    the JSON record's triton_config holds the whole text."""
    return ", ".join(p for p in config.split(", ") if p not in _CONFIG_DEFAULTS)
