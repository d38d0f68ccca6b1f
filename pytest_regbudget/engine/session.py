"""The state of one pytest run, and the flow that fills it: source -> facts -> verdict -> records.

plugin/hooks.py's hooks hand off here. The session holds state (settings, the baseline, each finished
kernel's record and baseline entry, what the run saw); collaborators do the work: the `Builder` (toolkit,
cache, compile pool), the kernel sources, the judging of one kernel (judge.py, on core/verdict.py), the
`GpuRunner`. What the run prints is summary.py's; under pytest-xdist each worker holds its own session and
ships its results to the controller (workers.py); only the controller writes files (finish.py).
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
from ..cache import baselines
from ..cache.store import CacheStats
from ..core import baseline as bl
from ..core.baseline_schema import key_text
from ..core.errors import (
    CompileError,
    MarkerError,
    RegbudgetWarning,
    ToolchainError,
    Unbuildable,
)
from ..core.facts import KernelFacts, release_of
from ..core.gpu_facts import Timing
from ..core.kernel_report import KernelReport, config_label
from ..core.metrics import AGREED
from ..core.verdict import strict, time_budgets_settled, timed
from ..gpu.runner import GpuRunner
from ..project.markers import Budget, parse_marker
from ..report.record import ReportRecord, to_record
from ..sources import KernelSource, SourceSpec
from ..tools.compiler import error_location
from ..tools.targets import Targets
from ..tools.toolkit import check_nvrtc
from ..tools.units import Spec
from ..update import broken
from ..update.scope import ERROR, RunScope, with_base
from .builder import Builder, ItemEnv
from .judge import Context, baseline_rule, fails_on_registers, item_archs, judge, limits_of, reads_sass
from .state import ItemState, Settings, resolve_archs


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
        # Manifest files named on the command line that another --regbudget-shard owns: not seen by this run.
        self.other_shards: set[str] = set()
        # The builds that failed, or that the baseline records as broken and build now (update/broken.py).
        self.builds: dict[bl.BuildKey, broken.BuildNote] = {}
        self.worker_cache = CacheStats()  # the controller's sum over workers
        self.worker_nvcc: str | None = None  # the nvcc an xdist worker found (the controller builds nothing)
        self._parsed: dict[int, tuple[Mark, Budget | None, str | None]] = {}
        # Raises BaselineError (a usage error) before any test runs, leaving the file untouched.
        path = settings.baseline_path
        self.baseline = baselines.load(path, settings.cache_dir) if path else bl.Baseline()

    # -- the builders -----------------------------------------------------------------------------------
    def cache_stats(self, start: CacheStats, *, skip_first: bool = False) -> CacheStats:
        """`start` plus the cache counts of this process's builders (but the first, with `skip_first`)."""
        total = start
        for builder in list(self.builders.values())[1 if skip_first else 0 :]:
            total = total.merged(builder.cache.stats)
        return total

    def nvcc_found(self) -> str | None:
        """The nvcc this process, or an xdist worker, found for a test that asked for one, described."""
        nvcc = next((n for b in self.builders.values() if (n := b.nvcc_if_found()) is not None), None)
        return self.worker_nvcc if nvcc is None else nvcc.describe()

    # -- collection --------------------------------------------------------------------------------------
    def item_archs(self, budget: Budget | None) -> list[str]:
        """The run's archs a marker's `archs=` keeps (judge.item_archs)."""
        return item_archs(self.settings.archs, budget)

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
            from ..sources.prebuilt import Binary  # cuobjdump's readers: for a marker that names a binary

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
        if module and nodeid not in self.other_shards:
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
            # An autotune config names its build (its own entry too), where a second build is counted.
            named = (
                facts.kernel
                if facts.triton_config is None
                else f"{facts.kernel} ({config_label(facts.triton_config)})"
            )
            kernel_id = self._kernel_id(state, named)
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
        """Read what the budget needs of a build (its SASS, the GPU's view of its cubin), and judge it
        (judge.py); the report joins the test's."""
        arch = facts.arch
        budget = state.budget or Budget()
        sass_report = None
        if reads_sass(budget, arch, sass=self.settings.sass) and facts.cubin:
            from ..tools import nvdisasm as disasm  # the SASS readers: for a kernel whose SASS is read

            res = facts.resources
            sass_report = disasm.read_sass(
                self.builder.nvdisasm(),
                facts.cubin,
                facts.entry,
                spills=res.spill_bytes > 0 or not res.spills_known,
                cache_dir=self.settings.cache_dir,
                trips=budget.limits(arch).loop_trips,
            )
        gpu_facts = None
        if arch == gpu_arch and facts.cubin:
            limits = limits_of(budget, facts)
            loaded, gpu_facts = self.gpu.load_and_probe(facts, limits, f"{nodeid}/{kernel_id}")
            state.loaded[(kernel_id, arch)] = loaded
        key = self.settings.baseline_key(facts)
        conflict = self._conflict(key, facts, nodeid)
        context = Context(
            nodeid,
            kernel_id,
            key=key,
            baseline=baseline_rule(self.baseline, self.settings, key, facts, budget, conflict),
            gpu=gpu_facts,
            sass=sass_report,
            gpu_note=note if arch == state.arch else None,
            package=self.settings.package_of(facts),
        )
        report = judge(facts, budget, context)
        if sass_report is None and fails_on_registers(report, limits_of(budget, facts), context.baseline):
            peak = self.builder.peak_live(facts)
            if peak is not None:  # the failure names where the registers go
                report = judge(facts, budget, replace(context, peak_live=peak))
        for defect in report.model_defects:
            warnings.warn(RegbudgetWarning(f"{report.label}: {defect}"), stacklevel=1)
        state.facts[(kernel_id, arch)] = facts
        state.reports.append(report)
        return report

    def _conflict(self, key: bl.Key, facts: KernelFacts, nodeid: str) -> str | None:
        """Two tests share one entry per kernel variant: their compile facts must agree."""
        numbers = tuple(getattr(facts.resources, m.name) for m in AGREED)
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
            "one baseline entry, so they must build it the same way. Fix: "
            + (
                'give one compile_triton call variant="..." (an entry of its own), or the same settings'
                if compiler == "triton"
                else "give the builds different defines (a variant of their own), or the same options"
            )
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

    def close(self) -> None:
        for builder in self.builders.values():
            builder.close()
