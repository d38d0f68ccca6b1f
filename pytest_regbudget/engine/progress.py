"""Progress while builds run, and the run's slowest builds: what a run prints so that a slow file can be told
from a hang (issue 42). No pytest here: the plugin hands in a function that writes a line.

`BuildProgress` is told by the compile pool (cache/prefetch.py) when a unit's build starts and ends, from any
thread, and says it as one line:

    regbudget: 37/1,528 builds (2 threads), 2 failed, slowest src/x.cu [sm_90] 95 s

`Ticker` writes that line while builds run: on a terminal rewritten in place, in a pipe a line of its own
every `interval` seconds (and, verbose, one per finished build), never two within `min_gap` seconds. A build
that the compile cache answered is not a build: a warm run prints nothing, and no `slowest builds:` line.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from msgspec import Struct

from ..core.text import one_line
from ..tools.units import Unit

PIPE_INTERVAL = 5.0  # seconds between two lines in a pipe while builds run
MIN_GAP = 2.0  # never two lines closer than this in a pipe
LIVE_INTERVAL = 0.5  # a terminal's status line is rewritten this often
SLOWEST_SHOWN = 5  # builds named by the summary's `slowest builds:` line


class Finished(Struct, frozen=True):
    label: str
    seconds: float
    failed: bool


class BuildProgress:
    """What the compile pool is building: counts, the builds running and those that ran (thread-safe)."""

    def __init__(
        self, rootdir: Path | None, threads: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rootdir = rootdir
        self.threads = threads
        self.clock = clock
        self._lock = threading.Lock()
        self._planned: set[Unit] = set()  # units the pool will build (not found in the cache)
        self._running: dict[Unit, float] = {}  # unit -> when its build started
        self._done: set[Unit] = set()  # planned units found or built, or tried
        self._finished: list[Finished] = []  # the builds that ran a compiler
        # Called (outside the lock) when a build is planned or starts: a writer's cue to start watching, so
        # that a run that builds nothing starts no thread.
        self.on_build: Callable[[], None] | None = None

    # -- the pool's side ---------------------------------------------------------------------------------
    def planned(self, units: list[Unit]) -> None:
        """Units the pool will build ahead (the cache holds no entry for them)."""
        with self._lock:
            self._planned.update(u for u in units if u not in self._done)
        self._woken()

    def started(self, unit: Unit) -> None:
        with self._lock:
            self._running[unit] = self.clock()
        self._woken()

    def _woken(self) -> None:
        if self.on_build is not None:
            self.on_build()

    def finished(self, unit: Unit, *, built: bool, failed: bool) -> None:
        """`unit`'s lookup or build ended; `built`: a compiler ran (not a cache hit)."""
        with self._lock:
            start = self._running.pop(unit, None)
            seconds = 0.0 if start is None else self.clock() - start
            if built or unit in self._planned:  # a build no plan named (made on demand) counts too
                self._planned.add(unit)
                self._done.add(unit)
            if built:
                self._finished.append(Finished(self.label(unit), seconds, failed))

    # -- what it says ------------------------------------------------------------------------------------
    def label(self, unit: Unit) -> str:
        """`src/x.cu [sm_90]`: the source relative to the rootdir (as given where it is outside)."""
        # Normalised: a marker's source is relative to its test file (`tests/../kernels/a.cu`).
        source = Path(os.path.normpath(unit.source))
        if self.rootdir is not None and source.is_absolute():
            with contextlib.suppress(ValueError):  # outside the rootdir: named as given
                source = source.relative_to(self.rootdir)
        return one_line(f"{source.as_posix()} [{unit.arch}]")  # a file's name, on the line of its build

    def active(self) -> bool:
        """Whether a build is running, or planned and not done."""
        with self._lock:
            return bool(self._running) or len(self._done) < len(self._planned)

    def built(self) -> int:
        """Builds that ran a compiler so far."""
        with self._lock:
            return len(self._finished)

    def line(self) -> str | None:
        """The status line; None while nothing has been built or is building."""
        with self._lock:
            now = self.clock()
            # A build no plan named (made on demand, as a listing is) counts from its start, not its end.
            total = len(self._planned | self._running.keys())
            if not self._running and not self._finished and total == 0:
                return None
            # The slowest so far: a build still running counts with the time it has taken.
            times = [(f.seconds, f.label) for f in self._finished]
            times += [(now - t, self.label(u)) for u, t in self._running.items()]
            failed = sum(1 for f in self._finished if f.failed)
            done = len(self._done)
        text = (
            f"regbudget: {done:,}/{total:,} builds ({self.threads} thread{'s' if self.threads != 1 else ''})"
        )
        if failed:
            text += f", {failed:,} failed"
        if times:
            seconds, label = max(times)
            text += f", slowest {label} {seconds:.0f} s"
        return text

    def slowest_line(self, limit: int = SLOWEST_SHOWN) -> str | None:
        """`slowest builds: src/x.cu [sm_90] 95.2 s, ...`, slowest first; None where nothing was built."""
        with self._lock:
            finished = sorted(self._finished, key=lambda f: -f.seconds)
        if not finished:
            return None
        shown = ", ".join(
            f"{f.label} {f.seconds:.1f} s{' (failed)' if f.failed else ''}" for f in finished[:limit]
        )
        more = f", and {len(finished) - limit:,} more" if len(finished) > limit else ""
        return f"slowest builds: {shown}{more}"


def slowest_line(progresses: list[BuildProgress], limit: int = SLOWEST_SHOWN) -> str | None:
    """One `slowest builds:` line over several builders' progress (a run of several toolkits)."""
    if len(progresses) == 1:
        return progresses[0].slowest_line(limit)
    merged = BuildProgress(None, 1)
    for p in progresses:
        with p._lock:
            merged._finished += p._finished
    return merged.slowest_line(limit)


class Ticker:
    """A daemon thread that writes `progress.line()` while builds run.

    `write(line, in_place)`: in place (a terminal's status line, "" to clear it) or as a line of its own.
    `live()` says, each time, whether the status line may be rewritten in place now (a terminal while
    pytest collects); otherwise lines of their own every `interval` seconds, one per finished build when
    `verbose`, never two within `min_gap` seconds."""

    def __init__(
        self,
        progress: BuildProgress,
        write: Callable[[str, bool], None],
        live: Callable[[], bool],
        *,
        verbose: bool = False,
        interval: float = PIPE_INTERVAL,
        min_gap: float = MIN_GAP,
        tick: float = LIVE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.progress = progress
        self.write = write
        self.live = live
        self.verbose = verbose
        self.interval = max(interval, min_gap)
        self.min_gap = min_gap
        self.tick = tick
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._busy_since: float | None = None  # when the builds now running began
        self._last: float | None = None  # when the last line of its own was written
        self._seen_built = 0
        self._shown_in_place = False

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="regbudget-progress", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Stop the thread, and clear a status line left in place."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._clear()

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                self.step()
            except Exception:  # a closed terminal must not kill a run: progress is only a courtesy
                return

    def step(self) -> None:
        """One look at the builds: write a line if one is due (the thread calls this every `tick`)."""
        now = self.clock()
        if not self.progress.active():
            self._busy_since = None
            self._clear()
            return
        if self._busy_since is None:
            self._busy_since = now
        line = self.progress.line()
        if line is None:
            return
        line = one_line(line)  # it names a source file: guarded where it leaves for the terminal
        if self.live():
            self._shown_in_place = True
            self.write(line, True)
            return
        self._clear()
        built = self.progress.built()
        # Due `interval` after the builds began or the last line, or `min_gap` after it for a build that
        # ended (verbose).
        since = now - max(self._busy_since, self._last if self._last is not None else self._busy_since)
        news = self.verbose and built > self._seen_built
        if since >= self.interval or (news and since >= self.min_gap):
            self._last = now
            self._seen_built = built
            self.write(line, False)

    def _clear(self) -> None:
        """Clear the status line, if it is still there: once in-place writing has ended (pytest collected),
        pytest has written over it."""
        if self._shown_in_place:
            self._shown_in_place = False
            if self.live():
                self.write("", True)
