"""The build side of a run: the toolkit, nvcc, nvdisasm, the compile cache and its prefetch pool, and the
`BuildEnv` each test's kernel sources build in. Found once, on first use; no test state lives here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import Struct

from ..cache.fingerprint import FORMAT
from ..cache.prefetch import Prefetcher
from ..cache.store import CacheStats, CompileCache
from ..core import baseline as bl
from ..core.errors import CompileError, SassError, ToolchainError
from ..core.facts import KernelFacts
from ..core.liveness import PeakLive
from ..tools.options import CompileOptions, Timeouts
from ..tools.outputs import CompiledKernel
from ..tools.running import ToolMemo, kill_running_tools
from ..tools.toolkit import Nvcc, Toolkit, discover
from ..tools.units import Spec, Unit
from .progress import BuildProgress

if TYPE_CHECKING:
    from ..tools.cuobjdump import Held
    from ..tools.frontends import FrontendPtx

# Each tool's module (nvcc, nvdisasm, cuobjdump) is imported where a build first asks for that tool: a run of
# NVRTC kernels on a warm cache loads none of them (docs/speed.md, "what a run pays").


class BuildSettings(Struct, frozen=True):
    rootdir: Path
    cuda_home: str | None
    timeouts: Timeouts
    cache_dir: Path | None  # None: --regbudget-no-cache
    jobs: int  # compile threads
    sass: bool  # --regbudget-sass: every kernel's SASS is read
    toolkit: str | None = None  # a --regbudget-toolkit name (toolchain.TOOLKIT_NAMES, or a path)
    nvcc: str | None = None  # --regbudget-nvcc: the nvcc for compiler="nvcc", pinned


class Builder:
    def __init__(self, settings: BuildSettings) -> None:
        self.settings = settings
        self.cache = CompileCache(settings.cache_dir, settings.rootdir)
        self._toolkit: Toolkit | None = None
        self._toolkit_error: str | None = None
        self._nvcc: Nvcc | None = None
        self._cuobjdump: Path | None = None  # found once per run: a library's thousands of items each ask
        self._binaries: dict[tuple[Path, str], tuple[tuple[int, ...], Held]] = {}
        self._prefetcher: Prefetcher | None = None
        self._options_hashes: dict[CompileOptions, str] = {}
        # What the pool builds, for the progress line and the summary's slowest builds.
        self.progress = BuildProgress(settings.rootdir, settings.jobs)
        # What discovery and `nvcc --version` found, remembered in the cache: a warm run starts no process.
        where = self.cache.directory
        self._memo = ToolMemo(None if where is None else where / f"v{FORMAT}" / "tools", where)

    def toolkit(self) -> Toolkit:
        if self._toolkit is None and self._toolkit_error is None:
            try:
                named = self.settings.toolkit
                self._toolkit = discover(self.settings.cuda_home, memo=self._memo, named=named)
            except ToolchainError as exc:
                self._toolkit_error = str(exc)
        if self._toolkit is None:
            raise ToolchainError(self._toolkit_error or "no toolkit")
        return self._toolkit

    def toolkit_or_none(self) -> Toolkit | None:
        """The toolkit, for tools that can also come from elsewhere (nvcc, nvdisasm, cuobjdump)."""
        try:
            return self.toolkit()
        except ToolchainError:
            return None

    def nvcc(self) -> Nvcc:
        """The nvcc for compiler="nvcc": the pinned one (--regbudget-nvcc); under --regbudget-toolkit the
        toolkit's own (Unbuildable where it has none); else the toolkit's, the CUDA 13 wheel's or PATH's."""
        if self._nvcc is None:
            from ..tools.nvcc import find_nvcc

            s = self.settings
            if s.nvcc is not None:
                self._nvcc = find_nvcc(None, self._memo, pinned=Path(s.nvcc))
            elif s.toolkit is not None:
                self._nvcc = find_nvcc(self.toolkit(), self._memo, only_toolkit=s.toolkit)
            else:
                self._nvcc = find_nvcc(self.toolkit_or_none(), self._memo)
        return self._nvcc

    def nvcc_if_found(self) -> Nvcc | None:
        """The nvcc this process found, if a test asked for one (it is never looked for otherwise)."""
        return self._nvcc

    def nvdisasm(self) -> Path:
        """nvdisasm for the SASS diagnostics; SassError (naming the `sass` extra) when there is none."""
        from ..tools import nvdisasm as disasm

        found = disasm.find_nvdisasm(self.toolkit_or_none())
        if found is None:
            raise SassError(
                "the SASS diagnostics (--regbudget-sass, hot_spills, max_local_share) need nvdisasm, found "
                "neither in the toolkit, nor as the nvidia-cuda-nvdisasm wheel, nor on PATH. Fix: "
                f"{disasm.SASS_FIX}"
            )
        return found

    def peak_live(self, facts: KernelFacts) -> PeakLive | None:
        """The peak of live registers of a build whose SASS is not read otherwise (tools/nvdisasm.py's
        read_peak), where nvdisasm is found and gives life ranges of its cubin; None otherwise: the peak
        only adds to a message, and no budget asked for nvdisasm."""
        from ..tools import nvdisasm as disasm  # the SASS readers: for a kernel that fails on registers

        found = disasm.find_nvdisasm(self.toolkit_or_none())
        if found is None or not facts.cubin:
            return None
        return disasm.read_peak(found, facts.cubin, facts.entry, cache_dir=self.settings.cache_dir)

    def pool(self) -> Prefetcher:
        if self._prefetcher is None:
            self._prefetcher = Prefetcher(
                self.cache, self.toolkit(), self.settings.jobs, self.settings.timeouts, self.progress
            )
        return self._prefetcher

    def prefetch(self, specs: Iterable[Spec]) -> None:
        """Plan the run's kernels (the units they share), and start building them when there is a pool."""
        with contextlib.suppress(ToolchainError):  # each test reports a missing toolkit itself
            self.pool().submit(specs)

    def prefetch_listings(self, listings: Iterable[tuple[Path, str, CompileOptions, str]]) -> None:
        """Start building the units whose kernel lists collection will ask `entries` for, all at once on the
        pool (source, arch, options, compiler each); errors are left to `entries`, which reports them."""
        units = []
        for source, arch, options, compiler in listings:
            try:
                nvcc = self.nvcc() if compiler == "nvcc" else None
            except (CompileError, ToolchainError):
                continue
            units.append(Unit(source, arch, options.with_line_info(), nvcc))
        with contextlib.suppress(ToolchainError):
            self.pool().prefetch_units(units)

    def cuobjdump(self) -> str | None:
        """The cuobjdump that reads prebuilt binaries, described (`cuobjdump 13.5.37 (path)`)."""
        from ..tools.cuobjdump import describe_cuobjdump

        return describe_cuobjdump(self.toolkit_or_none())

    def binary_arch(self, path: Path, arch: str) -> Held:
        # A library's thousands of items each ask for the same file: one stat tells whether it is as read.
        try:
            st = path.stat()
        except OSError:
            st = None
        stamp = None if st is None else (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        known = self._binaries.get((path, arch))
        if stamp is not None and known is not None and known[0] == stamp:
            return known[1]
        from ..tools.cuobjdump import read_arch, require_cuobjdump

        s = self.settings
        if self._cuobjdump is None:
            self._cuobjdump = require_cuobjdump(path, self.toolkit_or_none())
        held = read_arch(
            path, self._cuobjdump, arch, timeout=s.timeouts.cuobjdump, cache_dir=s.cache_dir, jobs=s.jobs
        )
        if stamp is not None:
            self._binaries[(path, arch)] = (stamp, held)
        return held

    def entries(self, source: Path, arch: str, options: CompileOptions, compiler: str) -> list[str]:
        """The entries of every kernel `source` holds for `arch`, built by `compiler` ("nvrtc": its plain
        compile, every extern "C" and non-template kernel; "nvcc": every kernel the file instantiates). The
        build is the one its kernels share: it is made once, and cached."""
        nvcc = self.nvcc() if compiler == "nvcc" else None
        return self.pool().entries(Unit(source, arch, options.with_line_info(), nvcc))

    def compile(self, spec: Spec, source_text: str | None = None) -> CompiledKernel:
        if source_text is None:
            return self.pool().get(spec)
        source, kernel, arch, options, nvcc = spec
        return self.cache.compile(
            source,
            kernel,
            arch,
            options,
            self.toolkit(),
            self.settings.timeouts,
            source_text=source_text,
            nvcc=nvcc,
        )

    def options_hash(self, options: CompileOptions) -> str:
        # Every field, from the list the cache key uses too; paths relative to the rootdir, so that the
        # hash is the same on every checkout. Remembered: the kernels of a run share few option sets.
        known = self._options_hashes.get(options)
        if known is None:
            known = bl.options_hash(*options.identity(relative_to=self.settings.rootdir))
            self._options_hashes[options] = known
        return known

    def build_settings(self, options: CompileOptions) -> tuple[str, ...]:
        return options.settings(relative_to=self.settings.rootdir)

    def cache_line(self, workers: CacheStats) -> str:
        if self.settings.cache_dir is None:
            return "compile cache: off (--regbudget-no-cache)"
        total = self.cache.stats.merged(workers)
        return f"compile cache {self.settings.cache_dir}: {total} ({self.settings.jobs} compile thread(s))"

    def close(self) -> None:
        # Tools run in sessions of their own, out of Ctrl-C's reach: stop any still running (an interrupted
        # run) before waiting for the compile threads that started them.
        kill_running_tools()
        if self._prefetcher is not None:
            self._prefetcher.shutdown()


class ItemEnv:
    """The `BuildEnv` of one test: the builder of the toolkit it builds with."""

    def __init__(self, builder: Builder) -> None:
        self._builder = builder
        self.ptxas_timeout = builder.settings.timeouts.ptxas

    def toolkit(self) -> Toolkit:
        return self._builder.toolkit()

    def toolkit_or_none(self) -> Toolkit | None:
        return self._builder.toolkit_or_none()

    def nvcc(self) -> Nvcc:
        return self._builder.nvcc()

    def compile(self, spec: Spec, source_text: str | None = None) -> CompiledKernel:
        return self._builder.compile(spec, source_text)

    def options_hash(self, options: CompileOptions) -> str:
        return self._builder.options_hash(options)

    def build_settings(self, options: CompileOptions) -> tuple[str, ...]:
        return self._builder.build_settings(options)

    def frontend(self, key: str | None, make: Callable[[], FrontendPtx]) -> FrontendPtx:
        return self._builder.cache.frontend(key, make)

    def binary(self, path: Path, arch: str) -> Held:
        return self._builder.binary_arch(path, arch)
