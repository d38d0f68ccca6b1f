"""The engine's hooks, which entry.py registers once a run has kernels: they hand off to the run's
RegbudgetSession, its summary, its xdist workers' results and its finish. Nothing here imports NVRTC or a GPU
library.
"""

from __future__ import annotations

import os
import unittest
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pytest

from ..core.errors import (
    BaselineError,
    CompileError,
    ManifestError,
    ToolchainError,
    Unbuildable,
)
from ..core.text import safe_block
from ..engine import finish, summary
from ..engine.progress import Ticker
from ..engine.session import RegbudgetSession
from ..engine.state import ItemState
from ..project import manifest
from ..project.markers import duplicate_markers
from ..report.layout import wrap
from ..update import scope
from . import shard
from .marked import case_markers
from .options import ARCH_PARAM, TOOLKIT_PARAM
from .settings import settings_of

if TYPE_CHECKING:
    from .collect import ManifestCollection

SESSION_KEY = pytest.StashKey[RegbudgetSession]()
LATE_KEY = pytest.StashKey[bool]()  # loaded during collection: the header follows `collected N items`
ITEM_KEY = pytest.StashKey[ItemState]()


def pytest_configure(config: pytest.Config) -> None:
    """Called when entry.py registers this module: at configure, or during collection (`started_late`)."""
    try:
        _configure(config)
    except pytest.UsageError as exc:
        # Each refusal quotes what the project holds (an ini value, a manifest key, a path, a baseline's
        # line): guarded as the run's every other line is (core/text.py).
        raise pytest.UsageError(safe_block(str(exc))) from None


def _configure(config: pytest.Config) -> None:
    try:
        kernels = manifest.load(config.rootpath, cache=not config.getoption("regbudget_no_cache"))
    except ManifestError as exc:
        raise pytest.UsageError(f"regbudget manifest: {exc}") from None
    try:
        config.stash[SESSION_KEY] = session = RegbudgetSession(settings_of(config, kernels))
    except BaselineError as exc:
        # Before any test runs, and before anything is written: the file stays as it was.
        raise pytest.UsageError(f"{exc}\nFix the file (or restore it from version control).") from None
    try:
        session.check_toolkits()
    except ToolchainError as exc:
        # A toolkit asked for by name or path that is not there: once, now, not in every test.
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(_ScopeWatcher(config), "regbudget-scope")
    shard.register(config, session, kernels, ITEM_KEY)  # before the manifest's hooks, which ask it
    if kernels is not None:
        from . import collect

        collection = collect.ManifestCollection(config, kernels, session_of(config), ITEM_KEY)
        config.pluginmanager.register(collection, collect.PLUGIN_NAME)
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistController(config), "regbudget-xdist-controller")
    if not hasattr(config, "workerinput"):  # a worker's output reaches no terminal
        config.pluginmanager.register(_BuildProgress(config, session), "regbudget-progress")


def session_of(config: pytest.Config) -> RegbudgetSession:
    return config.stash[SESSION_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    found = _collection(config)
    if found is not None and not found.selected:
        found = None  # -m leaves out every manifest item: it builds nothing, so asks nothing of nvcc
    # A manifest of nvcc kernels builds nothing with NVRTC: the header names the nvcc too.
    nvcc = found is not None and any(t.compiler == "nvcc" for t in found.manifest.tables)
    binaries = found is not None and all(t.binary for t in found.manifest.tables)
    lines = [summary.header(session_of(config), nvcc=nvcc, binaries=binaries)]
    if found is not None and config.get_verbosity() > 0:
        from . import collect

        lines += collect.excluded_lines(found.manifest)
    # Fitted to the width as the section is, then guarded as printed (paths, a compiler's error, excluded
    # files' names): a break can start a line with what the runner would read as a command.
    return [safe_block(line) for line in wrap(lines, _width(config))]


def _width(config: pytest.Config) -> int | None:
    """The columns our lines are fitted to: the terminal's, as pytest's own lines are (COLUMNS sets it where
    there is none: 80 in CI); None (whole) under -vv, as pytest's diffs. pytest's TerminalReporter has no
    public width; write_sep uses its writer's."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or config.get_verbosity() > 1:
        return None
    return int(reporter._tw.fullwidth)


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # trylast: our arch parameter goes after the user's own, so ids end in the arch (test_x[4-sm_90]).
    marker = metafunc.definition.get_closest_marker("regbudget")
    cases = case_markers(metafunc)
    fixture = "regbudget" in metafunc.fixturenames
    if marker is None and all(c is None for c in cases) and not fixture:
        return
    session = session_of(metafunc.config)
    path = Path(metafunc.definition.path)
    # Every case runs per arch once one needs it: parametrize applies to all. Each marker's archs= keeps
    # its own (pytest_collection_modifyitems skips a case on an arch its marker leaves out).
    markers = [marker] if marker is not None else [m for m in cases if m is not None]
    budgets = [session.parse(m, path)[0] for m in markers]
    if not markers or (marker is None and None in cases):
        budgets.append(None)  # a case without a marker (the fixture's, or one only beside marked ones)
    kept = {a for b in budgets for a in session.item_archs(b)}
    archs = [a for a in session.settings.archs if a in kept]
    metafunc.fixturenames.append(ARCH_PARAM)
    multiplied = [b for b in budgets if session.multiplied(b)]
    if archs and multiplied:
        params = session.item_params(multiplied[0], archs)
        metafunc.fixturenames.append(TOOLKIT_PARAM)
        metafunc.parametrize(
            [ARCH_PARAM, TOOLKIT_PARAM], [(a, t) for a, t, _ in params], ids=[i for _, _, i in params]
        )
        return
    if archs:
        metafunc.parametrize(ARCH_PARAM, archs, ids=archs)
        return
    wanted = ",".join(dict.fromkeys(a for b in budgets if b is not None for a in b.archs or ()))
    metafunc.parametrize(
        ARCH_PARAM, [pytest.param(None, marks=pytest.mark.skip(reason=_no_arch(session, wanted)), id=wanted)]
    )


def _no_arch(session: RegbudgetSession, wanted: str) -> str:
    return f"regbudget archs={wanted} not among this run's archs {','.join(session.settings.archs)}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
        arch = params.get(ARCH_PARAM)
        if arch is None:
            continue
        state = _item_state(item, arch, params.get(TOOLKIT_PARAM))
        if state.budget is not None and arch not in state.item_archs:
            # A pytest.param case whose marker's archs= leave out this arch (another case needs it).
            reason = f"regbudget archs={','.join(state.budget.archs or ())} of this case leave out {arch}"
            item.add_marker(pytest.mark.skip(reason=reason))
            continue
        item.stash[ITEM_KEY] = state


def _item_state(item: pytest.Item, arch: str, toolkit: str | None) -> ItemState:
    """What a marked test (or one with the fixture) carries: its marker's budget or the marker's error."""
    session = session_of(item.config)
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
    return ItemState(
        arch=arch, budget=budget, marker_error=error, source=source, item_archs=archs, toolkit=toolkit
    )


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    if items:
        session_of(items[0].config).note_deselected(item.nodeid for item in items)


def pytest_collection_finish(session: pytest.Session) -> None:
    regbudget = session_of(session.config)
    regbudget.note_collected(item.nodeid for item in session.items)
    regbudget.note_no_arch(item.nodeid for item in session.items if _left_out(item))
    if session.config.option.collectonly:
        return  # nothing will be measured: build nothing ahead
    regbudget.prefetch([s for item in session.items if (s := item.stash.get(ITEM_KEY, None)) is not None])


def _left_out(item: pytest.Item) -> bool:
    """Whether an item is skipped because its archs= leave out every arch of the run (the summary counts
    them). A pytest.param case built on some of the run's archs and skipped on the others is not."""
    found = _collection(item.config)
    if found is not None and found.made(item, kernels_only=True):
        return ITEM_KEY not in item.stash  # a manifest kernel made an item without an arch to build
    params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
    return ARCH_PARAM in params and params[ARCH_PARAM] is None  # the one item of a test left with no arch


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
        session_of(self.config).note_collection(
            nodeid, outcome, reason.removeprefix("Skipped: "), module=module
        )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped:
            session_of(self.config).note_skipped(report.nodeid)


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
    if state is None:
        unbuilt = _unparametrized(item)
        if unbuilt is not None:
            pytest.fail(safe_block(unbuilt), pytrace=False)  # this test's error alone: the run goes on
        return
    if state.budget is None and state.marker_error is None and item.get_closest_marker("regbudget"):
        # A marker that a hook added after pytest_collection_modifyitems read this test's markers.
        item.stash[ITEM_KEY] = state = _item_state(item, state.arch, state.toolkit)
    if state.marker_error is not None:
        # An error of this test alone: the rest of the run goes on.
        pytest.fail(safe_block(f"{item.nodeid}: bad regbudget marker: {state.marker_error}"), pytrace=False)


def _unparametrized(item: pytest.Item) -> str | None:
    """Why a test with a regbudget marker but no arch builds nothing (None for any other item): pytest
    parametrizes tests before a collection hook can add a marker, and never parametrizes a unittest method."""
    found = _collection(item.config)
    if found is not None and found.made(item):
        return None
    if item.get_closest_marker("regbudget") is None:
        return None
    cls = getattr(item, "cls", None)
    if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
        return (
            f"{item.nodeid}: a regbudget marker on a unittest.TestCase method builds nothing: pytest runs no "
            "unittest method per arch. Fix: move the test into a plain test function or class (def test_x(): "
            "...), or list its kernel in the manifest ([[tool.regbudget.kernels]] in pyproject.toml)"
        )
    return (
        f"{item.nodeid}: a regbudget marker that a hook added after pytest parametrized the test "
        "(pytest_collection_modifyitems) builds nothing: the test has no arch to build for. Fix: mark the "
        "test itself (@pytest.mark.regbudget, or pytestmark on its class or module), or add the marker only "
        "to tests that take the regbudget fixture"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    state = item.stash.get(ITEM_KEY, None)
    if state is None:
        return (yield)
    session = session_of(item.config)
    try:
        _compile_marker_kernel(session, state, item.nodeid)
        result = yield
    except pytest.skip.Exception:
        # A body that skips (no GPU, say) does not excuse the compile-time budgets that were checked.
        failure = session.finish_test(state, item.nodeid, completed=False)
        if failure:
            pytest.fail(safe_block(failure), pytrace=False)
        raise
    except BaseException:
        session.finish_test(state, item.nodeid, completed=False)
        raise
    failure = session.finish_test(state, item.nodeid, completed=True)
    failure = "\n".join(filter(None, [failure, _built_nothing(item, state)]))
    if failure:
        pytest.fail(safe_block(failure), pytrace=False)
    return result


def _built_nothing(item: pytest.Item, state: ItemState) -> str | None:
    """The failure of a marked test that ran to its end without judging a kernel on its arch: its budgets
    were checked nowhere, so it must not pass."""
    if state.budget is None or any(r.arch == state.arch for r in state.reports):
        return None
    if "regbudget" in getattr(item, "fixturenames", ()):
        return safe_block(
            f"{item.nodeid}: its regbudget marker judged no kernel on {state.arch}: the test took the "
            "regbudget fixture but compiled nothing. Fix: compile the kernel (regbudget.compile(...)), give "
            "the marker source= and kernel=, or pytest.skip() where there is nothing to build"
        )
    return safe_block(
        f"{item.nodeid}: its regbudget marker built no kernel on {state.arch}: it names no source= and "
        "kernel=, and the test does not take the regbudget fixture. Fix: give the marker source= and "
        "kernel= (or binary=), or take the regbudget fixture and compile the kernel in the test"
    )


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    verbosity = config.get_verbosity()
    mode = config.getoption("regbudget_summary") or ("all" if verbosity > 0 else "changes")
    lines = summary.lines(session_of(config), mode, _width(config))
    if lines:
        terminalreporter.write_sep("-", "regbudget")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionstart(session: pytest.Session) -> None:
    _start(session.config)


def started_late(config: pytest.Config) -> None:
    """What the session-start hooks would have done, for a run whose collection met its first kernel."""
    config.stash[LATE_KEY] = True
    progress = config.pluginmanager.get_plugin("regbudget-progress")
    if isinstance(progress, _BuildProgress):
        progress.start()
    _start(config)


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    return pytest_report_header(config) if config.stash.get(LATE_KEY, False) else []


def _start(config: pytest.Config) -> None:
    regbudget = session_of(config)
    if regbudget.settings.gpu_mode == "require" and regbudget.gpu.device() is None:
        reason = regbudget.gpu.reason()
        raise pytest.UsageError(safe_block(f"--regbudget-gpu=require, but no GPU is usable: {reason}"))
    if regbudget.settings.sass:
        try:
            regbudget.builder.nvdisasm()
        except CompileError as exc:
            raise pytest.UsageError(safe_block(str(exc))) from None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    config = session.config
    progress = config.pluginmanager.get_plugin("regbudget-progress")
    if isinstance(progress, _BuildProgress):
        progress.stop()  # before the summary is written
    regbudget = session_of(config)
    regbudget.close()
    interrupted = _interruption(session, int(exitstatus), regbudget.scope.collection_errors)
    if interrupted:
        regbudget.note_interrupted(interrupted)
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        from ..engine import workers

        workeroutput[workers.WORKEROUTPUT_KEY] = workers.payload(regbudget)
        return
    # --lf skips whole files at collection without reporting them as deselected.
    selection = "--lf" if config.getoption("lf", False) else None
    exit_code = finish.finish(regbudget, _arg_prefixes(config) + _manifest_prefixes(config), selection)
    if exit_code is not None:
        session.exitstatus = exit_code


def _manifest_prefixes(config: pytest.Config) -> tuple[str, ...]:
    found = _collection(config)
    return found.full_prefixes() if found is not None else ()


def _collection(config: pytest.Config) -> ManifestCollection | None:
    """The manifest's collection (collect.py), which a run without a manifest never loads."""
    if not config.pluginmanager.has_plugin(manifest.PLUGIN_NAME):
        return None
    # `from . import`, as configure's: one module whatever a test harness has done to sys.modules.
    from . import collect

    return collect.collection(config)


class _XdistController:
    """Registered only under pytest-xdist: the controller collects its workers' records."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        from ..engine import workers

        output = getattr(node, "workeroutput", {})
        workers.merge(session_of(self.config), output.get(workers.WORKEROUTPUT_KEY, {}))


class _BuildProgress:
    """Writes the engine's progress line (engine/progress.py) while builds run: rewritten in place on a
    terminal while pytest collects (as its own `collecting ...`), else a line of its own every few seconds
    (as a pipe, such as a CI log, shows it).

    Builds run while pytest captures output (collecting a manifest file, running a test), so the line goes
    to a copy of the terminal reporter's file descriptor, taken when nothing is captured; pytest's reporter
    is told that its line was broken, so that it starts its next result on a line of its own."""

    def __init__(self, config: pytest.Config, session: RegbudgetSession) -> None:
        self.config = config
        progress = session.builder.progress
        for builder in session.builders.values():  # one count over every toolkit's builds
            builder.progress = progress
        self.progress = progress
        self.collecting = True
        self.ticker: Ticker | None = None
        self.out: TextIO | None = None
        self.left_at = 0  # the width of pytest's line when a line was last written here

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.start()

    def start(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < -1:
            return  # -p no:terminal, or -qq: nothing but what pytest must say
        self.reporter: pytest.TerminalReporter = reporter
        tw = self.config.get_terminal_writer()
        try:
            fd = tw._file.fileno()  # pytest's writer has no public file
            self.out = os.fdopen(os.dup(fd), "w", encoding="utf-8", errors="replace")
        except (AttributeError, OSError, ValueError):
            return  # not a file (an in-process pytester run): no progress
        self.width = tw.fullwidth
        verbose = self.config.get_verbosity() > 0
        self.ticker = Ticker(self.progress, self._write, self._live, verbose=verbose)
        self.progress.on_build = self.ticker.start  # no thread for a run that builds nothing

    @pytest.hookimpl(tryfirst=True)  # before pytest's `collected N items`, which a status line must not hide
    def pytest_collection_finish(self) -> None:
        self.collecting = False

    def _live(self) -> bool:
        return self.collecting and bool(self.reporter.isatty)

    def _write(self, line: str, in_place: bool) -> None:
        out = self.out
        if out is None:
            return
        if in_place:
            out.write("\r" + line.ljust(self.width - 1) + ("" if line else "\r"))
        else:
            # pytest's writer counts only what it wrote: mid-line unless that is where this left it.
            width = self.config.get_terminal_writer().width_of_current_line
            if width and width != self.left_at:
                # Mid-line (a file's results): end it, and have pytest start its next result anew.
                line = "\n" + line
                self.reporter.currentfspath = None
            self.left_at = width
            out.write(line + "\n")
        out.flush()

    def stop(self) -> None:
        self.progress.on_build = None
        if self.ticker is not None:
            self.ticker.stop()
            self.ticker = None
        if self.out is not None:
            self.out.close()
            self.out = None
