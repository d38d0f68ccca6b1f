"""The budgets one kernel is held to on one arch, as plain frozen values: no pytest, nothing to run.

project/markers.py checks a marker's keys and builds these once; verdict.py judges a kernel by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from msgspec import Struct, field

# What a kernel over its budget does to its test: fail it, or pass it with a warning.
Level = Literal["fail", "warn"]
LEVELS: tuple[Level, ...] = get_args(Level)


class Launch(Struct, frozen=True):
    threads: int
    blocks: int | None = None  # resident blocks per SM that must fit

    def __str__(self) -> str:
        return f"({self.threads},)" if self.blocks is None else f"({self.threads}, {self.blocks})"


class Limits(Struct, frozen=True):
    """The budgets that apply on one arch; None means unchecked."""

    max_regs: int | None = None
    # The most a metric may be, by budget key (metrics.CAP_KEYS): a metric's name (stack=64: its stack frame)
    # or its group's (spills=16: each spill metric).
    caps: Mapping[str, int] = field(default_factory=dict)
    launch: Launch | None = None
    dynamic_smem: int = 0
    min_occupancy: float | None = None
    max_time_ratio: float | None = None  # GPU median / baseline median of the same device
    max_time_ms: float | None = None
    hot_spills: int | None = None  # spill instructions inside loops (needs the SASS)
    # The most the estimated local share of executed instructions may be (needs the SASS: core/estimate.py).
    max_local_share: float | None = None
    # Trip counts the code does not show, for the estimate: a count for every such loop, or counts by the
    # loop's FILE:LINE, (("poly.cu", 17, 50),). Not a budget: it only weighs loops where the SASS is read.
    loop_trips: int | tuple[tuple[str, int, int], ...] | None = None
    # "required": the kernel must keep its setmaxnreg roles (ptxas may drop them, C7508); or the exact targets
    # by direction, (("dec", 40), ("inc", 232)), sorted.
    setmaxnreg: str | tuple[tuple[str, int], ...] | None = None
    # Threads in each role, (("dec", 128), ("inc", 256)): checks the register file's arithmetic.
    setmaxnreg_threads: tuple[tuple[str, int], ...] | None = None
    # ptxas warnings allowed: at most this many, or only these codes/patterns (fnmatch over the message).
    ptxas_warnings: int | tuple[str, ...] | None = None
    # Tensor memory columns a block may allocate (tcgen05.alloc); where the PTX's count cannot be read, the
    # count the launch arithmetic uses ("stated").
    tmem_cols: int | None = None
    # The cluster (x, y, z) the kernel is launched with at run time (cudaLaunchKernelEx), for a kernel
    # without __cluster_dims__.
    cluster: tuple[int, int, int] | None = None
    min_active_clusters: int | None = None  # clusters the driver must fit at once (needs a GPU)
