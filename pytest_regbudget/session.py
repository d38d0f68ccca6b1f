"""The state of one pytest run: settings, the toolkit, the baseline, and every kernel's record.

plugin.py's hooks hand off here. Under pytest-xdist each worker holds its own session and ships its records
(and what it collected) to the controller through `workeroutput`; only the controller writes files.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from . import baseline as bl
from . import binary, gpu, html, sass
from .arch import UnknownArchError, get_arch
from .budget import KernelReport, check, compare, time_verdict
from .cache import CacheStats, CompileCache, Prefetcher, Spec
from .compiler import (
    DEFAULT_PTXAS_TIMEOUT,
    BuildOutputs,
    CompiledKernel,
    CompileError,
    CompileOptions,
    KernelNotFoundError,
    Nvcc,
    error_location,
    find_nvcc,
    interpret,
    match_entry,
    run_ptxas,
)
from .frontends import FrontendPtx
from .markers import Budget, MarkerError, parse_marker
from .occupancy import launch_failure
from .ptxas import KernelResources
from .report import (
    KernelRecord,
    baseline_lines,
    entry_from_record,
    github_annotations,
    markdown_report,
    summary_lines,
    to_record,
    unknown_arch_lines,
    write_json,
)
from .scope import Decision, RunScope, decide
from .text import safe_block
from .toolchain import ToolchainError, Toolkit, discover, kill_running_tools

WORKEROUTPUT_KEY = "regbudget"
UPDATE_HINT = "pytest --regbudget-update"


class RegbudgetWarning(UserWarning):
    """A budget exceeded by a kernel whose marker says level="warn", or a baseline that cannot be compared."""


@dataclass(frozen=True)
class Settings:
    archs: tuple[str, ...]
    rootdir: Path
    cuda_home: str | None = None
    json_path: Path | None = None
    ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT
    baseline_path: Path | None = None
    update: bool = False
    tolerance: dict[str, float] = field(default_factory=dict)
    markdown_path: Path | None = None
    step_summary: Path | None = None  # $GITHUB_STEP_SUMMARY
    annotate: bool = False  # GITHUB_ACTIONS=true
    gpu_mode: str = "auto"  # auto | off | require
    sass: bool = False  # --regbudget-sass
    html_path: Path | None = None
    cache_dir: Path | None = None  # None: --regbudget-no-cache
    jobs: int = 1  # compile threads
    compiler: str = "nvrtc"  # ini regbudget_compiler: nvrtc or nvcc


@dataclass
class ItemState:
    """What a marked test carries from collection to its call phase."""

    arch: str
    budget: Budget | None = None
    marker_error: str | None = None
    reports: list[KernelReport] = field(default_factory=list)
    item_archs: tuple[str, ...] = ()  # every arch this item runs for, in order
    loaded: dict[tuple[str, str], Any] = field(default_factory=dict)  # (kernel id, arch) -> CuPy kernel
    gpu_note: str | None = None


class RegbudgetSession:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.records: list[KernelRecord] = []
        self.scope = RunScope()
        # Set by the controller at the end: the run's path arguments and a selection that hides files.
        self.prefixes: tuple[str, ...] = ("",)
        self.selection: str | None = None
        self.missing_sources: set[bl.Key] = set()  # entries whose kernel source file the run found gone
        self.finish_lines: list[str] = []
        self._toolkit: Toolkit | None = None
        self._toolkit_error: str | None = None
        self._warned_versions: set[tuple[str, str]] = set()
        self.gpu_reason = ""
        self.cache = CompileCache(settings.cache_dir)
        self._prefetcher: Prefetcher | None = None
        self._nvcc: Nvcc | None = None
        self.cache_totals = CacheStats()  # the controller's sum over workers
        # Raises BaselineError (a usage error) before any test runs, leaving the file untouched.
        self.baseline = bl.load(settings.baseline_path) if settings.baseline_path else {}

    # -- toolkit ---------------------------------------------------------------------------------
    def toolkit(self) -> Toolkit:
        if self._toolkit is None and self._toolkit_error is None:
            try:
                self._toolkit = discover(self.settings.cuda_home)
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

    def header(self) -> str:
        s = self.settings
        archs = ",".join(s.archs)
        try:
            where = self.toolkit().describe()
        except ToolchainError:
            where = "NO CUDA TOOLKIT FOUND (marked tests will fail and say why)"
        base = "-"
        if s.baseline_path is not None:
            count = f"{len(self.baseline)} entries" if s.baseline_path.exists() else "not yet written"
            base = f"{self._display(s.baseline_path)} ({count}{', updating' if s.update else ''})"
        return f"regbudget: {where}; archs {archs}; baseline {base}; gpu {s.gpu_mode}"

    def cache_line(self) -> str:
        if self.settings.cache_dir is None:
            return "compile cache: off (--regbudget-no-cache)"
        total = self.cache.stats.merged(self.cache_totals)
        return f"compile cache {self.settings.cache_dir}: {total} ({self.settings.jobs} compile thread(s))"

    def gpu_line(self) -> str:
        """Where the GPU checks ran, or why not (probing only if the run already did)."""
        if self.settings.gpu_mode == "off":
            return "GPU checks: off (--regbudget-gpu=off)"
        devices = sorted({r["gpu_device"] for r in self.records if r["gpu_device"]})
        if devices:
            timed = sum(1 for r in self.records if r["time_ms"] is not None)
            return f"GPU checks ran on {', '.join(devices)} ({timed} kernel(s) timed)"
        notes = sorted({r["gpu_note"] for r in self.records if r["gpu_note"]})
        return f"GPU checks: none ran ({notes[0] if notes else 'no kernel reached them'})"

    def _display(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.settings.rootdir))
        except ValueError:
            return str(path)

    # -- collection --------------------------------------------------------------------------------
    def item_archs(self, budget: Budget | None) -> list[str]:
        if budget is None or budget.archs is None:
            return list(self.settings.archs)
        return [a for a in self.settings.archs if a in budget.archs]

    @staticmethod
    def parse(marker: pytest.Mark | None, test_path: Path) -> tuple[Budget | None, str | None]:
        if marker is None:
            return None, None
        try:
            return parse_marker(marker.args, marker.kwargs, test_path.parent), None
        except MarkerError as exc:
            return None, str(exc)

    # -- the test's call phase ---------------------------------------------------------------------
    def compile_and_check(
        self,
        state: ItemState,
        nodeid: str,
        source: Path,
        kernel: str,
        options: CompileOptions,
        *,
        compiler: str = "nvrtc",
        source_text: str | None = None,
    ) -> KernelReport:
        """Compile one kernel for the item's arch (and the GPU's, where this item runs the GPU checks but
        does not target the GPU's arch), judge it, and return the report for the item's arch.

        `compiler="nvcc"` builds the whole translation unit with nvcc; `source_text` compiles a code string
        that `source` only names.
        """
        budget = state.budget or Budget()
        if source_text is None and not source.exists():
            # The kernel's source is gone: its entry is stale even though the test still names it.
            self.missing_sources.add((nodeid, self._kernel_id(state, kernel), state.arch))
        nvcc = self.nvcc() if compiler == "nvcc" else None

        def produce(arch: str) -> CompiledKernel:
            spec = self._spec(budget, source, kernel, options, arch, nvcc)
            if source_text is not None:
                return self.cache.compile(
                    source,
                    kernel,
                    arch,
                    spec[3],
                    self.toolkit(),
                    self.settings.ptxas_timeout,
                    source_text=source_text,
                    nvcc=nvcc,
                )
            return self.compiler().get(spec)

        return self.measure(state, nodeid, kernel, produce, options)

    def measure(
        self,
        state: ItemState,
        nodeid: str,
        kernel: str,
        produce: Callable[[str], CompiledKernel],
        options: CompileOptions,
    ) -> KernelReport:
        """Judge what `produce(arch)` built, for the item's arch and, where due, the GPU's."""
        kernel_id = self._kernel_id(state, kernel)
        gpu_arch = self.gpu_arch(state)
        report = self._judge(state, nodeid, kernel_id, produce(state.arch), options, gpu_arch)
        if gpu_arch is not None and gpu_arch != state.arch:
            self._judge(state, nodeid, kernel_id, produce(gpu_arch), options, gpu_arch)
        return report

    def measure_ptx(
        self,
        state: ItemState,
        nodeid: str,
        make_ptx: Callable[[str, Toolkit], FrontendPtx],
        settings_text: Sequence[str],
    ) -> KernelReport:
        """Judge a kernel whose PTX another compiler (Triton, Numba) wrote, measured by our ptxas.

        `settings_text` (signature, constexprs, warps...) stands in for compile options in the baseline's
        options hash.
        """
        tk = self.toolkit()
        options = CompileOptions(options=tuple(settings_text))
        first = make_ptx(state.arch, tk)

        def produce(arch: str) -> CompiledKernel:
            made = first if arch == state.arch else make_ptx(arch, tk)
            label = f"{made.name} [{arch}]"
            # Triton writes sm_90a PTX when asked for sm_90 (wgmma exists only there): assemble what it wrote.
            log, cubin = run_ptxas(made.ptx, made.ptx_target, (), tk, self.settings.ptxas_timeout, label)
            outputs = BuildOutputs(entry=made.entry, ptx=made.ptx, nvrtc_log="", ptxas_log=log, cubin=cubin)
            source = made.source or Path(made.name)
            compiled = interpret(outputs, source, "", made.name, arch, options, tk)
            used = replace(
                tk, nvrtc_version=made.frontend
            )  # the report names the compiler that wrote the PTX
            return replace(compiled, kernel=made.name, line=made.line, toolkit=used)

        return self.measure(state, nodeid, first.name, produce, options)

    def load_binary(
        self, state: ItemState, nodeid: str, path: Path, kernel: str | None = None
    ) -> list[KernelReport]:
        """Judge the kernels a prebuilt binary holds for the item's arch (all, or `kernel` only)."""
        held = binary.read_binary(path, self.toolkit_or_none())
        mine = [k for k in held if k.arch == state.arch]
        if not mine:
            archs = ", ".join(sorted({k.arch for k in held})) or "none"
            raise CompileError(
                f"{path} holds no machine code for {state.arch} (it holds: {archs}); build it with "
                f"-gencode arch=compute_XX,code={state.arch} or restrict the test with archs="
            )
        if kernel is not None:
            entry = match_entry(kernel, [k.name for k in mine])
            if entry is None:
                names = ", ".join(k.name for k in mine)
                raise KernelNotFoundError(
                    f"kernel {kernel!r} not found in {path} [{state.arch}]; it contains: {names} (name a C++ "
                    "template or overload by its mangled name)"
                )
            mine = [k for k in mine if k.name == entry]
        made = Toolkit(
            origin=f"prebuilt {path.name}",
            ptxas=path,
            nvrtc=path,
            nvrtc_version="prebuilt",
            ptxas_version="prebuilt",
        )
        reports = []
        for k in mine:
            resources = KernelResources(
                name=k.name,
                arch=k.arch,
                registers=k.registers,
                spill_stores=k.spill_stores or 0,
                spill_loads=k.spill_loads or 0,
                stack_frame=k.stack,
                shared_mem=k.shared,
                const_mem=k.const,
                const_banks=(),
                barriers=0,
                ptxas_line=(
                    f"cuobjdump: REG:{k.registers} STACK:{k.stack} SHARED:{k.shared} LOCAL:{k.local}"
                    + ("" if k.spill_stores is not None else " (spills not recorded in the binary)")
                ),
                max_threads=k.max_threads,
                min_blocks_per_sm=k.min_blocks,
                spills_known=k.spill_stores is not None,
            )
            compiled = CompiledKernel(
                kernel=k.name,
                entry=k.name,
                arch=k.arch,
                source=path,
                resources=resources,
                options=CompileOptions(),
                toolkit=made,
                ptxas_log="",
                nvrtc_log="",
                cubin=b"",
                ptx="",
            )
            kernel_id = self._kernel_id(state, kernel if kernel is not None else k.name)
            reports.append(self._judge(state, nodeid, kernel_id, compiled, CompileOptions(), gpu_arch=None))
        return reports

    def _judge(
        self,
        state: ItemState,
        nodeid: str,
        kernel_id: str,
        compiled: CompiledKernel,
        options: CompileOptions,
        gpu_arch: str | None,
    ) -> KernelReport:
        arch = compiled.arch
        budget = state.budget or Budget()
        limits = budget.limits(arch)
        sass_report = None
        if self._needs_sass(budget, arch) and compiled.cubin:
            sass_report = sass.disassemble(self.nvdisasm(), compiled.cubin, compiled.entry)
        facts = None
        if arch == gpu_arch and compiled.cubin:
            dev = gpu.device()
            loaded = dev.load(compiled.cubin, compiled.entry, f"{nodeid}/{kernel_id}")
            state.loaded[(kernel_id, arch)] = loaded
            facts = gpu.probe(
                dev, loaded, limits.launch.threads if limits.launch else None, limits.dynamic_smem
            )
        report = check(
            nodeid,
            kernel_id,
            arch,
            str(compiled.source),
            compiled.resources,
            limits,
            budget.level,
            gpu=facts,
            sass=sass_report,
            ptxas_options=options.ptxas_options,
        )
        report.ptxas_version = compiled.toolkit.ptxas_version
        report.nvrtc_version = compiled.toolkit.nvrtc_version
        report.options_hash = self._options_hash(options)
        report.line = compiled.line
        if state.gpu_note and arch == state.arch:
            report.gpu_note = state.gpu_note
        for defect in report.model_defects:
            warnings.warn(RegbudgetWarning(f"{report.label}: {defect}"), stacklevel=1)
        self._ratchet(report, {**self.settings.tolerance, **budget.tolerance})
        state.reports.append(report)
        return report

    def _needs_sass(self, budget: Budget, arch: str) -> bool:
        return self.settings.sass or budget.limits(arch).hot_spills is not None

    def _spec(
        self,
        budget: Budget,
        source: Path,
        kernel: str,
        options: CompileOptions,
        arch: str,
        nvcc: Nvcc | None = None,
    ) -> Spec:
        # Line info only when the SASS is read: the spec is what the cache and the prefetcher key on.
        build = options.with_line_info() if self._needs_sass(budget, arch) else options
        return (source, kernel, arch, build, nvcc)

    def compiler_of(self, budget: Budget) -> str:
        return budget.compiler or self.settings.compiler

    def nvcc(self) -> Nvcc:
        if self._nvcc is None:
            self._nvcc = find_nvcc(self.toolkit_or_none())
        return self._nvcc

    def compiler(self) -> Prefetcher:
        if self._prefetcher is None:
            self._prefetcher = Prefetcher(
                self.cache, self.toolkit(), self.settings.jobs, self.settings.ptxas_timeout
            )
        return self._prefetcher

    def prefetch(self, states: Sequence[ItemState]) -> None:
        """Start compiling every marker kernel of the run, in collection order, on the pool."""
        if self.settings.jobs <= 1:
            return
        specs = []
        for s in states:
            b = s.budget
            if b is None or b.source is None or b.kernel is None or b.binary is not None:
                continue
            try:
                nvcc = self.nvcc() if self.compiler_of(b) == "nvcc" else None
            except CompileError:
                continue  # the test itself reports the missing nvcc
            specs.append(self._spec(b, b.source, b.kernel, b.options, s.arch, nvcc))
        with contextlib.suppress(ToolchainError):  # each test reports a missing toolkit itself
            self.compiler().submit(specs)

    def close(self) -> None:
        # Tools run in sessions of their own, out of Ctrl-C's reach: stop any still running (an interrupted
        # run) before waiting for the compile threads that started them.
        kill_running_tools()
        if self._prefetcher is not None:
            self._prefetcher.shutdown()

    def nvdisasm(self) -> Path:
        """nvdisasm for the SASS diagnostics; SassError (naming the `sass` extra) when there is none."""
        found = sass.find_nvdisasm(self.toolkit_or_none())
        if found is None:
            raise sass.SassError(
                "the SASS diagnostics (--regbudget-sass, hot_spills) need nvdisasm, found neither in the "
                f"toolkit, nor as the nvidia-cuda-nvdisasm wheel, nor on PATH. Fix: {sass.SASS_FIX}"
            )
        return found

    @staticmethod
    def _kernel_id(state: ItemState, kernel: str) -> str:
        # A test may compile one kernel several ways; each gets its own baseline entry.
        n = sum(
            1
            for r in state.reports
            if r.arch == state.arch and (r.kernel == kernel or r.kernel.startswith(f"{kernel} #"))
        )
        return kernel if n == 0 else f"{kernel} #{n + 1}"

    # -- GPU ---------------------------------------------------------------------------------------
    def gpu_device(self) -> gpu.Device | None:
        """The device when GPU checks are on and one is usable, else None (the reason in gpu_reason)."""
        if self.settings.gpu_mode == "off":
            self.gpu_reason = "--regbudget-gpu=off"
            return None
        try:
            return gpu.device()
        except gpu.GpuUnavailable as exc:
            self.gpu_reason = str(exc)
            return None

    def gpu_arch(self, state: ItemState) -> str | None:
        """The device's arch if this item instance is the one that runs GPU checks, else None.

        The instance for the device's arch runs them; an item that does not target the device's arch runs
        them in its first arch's instance, after compiling for the device's arch too.
        """
        dev = self.gpu_device()
        if dev is None:
            state.gpu_note = f"GPU checks skipped: {self.gpu_reason}"
            return None
        try:
            get_arch(dev.arch)
        except UnknownArchError:
            state.gpu_note = f"GPU checks skipped: {dev.name} is {dev.arch}, which this version does not know"
            return None
        if state.arch == dev.arch:
            return dev.arch
        if dev.arch not in state.item_archs and state.item_archs and state.arch == state.item_archs[0]:
            return dev.arch
        state.gpu_note = f"GPU checks run in the {dev.arch} instance of this test"
        return None

    def benchmark(
        self,
        state: ItemState,
        kernel: str | KernelReport,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        args: Sequence[Any],
        dynamic_smem: int,
        flush_l2: bool,
    ) -> gpu.Timing | None:
        """Time the loaded cubin of `kernel`; None (with the reason noted) where GPU checks do not run."""
        report = self._gpu_report(state, kernel)
        if report is None:
            return None
        budget = state.budget or Budget()
        limits = budget.limits(report.arch)
        dev = gpu.device()
        try:
            timing = dev.benchmark(
                state.loaded[(report.kernel, report.arch)], grid, block, args, dynamic_smem, flush_l2=flush_l2
            )
        except gpu.LaunchError as exc:
            raise gpu.LaunchError(self._launch_failure_text(report, block, dynamic_smem, str(exc))) from None
        report.timing = timing
        baseline_ms = report.baseline.gpu_time_ms(dev.name) if report.baseline else None
        report.baseline_time_ms = baseline_ms
        if timing.throttled:
            warnings.warn(
                RegbudgetWarning(
                    f"{report.label}: {dev.name} was throttled while timing (SM clock "
                    f"{timing.sm_clock_mhz} of {timing.max_sm_clock_mhz} MHz, NVML reasons "
                    f"{timing.throttle_reasons:#x}); times are suspect"
                ),
                stacklevel=1,
            )
        if baseline_ms is None and limits.max_time_ratio is not None:
            report.gpu_note = (
                f"no time baseline for {dev.name} yet: max_time_ratio not checked; "
                f"record one with {UPDATE_HINT} on this GPU"
            )
        if not self.settings.update:
            report.violations += time_verdict(report, limits, timing, baseline_ms)
        elif limits.max_time_ms is not None:
            report.violations += time_verdict(report, replace(limits, max_time_ratio=None), timing, None)
        return timing

    def _gpu_report(self, state: ItemState, kernel: str | KernelReport) -> KernelReport | None:
        wanted = kernel.kernel if isinstance(kernel, KernelReport) else kernel
        loaded = [r for r in state.reports if (r.kernel, r.arch) in state.loaded]
        if not loaded:
            if state.gpu_note is None and not state.reports:
                raise ValueError(f"benchmark({wanted!r}): this test compiled no kernel; compile it first")
            return None
        for r in loaded:
            if r.kernel == wanted:
                return r
        names = ", ".join(sorted({r.kernel for r in loaded}))
        raise ValueError(f"benchmark({wanted!r}): no such kernel compiled in this test (compiled: {names})")

    @staticmethod
    def _launch_failure_text(
        report: KernelReport, block: tuple[int, ...], dynamic_smem: int, error: str
    ) -> str:
        threads = 1
        for b in block:
            threads *= b
        res = report.resources
        why = None
        if res is not None:
            why = launch_failure(
                report.arch, res.registers, threads, res.shared_mem, dynamic_smem, res.max_threads
            )
        detail = (
            why
            or "the static calculator says it fits: a defect of pytest-regbudget's model, please report it"
        )
        return f"{report.label}: launching block={block} failed ({error}): {detail}"

    def _options_hash(self, options: CompileOptions) -> str:
        # Every field, from the list the cache key uses too; paths relative to the rootdir, so that the
        # hash is the same on every checkout.
        return bl.options_hash(*options.identity(relative_to=self.settings.rootdir))

    def _ratchet(self, report: KernelReport, tolerance: dict[str, float]) -> None:
        old = self.baseline.get((report.nodeid, report.kernel, report.arch))
        if old is None:
            report.baseline_status = "new" if self.settings.baseline_path else "none"
            return
        report.baseline = old
        report.deltas = compare(old, entry_from_record(to_record(report)), tolerance)
        if old.ptxas != report.ptxas_version:
            report.baseline_status = "toolkit-mismatch"
            self._warn_toolkit_mismatch(old.ptxas, report.ptxas_version)
            return
        report.baseline_status = "compared"
        if self.settings.update:
            return  # this run accepts whatever it measures
        name = self._display(self.settings.baseline_path) if self.settings.baseline_path else "the baseline"
        for d in report.deltas:
            if d.verdict == "worse":
                allowed = f", tolerance {d.tolerance:g}" if d.tolerance else ""
                report.violations.append(
                    f"{d.text()} is worse than the baseline{allowed}; if intended, accept it with "
                    f"{UPDATE_HINT} and commit {name}"
                )

    def _warn_toolkit_mismatch(self, old: str, new: str) -> None:
        if (old, new) in self._warned_versions:
            return
        self._warned_versions.add((old, new))
        warnings.warn(
            RegbudgetWarning(
                f"baseline {self.settings.baseline_path} was recorded with ptxas {old}, this run uses ptxas "
                f"{new}: its entries are shown but not enforced. Refresh it with this toolkit: {UPDATE_HINT}"
            ),
            stacklevel=1,
        )

    def record_error(self, state: ItemState, nodeid: str, kernel: str, source: Path, error: str) -> None:
        where = error_location(error)
        report = KernelReport(
            nodeid=nodeid,
            kernel=kernel,
            arch=state.arch,
            source=where[0] if where else str(source),
            resources=None,
            error=error,
            line=where[1] if where else None,
        )
        state.reports.append(report)

    def verdict(self, state: ItemState, nodeid: str, completed: bool) -> str | None:
        """The failure text of a finished test, or None; warn-level violations become warnings."""
        if completed:
            self.scope.completed.add(nodeid)
        self.records.extend(to_record(r) for r in state.reports)
        failures = [r.failure_text() for r in state.reports if r.outcome == "failed"]
        for r in state.reports:
            if r.outcome == "warned":
                warnings.warn(RegbudgetWarning(r.failure_text()), stacklevel=1)
        return "\n".join(failures) if failures else None

    # -- xdist -------------------------------------------------------------------------------------
    def worker_payload(self) -> dict[str, Any]:
        return {
            "cache": self.cache.stats.to_payload(),
            "records": self.records,
            "scope": self.scope.payload(),
            "missing_sources": sorted(self.missing_sources),
        }

    def merge_worker(self, payload: dict[str, Any]) -> None:
        self.records.extend(payload.get("records", []))
        self.cache_totals.add_payload(payload.get("cache"))
        self.scope.merge(payload.get("scope", {}))
        self.missing_sources.update(
            (str(n), str(k), str(a)) for n, k, a in payload.get("missing_sources", [])
        )

    # -- end of run (controller only) --------------------------------------------------------------
    def decision(self) -> Decision:
        """The baseline entries this run did not measure, split into stale and kept (see scope.py)."""
        return decide(
            self.baseline,
            self.scope,
            measured={(r["nodeid"], r["kernel"], r["arch"]) for r in self.records},
            missing_sources=self.missing_sources,
            archs=self.settings.archs,
            prefixes=self.prefixes,
            rootdir=self.settings.rootdir,
            selection=self.selection,
        )

    def finish(self) -> int | None:
        """Write what the run produced; returns an exit code when the baseline could not be written.

        An interrupted run (scope.interrupted) still writes the entries of the kernels it measured, but
        removes none: it cannot tell a test that is gone from one it never reached.
        """
        s = self.settings
        decision = self.decision()
        stale = set(decision.stale)
        exit_code = None
        if s.update and s.baseline_path is not None:
            fresh = {
                (r["nodeid"], r["kernel"], r["arch"]): entry_from_record(r)
                for r in self.records
                if r["registers"] is not None
            }
            try:
                counts = bl.update(s.baseline_path, fresh, stale, lock_dir=s.cache_dir)
            except (bl.BaselineError, OSError) as exc:
                # OSError: a failure baseline.py did not foresee; the file is still as it was.
                self.finish_lines.append(f"baseline NOT updated: {exc}")
                exit_code = int(pytest.ExitCode.USAGE_ERROR)
            else:
                self.finish_lines.append(f"baseline {self._display(s.baseline_path)} updated: {counts}")
        kept = decision.kept_lines() if s.update else []
        if s.update and self.scope.interrupted:
            kept.insert(0, f"run interrupted ({self.scope.interrupted}): no baseline entry was removed")
        self.finish_lines[:0] = baseline_lines(self.records, sorted(stale), updating=s.update, kept=kept)
        if s.baseline_path is not None:
            self.finish_lines += unknown_arch_lines(self.baseline, self._display(s.baseline_path))
        markdown = markdown_report(self.records) if self.records else ""
        outputs: list[tuple[str, Path | None, Callable[[Path], None]]] = [
            ("--regbudget-json", s.json_path, lambda p: write_json(p, self.records)),
            ("--regbudget-html", s.html_path, lambda p: bl.atomic_write(p, html.render(self.records))),
            (
                "--regbudget-markdown",
                s.markdown_path if markdown else None,
                lambda p: bl.atomic_write(p, markdown),
            ),
        ]
        for option, path, write in outputs:
            if path is not None and not self._write_output(option, path, write):
                exit_code = int(pytest.ExitCode.USAGE_ERROR)
        if markdown and s.step_summary is not None:
            # GitHub's step summary is shared by every command of the step: append, never replace. It is
            # the runner's file, not one the user asked for: a failure is reported, not an exit code.
            self._write_output("$GITHUB_STEP_SUMMARY", s.step_summary, lambda p: _append(p, markdown))
        return exit_code

    def _write_output(self, option: str, path: Path, write: Callable[[Path], None]) -> bool:
        """Write one report file; a failure becomes a summary line naming the file, never a traceback."""
        try:
            write(path)
        except (OSError, bl.BaselineError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            hint = "give a file path, not a directory" if path.is_dir() else "check the path and free space"
            self.finish_lines.append(f"{option} report NOT written to {path}: {why}; {hint}")
            return False
        return True

    def summary(self) -> list[str]:
        # finish_lines quote paths and OS errors: never let one read as a workflow command.
        lines = [*summary_lines(self.records), *(safe_block(line) for line in self.finish_lines)]
        if self.settings.annotate:
            lines += github_annotations(self.records, self.settings.rootdir)
        return lines


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def parse_archs(values: Sequence[str]) -> list[str]:
    """Flatten repeated, comma-separated arch values, validating each and keeping the first of duplicates."""
    out: list[str] = []
    for value in values:
        for name in (v.strip() for v in value.replace("\n", ",").split(",")):
            if name and name not in out:
                get_arch(name)
                out.append(name)
    return out
