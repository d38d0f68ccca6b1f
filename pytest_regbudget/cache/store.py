"""The content-addressed cache of compiler outputs: one entry per translation unit and arch (tools/units.py),
looked up by a key that covers everything the compiler could have read. Owns which key finds which entry,
and when an entry may be stored; the keys are keys.py's, the documents entries.py's.

- **NVRTC** builds are keyed beforehand by a conservative fingerprint of every file NVRTC could reach
  (keys.py `cache_key`).
- **nvcc** builds, as in ccache's "direct mode", go through a *dependency record* keyed by the source, arch,
  options and toolkit: for each build seen, the files nvcc opened (`-MD -MF`) with their digests and the
  listings of the directories it searched (nvcc_deps.py). A lookup re-checks them, and the entry they name
  is used only when all still match.

Both keys hold every field of CompileOptions (`CompileOptions.identity`, which the baseline's options_hash
uses too) and the contents of the `depends=` files. An entry is stored only if its inputs did not change
while the compiler ran. Across processes a lock per key in the cache directory makes the second process
wait for the first one's entry.

A build the compiler rejected (`Rejected`: NVRTC's or nvcc's errors, ptxas's exit code) is cached too, so
that a file that does not build costs no compiler run on a warm run: under the build's own key plus every
path its #includes may be found at, with its state (`include_lookups`), so that a missing header that
appears, or a header that changes, rebuilds it. A timeout or a missing tool is never cached.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from msgspec import Struct, field

from ..core.defaults import DEFAULT_NVCC_TIMEOUT, DEFAULT_PTXAS_TIMEOUT
from ..core.errors import CompileError, Rejected
from ..core.text import readable
from ..tools import compiler, nvcc, units
from ..tools.nvcc import env_flags, host_compiler
from ..tools.nvcc import environment as nvcc_environment
from ..tools.options import CompileOptions, Timeouts
from ..tools.outputs import CompiledKernel, UnitOutputs
from ..tools.toolkit import Nvcc, Toolkit
from ..tools.units import Unit
from ..util.files import json_digest, ready_lock
from .entries import Entries, FailedBuild, sound
from .fingerprint import (
    CLOCK_SLACK_NS,
    FORMAT,
    StatCache,
    Uncacheable,
    file_state,
    listing_digest,
    newest_change,
    shown_path,
)
from .keys import (
    cache_key,
    check_headers,
    depends_fingerprint,
    host_compiler_identity,
    identity_digest,
    include_lookups,
    skip_dirs,
    tool_states,
    toolkit_bases,
)
from .nvcc_deps import DepBuild, host_system_dirs, nvcc_probes, parse_depfile, searched_trees

if TYPE_CHECKING:
    from ..tools.frontends import FrontendPtx

DEFAULT_TIMEOUTS = Timeouts()
_RECORD_BUILDS = 8  # builds kept per dependency record, newest first


# -- the cache ------------------------------------------------------------------------------------------
class CacheStats(Struct):
    hits: int = 0
    misses: int = 0
    corrupt: int = 0
    not_cached: int = 0  # compiles whose inputs the key could not cover
    reasons: dict[str, str] = field(default_factory=dict)  # file -> why its kernels are not cached
    disabled: str = ""  # why the cache is off altogether
    # file -> why its builds are keyed by whole directories (any change there rebuilds them), not by the
    # files they read and the paths they probed
    whole_dirs: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        if self.disabled:
            return self.disabled
        text = f"{self.hits} hits, {self.misses} misses"
        if self.corrupt:
            text += f", {self.corrupt} corrupt entries rebuilt"
        if self.not_cached:
            where, why = min(self.reasons.items())
            more = f"; and {len(self.reasons) - 1} more file(s)" if len(self.reasons) > 1 else ""
            text += f", {self.not_cached} not cached ({where}: {why}{more})"
        if self.whole_dirs:
            where, why = min(self.whole_dirs.items())
            more = f"; and {len(self.whole_dirs) - 1} more" if len(self.whole_dirs) > 1 else ""
            text += (
                f", {len(self.whole_dirs)} file(s) keyed by whole directories ({where}: {why}{more}; "
                "an edit anywhere there rebuilds them)"
            )
        return text

    def merged(self, other: CacheStats) -> CacheStats:
        return CacheStats(
            self.hits + other.hits,
            self.misses + other.misses,
            self.corrupt + other.corrupt,
            self.not_cached + other.not_cached,
            {**other.reasons, **self.reasons},
            self.disabled or other.disabled,
            {**other.whole_dirs, **self.whole_dirs},
        )

    def to_payload(self) -> object:
        """For an xdist worker's report to the controller (JSON's types)."""
        return msgspec.to_builtins(self)

    @classmethod
    def from_payload(cls, payload: object) -> CacheStats:
        """A worker's `to_payload()`; no counts from a payload of another shape (another version's)."""
        try:
            return msgspec.convert(payload, cls)
        except msgspec.ValidationError:
            return cls()


def _unusable(directory: Path) -> str:
    """Why `directory` cannot hold the cache ("" if it can, or can be created)."""
    for path in [directory, *directory.parents]:
        if path.exists():
            if path.is_dir():
                return ""
            return (
                f"{path} is not a directory: caching off (remove it, or point REGBUDGET_CACHE_DIR at a "
                "directory)"
            )
    return ""


class CompileCache:
    """Builds of translation units (NVRTC + ptxas, or nvcc) with a disk cache in front (directory None: no
    cache, every build runs). A unit that another process is building is waited for, through a lock per
    key in the cache directory, so that the second process finds the first one's entry."""

    def __init__(self, directory: Path | None, rootdir: Path | None = None) -> None:
        self.stats = CacheStats()
        self.rootdir = rootdir
        self._cwd_seen = ("", False)  # the working directory last seen, and whether it is the rootdir
        self._lock = threading.Lock()
        if directory is not None:
            self.stats.disabled = _unusable(directory)
            if self.stats.disabled:
                directory = None
        self.directory = directory
        self.digests = StatCache(
            None if directory is None else directory / f"v{FORMAT}" / "stat-cache", directory
        )
        if rootdir is not None:
            # A key names the checkout's files relative to it, so that a checkout at another path hits.
            self.digests.add_base("<rootdir>", rootdir)
        self._keys: dict[tuple[Unit, str, Toolkit, Path | None], str] = {}  # NVRTC keys made this run
        self.entries = Entries(directory, self._count)

    def base(self) -> Path | None:
        """The rootdir when it is the working directory, else None: the compilers are then given names
        relative to it (`given_names`), which they resolve in the working directory (NVRTC runs in this
        process, and a thread cannot have a working directory of its own)."""
        if self.rootdir is None:
            return None
        here = os.getcwd()
        if here != self._cwd_seen[0]:
            self._cwd_seen = (here, self.digests.realpath(here) == self.digests.realpath(str(self.rootdir)))
        return self.rootdir if self._cwd_seen[1] else None

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self.stats, what, getattr(self.stats, what) + 1)

    def _not_cached(self, exc: Uncacheable) -> None:
        with self._lock:
            self.stats.not_cached += 1
            self.stats.reasons.setdefault(exc.where, exc.reason)

    def compile(
        self,
        source: Path,
        kernel: str,
        arch: str,
        options: CompileOptions,
        toolkit: Toolkit,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        *,
        source_text: str | None = None,
        nvcc: Nvcc | None = None,
    ) -> CompiledKernel:
        """One kernel: its translation unit built by NVRTC + ptxas (or, with `nvcc`, by nvcc), or found in
        the cache, and the kernel picked from it. `source_text` compiles a code string; `source` then only
        names it."""
        text = compiler.read_source(source) if source_text is None else source_text
        label = f"{kernel} [{arch}]"

        def build(unit: Unit) -> UnitOutputs:
            return self.unit(unit, toolkit, timeouts, source_text=text, label=label)

        unit = Unit(source, arch, options.with_line_info(), nvcc)  # as every build is made (with_line_info)
        return units.build_kernel(kernel, unit, text, toolkit, build)

    def unit(
        self,
        unit: Unit,
        toolkit: Toolkit,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        *,
        source_text: str | None = None,
        label: str = "",
    ) -> UnitOutputs:
        """The outputs of one translation unit, every kernel of it: from the cache, or built (and stored).
        `label` names the build in a compiler's errors (the kernel that asked for it)."""
        text = compiler.read_source(unit.source) if source_text is None else source_text
        label = label or f"{unit.source.name} [{unit.arch}]"

        base = self.base()

        def build(depfile: Path | None = None) -> UnitOutputs:
            # Before every build, cached or not: a header that is a FIFO would block the compiler for ever.
            check_headers(unit.source, text, unit.options, self._system_dirs(unit, toolkit), self.digests)
            if unit.nvcc is not None:
                return nvcc.build_nvcc_unit(
                    unit.source, unit.arch, unit.options, unit.nvcc, timeouts.nvcc, depfile, label, base
                )
            return compiler.build_unit(
                unit.source, text, unit.arch, unit.options, toolkit, unit.names, timeouts.ptxas, label, base
            )

        if self.directory is None:
            return build()
        # The key of a failure: made once, when no successful build is found (a warm hit never makes it).
        failed_key = functools.cache(lambda: self._failed_key(unit, text, toolkit))

        def known_failure() -> None:
            """Raise the failure the cache holds for these inputs, if it holds one (a hit)."""
            key = failed_key()
            known = None if key is None else self.entries.failed(key)
            if known is not None:
                self._count("hits")
                raise _KnownFailure(known.message, known.log)

        try:
            if unit.nvcc is not None:
                return self._unit_nvcc(unit, text, unit.nvcc, build, timeouts.nvcc, known_failure)
            return self._unit_nvrtc(unit, text, toolkit, build, timeouts.ptxas, known_failure)
        except Uncacheable as exc:  # raised before any build: this is the only one
            self._not_cached(exc)
            return build()
        except _KnownFailure:
            raise
        except Rejected as exc:
            # Kept only if its inputs did not change while the compiler ran (it may have read either state).
            now = text if source_text is not None else compiler.read_source(unit.source)
            key = failed_key()  # made by known_failure, which every build comes after
            if key is not None and self._failed_key(unit, now, toolkit, fresh=True) == key:
                # As text a person reads: a file name's byte that is not UTF-8 is shown, not stored raw.
                kept = FailedBuild(readable(str(exc)), readable(exc.log))
                self.entries.store_failed(key, kept)
            raise
        finally:
            self.stats.whole_dirs.update(self.digests.whole_dirs)
            self.digests.save()

    def _system_dirs(self, unit: Unit, toolkit: Toolkit) -> list[Path]:
        """The include directories of the compiler's own headers: NVRTC's toolkit's, or nvcc's and its host
        compiler's."""
        if unit.nvcc is None:
            return list(toolkit.include_dirs)
        return [Path(d) for d in (*self._toolkit_dirs(unit.nvcc), *host_system_dirs(host_compiler()))]

    def _failed_key(self, unit: Unit, text: str, toolkit: Toolkit, fresh: bool = False) -> str | None:
        """The key a rejected build of `unit` is kept under; None where it cannot be (an #include through a
        macro): the build's key, and every path its #includes may be found at with its state."""
        try:
            if unit.nvcc is None:
                return json_digest(["failed", self._nvrtc_key(unit, text, toolkit, fresh)])
            lookups = include_lookups(
                unit.source, text, unit.options, self._system_dirs(unit, toolkit), self.digests
            )
            return json_digest(["failed", self._record_key(unit, text, unit.nvcc), lookups])
        except (Uncacheable, OSError):
            return None

    def stored(self, unit: Unit, toolkit: Toolkit) -> bool:
        """Whether the cache holds an entry (NVRTC) or a dependency record (nvcc) for `unit` as its inputs
        are now: then its lookup will most likely hit, and is left to the test that needs it rather than to a
        compile thread (a warm run then uses no thread, whose lookups would only contend for the GIL)."""
        if self.directory is None:
            return False
        try:
            text = compiler.read_source(unit.source)
            if unit.nvcc is not None:
                return os.path.exists(self.entries.path(self._record_key(unit, text, unit.nvcc), "records"))
            return os.path.exists(self.entries.path(self._nvrtc_key(unit, text, toolkit)))
        except (CompileError, Uncacheable, OSError):
            return False

    def _nvrtc_key(self, unit: Unit, text: str, toolkit: Toolkit, fresh: bool = False) -> str:
        """cache_key of an NVRTC unit, made once per run (as its trees are) unless `fresh`."""
        base = self.base()
        memo = (unit, text, toolkit, base)
        if not fresh and memo in self._keys:
            return self._keys[memo]
        key = cache_key(
            unit.source, text, unit.names, unit.arch, unit.options, toolkit, self.digests, self.directory,
            fresh=fresh, base=base,
        )  # fmt: skip
        self._keys[memo] = key
        return key

    @staticmethod
    def _toolkit_dirs(nvcc: Nvcc) -> list[str]:
        """Where nvcc's own headers are (its toolkit, the CUDA wheels' include dirs): not the user's."""
        return [os.path.realpath(p) for p in (nvcc.path.parent.parent, *nvcc.include_dirs)]

    def _record_key(self, unit: Unit, text: str, nvcc: Nvcc) -> str:
        """The key of an nvcc unit's dependency record: nvcc by its version and the contents of its tools,
        its paths relative to their root (`toolkit_bases`), as the files of its records are."""
        toolkit_bases([*nvcc.include_dirs, nvcc.path.parent.parent / "include"], self.digests)
        base = self.base()
        return json_digest(
            [
                *identity_digest(unit.source, text, unit.names, unit.arch, unit.options, self.digests, base),
                "nvcc",
                nvcc.identity(self.digests.keyed),
                tool_states(nvcc.tools(), self.digests),
                nvcc_environment(),
                host_compiler_identity(self.digests),
                depends_fingerprint(unit.options.depends, self.digests, skip_dirs([], self.directory)),
            ]
        )

    @contextlib.contextmanager
    def _locked(self, key: str, timeout: float) -> Iterator[None]:
        """Hold `key`'s lock, shared by every process that uses this cache directory, for at most `timeout`
        seconds of waiting (as long as a build may take). A lock that cannot be had (a read-only cache, a
        holder that takes longer) only means that this process builds the unit too."""
        import filelock  # only a miss needs it

        assert self.directory is not None
        path = self.directory / "locks" / f"unit-{key}.lock"
        lock: filelock.BaseFileLock | None = None
        try:
            ready_lock(self.directory, path)
            lock = filelock.FileLock(str(path), timeout=timeout)
            lock.acquire()
        except (filelock.Timeout, OSError):
            lock = None
        try:
            yield
        finally:
            if lock is not None:
                lock.release()

    def _unit_nvrtc(
        self,
        unit: Unit,
        text: str,
        toolkit: Toolkit,
        build: Callable[[], UnitOutputs],
        timeout: float,
        known_failure: Callable[[], None],
    ) -> UnitOutputs:
        def key(fresh: bool = False) -> str:
            return self._nvrtc_key(unit, text, toolkit, fresh)

        before = key()  # Uncacheable before anything is counted
        found = self.entries.hit(before, unit, build)
        if found is not None:
            return found
        known_failure()
        with self._locked(before, timeout):
            # Another process may have built it while this one waited, or seen it fail.
            found = self.entries.hit(before, unit, build, quiet=True)
            if found is not None:
                return found
            known_failure()
            self._count("misses")
            outputs = build()
            # A file edited while NVRTC ran may have been read in either state: then store nothing.
            with contextlib.suppress(Uncacheable):
                if key(fresh=True) == before and sound(outputs, unit):
                    self.entries.store(before, outputs)
        return outputs

    def _unit_nvcc(
        self,
        unit: Unit,
        text: str,
        nvcc: Nvcc,
        build: Callable[[Path | None], UnitOutputs],
        timeout: float,
        known_failure: Callable[[], None],
    ) -> UnitOutputs:
        skip = skip_dirs([], self.directory)
        record_key = self._record_key(unit, text, nvcc)
        trees = searched_trees(unit.source, unit.options)

        def rebuild() -> UnitOutputs:
            return build(None)

        found, builds = self._record_hit(record_key, unit, skip, rebuild)
        if found is not None:
            return found
        known_failure()
        with self._locked(record_key, timeout):
            # Another process may have built it while this one waited, or seen it fail.
            found, builds = self._record_hit(record_key, unit, skip, rebuild, quiet=True)
            if found is not None:
                return found
            known_failure()
            # The user's trees, listed before the build, for a build that turns out to need them (a
            # computed include): a change while nvcc runs then shows. A tree too large to list matters only
            # to such a build.
            too_large = None
            try:
                listed = [(d, True, listing_digest(d, skip, True)) for d in trees]
            except Uncacheable as exc:
                listed, too_large = [], exc
            self._count("misses")
            started = time.time_ns()
            with tempfile.TemporaryDirectory(prefix="regbudget-deps-") as tmp:
                depfile = Path(tmp) / "deps.d"
                outputs = build(depfile)
                try:
                    deps = depfile.read_text(encoding="utf-8", errors="surrogateescape")
                except OSError:
                    deps = ""
            files = parse_depfile(deps, os.getcwd())
            if not files:
                self._not_cached(
                    Uncacheable(
                        shown_path(unit.source), f"nvcc {nvcc.version} wrote no dependency list (-MD)"
                    )
                )
                return outputs
            system_dirs = [*self._toolkit_dirs(nvcc), *host_system_dirs(host_compiler())]
            scanned = nvcc_probes(files, unit.source, unit.options, system_dirs, env_flags())
            # The system headers' directories are listed (a header added there may shadow one); the user's
            # are probed, and listed whole only when a computed include could read anything in them.
            dirs = sorted({os.path.realpath(os.path.dirname(f)) for f in scanned.system})
            if scanned.unresolved and too_large is not None:
                self._not_cached(too_large)
                return outputs
            if scanned.unresolved:
                where, written = scanned.unresolved[0]
                self.digests.whole_dirs[shown_path(where)] = f"{written} goes through a macro"
            else:
                listed = []
            present = [p for p, kind in scanned.probes.items() if kind == "file"]
            # A file or directory that changed (or a header that appeared) while nvcc ran may have been
            # read in either state: store nothing.
            if newest_change([*files, *dirs, *present]) >= started - CLOCK_SLACK_NS or not sound(
                outputs, unit
            ):
                return outputs
            try:
                # The trees again, for a build keyed by them: unchanged since before the build, or no entry.
                after = (
                    [(d, True, listing_digest(d, skip, True)) for d in trees] if scanned.unresolved else []
                )
                listed += [(d, False, listing_digest(d, skip, False)) for d in dirs]
            except Uncacheable:
                return outputs
            if after != listed[: len(after)]:
                return outputs
            keyed = self.digests.keyed  # paths as the key holds them: the record serves any checkout path
            seen = DepBuild(
                files=tuple((keyed(f), file_state(f, self.digests)) for f in files),
                listings=tuple((keyed(d), recursive, state) for d, recursive, state in listed),
                probes=tuple(sorted((keyed(p), kind) for p, kind in scanned.probes.items())),
            )
            self.entries.store(seen.key(record_key), outputs)
            self.entries.store_record(record_key, [seen, *(b for b in builds if b != seen)][:_RECORD_BUILDS])
        return outputs

    def _record_hit(
        self,
        record_key: str,
        unit: Unit,
        skip: frozenset[str],
        rebuild: Callable[[], UnitOutputs],
        *,
        quiet: bool = False,
    ) -> tuple[UnitOutputs | None, list[DepBuild]]:
        """The entry of the first build in the dependency record whose files, probes and directories are
        all as they were, and the record's builds."""
        builds = self.entries.record(record_key, quiet=quiet)
        known: dict[tuple[str, bool], str] = {}  # listings made for one build, reused for the next
        for seen in builds:
            if seen.still_valid(self.digests, skip, known):
                return self.entries.hit(seen.key(record_key), unit, rebuild, quiet=quiet), builds
        return None, builds

    def frontend(self, key: str | None, make: Callable[[], FrontendPtx]) -> FrontendPtx:
        """A Python front end's build (Triton's PTX, cubin and ptxas log), from the cache by `key` (the
        front end's own cache key: frontends.triton_key), or made and stored. No key: made every time."""
        if self.directory is None or key is None:
            return make()
        from ..tools.frontends import FrontendPtx  # Triton's and Numba's: for a Python kernel only

        path = self.entries.path(json_digest(["frontend", FORMAT, key]), "frontend")
        found = self.entries.read(path, FrontendPtx)
        if found is not None:
            self._count("hits")
            return found
        self._count("misses")
        made = make()
        self.entries.write(path, made)
        return made


class _KnownFailure(Rejected):
    """A failed build read from the cache (not stored again)."""


def compile_kernel(
    source: Path,
    kernel: str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT,
    source_text: str | None = None,
    *,
    nvcc: Nvcc | None = None,
    cache: CompileCache | None = None,
    nvcc_timeout: float = DEFAULT_NVCC_TIMEOUT,
) -> CompiledKernel:
    """Compile one kernel of `source` for `arch` (with `nvcc`, by nvcc; else NVRTC and ptxas) and read
    ptxas's report of it, exactly as a pytest run does; from and into `cache` when given, else built anew."""
    timeouts = Timeouts(ptxas=ptxas_timeout, nvcc=nvcc_timeout)
    return (cache or CompileCache(None)).compile(
        source, kernel, arch, options, toolkit, timeouts, source_text=source_text, nvcc=nvcc
    )
