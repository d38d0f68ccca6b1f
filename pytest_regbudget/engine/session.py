"""The state of one pytest run, and the flow that fills it: source -> facts -> verdict -> records.

plugin.py's hooks hand off here. The session holds state (settings, the baseline, each finished kernel's
record and baseline entry, what the run saw); collaborators do the work: the `Builder` (toolkit, cache,
compile pool), the kernel sources, the pure verdict of budget.py, the `GpuRunner`, and the writers. Under
pytest-xdist each worker holds its own session and ships its results to the controller through
`workeroutput`; only the controller writes files.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from msgspec.structs import replace

from .. import sources
from ..cache.store import CacheStats
from ..core import baseline as bl
from ..core import trend
from ..core.arch import get_arch
from ..core.errors import (
    BaselineError,
    CompileError,
    MarkerError,
    RegbudgetWarning,
    ToolchainError,
    Unbuildable,
)
from ..core.facts import KernelFacts, release_of
from ..core.gpu_facts import Timing
from ..core.kernel_report import KernelReport
from ..core.limits import Launch
from ..core.ratchet import BaselineRule
from ..core.text import safe_block
from ..core.trend import Trails
from ..core.verdict import strict, time_budgets_settled, timed, verdict
from ..gpu.runner import GpuRunner
from ..history import git as history_git
from ..project.markers import Budget, parse_marker
from ..report import compare
from ..report.record import ReportRecord, to_record
from ..report.terminal import (
    baseline_lines,
    compilers_line,
    empty_binaries_line,
    enforced_line,
    github_annotations,
    gpu_line,
    key_text,
    no_arch_line,
    summary_table,
    unknown_arch_lines,
)
from ..report.writers import FileWriter, file_writers
from ..sources import KernelSource, SourceSpec
from ..sources.prebuilt import Binary
from ..tools import nvdisasm as disasm
from ..tools.compiler import error_location
from ..tools.toolkit import Targets, check_nvrtc
from ..tools.units import Spec
from ..update import broken
from ..update import plan as update
from ..update.scope import ERROR, Rule, RunScope, with_base
from .builder import Builder, ItemEnv
from .provenance import provenance
from .state import ItemState, Settings, resolve_archs

WORKEROUTPUT_KEY = "regbudget"
USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR, named here without importing pytest
TESTS_FAILED = 1  # pytest.ExitCode.TESTS_FAILED


class Mark(Protocol):
    """A pytest marker, as far as the session reads one."""

    @property
    def args(self) -> tuple[Any, ...]: ...

    @property
    def kwargs(self) -> Mapping[str, Any]: ...


class RegbudgetSession:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # One builder per toolkit a kernel is built with; the first also builds what no toolkit multiplies
        # (Triton, Numba, binaries) and lists a manifest's files.
        self.builders = {name: Builder(settings.build(name)) for name in settings.toolkits or (None,)}
        self.builder = next(iter(self.builders.values()))
        self.gpu = GpuRunner(settings.gpu_mode)
        self.records: list[ReportRecord] = []
        self.conflicts: list[str] = []  # one kernel variant measured differently by two tests
        self._measured: dict[bl.Key, tuple[str, tuple[object, ...]]] = {}  # key -> (first test, its numbers)
        self.scope = RunScope()
        self.finish_lines: list[str] = []
        # Binaries a manifest names, and how many of their cubins of the run's archs hold no kernel (0: the
        # whole file holds none): said in one line at the end.
        self.empty_binaries: dict[str, int] = {}
        self.empty_sources: set[str] = set()  # manifest source files whose builds hold no kernel
        self.unmatched: list[str] = []  # manifest `kernels` patterns that match no kernel of a file
        self.no_arch: set[str] = set()  # items skipped because their archs= leave out their arch
        # The builds that failed, or that the baseline records as broken and build now (update/broken.py).
        self.builds: dict[bl.BuildKey, broken.BuildNote] = {}
        self.worker_cache = CacheStats()  # the controller's sum over workers
        self.worker_nvcc: str | None = None  # the nvcc an xdist worker found (the controller builds nothing)
        self._parsed: dict[int, tuple[Mark, Budget | None, str | None]] = {}
        # Raises BaselineError (a usage error) before any test runs, leaving the file untouched.
        path = settings.baseline_path
        self.baseline = bl.load(path) if path else bl.Baseline()

    # -- what the run prints before and after ----------------------------------------------------------
    def header(self, *, nvcc: bool = False, binaries: bool = False) -> str:
        """The toolkit found, and the nvcc when the run is set to use one (`nvcc`: a manifest table names
        it); the summary's compilers_line says what each kernel was built with in the end."""
        s = self.settings
        archs = ",".join(s.archs)
        try:
            where = "; ".join(b.toolkit().describe() for b in self.builders.values())
        except ToolchainError:
            where = "NO CUDA TOOLKIT FOUND (marked tests will fail and say why)"
        if binaries:
            # A manifest of prebuilt binaries compiles nothing: what reads them comes first.
            where = (
                f"{self.builder.cuobjdump() or 'NO CUOBJDUMP FOUND'}; toolkit for compiled kernels: {where}"
            )
        if nvcc or s.nvcc or s.compiler == "nvcc":
            try:
                found = self.builder.nvcc()
                where += f"; {found.describe()}"
            except (CompileError, ToolchainError, Unbuildable) as exc:
                where += f"; NO NVCC ({str(exc).splitlines()[0]})"
        base = "-"
        if s.baseline_path is not None:
            count = f"{len(self.baseline)} entries" if s.baseline_path.exists() else "not yet written"
            base = f"{self._display(s.baseline_path)} ({count}{', updating' if s.update else ''})"
        return f"regbudget: {where}; archs {archs}; baseline {base}; gpu {s.gpu_mode}"

    def cache_line(self) -> str:
        return self.builder.cache_line(self._cache_stats(self.worker_cache, skip_first=True))

    def _cache_stats(self, start: CacheStats, *, skip_first: bool = False) -> CacheStats:
        """`start` plus the cache counts of this process's builders (but the first, with `skip_first`)."""
        total = start
        for builder in list(self.builders.values())[1 if skip_first else 0 :]:
            total = total.merged(builder.cache.stats)
        return total

    def nvcc_found(self) -> str | None:
        """The nvcc this process, or an xdist worker, found for a test that asked for one, described."""
        nvcc = next((n for b in self.builders.values() if (n := b.nvcc_if_found()) is not None), None)
        return self.worker_nvcc if nvcc is None else nvcc.describe()

    def compilers_line(self) -> str | None:
        described = self.nvcc_found()
        read = any(r["compiler"] == "binary" for r in self.records)
        return compilers_line(self.records, described, self.builder.cuobjdump() if read else None)

    def gpu_line(self) -> str:
        return gpu_line(self.records, self.settings.gpu_mode)

    def summary(self, mode: str = "changes", width: int | None = None) -> list[str]:
        """The run's section of the terminal summary: where it built and what it found first, then the
        table (terminal.summary_table), so that its failing rows end next to pytest's own summary."""
        records = self.records
        annotations = github_annotations(records, self.settings.rootdir) if self.settings.annotate else []
        # finish_lines quote paths and OS errors: never let one read as a workflow command.
        counted = enforced_line(records, updating=self.settings.update, strict=self.settings.strict)
        compared: list[str] = []
        if len({r["release"] for r in records}) > 1:  # the toolkits' differences, where there are several
            compared = compare.summary_lines(compare.across_releases(records))
        finish = [*compared, *([counted] if counted else []), *self.finish_lines]
        finish += broken.summary_lines(self.builds, updating=self.settings.update)
        finish += empty_binaries_line(self.empty_binaries, self.settings.archs, self.empty_sources)
        finish += no_arch_line(self.no_arch, self.settings.archs)
        if not records and not finish:
            return []
        finish = [self.cache_line(), *filter(None, [self.compilers_line()]), self.gpu_line(), *finish]
        return [
            *annotations,
            *(safe_block(line) for line in finish),
            *summary_table(records, mode=mode, width=width),
        ]

    def _display(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.settings.rootdir))
        except ValueError:
            return str(path)

    # -- collection --------------------------------------------------------------------------------------
    def item_archs(self, budget: Budget | None) -> list[str]:
        """The run's archs a marker's `archs=` keeps. `sm_90` names the chip, so it keeps sm_90a and sm_90f
        too (they build for it); `sm_90a` keeps that spelling only."""
        if budget is None or budget.archs is None:
            return list(self.settings.archs)
        wanted = budget.archs
        return [a for a in self.settings.archs if a in wanted or get_arch(a).base_name in wanted]

    def note_unmatched(self, message: str) -> None:
        """A manifest `kernels` pattern that matched no kernel of a file (`message` names the table, the
        pattern and the kernels the file holds): a failure of the run under --regbudget-strict."""
        if message not in self.unmatched:
            self.unmatched.append(message)

    def note_no_arch(self, nodeids: Iterable[str]) -> None:
        """Items skipped because their marker's (or manifest table's) archs= leave out their arch."""
        self.no_arch.update(nodeids)

    def parse(self, marker: Mark | None, test_path: Path) -> tuple[Budget | None, str | None]:
        """The marker's Budget (or the error), parsed once per marker however many items share it."""
        if marker is None:
            return None, None
        cached = self._parsed.get(id(marker))
        if cached is not None and cached[0] is marker:
            return cached[1], cached[2]
        try:
            result: tuple[Budget | None, str | None] = (
                parse_marker(marker.args, marker.kwargs, test_path.parent),
                None,
            )
        except MarkerError as exc:
            result = (None, str(exc))
        # The marker is kept with its result, so that its id cannot be reused by another object.
        self._parsed[id(marker)] = (marker, *result)
        return result

    def marker_source(self, budget: Budget | None) -> KernelSource | None:
        """The kernel source a marker names, if it names one."""
        if budget is None or budget.kernel is None:
            return None
        if budget.binary is not None:
            return Binary(budget.binary, budget.kernel)
        if budget.source is None:
            return None
        spec = SourceSpec(budget.source, budget.kernel, budget.options)
        return sources.make(budget.compiler or self.settings.compiler, spec)

    def env(self, state: ItemState) -> ItemEnv:
        return ItemEnv(self.builder_for(state.toolkit))

    def builder_for(self, toolkit: str | None) -> Builder:
        return self.builders.get(toolkit, self.builder)

    def multiplied(self, budget: Budget | None) -> bool:
        """Whether an item is built once per --regbudget-toolkit: not Triton, Numba or a binary, which bring
        their own toolchains (or none)."""
        if len(self.builders) < 2:
            return False
        if budget is None:
            return True  # a test that compiles through the fixture alone
        compiler = budget.compiler or self.settings.compiler
        if compiler == "nvcc" and self.settings.nvcc is not None:
            return False  # a pinned nvcc builds it whatever the toolkit: once, not once per toolkit
        return budget.binary is None and compiler in ("nvrtc", "nvcc")

    def item_params(self, budget: Budget | None, archs: Sequence[str]) -> list[tuple[str, str | None, str]]:
        """(arch, toolkit, id) per item of a test or manifest kernel: one per arch, or per (arch, toolkit)
        with the release that builds it in the id ("sm_90-12.9") when several are compared: the toolkit's,
        or for compiler="nvcc" its nvcc's."""
        if not self.multiplied(budget):
            return [(arch, None, arch) for arch in archs]
        nvcc = budget is not None and (budget.compiler or self.settings.compiler) == "nvcc"
        return [
            (a, name, f"{a}-{self.nvcc_release_of(name) if nvcc else self.release_of(name)}")
            for a in archs
            for name in self.settings.toolkits
        ]

    def _check_arch(self, toolkit: str, arch: str) -> None:
        """Unbuildable (a skip, with the one line that says why) where the toolkit a compared item builds with
        does not build `arch`, as its own list says: another toolkit of the comparison does (check_toolkits
        made sure of that at start-up). A run of one toolkit fails such items instead, in the build."""
        builder = self.builder_for(toolkit)
        tk = builder.toolkit()
        targets = tk.targets(toolkit)
        if tk.nvrtc is None:  # a toolkit named for its nvcc: what that nvcc builds
            try:
                targets = builder.nvcc().targets()
            except (CompileError, ToolchainError):
                return  # its items say themselves that they cannot build
        refusal = targets.refusal(arch)
        if refusal is not None:
            raise Unbuildable(refusal)

    def _compilers(self) -> list[Targets]:
        """What each toolkit of the run builds (a toolkit without NVRTC: its nvcc), and a pinned nvcc."""
        found = []
        for name, builder in self.builders.items():
            tk = builder.toolkit_or_none()
            if tk is not None and tk.nvrtc is not None:
                found.append(tk.targets(name))
            elif tk is not None and self.settings.nvcc is None:  # a toolkit named for its nvcc
                with contextlib.suppress(CompileError, ToolchainError):
                    found.append(builder.nvcc().targets())
        if self.settings.nvcc is not None:
            with contextlib.suppress(CompileError, ToolchainError):
                found.append(self.builder.nvcc().targets())
        return found

    def _run_nvcc(self) -> Targets | None:
        """What the nvcc that would build compiler="nvcc" kernels builds; None where the run has none."""
        try:
            return self.builder.nvcc().targets()
        except (CompileError, ToolchainError):
            return None

    def _device_arch(self) -> tuple[str | None, str]:
        """The GPU's arch for `native`, or None and why the GPU checks find none."""
        dev = self.gpu.device()
        return (dev.arch, "") if dev is not None else (None, self.gpu.reason())

    def release_of(self, toolkit: str | None) -> str:
        return self.builder_for(toolkit).toolkit().release

    def nvcc_release_of(self, toolkit: str | None) -> str:
        """The release of the nvcc that builds nvcc kernels under `toolkit`; the toolkit's where it has
        none (its items are then skipped with the reason when they run)."""
        try:
            return release_of(self.builder_for(toolkit).nvcc().version)
        except (CompileError, ToolchainError):
            return self.release_of(toolkit)

    def check_toolkits(self) -> None:
        """Find every toolkit named on the command line or in the ini now: one usage error at startup, not
        the same failure in every test. ToolchainError says which and why."""
        nvcc = self.settings.nvcc
        if nvcc is not None and not Path(nvcc).is_file():
            raise ToolchainError(f"--regbudget-nvcc={nvcc}: no such file. Fix: give the path of an nvcc")
        toolkit = self.builder.toolkit_or_none()
        if toolkit is not None and toolkit.nvrtc is not None:
            check_nvrtc(toolkit.nvrtc)
        home = self.settings.cuda_home or os.environ.get("REGBUDGET_CUDA_HOME")
        explicit = self.settings.toolkits or ((None,) if home else ())
        seen: dict[str, str] = {}
        for name in explicit:
            release = self.release_of(name)
            if name is not None and release in seen:
                raise ToolchainError(
                    f"--regbudget-toolkit: {seen[release]} and {name} are both CUDA {release}; they would "
                    "share one baseline entry per kernel. Compare toolkits of different releases"
                )
            seen[release] = name or ""
        # The archs last: what the toolkits build decides whether a named arch is an error here, once.
        try:
            archs = resolve_archs(self.settings.archs, self._compilers(), self._run_nvcc, self._device_arch)
        except ToolchainError as exc:
            given = self.settings.archs_from
            raise ToolchainError("\n".join(f"{given}: {line}" for line in str(exc).splitlines())) from None
        self.settings = replace(self.settings, archs=archs)

    def _reads_sass(self, budget: Budget, arch: str) -> bool:
        """Whether a kernel's SASS is read on `arch`: with --regbudget-sass, or for a hot_spills budget."""
        return self.settings.sass or budget.limits(arch).hot_spills is not None

    def prefetch(self, states: Sequence[ItemState]) -> None:
        """Start compiling every marker kernel of the run, in collection order, on the pool."""
        specs: dict[str | None, list[Spec]] = {}
        for s in states:
            if s.source is None:
                continue
            try:
                spec = s.source.plan(s.arch, self.env(s))
            except (CompileError, ToolchainError):
                continue  # the test itself reports the missing nvcc or toolkit
            if spec is not None:
                specs.setdefault(s.toolkit, []).append(spec)
        for toolkit, planned in specs.items():
            self.builder_for(toolkit).prefetch(planned)

    def note_collection(self, nodeid: str, outcome: str, reason: str, *, module: bool) -> None:
        """How collecting one node ended (a module, or a package, directory or class)."""
        if outcome == ERROR:
            self.scope.collection_errors += 1
        if module:
            self.scope.note_file(nodeid, outcome, reason)

    def note_collected(self, nodeids: Iterable[str]) -> None:
        self.scope.collected.update(with_base(nodeids))

    def note_deselected(self, nodeids: Iterable[str]) -> None:
        self.scope.deselected.update(with_base(nodeids))

    def note_skipped(self, nodeid: str) -> None:
        self.scope.skipped.update(with_base([nodeid]))

    def note_interrupted(self, reason: str) -> None:
        """The run stopped early: it removes no baseline entry (see scope.py)."""
        self.scope.interrupted = self.scope.interrupted or reason

    def note_build(self, key: bl.BuildKey, error: str | None, compiler: str) -> None:
        """A manifest file's build of one variant and arch, as collection made it (`error`: the compiler's
        log when it failed): noted where it failed, or where the baseline records it as broken."""
        found = broken.note(self.baseline, key, error, compiler)
        if found is not None:
            self.builds[key] = found

    def build_failure(self, key: bl.BuildKey) -> str | None:
        """The failure text of a failed build's item; None where it passes (recorded as broken, or an
        update, which records it)."""
        found = self.builds.get(key)
        if found is None or found.status != broken.FAILED or self.settings.update:
            return None
        return broken.failure_text(key, found, updating=False)

    # -- the test's call phase -------------------------------------------------------------------------
    def measure(self, state: ItemState, nodeid: str, source: KernelSource) -> list[KernelReport]:
        """Build `source` for the item's arch (and the GPU's, where this instance runs the GPU checks but
        does not target the GPU's arch), judge each kernel, and return the reports for the item's arch."""
        env = self.env(state)
        if state.toolkit is not None:
            self._check_arch(state.toolkit, state.arch)
        gpu_arch, note = self.gpu.plan(state.arch, state.item_archs) if source.loadable else (None, None)
        built = source.build(state.arch, env)
        ids = []
        reports = []
        for facts in built:
            kernel_id = self._kernel_id(state, facts.kernel)
            ids.append(kernel_id)
            reports.append(self._judge(state, nodeid, kernel_id, facts, gpu_arch, note))
        if gpu_arch is not None and gpu_arch != state.arch:
            for kernel_id, facts in zip(ids, source.build(gpu_arch, env), strict=False):
                self._judge(state, nodeid, kernel_id, facts, gpu_arch, None)
        return reports

    def _judge(
        self,
        state: ItemState,
        nodeid: str,
        kernel_id: str,
        facts: KernelFacts,
        gpu_arch: str | None,
        note: str | None,
    ) -> KernelReport:
        arch = facts.arch
        budget = state.budget or Budget()
        limits = budget.limits(arch)
        if limits.launch is None and facts.block is not None:
            limits = replace(limits, launch=Launch(facts.block))
        if limits.dynamic_smem == 0 and facts.dynamic_smem:
            limits = replace(limits, dynamic_smem=facts.dynamic_smem)
        sass_report = None
        if self._reads_sass(budget, arch) and facts.cubin:
            res = facts.resources
            sass_report = disasm.disassemble(
                self.builder.nvdisasm(),
                facts.cubin,
                facts.entry,
                spills=bool(res.spill_stores or res.spill_loads) or not res.spills_known,
            )
        gpu_facts = None
        if arch == gpu_arch and facts.cubin:
            loaded, gpu_facts = self.gpu.load_and_probe(facts, limits, f"{nodeid}/{kernel_id}")
            state.loaded[(kernel_id, arch)] = loaded
        key = self.settings.baseline_key(facts)
        report = verdict(
            nodeid,
            kernel_id,
            facts,
            limits,
            budget.level,
            gpu=gpu_facts,
            sass=sass_report,
            baseline=self._rule(key, facts, nodeid, budget),
            gpu_note=note if arch == state.arch else None,
            key=key,
        )
        for defect in report.model_defects:
            warnings.warn(RegbudgetWarning(f"{report.label}: {defect}"), stacklevel=1)
        state.facts[(kernel_id, arch)] = facts
        state.reports.append(report)
        return report

    def _rule(self, key: bl.Key, facts: KernelFacts, nodeid: str, budget: Budget) -> BaselineRule:
        s = self.settings
        entry, found_under = self.baseline.find(key, facts.legacy_variant)
        return BaselineRule(
            entry=entry,
            found_under=found_under,
            releases=tuple(self.baseline.releases(key)) if entry is None else (),
            conflict=self._conflict(key, facts, nodeid),
            recorded=s.baseline_path is not None,
            tolerance={**s.tolerance, **budget.tolerance},
            enforce=not s.update,
            name=self._display(s.baseline_path) if s.baseline_path else "the baseline",
        )

    def _conflict(self, key: bl.Key, facts: KernelFacts, nodeid: str) -> str | None:
        """Two tests share one entry per kernel variant: their compile facts must agree."""
        r = facts.resources
        numbers = (r.registers, r.spill_stores, r.spill_loads, r.stack_frame, r.shared_mem)
        compiler = facts.provenance.compiler
        first = self._measured.setdefault(key, (nodeid, (compiler, *numbers)))
        if first[1] == (compiler, *numbers) or first[0] == nodeid:
            return None
        if first[1][0] != compiler:
            # NVRTC and nvcc of one release may give one file different registers: the entry would hold
            # whichever ran last.
            text = (
                f"{first[0]} measured this kernel variant with {first[1][0]}, this test with {compiler}: "
                "they share one baseline entry, so they must build it the same way. Fix: measure it with "
                "one compiler (the one you ship with), or give one build a define of its own (a variant)"
            )
            self.conflicts.append(f"{key_text(key)}: {nodeid}: {text}")
            return text
        text = (
            f"{first[0]} measured this kernel variant with registers/spill stores/spill loads/stack/smem "
            f"{'/'.join(map(str, first[1][1:]))}, this test with {'/'.join(map(str, numbers))}: they share "
            "one baseline entry, so they must build it the same way. Fix: give the builds different "
            "defines (a variant of their own), or the same options"
        )
        self.conflicts.append(f"{key_text(key)}: {nodeid}: {text}")
        return text

    @staticmethod
    def _kernel_id(state: ItemState, kernel: str) -> str:
        # A test may compile one kernel several ways; each gets its own baseline entry.
        n = sum(
            1
            for r in state.reports
            if r.arch == state.arch and (r.kernel == kernel or r.kernel.startswith(f"{kernel} #"))
        )
        return kernel if n == 0 else f"{kernel} #{n + 1}"

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

    # -- GPU -------------------------------------------------------------------------------------------
    def gpu_arch(self, state: ItemState) -> str | None:
        """The arch this test instance checks on the GPU, or None (no GPU, or another instance does)."""
        return self.gpu.plan(state.arch, state.item_archs)[0]

    def benchmark(
        self,
        state: ItemState,
        kernel: str | KernelReport,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        args: Sequence[Any],
        dynamic_smem: int,
        flush_l2: bool,
    ) -> Timing | None:
        """Time the loaded cubin of `kernel`; None where GPU checks do not run in this instance. The time
        budgets are judged when the test ends."""
        report = state.loaded_report(kernel, gpu_checks=self.gpu_arch(state) is not None)
        if report is None:
            return None
        key = (report.kernel, report.arch)
        limits = (state.budget or Budget()).limits(report.arch)
        timing = self.gpu.benchmark(
            state.loaded[key],
            report.label,
            state.facts[key],
            grid,
            block,
            args,
            dynamic_smem,
            flush_l2,
            decided=time_budgets_settled(report, limits, enforce=not self.settings.update),
        )
        state.timings[key] = timing
        if timing.throttled:
            device = report.gpu.device if report.gpu else "the GPU"
            warnings.warn(
                RegbudgetWarning(
                    f"{report.label}: {device} was throttled while timing (SM clock "
                    f"{timing.sm_clock_mhz} of {timing.max_sm_clock_mhz} MHz, NVML reasons "
                    f"{timing.throttle_reasons:#x}); times are suspect"
                ),
                stacklevel=1,
            )
        return timing

    # -- the end of a test -----------------------------------------------------------------------------
    def finish_test(self, state: ItemState, nodeid: str, completed: bool) -> str | None:
        """Record a finished test's kernels; the failure text, or None. Warn-level violations become
        warnings. Time budgets are judged here, on the timings the test took."""
        if completed:
            self.scope.completed.update(with_base([nodeid]))
        budget = state.budget or Budget()
        final = []
        for r in state.reports:
            timing = state.timings.get((r.kernel, r.arch))
            if timing is not None:
                r = timed(
                    r,
                    budget.limits(r.arch),
                    timing,
                    enforce=not self.settings.update,
                    basis=self.settings.time_basis,
                )
            if self.settings.strict and not self.settings.update:
                r = strict(r)
            final.append(r)
        self.records.extend(to_record(r) for r in final)
        for r in final:
            if r.outcome == "warned":
                warnings.warn(RegbudgetWarning(r.failure_text()), stacklevel=1)
        failures = [r.failure_text() for r in final if r.outcome == "failed"]
        return "\n".join(failures) if failures else None

    # -- xdist -----------------------------------------------------------------------------------------
    def worker_payload(self) -> dict[str, Any]:
        # The records carry everything an update writes (update.fresh_entries): the controller rebuilds the
        # entries from all workers' records, as `regbudget merge` does from CI shards' reports.
        return {
            "cache": self._cache_stats(CacheStats()).to_payload(),
            "records": self.records,
            "scope": self.scope.payload(),
            "conflicts": self.conflicts,
            "empty_binaries": self.empty_binaries,
            "empty_sources": sorted(self.empty_sources),
            "nvcc": self.nvcc_found(),
            "builds": broken.json_objects(self.builds),
            "unmatched": self.unmatched,
            "no_arch": sorted(self.no_arch),
        }

    def merge_worker(self, payload: dict[str, Any]) -> None:
        self.records.extend(payload.get("records", []))
        self.worker_cache = self.worker_cache.merged(CacheStats.from_payload(payload.get("cache")))
        self.scope.merge(payload.get("scope", {}))
        self.conflicts += payload.get("conflicts", [])
        self.empty_sources.update(payload.get("empty_sources", []))
        self.worker_nvcc = self.worker_nvcc or payload.get("nvcc")
        self.builds.update(broken.from_json(payload.get("builds", [])))
        for message in payload.get("unmatched", []):
            self.note_unmatched(message)  # every worker collects the manifest: once each
        self.no_arch.update(payload.get("no_arch", []))
        for file, count in payload.get("empty_binaries", {}).items():
            self.empty_binaries[file] = max(count, self.empty_binaries.get(file, 0))

    # -- end of run (controller only) ------------------------------------------------------------------
    def _stale_rule(self, prefixes: Sequence[str], selection: str | None) -> Rule:
        built = frozenset(self._built())
        return Rule(
            self.scope,
            self.settings.archs,
            prefixes,
            self.settings.rootdir,
            selection,
            built,
            broken=broken.protected(self.builds),
        )

    def _built(self) -> set[tuple[str, str]]:
        """The (compiler, release) pairs this run built with: its kernels', and its manifest builds' that
        failed or were recorded as broken."""
        return {(r["compiler"], r["release"]) for r in self.records if r["registers"] is not None} | {
            (b.compiler, key[3]) for key, b in self.builds.items()
        }

    def plan(self, prefixes: Sequence[str] = ("",), selection: str | None = None) -> update.Plan:
        """What an update by this run writes and removes (see update.py and scope.py).

        `prefixes`: the run's path arguments; `selection`: an option that hides whole files (--lf).
        """
        fresh = update.fresh_entries(self.records)
        # Conflicts between xdist workers show only now; those within one process were named already.
        named = {c.split(": ", 1)[0] for c in self.conflicts}
        self.conflicts += [c for c in fresh.conflicts if c.split(": ", 1)[0] not in named]
        return update.plan(self.baseline, self.records, fresh.entries, self._stale_rule(prefixes, selection))

    def finish(self, prefixes: Sequence[str] = ("",), selection: str | None = None) -> int | None:
        """Write what the run produced; returns an exit code when a file asked for could not be written.

        An interrupted run (scope.interrupted) still writes the entries of the kernels it measured, but
        removes none: it cannot tell a test that is gone from one it never reached.
        """
        s = self.settings
        planned = self.plan(prefixes, selection)
        decision = planned.decision
        stale = set(decision.stale)
        exit_code = None
        if s.update and s.baseline_path is not None and self.conflicts:
            shown = "\n  ".join(self.conflicts[:10])
            self.finish_lines.append(
                f"baseline NOT updated: kernels measured differently by two tests:\n  {shown}"
            )
            exit_code = USAGE_ERROR
        elif s.update and s.baseline_path is not None:
            builds = broken.plan(
                self.baseline,
                self.builds,
                rootdir=str(s.rootdir),
                prefixes=prefixes,
                archs=s.archs,
                releases={r["release"] for r in self.records} | {key[3] for key in self.builds},
                interrupted=bool(self.scope.interrupted),
            )
            try:
                counts = bl.update(
                    s.baseline_path,
                    planned.write,
                    planned.stale,
                    moved=planned.moved,
                    lock_dir=s.cache_dir,
                    broken=builds.record,
                    fixed=builds.drop,
                )
            except (BaselineError, OSError) as exc:
                # OSError: a failure baseline.py did not foresee; the file is still as it was.
                self.finish_lines.append(f"baseline NOT updated: {exc}")
                exit_code = USAGE_ERROR
            else:
                self.finish_lines.append(f"baseline {self._display(s.baseline_path)} updated: {counts}")
                # The reports say what the baseline now holds: each failed build is recorded.
                self.builds = broken.recorded(self.builds)
        kept = decision.kept_lines() if s.update else []
        if s.update and self.scope.interrupted:
            kept.insert(0, f"run interrupted ({self.scope.interrupted}): no baseline entry was removed")
        self.finish_lines[:0] = baseline_lines(self.records, sorted(stale), updating=s.update, kept=kept)
        if s.baseline_path is not None:
            keys = list(self.baseline.entries)
            self.finish_lines += unknown_arch_lines(keys, self._display(s.baseline_path))
        if s.strict and not s.update and self.unmatched:
            # The budgets of a table whose pattern selects nothing are checked nowhere: not a pass.
            self.finish_lines += [
                f"--regbudget-strict: {m}. Fix: correct the pattern (or drop it from the table)"
                for m in self.unmatched
            ]
            exit_code = exit_code or TESTS_FAILED
        if not any((s.json_path, s.html_path, s.markdown_path, s.step_summary)):
            return exit_code

        writers = file_writers(
            json_path=s.json_path,
            html_path=s.html_path,
            html_all=s.html_all,
            trails=self._trails() if s.html_path else None,
            markdown_path=s.markdown_path,
            step_summary=s.step_summary,
            scope=self.report_scope(prefixes, selection),
            provenance=self.provenance() if s.json_path else None,
            broken_builds=broken.json_objects(self.builds),
        )
        for writer in writers:
            if not self._write(writer) and writer.required:
                exit_code = USAGE_ERROR
        return exit_code

    def provenance(self) -> dict[str, object]:
        """Where the run was, for the JSON report (engine/provenance.py)."""
        found = [b.toolkit_or_none() for b in self.builders.values()]
        return provenance(
            self.records,
            self.settings.rootdir,
            toolkits=[t.describe() for t in found if t is not None],
            nvcc=self.nvcc_found(),
        )

    def report_scope(self, prefixes: Sequence[str], selection: str | None) -> dict[str, object]:
        """What this run could have seen, for the JSON report: what a later merge of shards needs to decide
        stale entries as this run would (`regbudget merge`), and what a reader needs to know what was
        compared. `run` is scope.RunScope's payload; `built` the (compiler, release) pairs measured."""
        built = sorted(self._built())
        return {
            "run": self.scope.payload(),
            "prefixes": list(prefixes),
            "selection": selection,
            "archs": list(self.settings.archs),
            "toolkits": list(self.settings.toolkits),
            "built": [list(pair) for pair in built],
            "rootdir": str(self.settings.rootdir),
            "baseline": self._display(self.settings.baseline_path) if self.settings.baseline_path else None,
            "update": self.settings.update,
        }

    def _trails(self) -> Trails | None:
        """The baseline's last commits for the HTML report's charts; a note instead where git cannot say."""
        s = self.settings
        if s.baseline_path is None or s.html_history == 0:
            return None
        try:
            found = history_git.versions(s.baseline_path, cache_dir=s.cache_dir, limit=s.html_history)
        except history_git.GitError as exc:
            return Trails({}, (), f"No history charts: {exc}.")
        note = f"Shallow clone: {history_git.SHALLOW_FIX}." if found.shallow else None
        return trend.trails(found.versions, s.html_history, note)

    def _write(self, writer: FileWriter) -> bool:
        """Write one report file; a failure becomes a summary line naming the file, never a traceback."""
        try:
            writer.write(self.records)
        except (OSError, BaselineError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            path = writer.path
            hint = "give a file path, not a directory" if path.is_dir() else "check the path and free space"
            self.finish_lines.append(f"{writer.option} report NOT written to {path}: {why}; {hint}")
            return False
        return True

    def close(self) -> None:
        for builder in self.builders.values():
            builder.close()
