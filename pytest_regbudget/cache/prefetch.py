"""Translation units and the pool that builds them ahead of the tests. A build is a translation unit for one
arch (`Unit`): every kernel of a file is picked from one build per (source, options, toolkit, arch), plus,
for NVRTC, the name expressions of the template instances compiled with it. Within a run each unit is built
once and shared (`Prefetcher`), on a thread pool of `default_jobs()` workers.
"""

from __future__ import annotations

import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Protocol

from msgspec.structs import replace

from ..tools import compiler, running, units
from ..tools.options import Timeouts
from ..tools.outputs import CompiledKernel, UnitOutputs
from ..tools.toolkit import Toolkit
from ..tools.units import Spec, Unit
from .store import CompileCache

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

_RECENT_UNITS = 16  # units kept after their last planned kernel, for kernels no plan named


class BuildWatch(Protocol):
    """Who is told what the pool builds (engine/progress.py's BuildProgress), from any thread."""

    def planned(self, units: list[Unit]) -> None: ...

    def started(self, unit: Unit) -> None: ...

    def finished(self, unit: Unit, *, built: bool, failed: bool) -> None: ...


class Prefetcher:
    """The run's translation units: each built (or found in the cache) once in this process and shared by
    all its kernels; with more than one job, built ahead of the tests on a thread pool (NVRTC releases the
    GIL; ptxas and nvcc are processes). The NVRTC kernels planned for one file and arch that need name
    expressions (template instances) are compiled together, with all their names.

    A unit is kept while a planned kernel still wants it, and a while after (`_RECENT_UNITS`), so that
    memory does not grow with the number of files in a run."""

    def __init__(
        self,
        cache: CompileCache,
        toolkit: Toolkit,
        jobs: int,
        timeouts: Timeouts,
        watch: BuildWatch | None = None,
    ) -> None:
        self.cache = cache
        self.watch = watch
        self.toolkit = toolkit
        self.timeouts = timeouts
        self._lock = threading.Lock()
        self._units: dict[Unit, Future[UnitOutputs]] = {}
        self._kernels: dict[Unit, list[str]] = {}  # file (a unit without names) -> its planned kernels
        self._groups: dict[Unit, tuple[str, ...]] = {}  # NVRTC file -> the template names planned for it
        self._planned: Counter[Spec] = Counter()  # planned requests not made yet
        self._wanted: Counter[Unit] = Counter()  # ... per unit they look in first
        self._recent: OrderedDict[Unit, None] = OrderedDict()
        # Units prefetched for a listing: held (wanted) until the run's plan (`submit`) wants them for their
        # kernels, so that a manifest's units read at collection are still here when its items run.
        self._listings: set[Unit] = set()
        self._jobs = jobs
        self._pool: ThreadPoolExecutor | None = None  # started for the first build to make ahead

    def submit(self, specs: Iterable[Spec]) -> None:
        """Plan the kernels the run will ask for (and, with a pool, start building their units, in order)."""
        specs = list(specs)
        with self._lock:
            files: list[Unit] = []
            for spec in specs:
                base = Unit.of(spec)
                if base not in self._kernels:
                    files.append(base)
                self._kernels.setdefault(base, []).append(spec[1])
            for base in files:
                if base.nvcc is None:
                    self._groups[base] = self._group(base)
            first = []
            for spec in specs:
                base = Unit.of(spec)
                unit = self._first(base, spec[1], self._groups.get(base))
                self._planned[spec] += 1
                self._wanted[unit] += 1
                first.append(unit)
            self._release_listings()
        if self._jobs <= 1:
            return
        self._build_ahead(_worker_order(list(dict.fromkeys(first))))

    def _build_ahead(self, units: Iterable[Unit]) -> None:
        """Start building on the pool each unit the cache does not hold, one by one: the first builds while
        the next ones' keys are made."""
        for unit in units:
            if self.cache.stored(unit, self.toolkit):
                continue
            if self.watch is not None:
                with self._lock:
                    unbuilt = unit not in self._units
                if unbuilt:
                    self.watch.planned([unit])
            if self._pool is None:
                # The pool's module only where something is built (a warm run builds nothing).
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self._jobs, thread_name_prefix="regbudget")
            self._pool.submit(self._prefetch, unit)

    def _group(self, base: Unit) -> tuple[str, ...]:
        """The template names of a file's planned kernels, but those its plain compile already holds."""
        held = self._plain(base)
        wanted = (k for k in self._kernels[base] if "<" in k)
        return tuple(sorted({k for k in wanted if held is None or held.entry(k) is None}))

    def _plain(self, base: Unit) -> UnitOutputs | None:
        """A file's plain NVRTC compile, when this process has built it already (a manifest's listing)."""
        future = self._units.get(base) if base.nvcc is None else None
        if future is None or not future.done() or future.exception() is not None:
            return None
        return future.result()

    def _first(self, base: Unit, kernel: str, group: Sequence[str] | None) -> Unit:
        """The unit `kernel` is looked for in first: the plain compile, when it is built and holds the kernel
        (a template instance the file makes itself), else `Unit.first`'s."""
        held = self._plain(base)
        return base if held is not None and held.entry(kernel) is not None else base.first(kernel, group)

    def get(self, spec: Spec) -> CompiledKernel:
        """`spec`'s kernel, from its unit (built now, or by another thread, or found in the cache)."""
        source, kernel = spec[0], spec[1]
        base = Unit.of(spec)
        text = compiler.read_source(source)
        with self._lock:
            group = self._groups.get(base)
            planned = self._planned[spec] > 0
            first = self._first(base, kernel, group)
            held = self._plain(base)
        if held is not None and held.entry(kernel) is not None:

            def build(unit: Unit) -> UnitOutputs:
                return held  # the plain compile, built already, holds the kernel

        else:

            def build(unit: Unit) -> UnitOutputs:
                return self._outputs(unit, kernel)

        try:
            return units.build_kernel(kernel, base, text, self.toolkit, build, group)
        finally:
            if planned:
                self._release(spec, first)

    def entries(self, unit: Unit) -> list[str]:
        """The entries of every kernel in `unit` (shared with the builds of its kernels)."""
        return list(self._outputs(unit, None).entries)

    def _release_listings(self) -> None:
        """Let go of the listings' holds (the plan holds what its kernels want). Under the lock."""
        for unit in self._listings:
            self._unwant(unit)
        self._listings.clear()

    def prefetch_units(self, units: Iterable[Unit]) -> None:
        """Start building whole units ahead of whoever waits for them (a manifest's file listings, which
        collection would otherwise build one after another); each stays wanted until `entries` reads it."""
        units = [u for u in dict.fromkeys(units) if u not in self._listings]
        with self._lock:
            for unit in units:
                self._listings.add(unit)
                self._wanted[unit] += 1
        if self._jobs <= 1:
            return
        self._build_ahead(units)

    def _outputs(self, unit: Unit, kernel: str | None) -> UnitOutputs:
        """The unit's outputs: built here, or by the thread already at it."""
        future = self._future(unit, kernel)
        # Wait in short slices: a plain result() would hold off Ctrl-C until the build ends.
        while True:
            try:
                return future.result(timeout=0.1)
            except FutureTimeout:
                continue

    def _prefetch(self, unit: Unit) -> None:
        """For the pool: build the unit, unless a thread is at it already."""
        self._future(unit, None)

    def _future(self, unit: Unit, kernel: str | None) -> Future[UnitOutputs]:
        """The unit's one future in this process; the first caller builds it."""
        with self._lock:
            future = self._units.get(unit)
            if future is not None:
                return future
            future = self._units[unit] = Future()
            if not self._wanted[unit]:
                self._remember(unit)
        watch = self.watch
        if watch is not None:
            watch.started(unit)
        runs = running.runs_in_this_thread()
        failed = False
        try:
            label = self._label(unit, kernel)
            future.set_result(self.cache.unit(unit, self.toolkit, self.timeouts, label=label))
        except BaseException as exc:
            failed = True
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            if watch is not None:
                # A build ran a compiler (ptxas, nvcc) in this thread; a cache hit, or a failure the cache
                # holds, ran none.
                watch.finished(unit, built=running.runs_in_this_thread() > runs, failed=failed)
        return future

    def _label(self, unit: Unit, kernel: str | None) -> str:
        """How a build's errors name it: the kernel that asked, or the planned ones."""
        kernels = [kernel] if kernel is not None else self._kernels.get(replace(unit, names=()), [])
        more = f" and {len(kernels) - 1} more" if len(kernels) > 1 else ""
        return f"{kernels[0]}{more} [{unit.arch}]" if kernels else f"{unit.source.name} [{unit.arch}]"

    def _release(self, spec: Spec, unit: Unit) -> None:
        with self._lock:
            self._planned[spec] -= 1
            if self._planned[spec] <= 0:
                del self._planned[spec]
            self._unwant(unit)

    def _unwant(self, unit: Unit) -> None:
        """One hold on `unit` fewer; without any, it is among the recent units. Under the lock."""
        self._wanted[unit] -= 1
        if self._wanted[unit] <= 0:
            del self._wanted[unit]
            self._remember(unit)

    def _remember(self, unit: Unit) -> None:
        """Keep `unit` among the recent ones, forgetting the oldest built one that no plan wants."""
        self._recent[unit] = None
        self._recent.move_to_end(unit)
        if len(self._recent) <= _RECENT_UNITS or self.cache.directory is None:
            return  # without a cache on disk, a build let go would have to be made again
        old = next((u for u in self._recent if u not in self._wanted and self._done(u)), None)
        if old is not None:
            del self._recent[old]
            self._units.pop(old, None)

    def _done(self, unit: Unit) -> bool:
        future = self._units.get(unit)
        return future is None or future.done()

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _worker_order(units: list[Unit], env: Mapping[str, str] = os.environ) -> list[Unit]:
    """The order a pytest-xdist worker builds the run's units in: every worker plans them all, so each starts
    at its own share (gw1 of 2 halfway) rather than all waiting on the first unit's lock."""
    worker, count = env.get("PYTEST_XDIST_WORKER", ""), _worker_count(env)
    if not worker.startswith("gw") or not worker[2:].isdigit() or count < 2:
        return units
    start = len(units) * (int(worker[2:]) % count) // count
    return units[start:] + units[:start]


def default_jobs(env: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The cores this process may use: all of them, divided among pytest-xdist's workers."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores // _worker_count(env))


def _worker_count(env: Mapping[str, str]) -> int:
    """pytest-xdist's count of workers, which it sets in each worker; 1 where it is not a whole number of
    one or more (set by hand, or by something else): a hint for sharing the cores, not worth a failed run."""
    text = env.get("PYTEST_XDIST_WORKER_COUNT", "").strip()
    # Short: int() refuses a string of more than 4,300 digits.
    return int(text) if text.isascii() and text.isdigit() and len(text) < 7 and int(text) > 0 else 1
