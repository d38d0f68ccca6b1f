"""The GPU side: load the very cubin ptxas measured with CuPy, ask the driver, and time launches.

Owns everything that needs a CUDA device: probing for one (CuPy imported lazily, cupy-cuda12x or
cupy-cuda13x), driver attributes and occupancy, and a noise-aware timer with CUDA events and an L2 flush.
Nothing else in the package imports CuPy.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import GpuUnavailable, LaunchError
from .facts import DriverView, GpuFacts, Timing

# Sampling defaults, after NVBench (--min-samples 10, --max-noise 0.5 %, a per-benchmark time limit) and
# triton.testing.do_bench (warm-up of ~25 ms, cold L2 by writing a buffer larger than the cache).
MIN_SAMPLES = 10
MAX_SAMPLES = 2000
MAX_NOISE = 0.005
TIME_LIMIT_S = 2.0
WARMUP_S = 0.025


class Device:
    """Device 0 as CuPy sees it (CUDA_VISIBLE_DEVICES selects it)."""

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError as exc:
            raise GpuUnavailable(
                f"CuPy is not installed ({exc}); pip install 'pytest-regbudget[gpu]' (cupy-cuda12x) "
                "or cupy-cuda13x to match your driver"
            ) from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # CUDARuntimeError without a driver; its type lives in CuPy
            raise GpuUnavailable(f"no CUDA device: {exc}") from None
        if count == 0:
            raise GpuUnavailable("no CUDA device (the driver reports 0 devices)")
        self.cupy: Any = cupy
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        self.name: str = name.decode() if isinstance(name, bytes) else str(name)
        self.arch = f"sm_{props['major']}{props['minor']}"
        self.l2_bytes = int(props.get("l2CacheSize", 0)) or 64 * 1024 * 1024
        self.driver_version = cupy.cuda.runtime.driverGetVersion()
        self.cupy_version: str = cupy.__version__
        self._flush_buffer: Any = None
        self._tmp = tempfile.TemporaryDirectory(prefix="regbudget-gpu-")
        self._nvml: Any = None
        self._nvml_handle: Any = None
        try:  # NVML (nvidia-ml-py) is optional: without it, timings carry no clock.
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._nvml_handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            self._nvml = None

    def describe(self) -> str:
        major, minor = divmod(self.driver_version // 10, 100)
        return f"{self.name} ({self.arch}), driver CUDA {major}.{minor}, CuPy {self.cupy_version}"

    # -- loading -------------------------------------------------------------------------------------
    def load(self, cubin: bytes, entry: str, key: str) -> Any:
        """The kernel `entry` of exactly this cubin, as the driver loads it."""
        path = Path(self._tmp.name) / f"{abs(hash((key, cubin)))}.cubin"
        path.write_bytes(cubin)
        return self.cupy.RawModule(path=str(path)).get_function(entry)

    @staticmethod
    def view(kernel: Any) -> DriverView:
        attrs = kernel.attributes
        return DriverView(
            registers=int(attrs["num_regs"]),
            local_bytes=int(attrs["local_size_bytes"]),
            shared_bytes=int(attrs["shared_size_bytes"]),
            max_threads=int(attrs["max_threads_per_block"]),
        )

    def occupancy(self, kernel: Any, block: int, dynamic_smem: int) -> int:
        """Resident blocks per SM the driver grants (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
        self._opt_in(kernel, dynamic_smem)
        return int(
            self.cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                kernel.kernel.ptr, block, dynamic_smem
            )
        )

    @staticmethod
    def _opt_in(kernel: Any, dynamic_smem: int) -> None:
        # Above 48 KiB the kernel must opt in, as the static calculator assumes.
        if dynamic_smem > 48 * 1024 and kernel.max_dynamic_shared_size_bytes < dynamic_smem:
            kernel.max_dynamic_shared_size_bytes = dynamic_smem

    # -- timing --------------------------------------------------------------------------------------
    def _launch(
        self, kernel: Any, grid: tuple[int, ...], block: tuple[int, ...], args: Sequence[Any], smem: int
    ) -> None:
        try:
            kernel(grid, block, tuple(args), shared_mem=smem)
        except self.cupy.cuda.driver.CUDADriverError as exc:
            raise LaunchError(str(exc)) from None

    def _flush_l2(self) -> None:
        if self._flush_buffer is None:
            self._flush_buffer = self.cupy.empty(2 * self.l2_bytes, dtype=self.cupy.uint8)
        self._flush_buffer.fill(0)

    def clocks(self) -> tuple[int | None, int | None, int | None]:
        """(SM clock, max SM clock, throttle reasons) from NVML, or Nones."""
        if self._nvml is None:
            return None, None, None
        nv = self._nvml
        try:
            sm = int(nv.nvmlDeviceGetClockInfo(self._nvml_handle, nv.NVML_CLOCK_SM))
            top = int(nv.nvmlDeviceGetMaxClockInfo(self._nvml_handle, nv.NVML_CLOCK_SM))
            # Renamed from "ThrottleReasons" in newer NVML bindings; the bits are the same.
            get_reasons = (
                getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or nv.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            reasons = int(get_reasons(self._nvml_handle))
        except Exception:
            return None, None, None
        return sm, top, reasons

    def benchmark(
        self,
        kernel: Any,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        args: Sequence[Any],
        dynamic_smem: int = 0,
        *,
        flush_l2: bool = True,
        max_noise: float = MAX_NOISE,
        min_samples: int = MIN_SAMPLES,
        time_limit_s: float = TIME_LIMIT_S,
    ) -> Timing:
        """Median kernel time over samples taken until their relative noise is under `max_noise` (after
        `min_samples`) or `time_limit_s` has passed. Each sample is one launch between two CUDA events,
        after an L2 flush unless `flush_l2=False`."""
        cp = self.cupy
        self._opt_in(kernel, dynamic_smem)
        stream = cp.cuda.get_current_stream()
        # Warm-up: module load, first-launch costs and clock ramp stay out of the samples.
        start_warm = time.perf_counter()
        warm = 0
        while warm < 3 or time.perf_counter() - start_warm < WARMUP_S:
            self._launch(kernel, grid, block, args, dynamic_smem)
            stream.synchronize()
            warm += 1
        begin, end = cp.cuda.Event(), cp.cuda.Event()
        samples: list[float] = []
        deadline = time.perf_counter() + time_limit_s
        while len(samples) < MAX_SAMPLES:
            if flush_l2:
                self._flush_l2()
            begin.record(stream)
            self._launch(kernel, grid, block, args, dynamic_smem)
            end.record(stream)
            end.synchronize()
            samples.append(float(cp.cuda.get_elapsed_time(begin, end)))
            if len(samples) >= min_samples and (
                _noise(samples) <= max_noise or time.perf_counter() > deadline
            ):
                break
        sm, top, reasons = self.clocks()
        import statistics  # timing only: a run without a GPU does not pay for importing it

        return Timing(
            median_ms=statistics.median(samples),
            noise=_noise(samples),
            samples=len(samples),
            min_ms=min(samples),
            sm_clock_mhz=sm,
            max_sm_clock_mhz=top,
            throttle_reasons=reasons,
            l2_flush=flush_l2,
        )


def _noise(samples: Sequence[float]) -> float:
    """Relative standard deviation, NVBench's noise measure."""
    if len(samples) < 2:
        return math.inf
    import statistics

    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if mean > 0 else math.inf


_DEVICE: Device | None = None
_DEVICE_ERROR: str | None = None


def device() -> Device:
    """The process's device, probed once; raises GpuUnavailable with the reason."""
    global _DEVICE, _DEVICE_ERROR
    if _DEVICE is None and _DEVICE_ERROR is None:
        try:
            _DEVICE = Device()
        except GpuUnavailable as exc:
            _DEVICE_ERROR = str(exc)
    if _DEVICE is None:
        raise GpuUnavailable(_DEVICE_ERROR or "no GPU")
    return _DEVICE


def probe(dev: Device, kernel: Any, threads: int | None, dynamic_smem: int) -> GpuFacts:
    blocks = None if threads is None else dev.occupancy(kernel, threads, dynamic_smem)
    return GpuFacts(device=dev.name, arch=dev.arch, view=dev.view(kernel), driver_blocks=blocks)
