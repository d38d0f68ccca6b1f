"""The baseline snapshot file: load, validate, merge and write `regbudget-baseline.toml`.

Owns the file format (one TOML table per (test nodeid, kernel, arch), keys in a fixed order so a register
change is a one-line diff), the atomic write under a cross-process lock, and the update arithmetic
(added, updated, unchanged, stale). It knows nothing of pytest.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomli_w

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

FORMAT_VERSION = 1
HEADER = """\
# pytest-regbudget baseline: what ptxas reported for each (test, kernel, arch) when it was last accepted.
# A kernel that gets worse than its entry fails its test. Refresh deliberately with
#   pytest --regbudget-update
# and review the diff like code: every changed line is a kernel that changed.
"""

Key = tuple[str, str, str]  # (test nodeid, kernel, arch)

# Stored integer metrics, in file order; "occupancy" (a fraction) and the provenance fields follow.
INT_FIELDS = ("registers", "spill_stores", "spill_loads", "stack", "smem", "const_mem")
TEXT_FIELDS = ("ptxas", "nvrtc", "options_hash")
OPTIONAL_INT_FIELDS = ("spill_stores", "spill_loads")  # absent for binaries, which do not record spills


class BaselineError(Exception):
    """The baseline file cannot be used; the message names the file, the place and the problem."""


@dataclass(frozen=True)
class Entry:
    registers: int
    spill_stores: int | None  # None: a prebuilt binary, which does not record spills
    spill_loads: int | None
    stack: int
    smem: int
    const_mem: int
    ptxas: str
    nvrtc: str
    options_hash: str
    occupancy: float | None = None  # at the launch size, when the marker gives one
    occupancy_at: str | None = None  # "256 threads" or "256 threads, 65536 B dynamic smem"
    # Timings and driver figures per GPU name ("NVIDIA H200"), written by an update on a GPU runner.
    gpu: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    # Fields this version does not know (a newer plugin's) are kept, not dropped.
    extra: Mapping[str, object] = field(default_factory=dict)

    def to_toml(self) -> dict[str, object]:
        out: dict[str, object] = {n: getattr(self, n) for n in INT_FIELDS if getattr(self, n) is not None}
        if self.occupancy is not None:
            out["occupancy"] = self.occupancy
        if self.occupancy_at is not None:
            out["occupancy_at"] = self.occupancy_at
        out.update({name: getattr(self, name) for name in TEXT_FIELDS})
        out.update(sorted(self.extra.items()))
        if self.gpu:
            out["gpu"] = {name: dict(sorted(fig.items())) for name, fig in sorted(self.gpu.items())}
        return out

    def gpu_time_ms(self, device: str) -> float | None:
        value = self.gpu.get(device, {}).get("time_ms")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def options_hash(*parts: object) -> str:
    """A short, stable digest of the compile options, to tell when a kernel's build changed."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def _entry(where: str, table: object) -> Entry:
    if not isinstance(table, dict):
        raise BaselineError(f"{where}: expected a table of numbers, found {table!r}")
    known = {*INT_FIELDS, *TEXT_FIELDS, "occupancy", "occupancy_at", "gpu"}
    gpu = table.get("gpu", {})
    if not isinstance(gpu, dict) or not all(isinstance(v, dict) for v in gpu.values()):
        raise BaselineError(f'{where}: gpu must hold one table per device, e.g. [...gpu."NVIDIA H200"]')
    for device, figures in gpu.items():
        time_ms = figures.get("time_ms")
        if time_ms is not None and (
            isinstance(time_ms, bool) or not isinstance(time_ms, (int, float)) or time_ms <= 0
        ):
            raise BaselineError(f'{where}: gpu."{device}".time_ms = {time_ms!r}, expected milliseconds > 0')
    for name in INT_FIELDS:
        value = table.get(name)
        if value is None and name in OPTIONAL_INT_FIELDS:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BaselineError(f"{where}: {name} = {value!r}, expected a whole number >= 0")
    for name in TEXT_FIELDS:
        if not isinstance(table.get(name), str):
            raise BaselineError(f"{where}: {name} = {table.get(name)!r}, expected a string")
    occ = table.get("occupancy")
    if occ is not None and (isinstance(occ, bool) or not isinstance(occ, (int, float)) or not 0 <= occ <= 1):
        raise BaselineError(f"{where}: occupancy = {occ!r}, expected a fraction in [0, 1]")
    occupancy_at = table.get("occupancy_at")
    if occupancy_at is not None and not isinstance(occupancy_at, str):
        raise BaselineError(f"{where}: occupancy_at = {occupancy_at!r}, expected a string like '256 threads'")
    return Entry(
        registers=table["registers"],
        spill_stores=table.get("spill_stores"),
        spill_loads=table.get("spill_loads"),
        stack=table["stack"],
        smem=table["smem"],
        const_mem=table["const_mem"],
        ptxas=table["ptxas"],
        nvrtc=table["nvrtc"],
        options_hash=table["options_hash"],
        occupancy=None if occ is None else float(occ),
        occupancy_at=occupancy_at,
        gpu=gpu,
        extra={k: v for k, v in table.items() if k not in known},
    )


def parse(text: str, path: Path) -> dict[Key, Entry]:
    """Validate a whole file; the first problem raises BaselineError naming the file and place."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BaselineError(f"{path} is not valid TOML: {exc}") from None
    version = doc.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise BaselineError(
            f"{path}: version = {version!r}; this pytest-regbudget reads version {FORMAT_VERSION}"
        )
    unknown = sorted(set(doc) - {"version", "kernels"})
    if unknown:
        raise BaselineError(
            f"{path}: unknown top-level key {unknown[0]!r} (expected 'version' and 'kernels')"
        )
    kernels = doc.get("kernels", {})
    if not isinstance(kernels, dict):
        raise BaselineError(f"{path}: 'kernels' must be a table")
    entries: dict[Key, Entry] = {}
    for nodeid, per_kernel in kernels.items():
        if not isinstance(per_kernel, dict):
            raise BaselineError(f'{path}: [kernels."{nodeid}"] must hold tables of kernels')
        for kernel, per_arch in per_kernel.items():
            if not isinstance(per_arch, dict):
                raise BaselineError(f'{path}: [kernels."{nodeid}"."{kernel}"] must hold tables of archs')
            for arch, table in per_arch.items():
                where = f'{path}: [kernels."{nodeid}"."{kernel}".{arch}]'
                entries[(nodeid, kernel, arch)] = _entry(where, table)
    return entries


def load(path: Path) -> dict[Key, Entry]:
    """The entries of `path`; a missing file is an empty baseline."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror}") from None
    return parse(text, path)


def dumps(entries: Mapping[Key, Entry]) -> str:
    """Sorted by nodeid, kernel, arch, with a fixed key order inside each entry."""
    kernels: dict[str, dict[str, dict[str, object]]] = {}
    for (nodeid, kernel, arch), entry in sorted(entries.items()):
        kernels.setdefault(nodeid, {}).setdefault(kernel, {})[arch] = entry.to_toml()
    body = tomli_w.dumps({"version": FORMAT_VERSION, "kernels": kernels})
    return HEADER + "\n" + body


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock shared by every pytest process on this machine that writes `path`.

    The lock file lives in the temp dir, keyed by the baseline's absolute path, so nothing is left beside
    the user's baseline.
    """
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"regbudget-{digest}.lock"
    with open(lock_path, "a+b") as fh:
        if sys.platform == "win32":  # pragma: no cover
            import msvcrt

            fh.seek(0)
            msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
        else:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield


def atomic_write(path: Path, text: str) -> None:
    """Write a temp file beside `path`, then replace: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        # mkstemp makes the file private (0600); a committed file keeps its mode, a new one gets the umask's.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@dataclass
class UpdateCounts:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    stale: int = 0
    stale_removed: bool = False

    def __str__(self) -> str:
        stale = f"{self.stale} stale" + (" (removed)" if self.stale and self.stale_removed else "")
        return f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, {stale}"


def update(path: Path, fresh: Mapping[Key, Entry], remove: set[Key]) -> UpdateCounts:
    """Merge `fresh` into the file and drop `remove`, re-reading it under the lock so that concurrent
    updates by other processes are kept. Raises BaselineError, leaving the file as it was, if it is corrupt.
    """
    with _locked(path):
        current = load(path)
        counts = UpdateCounts(stale=len(remove & current.keys()), stale_removed=True)
        merged = dict(current)
        for key, entry in fresh.items():
            old = current.get(key)
            # Keep what this run does not measure: other GPUs' figures (or all of them, on a CPU runner).
            if old is not None:
                entry = replace(entry, gpu={**old.gpu, **entry.gpu}, extra={**old.extra, **entry.extra})
            if old is None:
                counts.added += 1
            elif old.to_toml() == entry.to_toml():
                counts.unchanged += 1
            else:
                counts.updated += 1
            merged[key] = entry
        for key in remove:
            merged.pop(key, None)
        text = dumps(merged)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            atomic_write(path, text)
    return counts
