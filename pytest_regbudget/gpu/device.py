"""The GPU side: load the very cubin ptxas measured with CuPy, ask the driver, and time launches.

Owns everything that needs a CUDA device: probing for one (CuPy imported lazily, cupy-cuda12x or
cupy-cuda13x), driver attributes and occupancy, and a noise-aware timer with CUDA events and an L2 flush.
Nothing else in the package imports CuPy.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core import timing
from ..core.blackwell import PORTABLE_CLUSTER_BLOCKS
from ..core.errors import GpuUnavailable, LaunchError
from ..core.gpu_facts import DriverView, GpuFacts, Timing
from ..core.timing import Interval

# Warm-up after triton.testing.do_bench (~25 ms; cold L2 by writing a buffer larger than the cache). The
# stopping rule and its defaults are in timing.py.
WARMUP_S = 0.025
# Kernels shorter than this are timed as CUDA graphs of launches (launch overhead and the events' ~0.5 us
# resolution would be most of a single launch's figure), each graph lasting about GRAPH_SAMPLE_MS.
SHORT_MS = 0.020
GRAPH_SAMPLE_MS = 0.5
GRAPH_WARMUP_S = 0.05
# Below this even a graph's per-launch time is mostly the GPU's own launch latency: reported as too short to
# time, never judged.
TOO_SHORT_MS = 0.002
# cuda.h: CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED.
_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14


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

    def active_clusters(
        self, kernel: Any, block: int, dynamic_smem: int, cluster: tuple[int, int, int], compiled: bool
    ) -> int:
        """Clusters of `cluster` blocks of `block` threads that fit on the device at once
        (cuOccupancyMaxActiveClusters). CuPy wraps no cluster API, so the call goes to the driver library that
        CuPy loaded, through ctypes, with the function handle CuPy's occupancy call takes. A kernel compiled
        with __cluster_dims__ (`compiled`) is asked without a cluster attribute, as the driver requires
        (its own dims, or none); the grid is one cluster. Raises LaunchError with the driver's error name."""
        self._opt_in(kernel, dynamic_smem)
        if math.prod(cluster) > PORTABLE_CLUSTER_BLOCKS:
            # As a launch of such a cluster must: without it the driver counts no cluster over 8 blocks.
            self.cupy.cuda.driver.funcSetAttribute(kernel.kernel.ptr, _NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
        # ctypes (about 2 ms to import) only for this call, which only a GPU run with a cluster kernel makes.
        from .clusters import max_active_clusters

        return max_active_clusters(kernel.kernel.ptr, block, dynamic_smem, cluster, compiled)

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
        time_limit_s: float | None = None,
        decided: Callable[[Interval], bool] | None = None,
    ) -> Timing:
        """The kernel's median time and its interval (timing.py): samples are taken until the interval's
        half-width is within timing.PRECISION of the median and, with `decided`, until the interval settles
        the verdict it is wanted for (it does not straddle a ceiling), or until `time_limit_s` (default
        timing.TIME_LIMIT_S).

        A sample is one launch between two CUDA events, after an L2 flush unless `flush_l2=False`. A kernel
        shorter than SHORT_MS is timed as a CUDA graph of back-to-back launches, divided by their number (as
        triton.testing.do_bench_cudagraph does): the launch overhead and the events' resolution would
        otherwise be most of the figure. Graph samples run with a warm L2: a flush between the graph's
        launches would cost more than the kernel. A kernel too short even for that is `too_short`."""
        cp = self.cupy
        self._opt_in(kernel, dynamic_smem)
        started = time.perf_counter()
        stream = cp.cuda.get_current_stream()
        begin, end = cp.cuda.Event(), cp.cuda.Event()
        # Warm-up: module load, first-launch costs and clock ramp stay out of the samples.
        warm = 0
        while warm < 3 or time.perf_counter() - started < WARMUP_S:
            begin.record(stream)
            self._launch(kernel, grid, block, args, dynamic_smem)
            end.record(stream)
            end.synchronize()
            warm += 1
        single = float(cp.cuda.get_elapsed_time(begin, end))
        graph, per_sample, sample_stream = None, 1, stream
        if single < SHORT_MS:
            per_sample = max(8, math.ceil(GRAPH_SAMPLE_MS / max(single, 1e-4)))
            sample_stream = cp.cuda.Stream(non_blocking=True)  # capture fails on the legacy stream
            with sample_stream:
                sample_stream.begin_capture()
                for _ in range(per_sample):
                    self._launch(kernel, grid, block, args, dynamic_smem)
                graph = sample_stream.end_capture()
            # The graph's own warm-up: a few microseconds per launch leave the SM clock where the warm-up
            # of single launches left it only if the GPU stays busy long enough to hold it there.
            warm_until = time.perf_counter() + GRAPH_WARMUP_S
            while time.perf_counter() < warm_until:
                graph.launch(sample_stream)
                sample_stream.synchronize()
        sampler = timing.Sampler()
        deadline = started + (timing.TIME_LIMIT_S if time_limit_s is None else time_limit_s)
        while sampler.count < timing.MAX_SAMPLES:
            if graph is None:
                if flush_l2:
                    self._flush_l2()
                begin.record(stream)
                self._launch(kernel, grid, block, args, dynamic_smem)
                end.record(stream)
            else:
                begin.record(sample_stream)
                graph.launch(sample_stream)
                end.record(sample_stream)
            end.synchronize()
            check = sampler.add(float(cp.cuda.get_elapsed_time(begin, end)) / per_sample)
            if check or time.perf_counter() > deadline:
                if time.perf_counter() > deadline and sampler.count >= timing.MIN_SAMPLES:
                    break
                if check and sampler.precise() and (decided is None or decided(sampler.interval())):
                    break
        sm, top, reasons = self.clocks()
        found = sampler.interval()
        record = os.environ.get("REGBUDGET_RECORD_SAMPLES")
        if record:  # test data for the stopping rule (benchmarks/timing_power.py records real sample sets)
            with open(record, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"launches": per_sample, "arrivals": sampler.arrivals}) + "\n")
        return Timing(
            median_ms=found.median,
            noise=_noise(sampler.ordered),
            samples=sampler.count,
            min_ms=sampler.ordered[0],
            sm_clock_mhz=sm,
            max_sm_clock_mhz=top,
            throttle_reasons=reasons,
            l2_flush=flush_l2 and graph is None,
            ci_low_ms=found.low,
            ci_high_ms=found.high,
            launches_per_sample=per_sample,
            spent_s=time.perf_counter() - started,
            too_short=found.median < TOO_SHORT_MS,
        )


def _noise(ordered: Sequence[float]) -> float:
    """Relative standard deviation (NVBench's noise measure), once, of the final samples."""
    if len(ordered) < 2:
        return math.inf
    mean = math.fsum(ordered) / len(ordered)
    var = math.fsum((x - mean) ** 2 for x in ordered) / (len(ordered) - 1)
    return math.sqrt(var) / mean if mean > 0 else math.inf


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


def probe(
    dev: Device,
    kernel: Any,
    threads: int | None,
    dynamic_smem: int,
    cluster: tuple[int, int, int] | None = None,
    compiled: bool = False,
) -> GpuFacts:
    """The driver's view of a loaded kernel; at a launch size, its blocks per SM and, for a kernel that runs
    with a cluster (its compiled dims, or `cluster=`), the clusters that fit at once."""
    blocks = None if threads is None else dev.occupancy(kernel, threads, dynamic_smem)
    clusters, refused = None, None
    if threads is not None and cluster is not None:
        try:
            clusters = dev.active_clusters(kernel, threads, dynamic_smem, cluster, compiled)
        except LaunchError as exc:
            refused = str(exc)
    return GpuFacts(
        device=dev.name,
        arch=dev.arch,
        view=dev.view(kernel),
        driver_blocks=blocks,
        driver_active_clusters=clusters,
        cluster_error=refused,
    )
