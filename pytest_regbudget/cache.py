"""A content-addressed cache of NVRTC + ptxas outputs, and a pool that compiles ahead of the tests.

The key covers the source and every user header it includes (found by following #include lines through
the include path), the defines and options, the toolkit (NVRTC and ptxas versions, its header directories),
the kernel and the arch. Entries are JSON files written atomically and carry a checksum: a corrupt or
unreadable entry is rebuilt, never trusted. Only successful builds are cached.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import compiler
from .baseline import atomic_write
from .compiler import BuildOutputs, CompiledKernel, CompileOptions, Nvcc
from .toolchain import Toolkit

FORMAT = 1
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)


def default_cache_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """REGBUDGET_CACHE_DIR, else $XDG_CACHE_HOME/pytest-regbudget, else ~/.cache/pytest-regbudget."""
    if env.get("REGBUDGET_CACHE_DIR"):
        return Path(env["REGBUDGET_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-regbudget"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def included_files(
    source: Path, text: str, include_dirs: Sequence[str], toolkit_dirs: Sequence[Path]
) -> list[tuple[str, str]]:
    """(path, sha256) of every user header reachable from `source`, in a stable order.

    Headers found in the toolkit's own directories are left out (the toolkit is part of the key), and so
    are names found nowhere (NVRTC's built-in headers). Every #include line counts, even one inside an
    #if that is off: a superset of the real dependencies can only cost a rebuild, never a stale hit.
    """
    toolkit_roots = [d.resolve() for d in toolkit_dirs]
    found: dict[str, str] = {}
    pending = [(source.parent, text)]
    while pending:
        here, body = pending.pop()
        for quote, name in _INCLUDE.findall(body):
            local = [here] if quote == '"' else []
            candidates = [d / name for d in [*local, *map(Path, include_dirs), source.parent, *toolkit_roots]]
            path = next((c.resolve() for c in candidates if c.is_file()), None)
            if path is None or any(path.is_relative_to(root) for root in toolkit_roots):
                continue
            key = str(path)
            if key in found:
                continue
            data = path.read_bytes()
            found[key] = _digest(data)
            pending.append((path.parent, data.decode(errors="replace")))
    return sorted(found.items())


def _toolkit_identity(toolkit: Toolkit) -> list[object]:
    # A wheel upgrade rewrites the header directories, which changes their modification times.
    dirs = [(str(d), d.stat().st_mtime_ns if d.exists() else 0) for d in toolkit.include_dirs]
    return [toolkit.nvrtc_version, toolkit.ptxas_version, str(toolkit.ptxas), str(toolkit.nvrtc), dirs]


def cache_key(
    source: Path, text: str, kernel: str, arch: str, options: CompileOptions, toolkit: Toolkit
) -> str:
    parts = [
        FORMAT,
        str(source.resolve()),  # NVRTC writes the path into diagnostics and line info
        _digest(text.encode()),
        included_files(source, text, options.include_dirs, toolkit.include_dirs),
        kernel,
        arch,
        [list(d) for d in options.defines],
        list(options.include_dirs),
        list(options.options),
        list(options.ptxas_options),
        _toolkit_identity(toolkit),
    ]
    return _digest(json.dumps(parts, sort_keys=True).encode())


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    corrupt: int = 0

    def __str__(self) -> str:
        corrupt = f", {self.corrupt} corrupt entries rebuilt" if self.corrupt else ""
        return f"{self.hits} hits, {self.misses} misses{corrupt}"


class CompileCache:
    """compile_kernel with a disk cache in front (directory None: no cache, every compile runs)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.stats = CacheStats()
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / f"v{FORMAT}" / key[:2] / f"{key}.json"

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self.stats, what, getattr(self.stats, what) + 1)

    def compile(
        self,
        source: Path,
        kernel: str,
        arch: str,
        options: CompileOptions,
        toolkit: Toolkit,
        ptxas_timeout: float = compiler.DEFAULT_PTXAS_TIMEOUT,
        *,
        source_text: str | None = None,
        nvcc: Nvcc | None = None,
    ) -> CompiledKernel:
        """NVRTC + ptxas (or, with `nvcc`, nvcc over the whole translation unit), cached.

        `source_text` compiles a code string; `source` then only names it.
        """
        text = compiler.read_source(source) if source_text is None else source_text
        # An nvcc build is measured by nvcc's own toolkit, which is what its report must name.
        used = nvcc.as_toolkit() if nvcc is not None else toolkit

        def build() -> BuildOutputs:
            if nvcc is not None:
                return compiler.build_nvcc(source, text, kernel, arch, options, nvcc, ptxas_timeout)
            return compiler.build(source, text, kernel, arch, options, toolkit, ptxas_timeout)

        if self.directory is None:
            return compiler.interpret(build(), source, text, kernel, arch, options, used)
        key = cache_key(source, text, kernel, arch, options, used)
        cached = self._load(key)
        if cached is not None:
            try:
                compiled = compiler.interpret(cached, source, text, kernel, arch, options, used)
            except compiler.CompileError:
                self._count("corrupt")
            else:
                self._count("hits")
                return compiled
        self._count("misses")
        outputs = build()
        self._store(key, outputs)
        return compiler.interpret(outputs, source, text, kernel, arch, options, used)

    def _load(self, key: str) -> BuildOutputs | None:
        path = self._path(key)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            payload = doc["payload"]
            if doc.get("format") != FORMAT or doc.get("sha256") != _digest(json.dumps(payload).encode()):
                raise ValueError("checksum mismatch")
            return BuildOutputs(
                entry=str(payload["entry"]),
                ptx=str(payload["ptx"]),
                nvrtc_log=str(payload["nvrtc_log"]),
                ptxas_log=str(payload["ptxas_log"]),
                cubin=base64.b64decode(payload["cubin"], validate=True),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            self._count("corrupt")
            return None

    def _store(self, key: str, outputs: BuildOutputs) -> None:
        payload = {
            "entry": outputs.entry,
            "ptx": outputs.ptx,
            "nvrtc_log": outputs.nvrtc_log,
            "ptxas_log": outputs.ptxas_log,
            "cubin": base64.b64encode(outputs.cubin).decode(),
        }
        doc = {"format": FORMAT, "sha256": _digest(json.dumps(payload).encode()), "payload": payload}
        # A read-only or full cache directory slows the run down; it must not fail it.
        with contextlib.suppress(OSError):
            atomic_write(self._path(key), json.dumps(doc))


Spec = tuple[Path, str, str, CompileOptions, Nvcc | None]  # (source, kernel, arch, options, nvcc or NVRTC)


class Prefetcher:
    """Compiles the kernels a run will need on a thread pool (NVRTC releases the GIL; ptxas is a process)."""

    def __init__(self, cache: CompileCache, toolkit: Toolkit, jobs: int, ptxas_timeout: float) -> None:
        self.cache = cache
        self.toolkit = toolkit
        self.ptxas_timeout = ptxas_timeout
        self._futures: dict[Spec, Future[CompiledKernel]] = {}
        self._pool = (
            ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="regbudget") if jobs > 1 else None
        )

    def submit(self, specs: Iterable[Spec]) -> None:
        if self._pool is None:
            return
        for spec in specs:
            if spec not in self._futures:
                self._futures[spec] = self._pool.submit(self._compile, spec)

    def get(self, spec: Spec) -> CompiledKernel:
        """The prefetched result (its exception re-raised), or a compile now."""
        future = self._futures.pop(spec, None)
        if future is not None:
            return future.result()
        return self._compile(spec)

    def _compile(self, spec: Spec) -> CompiledKernel:
        source, kernel, arch, options, nvcc = spec
        return self.cache.compile(source, kernel, arch, options, self.toolkit, self.ptxas_timeout, nvcc=nvcc)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def default_jobs(env: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The cores this process may use: all of them, divided among pytest-xdist's workers."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    workers = int(env.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    return max(1, cores // max(1, workers))
