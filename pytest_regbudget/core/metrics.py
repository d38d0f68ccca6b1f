"""The metrics a kernel is measured by, one row each, and `KernelResources`, the record of one kernel's
numbers on one arch.

A row says everything the rest of the package needs to know about a metric: its unit, which way is worse,
its words in a sentence and in the terminal, its key in the JSON report and in the baseline file, the key
that tolerates a change of it and the budget key that caps it. The ratchet (kernel_report.compare), the
budgets (checks.py), the marker's keys (project/markers.py), the baseline file (baseline.py), the reports and
the check of a report read back (update/shards.py) read the rows rather than spell each metric out. Adding
a metric is a row here, a field of `KernelResources` that its parser fills, and its tests.

In memory a metric has one name (`Metric.name`): the attribute of `KernelResources` and of the baseline
entry, the ratchet's `Delta.metric`, its tolerance key and, for a capped one, its budget key. The files
keep the names they have always had: `stack_frame` and `shared_mem` in the JSON report (`Metric.field`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from msgspec import Struct

Unit = Literal["registers", "bytes", "instructions", "fraction"]
Worse = Literal["higher", "lower"]


class Metric(Struct, frozen=True):
    name: str  # see the module docstring
    unit: Unit
    worse: Worse  # which way a change is a regression
    label: str  # in a sentence: "spill loads 36 bytes > spill_loads 30"
    column: str  # in the terminal's table, where a change shows: "spill ld +8"
    field: str  # the JSON report's key
    baseline: str | None = None  # the baseline file's key; None: not kept there
    # The key of tolerance= and ini regbudget_tolerance; None: the ratchet does not hold the metric.
    tolerance: str | None = None
    group: str | None = None  # a tolerance and budget key that covers it with the other metrics of the group
    capped: bool = False  # a marker key of its name bounds it (stack=64)
    compared: bool = False  # `regbudget compare` and a run of several toolkits show its changes
    # Two builds of one kernel variant must agree on it: they share one baseline entry.
    agree: bool = False
    # The name of its callees' part (the bytes ptxas reports under the __noinline__ functions a kernel
    # calls), in KernelResources, the baseline entry and the JSON report; None: it has no such part.
    callees: str | None = None
    note: str = ""  # where it shows, and why there


SPILLS = "spills"  # the group of the spill metrics: spills=16 bounds (and tolerates) each of them

METRICS: tuple[Metric, ...] = (
    Metric(
        "registers",
        "registers",
        "higher",
        "registers",
        "regs",
        "registers",
        baseline="registers",
        tolerance="registers",
        compared=True,
        agree=True,
        note="ptxas's 'Used N registers'; its budget is max_regs, with the register file's arithmetic",
    ),
    Metric(
        "spill_stores",
        "bytes",
        "higher",
        "spill stores",
        "spill st",
        "spill_stores",
        baseline="spill_stores",
        tolerance="spill_stores",
        group=SPILLS,
        capped=True,
        compared=True,
        agree=True,
        callees="spill_stores_callees",
        note="unknown (None, no line in the baseline) for a prebuilt binary that does not record spills",
    ),
    Metric(
        "spill_loads",
        "bytes",
        "higher",
        "spill loads",
        "spill ld",
        "spill_loads",
        baseline="spill_loads",
        tolerance="spill_loads",
        group=SPILLS,
        capped=True,
        compared=True,
        agree=True,
        callees="spill_loads_callees",
        note="as spill_stores",
    ),
    Metric(
        "stack",
        "bytes",
        "higher",
        "stack frame",
        "stack",
        "stack_frame",
        baseline="stack",
        tolerance="stack",
        capped=True,
        compared=True,
        agree=True,
        note="ptxas's 'N bytes stack frame' (cuobjdump's STACK for a binary)",
    ),
    Metric(
        "smem",
        "bytes",
        "higher",
        "static shared memory",
        "smem",
        "shared_mem",
        baseline="smem",
        tolerance="smem",
        capped=True,
        agree=True,
        note="static only: the launch's dynamic shared memory is a budget's (dynamic_smem)",
    ),
    Metric(
        "const_mem",
        "bytes",
        "higher",
        "constant memory",
        "cmem",
        "const_mem",
        baseline="const_mem",
        note="recorded, not held: bank 0 holds the parameters, which a signature change moves",
    ),
    Metric(
        "occupancy",
        "fraction",
        "lower",
        "occupancy",
        "occ",
        "occupancy",
        baseline="occupancy",
        tolerance="occupancy",
        compared=True,
        note="at a launch, so the Occupancy's, not KernelResources'; the baseline keeps one per launch",
    ),
    Metric(
        "local_instructions",
        "instructions",
        "higher",
        "local-memory instructions",
        "local instr",
        "local_instructions",
        baseline="local_instructions",
        tolerance="local_instructions",
        note=(
            "LDL/STL in the kernel's SASS: 0, without reading the SASS, for a kernel with no local memory; "
            "else counted where the SASS is read (--regbudget-sass, hot_spills, a binary's marked spills), "
            "and unknown (None) where not, which is never a change. Only a count above 0 is written to the "
            "baseline, so that its files do not gain a line per entry. In the terminal only as a change "
            "against the baseline; in the JSON report and the HTML report's kernel sections always"
        ),
    ),
)

BY_NAME: Mapping[str, Metric] = {m.name: m for m in METRICS}
# Whole numbers, each a field of KernelResources (occupancy, a fraction at a launch, is the Occupancy's).
COUNTS = tuple(m for m in METRICS if m.unit != "fraction")
RATCHETED = tuple(m for m in METRICS if m.tolerance is not None)
CAPPED = tuple(m for m in METRICS if m.capped)
COMPARED = tuple(m for m in METRICS if m.compared)
AGREED = tuple(m for m in METRICS if m.agree)
# The spill metrics, stores then loads, each with its callees' part (Metric.callees).
SPLIT_BY_CALLEE = tuple(m for m in METRICS if m.callees is not None)


def _keys(rows: tuple[Metric, ...], own: Callable[[Metric], str | None]) -> tuple[str, ...]:
    """Each row's key, its group's key before the group's first row: registers, spills, spill_stores, ..."""
    out: list[str] = []
    for m in rows:
        for key in (m.group, own(m)):
            if key is not None and key not in out:
                out.append(key)
    return tuple(out)


# The keys of tolerance= and ini regbudget_tolerance, and the budget keys that cap a metric (a metric's
# name, or its group's).
TOLERANCE_KEYS = _keys(RATCHETED, lambda m: m.tolerance)
CAP_KEYS = _keys(CAPPED, lambda m: m.name)


def key_fields(rows: tuple[Metric, ...]) -> dict[str, tuple[str, ...]]:
    """Each tolerance key of `rows` -> the JSON fields it covers, a group's key before its metrics':
    {"registers": ("registers",), "spills": ("spill_stores", "spill_loads"), "spill_stores": (...), ...}."""
    return {
        key: tuple(m.field for m in rows if key in (m.tolerance, m.group))
        for key in _keys(rows, lambda m: m.tolerance)
    }


def tolerance_of(metric: Metric, tolerance: Mapping[str, float]) -> float:
    """How much worse than the baseline `metric` may get: its own key, else its group's, else 0."""
    for key in (metric.tolerance, metric.group):
        if key is not None and key in tolerance:
            return tolerance[key]
    return 0.0


class Callee(Struct, frozen=True):
    """A function a kernel calls that ptxas compiled apart (`__noinline__`), with the spills ptxas reports
    under it rather than under the kernel."""

    name: str  # as ptxas names it ("_Z5heavyPKfiii")
    spill_stores: int  # bytes
    spill_loads: int  # bytes

    def count(self, metric: Metric) -> int:
        """Its bytes of one of the spill metrics (SPLIT_BY_CALLEE)."""
        value: int = getattr(self, metric.name)
        return value


class KernelResources(Struct, frozen=True):
    """One kernel's resources as ptxas reports them for one arch (or a prebuilt binary records them), plus its
    PTX launch directives. Its metrics are named as the table names them."""

    name: str  # the entry's (mangled/lowered) name as ptxas prints it
    arch: str  # "sm_90" as in "for 'sm_90'"
    registers: int
    spill_stores: int  # bytes, the kernel's own and its callees' (spilling_callees)
    spill_loads: int  # bytes, likewise
    stack: int  # bytes of stack frame
    smem: int  # static shared memory bytes
    const_mem: int  # sum of all cmem[N] banks in bytes
    const_banks: tuple[tuple[int, int], ...]  # ((bank, bytes), ...) as printed
    barriers: int  # 0 when ptxas does not print it
    ptxas_line: str  # ptxas's own "Used N registers, ..." line, stripped, to quote in messages
    max_threads: int | None = None  # product of .maxntid (or .reqntid) x*y*z from the PTX
    maxntid: tuple[int, ...] | None = None
    reqntid: tuple[int, ...] | None = None
    min_blocks_per_sm: int | None = None  # .minnctapersm
    max_regs: int | None = None  # .maxnreg
    # Stack including callees ("N bytes cumulative stack size", ptxas 12.4+); None when not printed.
    cumulative_stack: int | None = None
    # ptxas's "N bytes stack frame, N bytes spill stores, ..." line, stripped, to quote for spills.
    properties_line: str = ""
    # False for a prebuilt binary, which does not record spills: the spill fields are then 0 and meaningless.
    spills_known: bool = True
    # The blocks of a cluster the kernel was compiled for (x, y, z): .reqnctapercluster, which
    # __cluster_dims__ writes; None for a kernel that fixes none (it may still be launched with one).
    cluster_dims: tuple[int, int, int] | None = None
    # LDL/STL instructions in its SASS: 0 where it has no local memory, the SASS's count where that was read
    # (the verdict fills it in, checks.check), else None (unknown).
    local_instructions: int | None = None
    # The functions it calls, directly or not, that spill (ptxas reports their spills under them): their
    # bytes are counted in spill_stores and spill_loads, each callee once (ptxas.with_callees).
    spilling_callees: tuple[Callee, ...] = ()

    @property
    def spill_stores_callees(self) -> int:
        """The part of spill_stores that is its callees', in bytes."""
        return sum(c.spill_stores for c in self.spilling_callees)

    @property
    def spill_loads_callees(self) -> int:
        """The part of spill_loads that is its callees', in bytes."""
        return sum(c.spill_loads for c in self.spilling_callees)

    @property
    def spills(self) -> tuple[int, int]:
        """(stores, loads) in bytes (0 where unknown: see spills_known)."""
        return self.spill_stores, self.spill_loads

    @property
    def spill_bytes(self) -> int:
        """Spill stores and loads together, in bytes."""
        return self.spill_stores + self.spill_loads

    def count(self, metric: Metric) -> int | None:
        """The value of one of the table's whole-number metrics (COUNTS)."""
        value: int | None = getattr(self, metric.name)
        return value

    def callees_count(self, metric: Metric) -> int:
        """The callees' part of a spill metric (SPLIT_BY_CALLEE), in bytes; 0 for any other metric."""
        value: int = getattr(self, metric.callees) if metric.callees else 0
        return value

    def recorded(self, metric: Metric) -> int | None:
        """What the JSON report and the baseline record of it: unknown spills as None, not 0."""
        return None if metric.group == SPILLS and not self.spills_known else self.count(metric)

    # The names the JSON report and KernelReport use, for code written before the fields were renamed.
    @property
    def stack_frame(self) -> int:
        return self.stack

    @property
    def shared_mem(self) -> int:
        return self.smem


class Figures:
    """KernelReport's public figures (docs/reference/markers.md): each None without resources (a compile
    error). A mixin, so that the report's module need not spell each metric out."""

    __slots__ = ()
    resources: KernelResources | None

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
        return self.resources.stack if self.resources else None

    @property
    def shared_mem(self) -> int | None:
        return self.resources.smem if self.resources else None
