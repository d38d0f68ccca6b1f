"""The pytest11 entry point: options, ini keys, the marker, the fixture, and hooks that hand off to
RegbudgetSession. Nothing here imports NVRTC or a GPU library.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, get_args

import pytest

from .. import sources
from ..build.options import DEFAULT_PTXAS_TIMEOUT, CompileOptions
from ..build.pool import default_jobs
from ..core.dirs import default_cache_dir
from ..core.errors import (
    BaselineError,
    CompileError,
    LaunchError,
    ManifestError,
    MarkerError,
    ToolchainError,
    Unbuildable,
    UnknownArchError,
)
from ..core.text import safe_block
from ..core.verdict import KernelReport, TimeBasis
from ..gpu.runner import GpuMode
from ..sources import KernelSource, SourceSpec
from ..sources import make as make_source
from ..update import scope
from . import manifest_files
from .markers import VALID_KEYS, Budget, compile_options, duplicate_markers, parse_tolerance
from .session import WORKEROUTPUT_KEY, ItemState, RegbudgetSession, Settings, parse_archs

if TYPE_CHECKING:
    from ..core.gpu_facts import Timing
    from ..gpu.device import Device
    from .manifest import Manifest

SESSION_KEY = pytest.StashKey[RegbudgetSession]()
ITEM_KEY = pytest.StashKey[ItemState]()
ARCH_PARAM = "regbudget_arch"
TOOLKIT_PARAM = "regbudget_toolkit"  # with several --regbudget-toolkit: which one an item builds with
DEFAULT_ARCH = "sm_90"
DEFAULT_BASELINE = "regbudget-baseline.toml"


def _arch_list(value: str) -> str:
    """argparse type: reject a bad arch while parsing, naming the value and the supported set."""
    try:
        parse_archs([value])
    except UnknownArchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("regbudget", "CUDA register and spill budgets (pytest-regbudget)")
    group.addoption(
        "--regbudget-arch",
        action="append",
        type=_arch_list,
        default=None,
        metavar="ARCHS",
        help="target archs, comma-separated, may repeat (e.g. sm_80,sm_90). Default: ini regbudget_arch, "
        f"else {DEFAULT_ARCH}.",
    )
    group.addoption(
        "--regbudget-cuda-home",
        default=None,
        metavar="DIR",
        help="CUDA toolkit to use (the directory holding bin/ptxas). Default: $REGBUDGET_CUDA_HOME, "
        "the pip wheels, $CUDA_HOME/$CUDA_PATH, then PATH.",
    )
    group.addoption(
        "--regbudget-update",
        action="store_true",
        default=False,
        help="write or refresh the baseline entries of the kernels that ran (absolute budgets still fail); "
        "it removes an entry only when the run could have seen it and did not, and never when interrupted.",
    )
    group.addoption(
        "--regbudget-toolkit",
        action="append",
        default=None,
        metavar="NAMES",
        help="build and judge every kernel with each toolkit, comma-separated, may repeat: cu12 (the CUDA 12 "
        "wheels), cu13 (the CUDA 13 wheels), system (CUDA_HOME, CUDA_PATH, PATH) or a toolkit's directory. "
        "With more than one, item ids end in the release (test_x[sm_90-12.9]) and the summary compares them. "
        "Default: ini regbudget_toolkit, else the one toolkit discovery finds.",
    )
    group.addoption(
        "--regbudget-nvcc",
        default=None,
        metavar="PATH",
        help='the nvcc for compiler="nvcc" kernels. Default: ini regbudget_nvcc, else the toolkit\'s.',
    )
    group.addoption(
        "--regbudget-strict",
        action="store_true",
        default=None,
        help="fail every kernel that is not held to a baseline entry of its own CUDA release (no entry, an "
        "entry of another release only, unknown spills): a toolkit upgrade cannot pass unnoticed. Default: "
        "ini regbudget_strict.",
    )
    group.addoption(
        "--regbudget-baseline",
        default=None,
        metavar="PATH",
        help="the baseline file. Default: ini regbudget_baseline, else regbudget-baseline.toml in the "
        "rootdir.",
    )
    group.addoption(
        "--regbudget-markdown",
        default=None,
        metavar="PATH",
        help="write a Markdown table of kernels, metrics and baseline deltas to PATH "
        "(also appended to $GITHUB_STEP_SUMMARY when set).",
    )
    group.addoption(
        "--regbudget-gpu",
        choices=("auto", "off", "require"),
        default=None,
        help="GPU checks (driver attributes and occupancy, regbudget.benchmark timings): auto runs them when "
        "CuPy and a CUDA device are present, require fails without them, off never touches the GPU. "
        "Default: ini regbudget_gpu, else auto.",
    )
    group.addoption(
        "--regbudget-sass",
        action="store_true",
        default=False,
        help="disassemble each measured cubin with nvdisasm: spill instructions inside loops, local arrays, "
        "source lines (needs the sass extra).",
    )
    group.addoption(
        "--regbudget-html",
        default=None,
        metavar="PATH",
        help="write a self-contained HTML report: an index of every kernel (failures first), then budgets, "
        "diagnosis and occupancy staircase of the failing and changed ones.",
    )
    group.addoption(
        "--regbudget-html-all",
        action="store_true",
        default=False,
        help="with --regbudget-html: a section with the occupancy staircase for every kernel, not only the "
        "failing and changed ones (a larger page).",
    )
    group.addoption(
        "--regbudget-no-cache",
        action="store_true",
        default=False,
        help="compile everything afresh and write no cache entries (the cache lives in $REGBUDGET_CACHE_DIR, "
        "else $XDG_CACHE_HOME/pytest-regbudget, else ~/.cache/pytest-regbudget).",
    )
    group.addoption(
        "--regbudget-jobs",
        type=int,
        default=None,
        metavar="N",
        help="compile threads. Default: ini regbudget_jobs, else the available cores divided by pytest-xdist "
        "workers.",
    )
    group.addoption(
        "--regbudget-json",
        default=None,
        metavar="PATH",
        help='write every kernel\'s numbers and verdict to PATH as {"kernels": [...]}.',
    )
    parser.addini("regbudget_arch", "target archs, comma- or line-separated (default sm_90)", type="linelist")
    parser.addini(
        "regbudget_baseline",
        "baseline file, relative to the ini file's directory "
        "(default regbudget-baseline.toml in the rootdir)",
        default="",
    )
    parser.addini(
        "regbudget_tolerance",
        "how much worse than the baseline a kernel may get, e.g. 'registers=4, spills=16, occupancy=0.05'",
        default="",
    )
    parser.addini(
        "regbudget_compiler", "nvrtc (default) or nvcc, for markers that name no compiler", default="nvrtc"
    )
    parser.addini("regbudget_toolkit", "toolkits to build with, as --regbudget-toolkit", type="linelist")
    parser.addini("regbudget_nvcc", "the nvcc for compiler=nvcc, as --regbudget-nvcc", default="")
    parser.addini(
        "regbudget_headroom",
        "registers of headroom `regbudget explain` adds to the budget it suggests, e.g. 'registers=8'",
        default="",
    )
    parser.addini(
        "regbudget_time_basis",
        "time (default) or cycles: judge max_time_ratio on time x SM clock, for runners whose clock varies",
        default="time",
    )
    parser.addini("regbudget_strict", "true: as --regbudget-strict", type="bool", default=False)
    parser.addini("regbudget_jobs", "compile threads (default: cores / xdist workers)", default="")
    parser.addini("regbudget_gpu", "auto, off or require (see --regbudget-gpu)", default="auto")
    parser.addini(
        "regbudget_ptxas_timeout",
        f"seconds one ptxas run may take (default {DEFAULT_PTXAS_TIMEOUT:g})",
        default=str(DEFAULT_PTXAS_TIMEOUT),
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "regbudget(source, kernel, **budgets): compile a CUDA kernel per target arch and check its "
        f"register, spill, stack, shared-memory, launch and occupancy budgets. Keys: {', '.join(VALID_KEYS)}",
    )
    try:
        manifest = _load_manifest(config.rootpath)
    except ManifestError as exc:
        raise pytest.UsageError(f"regbudget manifest: {exc}") from None
    try:
        config.stash[SESSION_KEY] = session = RegbudgetSession(_settings(config, manifest))
    except BaselineError as exc:
        # Before any test runs, and before anything is written: the file stays as it was.
        raise pytest.UsageError(f"{exc}\nFix the file (or restore it from version control).") from None
    try:
        session.check_toolkits()
    except ToolchainError as exc:
        # A toolkit asked for by name or path that is not there: once, now, not in every test.
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(_ScopeWatcher(config), "regbudget-scope")
    if manifest is not None:
        from . import collect

        kernels = collect.ManifestCollection(config, manifest, _session(config), ITEM_KEY)
        config.pluginmanager.register(kernels, collect.PLUGIN_NAME)
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistController(config), "regbudget-xdist-controller")


def _load_manifest(rootdir: Path) -> Manifest | None:
    """The rootdir's kernel manifest (manifest.load), None without one. The manifest's modules are imported
    only where there may be one: most projects have none, and importing them would cost each of their runs."""
    found = manifest_files.find(rootdir)
    if found is None:
        return None
    from .manifest import load

    return load(rootdir, found)


def _path_option(config: pytest.Config, name: str) -> Path | None:
    value: str | None = config.getoption(name)
    return Path(config.invocation_params.dir, value) if value else None


def _settings(config: pytest.Config, manifest: Manifest | None = None) -> Settings:
    cli: Sequence[str] | None = config.getoption("regbudget_arch")
    ini: list[str] = config.getini("regbudget_arch")
    conflict = None
    if manifest is not None and not cli:
        from .manifest import arch_conflict

        conflict = arch_conflict(manifest, ini)
    if conflict:
        raise pytest.UsageError(f"regbudget manifest: {conflict}")
    try:
        archs = parse_archs(cli or ini or (manifest.archs if manifest else ()) or [DEFAULT_ARCH])
    except UnknownArchError as exc:
        raise pytest.UsageError(f"regbudget_arch (ini): {exc}") from None
    timeout_text = str(config.getini("regbudget_ptxas_timeout"))
    try:
        timeout = float(timeout_text)
    except ValueError:
        timeout = float("nan")
    if not 0 < timeout < float("inf"):  # also false for nan
        raise pytest.UsageError(
            f"regbudget_ptxas_timeout = {timeout_text!r}: expected a finite number of seconds > 0, "
            f"e.g. {DEFAULT_PTXAS_TIMEOUT:g}"
        )
    try:
        tolerance = parse_tolerance(str(config.getini("regbudget_tolerance")), "regbudget_tolerance (ini)")
    except MarkerError as exc:
        raise pytest.UsageError(str(exc)) from None
    baseline = _path_option(config, "regbudget_baseline")
    ini_baseline = str(config.getini("regbudget_baseline"))
    if baseline is None:
        ini_dir = config.inipath.parent if config.inipath else config.rootpath
        baseline = ini_dir / ini_baseline if ini_baseline else config.rootpath / DEFAULT_BASELINE
    gpu_mode = _gpu_mode(config.getoption("regbudget_gpu") or str(config.getini("regbudget_gpu")).strip())
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    return Settings(
        archs=tuple(archs),
        rootdir=config.rootpath,
        cuda_home=config.getoption("regbudget_cuda_home"),
        json_path=_path_option(config, "regbudget_json"),
        ptxas_timeout=timeout,
        baseline_path=baseline,
        update=bool(config.getoption("regbudget_update")),
        tolerance=tolerance,
        markdown_path=_path_option(config, "regbudget_markdown"),
        step_summary=Path(step_summary) if step_summary else None,
        annotate=os.environ.get("GITHUB_ACTIONS") == "true",
        gpu_mode=gpu_mode,
        sass=bool(config.getoption("regbudget_sass")),
        cache_dir=None if config.getoption("regbudget_no_cache") else default_cache_dir(),
        jobs=_jobs(config),
        compiler=_compiler(config),
        html_path=_path_option(config, "regbudget_html"),
        html_all=bool(config.getoption("regbudget_html_all")),
        strict=bool(config.getoption("regbudget_strict") or config.getini("regbudget_strict")),
        time_basis=_time_basis(config),
        toolkits=_toolkits(config),
        nvcc=config.getoption("regbudget_nvcc") or str(config.getini("regbudget_nvcc")).strip() or None,
    )


def _time_basis(config: pytest.Config) -> TimeBasis:
    value = str(config.getini("regbudget_time_basis")).strip() or "time"
    if value not in ("time", "cycles"):
        raise pytest.UsageError(f"regbudget_time_basis = {value!r} (ini): expected time or cycles")
    return cast(TimeBasis, value)


def _toolkits(config: pytest.Config) -> tuple[str, ...]:
    cli: Sequence[str] | None = config.getoption("regbudget_toolkit")
    values = cli or config.getini("regbudget_toolkit")
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    return tuple(dict.fromkeys(names))


def _jobs(config: pytest.Config) -> int:
    value: int | None = config.getoption("regbudget_jobs")
    ini = str(config.getini("regbudget_jobs")).strip()
    if value is None and ini:
        try:
            value = int(ini)
        except ValueError:
            raise pytest.UsageError(f"regbudget_jobs = {ini!r} (ini): expected a whole number") from None
    if value is not None and value < 1:
        raise pytest.UsageError(f"--regbudget-jobs={value}: expected 1 or more")
    return value or default_jobs()


def _gpu_mode(value: str) -> GpuMode:
    for mode in get_args(GpuMode):
        if value == mode:
            return cast(GpuMode, mode)
    raise pytest.UsageError(f"regbudget_gpu = {value!r} (ini): expected {', '.join(get_args(GpuMode))}")


def _compiler(config: pytest.Config) -> str:
    value = str(config.getini("regbudget_compiler")).strip() or "nvrtc"
    if value not in sources.names():
        raise pytest.UsageError(
            f"regbudget_compiler = {value!r} (ini): expected one of {', '.join(sources.names())}"
        )
    return value


def _session(config: pytest.Config) -> RegbudgetSession:
    return config.stash[SESSION_KEY]


def pytest_report_header(config: pytest.Config) -> str:
    return _session(config).header()


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # trylast: our arch parameter goes after the user's own, so ids end in the arch (test_x[4-sm_90]).
    marker = metafunc.definition.get_closest_marker("regbudget")
    if marker is None and "regbudget" not in metafunc.fixturenames:
        return
    session = _session(metafunc.config)
    budget, _ = session.parse(marker, Path(metafunc.definition.path))
    archs = session.item_archs(budget)
    metafunc.fixturenames.append(ARCH_PARAM)
    if archs and session.multiplied(budget):
        params = session.item_params(budget, archs)
        metafunc.fixturenames.append(TOOLKIT_PARAM)
        metafunc.parametrize(
            [ARCH_PARAM, TOOLKIT_PARAM], [(a, t) for a, t, _ in params], ids=[i for _, _, i in params]
        )
        return
    if archs:
        metafunc.parametrize(ARCH_PARAM, archs, ids=archs)
        return
    wanted = ",".join(budget.archs or ()) if budget else ""
    reason = f"regbudget archs={wanted} not among this run's archs {','.join(session.settings.archs)}"
    metafunc.parametrize(ARCH_PARAM, [pytest.param(None, marks=pytest.mark.skip(reason=reason), id=wanted)])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
        arch = params.get(ARCH_PARAM)
        if arch is None:
            continue
        session = _session(item.config)
        budget, error = session.parse(item.get_closest_marker("regbudget"), Path(item.path))
        marks = [
            (f"{type(node).__name__.lower()} {node.name}", mark.args, mark.kwargs)
            for node, mark in item.iter_markers_with_node("regbudget")
        ]
        if (duplicates := duplicate_markers(marks)) is not None:
            budget, error = None, duplicates
        archs = tuple(session.item_archs(budget))
        source = None
        if error is None:
            try:
                source = session.marker_source(budget)
            except ValueError as exc:
                budget, error = None, str(exc)
        item.stash[ITEM_KEY] = ItemState(
            arch=arch,
            budget=budget,
            marker_error=error,
            source=source,
            item_archs=archs,
            toolkit=params.get(TOOLKIT_PARAM),
        )


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    if items:
        _session(items[0].config).note_deselected(item.nodeid for item in items)


def pytest_collection_finish(session: pytest.Session) -> None:
    regbudget = _session(session.config)
    regbudget.note_collected(item.nodeid for item in session.items)
    if session.config.option.collectonly:
        return  # nothing will be measured: build nothing ahead
    regbudget.prefetch([s for item in session.items if (s := item.stash.get(ITEM_KEY, None)) is not None])


class _ScopeWatcher:
    """Hooks that see reports without a config: what was collected, per file, and which tests skipped."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        nodeid = report.nodeid
        # Only a module holds entries: not a package, a directory or a class.
        module = bool(nodeid) and "::" not in nodeid and (self.config.rootpath / nodeid).is_file()
        longrepr = report.longrepr
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        outcome = scope.ERROR if report.failed else scope.SKIPPED if report.skipped else scope.COLLECTED
        _session(self.config).note_collection(
            nodeid, outcome, reason.removeprefix("Skipped: "), module=module
        )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped:
            _session(self.config).note_skipped(report.nodeid)


def _arg_prefixes(config: pytest.Config) -> tuple[str, ...]:
    """Nodeid prefixes of the paths this run was given in full ("dir/" or "file.py"); a node id argument
    (file.py::test_x) names only part of its file, and a path outside the rootdir nothing we can key on."""
    prefixes: list[str] = []
    for arg in config.args:
        path_part, sep, _ = arg.partition("::")
        if sep:
            continue
        path = Path(config.invocation_params.dir, path_part).resolve()
        try:
            rel = path.relative_to(config.rootpath).as_posix()
        except ValueError:
            continue
        if path.is_dir():
            prefixes.append("" if rel == "." else rel + "/")
        elif path.is_file():
            prefixes.append(rel)
    return tuple(prefixes)


def _interruption(session: pytest.Session, exitstatus: int, errors: int) -> str | None:
    """Why the run ended early, if it did: then it removes no baseline entry."""
    if exitstatus == pytest.ExitCode.INTERNAL_ERROR:
        return "internal error"
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        if errors:
            return f"{errors} error{'s' if errors != 1 else ''} during collection"
        return str(session.shouldstop or session.shouldfail or "KeyboardInterrupt or pytest.exit")
    if session.shouldstop or session.shouldfail:
        return str(session.shouldstop or session.shouldfail)  # -x, --maxfail, --stepwise
    if session.config.option.collectonly:
        return "--collect-only runs no test"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.stash.get(ITEM_KEY, None)
    if state is not None and state.marker_error is not None:
        # An error of this test alone: the rest of the run goes on.
        pytest.fail(safe_block(f"{item.nodeid}: bad regbudget marker: {state.marker_error}"), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    state = item.stash.get(ITEM_KEY, None)
    if state is None:
        return (yield)
    session = _session(item.config)
    try:
        _compile_marker_kernel(session, state, item.nodeid)
        result = yield
    except pytest.skip.Exception:
        # A body that skips (no GPU, say) does not excuse the compile-time budgets that were checked.
        failure = session.finish_test(state, item.nodeid, completed=False)
        if failure:
            pytest.fail(failure, pytrace=False)
        raise
    except BaseException:
        session.finish_test(state, item.nodeid, completed=False)
        raise
    failure = session.finish_test(state, item.nodeid, completed=True)
    if failure:
        pytest.fail(failure, pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    finally:
        state = item.stash.get(ITEM_KEY, None)
        if state is not None:
            state.clear()


def _compile_marker_kernel(session: RegbudgetSession, state: ItemState, nodeid: str) -> None:
    source = state.source
    if source is None:
        return
    try:
        session.measure(state, nodeid, source)
        return
    except Unbuildable as exc:
        pytest.skip(safe_block(str(exc)))
    except (CompileError, ToolchainError) as exc:
        message = str(exc)
        session.record_error(state, nodeid, source.kernel or str(source.where), source.where, message)
    # Outside the except block, so the report shows the message and not a chain of exceptions.
    pytest.fail(safe_block(message), pytrace=False)


class RegbudgetFixture:
    """The `regbudget` fixture: compile kernels inside a test; each is judged by the test's marker."""

    def __init__(self, session: RegbudgetSession, state: ItemState, nodeid: str, test_dir: Path) -> None:
        self._session = session
        self._state = state
        self._nodeid = nodeid
        self._test_dir = test_dir

    @property
    def arch(self) -> str:
        """The arch this run of the test is for (the id's last part)."""
        return self._state.arch

    @property
    def reports(self) -> list[KernelReport]:
        """This test's kernels so far, judged; empty once the test is torn down (its records stay)."""
        return list(self._state.reports)

    @property
    def gpu(self) -> Device | None:
        """The CUDA device when this instance of the test runs the GPU checks, else None.

        Use it to build launch arguments only when they will be used: `regbudget.gpu.cupy` is CuPy.
        """
        if self._session.gpu_arch(self._state) is None:
            return None
        from ..gpu.device import device  # CuPy's side: imported once a test asks for the device

        return device()

    def compile(
        self,
        source: str | os.PathLike[str],
        kernel: str,
        *,
        defines: dict[str, object] | Sequence[str] | None = None,
        include_dirs: Sequence[str | os.PathLike[str]] = (),
        options: Sequence[str] = (),
        ptxas_options: Sequence[str] = (),
        compiler: str | None = None,
        depends: Sequence[str | os.PathLike[str]] = (),
    ) -> KernelReport:
        """Compile `kernel` of `source` (relative paths: from the test file's dir) for `self.arch`.

        `compiler="nvcc"` builds a translation unit with host code (`options` are then nvcc flags); the
        default is the marker's `compiler`, else ini `regbudget_compiler`, else NVRTC. `depends` names files
        the compile cache cannot find by itself (such as a header included through a macro), as the marker's.
        """
        __tracebackhide__ = True
        opts = self._options(defines, include_dirs, options, ptxas_options, depends)
        chosen = compiler or (self._state.budget or Budget()).compiler or self._session.settings.compiler
        return self._measure_one(make_source(chosen, SourceSpec(self._test_dir / source, kernel, opts)))

    def compile_source(
        self,
        code: str,
        kernel: str,
        *,
        name: str = "kernel.cu",
        defines: dict[str, object] | Sequence[str] | None = None,
        include_dirs: Sequence[str | os.PathLike[str]] = (),
        options: Sequence[str] = (),
        ptxas_options: Sequence[str] = (),
        depends: Sequence[str | os.PathLike[str]] = (),
    ) -> KernelReport:
        """Compile `kernel` from a code string, as CuPy's RawKernel would. `name` is what errors (and the
        reports) call the code; `#include "x.h"` resolves against the test file's directory."""
        __tracebackhide__ = True
        from ..sources.nvrtc import CodeString  # the sources a fixture method needs load on first use

        opts = self._options(defines, include_dirs, options, ptxas_options, depends)
        return self._measure_one(CodeString(self._test_dir / name, code, kernel, opts))

    def load(self, path: str | os.PathLike[str], kernel: str | None = None) -> list[KernelReport]:
        """Read the kernels of a prebuilt cubin, fatbin, object or shared library for `self.arch` (all of
        them, or `kernel` only), judged by the marker's budgets. Spills are reported only where the binary
        records them."""
        __tracebackhide__ = True
        from ..sources.prebuilt import Binary

        return self.measure(Binary(self._test_dir / path, kernel))

    def compile_triton(
        self,
        fn: Any,
        *,
        signature: dict[str, str],
        constexprs: dict[str, object] | None = None,
        num_warps: int = 4,
        num_stages: int = 3,
    ) -> KernelReport:
        """Compile a `@triton.jit` function for `self.arch` with Triton (no GPU needed) and measure its PTX
        with this run's ptxas: true spill figures, not Triton's n_spills (which counts all local memory).
        Its block is num_warps * 32 threads: give the marker launch=(num_warps * 32,) to check occupancy."""
        __tracebackhide__ = True
        from ..sources.python import triton_kernel

        source = triton_kernel(
            fn,
            self._test_dir,
            signature=signature,
            constexprs=constexprs,
            num_warps=num_warps,
            num_stages=num_stages,
        )
        return self._measure_one(source)

    def compile_numba(self, fn: Any, signature: object) -> KernelReport:
        """Compile a Python function with Numba for `self.arch`, no GPU needed: numba-cuda lowers it to NVVM
        IR, which the libNVVM of this run's toolkit turns into PTX for this run's ptxas to measure."""
        __tracebackhide__ = True
        from ..sources.python import numba_kernel

        return self._measure_one(numba_kernel(fn, signature, self._test_dir))

    def measure(self, source: KernelSource) -> list[KernelReport]:
        """Build any kernel source (an object implementing `pytest_regbudget.sources.KernelSource`) for
        `self.arch` and judge its kernels by the marker's budgets, as the methods above do."""
        __tracebackhide__ = True
        try:
            return self._session.measure(self._state, self._nodeid, source)
        except Unbuildable as exc:
            pytest.skip(safe_block(str(exc)))
        except CompileError as exc:
            kernel = source.kernel or str(source.where)
            self._session.record_error(self._state, self._nodeid, kernel, source.where, str(exc))
            # A fresh exception keeps the plugin's internals out of the user's traceback.
            raise type(exc)(safe_block(str(exc)), exc.log) from None

    def _measure_one(self, source: KernelSource) -> KernelReport:
        __tracebackhide__ = True
        (report,) = self.measure(source)
        return report

    def _options(
        self,
        defines: dict[str, object] | Sequence[str] | None,
        include_dirs: Sequence[str | os.PathLike[str]],
        options: Sequence[str],
        ptxas_options: Sequence[str],
        depends: Sequence[str | os.PathLike[str]] = (),
    ) -> CompileOptions:
        given = {
            "defines": defines,
            "include_dirs": include_dirs,
            "options": options,
            "ptxas_options": ptxas_options,
            "depends": depends,
        }
        try:
            return compile_options(given, self._test_dir)
        except MarkerError as exc:
            # The same rules as the marker's keys: a bad argument is the test's error, said plainly.
            raise ValueError(str(exc)) from None

    def benchmark(
        self,
        kernel: str | KernelReport,
        grid: int | tuple[int, ...],
        block: int | tuple[int, ...],
        args: Sequence[Any],
        *,
        dynamic_smem: int = 0,
        flush_l2: bool = True,
    ) -> Timing | None:
        """Launch the very cubin ptxas measured for `kernel` (a name compiled in this test, or its report)
        and time it with CUDA events: warm-up, L2 flush per sample, samples until the noise is low.

        Returns None where GPU checks do not run (no GPU, --regbudget-gpu=off, or another arch's instance
        of this test); the summary says why. Time budgets (max_time_ms, max_time_ratio) are judged when
        the test ends.
        """
        __tracebackhide__ = True
        grid_t = (grid,) if isinstance(grid, int) else tuple(grid)
        block_t = (block,) if isinstance(block, int) else tuple(block)
        try:
            return self._session.benchmark(self._state, kernel, grid_t, block_t, args, dynamic_smem, flush_l2)
        except LaunchError as exc:
            message = str(exc)
        pytest.fail(safe_block(message), pytrace=False)


@pytest.fixture
def regbudget(request: pytest.FixtureRequest) -> RegbudgetFixture:
    state = request.node.stash.get(ITEM_KEY, None)
    if state is None:  # pragma: no cover - every test using the fixture is parametrized by arch
        raise pytest.UsageError("the regbudget fixture has no arch; is the plugin registered?")
    return RegbudgetFixture(_session(request.config), state, request.node.nodeid, Path(request.path).parent)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    lines = _session(config).summary()
    if lines:
        nvcc = _session(config).nvcc_line()
        lines += [_session(config).cache_line(), *([nvcc] if nvcc else []), _session(config).gpu_line()]
    if lines:
        terminalreporter.write_sep("-", "regbudget")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionstart(session: pytest.Session) -> None:
    regbudget = _session(session.config)
    if regbudget.settings.gpu_mode == "require" and regbudget.gpu.device() is None:
        raise pytest.UsageError(f"--regbudget-gpu=require, but no GPU is usable: {regbudget.gpu.reason()}")
    if regbudget.settings.sass:
        try:
            regbudget.builder.nvdisasm()
        except CompileError as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    config = session.config
    regbudget = _session(config)
    regbudget.close()
    interrupted = _interruption(session, int(exitstatus), regbudget.scope.collection_errors)
    if interrupted:
        regbudget.note_interrupted(interrupted)
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[WORKEROUTPUT_KEY] = regbudget.worker_payload()
        return
    # --lf skips whole files at collection without reporting them as deselected.
    selection = "--lf" if config.getoption("lf", False) else None
    exit_code = regbudget.finish(_arg_prefixes(config) + _manifest_prefixes(config), selection)
    if exit_code is not None:
        session.exitstatus = exit_code


def _manifest_prefixes(config: pytest.Config) -> tuple[str, ...]:
    if not config.pluginmanager.has_plugin(manifest_files.PLUGIN_NAME):
        return ()
    from . import collect

    return collect.full_prefixes(config)


class _XdistController:
    """Registered only under pytest-xdist: the controller collects its workers' records."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", {})
        _session(self.config).merge_worker(output.get(WORKEROUTPUT_KEY, {}))
