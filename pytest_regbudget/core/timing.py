"""How precise a GPU time is, and what it says against a ceiling: a distribution-free interval of the median,
the stopping rule of the sampler, and verdicts from intervals. Pure arithmetic on samples (no CuPy), so that
it is tested on recorded sample sets.

The median's interval comes from order statistics: for n samples, the ranks n/2 -+ z*sqrt(n)/2 bound the
median with ~95 % confidence whatever the distribution (GPU times are skewed: a launch is never faster than
the kernel, often slower). The sampler stops when the interval's half-width is within PRECISION of the median,
not when the samples' spread is small: a noisy copy kernel's median is stable long before its spread is.
"""

from __future__ import annotations

import bisect
import math
from typing import Literal

from msgspec import Struct

Z95 = 1.959964  # two-sided 95 %
PRECISION = 0.0025  # half-width of the median's interval, relative to the median, to stop at
MIN_SAMPLES = 10  # order statistics bound the median from 10 samples on (ranks 2 and 9: ~98 %)
MAX_SAMPLES = 5000
BATCH = 10  # samples between checks of the stopping rule
TIME_LIMIT_S = 2.0  # wall time one kernel's timing may take
Verdict = Literal["pass", "fail", "ambiguous"]


class Interval(Struct, frozen=True):
    """A median and its confidence interval (ms, or a ratio)."""

    median: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """Half the interval's width relative to the median."""
        return (self.high - self.low) / 2 / self.median if self.median > 0 else math.inf

    def scaled(self, factor: float) -> Interval:
        return Interval(self.median * factor, self.low * factor, self.high * factor)


def median_interval(ordered: list[float]) -> Interval:
    """The median of sorted samples and its ~95 % distribution-free interval (order statistics)."""
    n = len(ordered)
    if n == 0:
        raise ValueError("no samples")
    mid = n // 2
    median = ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    spread = Z95 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - spread) - 1)  # 1-based rank floor(n/2 - spread), as an index
    hi = min(n - 1, math.ceil(n / 2 + spread))
    return Interval(median, ordered[lo], ordered[hi])


class Sampler:
    """Samples kept sorted as they come (an insertion, not a sort per sample); the interval is computed
    every BATCH samples only."""

    def __init__(self) -> None:
        self.ordered: list[float] = []
        self.arrivals: list[float] = []  # in the order they came, for recording sample sets
        self.count = 0

    def add(self, value: float) -> bool:
        """Add a sample; True when the rule should be checked now (every BATCH samples)."""
        bisect.insort(self.ordered, value)
        self.arrivals.append(value)
        self.count += 1
        return self.count >= MIN_SAMPLES and self.count % BATCH == 0

    def interval(self) -> Interval:
        return median_interval(self.ordered)

    def precise(self) -> bool:
        return self.interval().half_width <= PRECISION


def ratio_interval(now: Interval, base: Interval) -> Interval:
    """now / base, with the interval that both intervals allow (conservative: the extremes)."""
    return Interval(now.median / base.median, now.low / base.high, now.high / base.low)


def verdict(value: Interval, limit: float) -> Verdict:
    """Against a ceiling: fail when the whole interval lies above it, pass when it lies at or below it,
    ambiguous when it straddles it (the caller samples more, then decides on the median and says so)."""
    if value.low > limit:
        return "fail"
    if value.high <= limit:
        return "pass"
    return "ambiguous"


def decided(value: Interval, limit: float) -> bool:
    return verdict(value, limit) != "ambiguous"
