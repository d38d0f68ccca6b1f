"""The baseline snapshot file: load, validate, merge and write `regbudget-baseline.toml`.

Owns the file format (version 3: one TOML table per kernel (source, name, variant, arch) and toolkit release,
keys in a fixed order so a register change is a one-line diff, and a `broken` table per build that failed when
it was recorded), the atomic write under a cross-process lock (whose lock and errors are baseline_write.py's),
and the update arithmetic (added, updated, unchanged, stale). It knows nothing of pytest.

Versions 1 and 2 were written only by development versions before 0.1.0, within days of each other, and are
not read: such a file is one clear error that says how to record it anew.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, cast

from msgspec import Struct, field
from msgspec.structs import replace

from ..util.files import atomic_write
from ..util.patterns import lazy

# The file's format is baseline_schema.py's (the standard library alone, for the pre-commit hook); its names
# are this module's too, as every reader of the baseline has imported them from here.
from .baseline_schema import CALLEE_FIELDS as CALLEE_FIELDS
from .baseline_schema import FILE_INT_FIELDS as FILE_INT_FIELDS
from .baseline_schema import FORMAT_VERSION as FORMAT_VERSION
from .baseline_schema import INT_FIELDS as INT_FIELDS
from .baseline_schema import KNOWN_FIELDS, check_entry, checked, load_document
from .baseline_schema import NO_VARIANT as NO_VARIANT
from .baseline_schema import OPTIONAL_INT_FIELDS as OPTIONAL_INT_FIELDS
from .baseline_schema import TEXT_FIELDS as TEXT_FIELDS
from .baseline_schema import BuildKey as BuildKey
from .baseline_schema import Key as Key
from .baseline_schema import read as read
from .baseline_write import check_writable, encoded, write_failure
from .baseline_write import lock_path as lock_path
from .baseline_write import locked as _locked  # update's; tests hold it from another process
from .dirs import default_cache_dir
from .errors import BaselineError
from .metrics import AGREED, COUNTS, SPLIT_BY_CALLEE, KernelResources
from .timing import Interval

# An item id of a run with several toolkits ends in the release ("test_x[sm_90-13.5]"); a baseline entry,
# which is the release's already, lists the test without it ("test_x[sm_90]"), so that switching between one
# toolkit and several does not rewrite every entry's tests.
_RELEASE_SUFFIX = lazy(r"(\bsm_\d+[af]?)-\d+\.\d+\]$")


def base_nodeid(nodeid: str) -> str:
    """`nodeid` without the toolkit release that a run of several toolkits adds to its id."""
    if not nodeid.endswith("]") or "." not in nodeid[nodeid.rfind("-") :]:
        return nodeid  # no release suffix: most ids, and the pattern would scan each
    return _RELEASE_SUFFIX.sub(r"\1]", nodeid)


# How long an update waits for another process's update of the same baseline before it gives up.
LOCK_TIMEOUT = 60.0
HEADER = """\
# pytest-regbudget baseline: what ptxas reported for each kernel (source, name, defines, arch), per CUDA
# release of the toolchain that built it, when it was last accepted.
# A kernel that gets worse than its entry fails its test. Refresh deliberately with
#   pytest --regbudget-update
# and review the diff like code: every changed line is a kernel that changed.
"""

# (source relative to the rootdir, readable kernel name, variant: the defines that select it, arch, release:
# major.minor of the ptxas that measured it, "12.9"). A key follows the kernel, not the test: renaming a test
# keeps its kernels' entries, and two tests of one kernel variant share one entry. Each toolkit release has
# entries of its own, and a build is judged against its release's: a CUDA upgrade is a reviewed diff.
# (Key, and NO_VARIANT, the variant of a kernel built without defines, are baseline_schema.py's.)
ARCH, RELEASE = 3, 4  # positions in a Key
# A build that failed when the baseline was last updated: (source, variant, arch, release), a kernel's key
# without the kernel. Recorded so that a file nobody changed that does not build (a missing header on this
# runner, a sibling's #include-only file) costs its own check, not the run: it passes while it still fails
# (BuildKey, baseline_schema.py's).
# How much of a failed build's log the baseline keeps: enough to recognise it in review, not the whole log.
BROKEN_ERROR_LINES = 6


class BrokenBuild(Struct, frozen=True):
    """A recorded broken build: the first lines of the compiler's log when it was recorded."""

    error: str

    def to_toml(self) -> dict[str, object]:
        return {"error": self.error}


def error_summary(log: str) -> str:
    """The first lines of a failed build's log, as the baseline records them (trailing space trimmed)."""
    lines = [line.rstrip() for line in log.strip().splitlines()]
    return "\n".join(lines[:BROKEN_ERROR_LINES])


# baseline_schema.py lists the file's fields with the standard library alone (the pre-commit hook's checker);
# they must stay the metrics table's.
if tuple(m.baseline for m in COUNTS if m.baseline) != INT_FIELDS:
    raise ImportError("core/baseline_schema.py's INT_FIELDS differ from the metrics table's baseline fields")
if tuple(m.callees for m in SPLIT_BY_CALLEE if m.callees) != CALLEE_FIELDS:
    raise ImportError("core/baseline_schema.py's CALLEE_FIELDS differ from the metrics table's callee parts")


class EntryNumbers(TypedDict):
    """An entry's metrics, as a measured kernel's resources give them (`numbers_of`)."""

    registers: int
    spill_stores: int | None
    spill_loads: int | None
    stack: int
    smem: int
    const_mem: int
    local_instructions: int | None
    spill_stores_callees: int | None
    spill_loads_callees: int | None


def numbers_of(res: KernelResources) -> EntryNumbers:
    """What an entry records of a kernel's resources: unknown spills and no local instructions as None."""
    known = res.spills_known
    return EntryNumbers(
        registers=res.registers,
        spill_stores=res.spill_stores if known else None,
        spill_loads=res.spill_loads if known else None,
        stack=res.stack,
        smem=res.smem,
        const_mem=res.const_mem,
        local_instructions=res.local_instructions or None,
        spill_stores_callees=(res.spill_stores_callees or None) if known else None,
        spill_loads_callees=(res.spill_loads_callees or None) if known else None,
    )


# gc=False: a built library's run holds one entry per kernel (thousands), and the collector would walk each on
# every full pass and at exit; an entry holds only numbers, strings and tables of them, so it is in no cycle.
class BaselineEntry(Struct, frozen=True, gc=False):
    registers: int
    spill_stores: int | None  # None: a prebuilt binary, which does not record spills
    spill_loads: int | None
    stack: int
    smem: int
    const_mem: int
    ptxas: str
    nvrtc: str  # what wrote the PTX: NVRTC's version, "nvcc 13.5.37", "triton 3.9.0"
    compiler: str  # the source kind: one of COMPILERS (or a registered source's name)
    options_hash: str  # recorded, not keyed: a flag change is reported, and the entry still enforced
    # Occupancy per launch it was measured at: {"256 threads": 0.5, "512 threads, 65536 B dynamic smem": 0.25}
    occupancy: Mapping[str, float] = field(default_factory=dict)
    tests: tuple[str, ...] = ()  # the tests (or manifest items) that measured it, for the stale rule
    # Timings and driver figures per GPU name ("NVIDIA H200"), written by an update on a GPU runner.
    gpu: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    # Fields this version does not know (a newer plugin's) are kept, not dropped.
    extra: Mapping[str, object] = field(default_factory=dict)
    # ptxas's messages for the kernel (a code, "C7508", or the text): a new one fails the ratchet.
    messages: tuple[str, ...] = ()
    # Its warpgroups' setmaxnreg targets ("dec 40", "inc 232"), sorted: a changed target fails the ratchet.
    setmaxnreg: tuple[str, ...] = ()
    # Its build settings: every flag but the variant's defines ("-DGGML_CUDA_F16", "-Iinclude"), so that
    # a change is reported by name. Recorded, not keyed; () for none, or for an entry written before 0.2.
    build_settings: tuple[str, ...] = ()
    local_instructions: int | None = None  # LDL/STL in its SASS, where read and above 0
    # The __noinline__ callees' part of the spills; None for none (and in entries of 0.1, which count none).
    spill_stores_callees: int | None = None
    spill_loads_callees: int | None = None
    # The installed distribution its source file belongs to ("liger_kernel 0.8.5"), for a kernel of installed
    # code (keyed by its import path); None for the project's own. An upgrade is reported, not keyed.
    package: str | None = None

    @property
    def spills(self) -> tuple[int, int] | None:
        """(stores, loads) in bytes; None where unknown (a binary)."""
        if self.spill_stores is None or self.spill_loads is None:
            return None
        return self.spill_stores, self.spill_loads

    def to_toml(self) -> dict[str, object]:
        """The entry's TOML table. Its arrays are tuples: tomli_w writes them as lists, and a run's records
        hold thousands of these tables, which tuples of strings keep out of the collector's walks."""
        out: dict[str, object] = {n: v for n in FILE_INT_FIELDS if (v := getattr(self, n)) is not None}
        out.update({name: getattr(self, name) for name in TEXT_FIELDS})
        if self.package:
            out["package"] = self.package
        if self.build_settings:
            out["build_settings"] = self.build_settings  # in build order: a define's place matters
        if self.messages:
            out["ptxas_messages"] = tuple(sorted(self.messages))
        if self.setmaxnreg:
            out["setmaxnreg"] = tuple(sorted(self.setmaxnreg))
        if self.tests:
            out["tests"] = tuple(sorted(self.tests))
        out.update(sorted(self.extra.items()))
        if self.occupancy:
            out["occupancy"] = dict(sorted(self.occupancy.items(), key=lambda item: _launch_order(item[0])))
        if self.gpu:
            out["gpu"] = {name: dict(sorted(fig.items())) for name, fig in sorted(self.gpu.items())}
        return out

    def merged(self, old: BaselineEntry) -> BaselineEntry:
        """This measurement, keeping what it did not measure of `old`: other launches' occupancy, other
        GPUs' figures (all of them, on a CPU runner), fields this version does not know, and the local
        instructions of a build that reads as the same one (an update that did not read the SASS does not
        drop what one that did recorded)."""
        local = self.local_instructions
        if local is None and all(getattr(self, m.name) == getattr(old, m.name) for m in AGREED):
            local = old.local_instructions
        return replace(
            self,
            occupancy={**old.occupancy, **self.occupancy},
            gpu={**old.gpu, **self.gpu},
            extra={**old.extra, **self.extra},
            local_instructions=local,
        )

    def gpu_time_ms(self, device: str) -> float | None:
        value = self.gpu.get(device, {}).get("time_ms")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def gpu_time_interval(self, device: str) -> Interval | None:
        """The median time on `device` with its interval (a point for an entry timed before intervals)."""
        median = self.gpu_time_ms(device)
        if median is None:
            return None
        figures = self.gpu.get(device, {})
        low, high = figures.get("ci_low_ms"), figures.get("ci_high_ms")
        if not (_number(low) and _number(high)):
            return Interval(median, median, median)
        return Interval(median, float(cast(float, low)), float(cast(float, high)))

    def gpu_clock_mhz(self, device: str) -> int | None:
        value = self.gpu.get(device, {}).get("sm_clock_mhz")
        return int(cast(float, value)) if _number(value) else None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def entry_from_table(table: object, where: str = "entry") -> BaselineEntry:
    """An entry from its TOML table (as `BaselineEntry.to_toml` makes it), validated like the file's."""
    return _entry(where, table)


def options_hash(*parts: object) -> str:
    """A short, stable digest of the compile options, to tell when a kernel's build changed."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


# The options_hash of a build with no options (CompileOptions().identity()): an entry that has it and no
# build_settings recorded none because there were none, not because an older version wrote it.
NO_OPTIONS_HASH = options_hash((), [], (), ())


def _entry(where: str, table: object) -> BaselineEntry:
    return _built(check_entry(where, table))


def _built(table: dict[str, Any]) -> BaselineEntry:
    """The entry of a table that check_entry has accepted."""
    gpu = table.get("gpu", {})
    return BaselineEntry(
        registers=table["registers"],
        spill_stores=table.get("spill_stores"),
        spill_loads=table.get("spill_loads"),
        stack=table["stack"],
        smem=table["smem"],
        const_mem=table["const_mem"],
        ptxas=table["ptxas"],
        nvrtc=table["nvrtc"],
        compiler=table["compiler"],
        options_hash=table["options_hash"],
        occupancy={k: float(v) for k, v in table.get("occupancy", {}).items()},
        tests=tuple(table.get("tests", [])),
        gpu=gpu,
        messages=tuple(table.get("ptxas_messages", [])),
        build_settings=tuple(table.get("build_settings", [])),
        setmaxnreg=tuple(table.get("setmaxnreg", [])),
        extra={k: v for k, v in table.items() if k not in KNOWN_FIELDS},
        local_instructions=table.get("local_instructions"),
        **{name: table.get(name) for name in CALLEE_FIELDS},
        package=table.get("package"),
    )


def _launch_order(at: str) -> tuple[int, str]:
    """ "256 threads" before "1024 threads": launches in numeric order, then as text."""
    head = at.split(" ", 1)[0]
    return (int(head), at) if head.isdigit() else (1 << 30, at)


class Baseline(Struct, frozen=True):
    """A baseline file's entries, per kernel variant, arch and release."""

    entries: Mapping[Key, BaselineEntry] = field(default_factory=dict)
    broken: Mapping[BuildKey, BrokenBuild] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.entries)

    def archs(self) -> set[str]:
        return {k[ARCH] for k in self.entries}

    def find(self, key: Key, legacy_variant: str | None = None) -> tuple[BaselineEntry | None, Key | None]:
        """The entry of `key`, and the key it was found under when that is not `key`: a kernel whose variant
        0.1 keyed with its build-wide defines (`legacy_variant`, see KernelFacts) is looked up there too, and
        an update moves it (`update`'s `moved`)."""
        entry = self.entries.get(key)
        if entry is not None or legacy_variant is None:
            return entry, None
        legacy = (key[0], key[1], legacy_variant, key[3], key[4])
        entry = self.entries.get(legacy)
        return entry, legacy if entry is not None else None

    def releases(self, key: Key) -> list[str]:
        """The releases with an entry for `key`'s kernel variant and arch, whatever `key`'s own release."""
        return sorted(r for (*rest, r) in self.entries if tuple(rest) == key[:RELEASE])


def parse(text: str, path: Path) -> Baseline:
    """Validate a whole file; the first problem raises BaselineError naming the file and place."""
    # tomli rather than the standard library's tomllib: the same parser, compiled (mypyc) in its wheels, reads
    # a baseline of 2,000 entries in 80 ms instead of 330 (docs/speed.md, "Issue 25"). Imported here: a warm
    # run reads the parsed entries back from the cache (cache/baselines.py), one without a baseline none.
    import tomli

    tables, broken = checked(load_document(text, path, tomli.loads), path)
    return Baseline(
        {key: _built(table) for key, table in tables.items()},
        {key: BrokenBuild(error) for key, error in broken.items()},
    )


def load(path: Path) -> Baseline:
    """The entries of `path`; a missing file is an empty baseline."""
    text = read(path)
    return Baseline() if text is None else parse(text, path)


def dumps(baseline: Baseline) -> str:
    """Sorted by source, kernel, variant, arch, release, with a fixed key order inside each entry."""
    section: dict[str, Any] = {}
    for key, entry in sorted(baseline.entries.items()):
        node = section
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = entry.to_toml()
    doc: dict[str, object] = {"version": FORMAT_VERSION, "kernels": section}
    if baseline.broken:
        broken: dict[str, Any] = {}
        for build, failed in sorted(baseline.broken.items()):
            node = broken
            for part in build[:-1]:
                node = node.setdefault(part, {})
            node[build[-1]] = failed.to_toml()
        doc["broken"] = broken

    # The TOML writer (about 1 ms with its teardown) only for a run that writes the baseline.
    import tomli_w

    return HEADER + "\n" + tomli_w.dumps(doc)


class UpdateCounts(Struct):
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    stale: int = 0
    stale_removed: bool = False
    rekeyed: int = 0  # entries moved to the key this version gives them (see `update`'s `moved`)
    broken: int = 0  # broken builds the file records after the update
    broken_dropped: int = 0  # recorded broken builds removed (they build now, or their file is gone)

    def __str__(self) -> str:
        stale = f"{self.stale} stale" + (" (removed)" if self.stale and self.stale_removed else "")
        rekeyed = f", {self.rekeyed} re-keyed" if self.rekeyed else ""
        broken = f", {self.broken} broken build(s) recorded" if self.broken else ""
        if self.broken_dropped:
            broken += f", {self.broken_dropped} broken build(s) dropped"
        counts = f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged"
        return f"{counts}, {stale}{rekeyed}{broken}"


def update(
    path: Path,
    fresh: Mapping[Key, BaselineEntry],
    remove: set[Key],
    *,
    moved: Mapping[Key, Key] | None = None,
    lock_dir: Path | None = None,
    lock_timeout: float | None = None,
    broken: Mapping[BuildKey, BrokenBuild] | None = None,
    fixed: set[BuildKey] | None = None,
) -> UpdateCounts:
    """Merge `fresh` into the file and drop `remove`, re-reading it under the lock so that concurrent updates
    by other processes are kept.

    `broken` records builds that failed (replacing what an earlier update recorded of them); `fixed` drops
    recorded broken builds (they build now, or their file is gone).

    `moved` maps a fresh key to the key its entry was read under (a key of an older version, see
    KernelFacts.legacy_variant): that entry is merged into the fresh one, as an entry under the same key
    would be (other launches, other GPUs' timings), and removed.

    The lock lives in `lock_dir` (default: the compile cache directory, which is where it goes even under
    --regbudget-no-cache) and is waited for at most `lock_timeout` seconds (default LOCK_TIMEOUT). Raises
    BaselineError, leaving the file as it was, if it is corrupt, read-only, locked for too long, or cannot
    be written (a directory that is not writable, a full disk).
    """
    if lock_dir is None:
        lock_dir = default_cache_dir()
    timeout = LOCK_TIMEOUT if lock_timeout is None else lock_timeout
    with _locked(path, lock_dir, timeout):
        current = load(path)
        counts = UpdateCounts(stale=len(remove & current.entries.keys()), stale_removed=True)
        merged = dict(current.entries)
        for key, entry in fresh.items():
            old = current.entries.get(key)
            was = (moved or {}).get(key)
            if old is None and was is not None and was in current.entries:
                old = merged.pop(was)
                counts.rekeyed += 1
                entry = entry.merged(old)
            elif old is not None:
                entry = entry.merged(old)
            if old is None:
                counts.added += 1
            elif old.to_toml() == entry.to_toml():
                counts.unchanged += 1
            else:
                counts.updated += 1
            merged[key] = entry
        for key in remove:
            merged.pop(key, None)
        failed = {**current.broken, **(broken or {})}
        dropped = [build for build in fixed or () if build in failed]
        for build in dropped:
            failed.pop(build)
        counts.broken, counts.broken_dropped = len(failed), len(dropped)
        data = encoded(path, dumps(Baseline(merged, failed)))
        if not path.exists() or path.read_bytes() != data:
            check_writable(path)
            try:
                atomic_write(path, data)
            except OSError as exc:
                raise BaselineError(write_failure(path, exc)) from None
    return counts
