"""The GPU runner: which instance of a test runs the GPU checks, loading its cubins, probing the driver and
timing kernels. It holds no test state: the session passes what it needs and keeps what comes back.

CuPy is imported only by device.py, and only when a check asks for the device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from ..core.arch import get_arch, runs_on
from ..core.blackwell import launch_cluster
from ..core.errors import GpuUnavailable, LaunchError, UnknownArchError
from ..core.facts import KernelFacts
from ..core.gpu_facts import GpuFacts, Timing
from ..core.limits import Limits
from ..core.occupancy import launch_failure
from ..core.timing import Interval
from . import device as gpu

GpuMode = Literal["auto", "off", "require"]


class GpuRunner:
    def __init__(self, mode: GpuMode) -> None:
        self.mode = mode

    def device(self) -> gpu.Device | None:
        """The device when GPU checks are on and one is usable, else None (`reason()` says why)."""
        if self.mode == "off":
            return None

        try:
            return gpu.device()
        except GpuUnavailable:
            return None

    def reason(self) -> str:
        """Why `device()` is None."""
        if self.mode == "off":
            return "--regbudget-gpu=off"

        try:
            gpu.device()
        except GpuUnavailable as exc:
            return str(exc)
        return ""

    def plan(self, arch: str, item_archs: Sequence[str]) -> tuple[str | None, str | None]:
        """(the arch whose build this test instance checks on the GPU, or None; the note saying why not).

        The instance for the device's arch runs the checks; a test that does not target the device's arch
        runs them in its first arch's instance, after compiling for the device's arch too.
        """
        dev = self.device()
        if dev is None:
            return None, f"GPU checks skipped: {self.reason()}"
        try:
            get_arch(dev.arch)
        except UnknownArchError:
            return None, f"GPU checks skipped: {dev.name} is {dev.arch}, which this version does not know"
        # An sm_90a build (wgmma, setmaxnreg) runs on the sm_90 device as it is: no sm_90 build, which such a
        # kernel would not even compile for, is made for it.
        if runs_on(arch, dev.arch):
            return arch, None
        own = next((a for a in item_archs if runs_on(a, dev.arch)), None)
        if own is None and item_archs and arch == item_archs[0]:
            return dev.arch, None
        return None, f"GPU checks run in the {own or dev.arch} instance of this test"

    def load_and_probe(self, facts: KernelFacts, limits: Limits, key: str) -> tuple[Any, GpuFacts]:
        """Load exactly the measured cubin and ask the driver about it (at the launch size, if any, with the
        cluster the kernel runs with)."""
        dev = gpu.device()
        loaded = dev.load(facts.cubin, facts.entry, key)
        threads = limits.launch.threads if limits.launch else None
        cluster = launch_cluster(facts.resources, limits)
        compiled = facts.resources.cluster_dims is not None
        return loaded, gpu.probe(dev, loaded, threads, limits.dynamic_smem, cluster, compiled)

    def benchmark(
        self,
        loaded: Any,
        label: str,
        facts: KernelFacts,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        args: Sequence[Any],
        dynamic_smem: int,
        flush_l2: bool,
        decided: Callable[[Interval], bool] | None = None,
    ) -> Timing:
        """Time a loaded kernel; a launch the driver refuses raises LaunchError with the arithmetic."""
        try:
            dev = gpu.device()
            return dev.benchmark(loaded, grid, block, args, dynamic_smem, flush_l2=flush_l2, decided=decided)
        except LaunchError as exc:
            raise LaunchError(_launch_failure_text(label, facts, block, dynamic_smem, str(exc))) from None


def _launch_failure_text(
    label: str, facts: KernelFacts, block: tuple[int, ...], dynamic_smem: int, error: str
) -> str:
    threads = 1
    for b in block:
        threads *= b
    res = facts.resources
    why = launch_failure(facts.arch, res.registers, threads, res.smem, dynamic_smem, res.max_threads)
    detail = (
        why or "the static calculator says it fits: a defect of pytest-regbudget's model, please report it"
    )
    return f"{label}: launching block={block} failed ({error}): {detail}"
