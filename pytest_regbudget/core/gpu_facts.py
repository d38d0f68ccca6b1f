"""What the GPU said about a kernel, as plain frozen data: the driver's view of a loaded cubin and a timing.

Only a run that loads kernels on a GPU makes these (gpu/); everything else names them in annotations alone.
"""

from __future__ import annotations

from msgspec import Struct

# NVML "clocks event reasons" that mean the SM clock was pulled down by power, heat or the hardware.
_THROTTLE_MASK = (
    0x4 | 0x8 | 0x20 | 0x40 | 0x80 | 0x100
)  # SW power cap, HW slowdown, SW/HW thermal, power brake


class DriverView(Struct, frozen=True):
    """What the driver says about one loaded kernel."""

    registers: int
    local_bytes: int
    shared_bytes: int
    max_threads: int


class Timing(Struct, frozen=True):
    """A kernel's GPU time: the median of samples taken until their noise was low enough."""

    median_ms: float
    noise: float  # relative standard deviation of the samples
    samples: int
    min_ms: float
    sm_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    throttle_reasons: int | None  # NVML bit mask, 0 = not throttled
    l2_flush: bool
    # The median's ~95 % interval (timing.median_interval); the time's own when not given (a point).
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    launches_per_sample: int = 1  # > 1: a CUDA graph of that many launches per sample (a short kernel)
    spent_s: float = 0.0  # wall time this timing took, warm-up included
    too_short: bool = False  # under a few microseconds even in a graph: not a figure to judge

    @property
    def interval_ms(self) -> tuple[float, float, float]:
        """(median, low, high) in ms."""
        low = self.median_ms if self.ci_low_ms is None else self.ci_low_ms
        high = self.median_ms if self.ci_high_ms is None else self.ci_high_ms
        return self.median_ms, low, high

    @property
    def throttled(self) -> bool:
        """The SM clock was held down (power, heat, hardware) when the samples were taken."""
        return bool(self.throttle_reasons and self.throttle_reasons & _THROTTLE_MASK)


class GpuFacts(Struct, frozen=True):
    """The driver's view of one loaded cubin, next to which the static numbers are judged."""

    device: str
    arch: str
    view: DriverView
    driver_blocks: int | None  # resident blocks per SM at the launch size, if there is one
    # Clusters that fit at once (cuOccupancyMaxActiveClusters) at the launch size, for a kernel that runs
    # with a cluster (compiled or stated) and a launch; None otherwise.
    driver_active_clusters: int | None = None
    cluster_error: str | None = None  # the driver's error where it refused to count clusters
