"""The pytest11 entry point: options, ini keys, the marker, the fixture, and hooks that hand off to
RegbudgetSession. Nothing here imports NVRTC or a GPU library.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..core.errors import (
    BaselineError,
    CompileError,
    ManifestError,
    ToolchainError,
    Unbuildable,
)
from ..core.text import safe_block
from ..project import manifest
from ..project.markers import VALID_KEYS, duplicate_markers
from ..update import scope
from . import collect
from .options import ARCH_PARAM, TOOLKIT_PARAM, settings_of
from .session import WORKEROUTPUT_KEY, RegbudgetSession
from .state import ItemState

SESSION_KEY = pytest.StashKey[RegbudgetSession]()
ITEM_KEY = pytest.StashKey[ItemState]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "regbudget(source, kernel, **budgets): compile a CUDA kernel per target arch and check its "
        f"register, spill, stack, shared-memory, launch and occupancy budgets. Keys: {', '.join(VALID_KEYS)}",
    )
    if config.option.help or config.option.version:
        return  # expand no glob and build nothing for a question about pytest itself
    try:
        kernels = manifest.load(config.rootpath)
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
    if kernels is not None:
        collection = collect.ManifestCollection(config, kernels, session_of(config), ITEM_KEY)
        config.pluginmanager.register(collection, collect.PLUGIN_NAME)
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistController(config), "regbudget-xdist-controller")


def session_of(config: pytest.Config) -> RegbudgetSession:
    return config.stash[SESSION_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    found = collect.collection(config)
    # A manifest of nvcc kernels builds nothing with NVRTC: the header names the nvcc too.
    nvcc = found is not None and any(t.compiler == "nvcc" for t in found.manifest.tables)
    binaries = found is not None and all(t.binary for t in found.manifest.tables)
    lines = [session_of(config).header(nvcc=nvcc, binaries=binaries)]
    if found is not None and config.get_verbosity() > 0:
        lines += collect.excluded_lines(found.manifest)
    return lines


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # trylast: our arch parameter goes after the user's own, so ids end in the arch (test_x[4-sm_90]).
    marker = metafunc.definition.get_closest_marker("regbudget")
    if marker is None and "regbudget" not in metafunc.fixturenames:
        return
    session = session_of(metafunc.config)
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
        session_of(items[0].config).note_deselected(item.nodeid for item in items)


def pytest_collection_finish(session: pytest.Session) -> None:
    regbudget = session_of(session.config)
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
    if state is not None and state.marker_error is not None:
        # An error of this test alone: the rest of the run goes on.
        pytest.fail(safe_block(f"{item.nodeid}: bad regbudget marker: {state.marker_error}"), pytrace=False)


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    verbosity = config.get_verbosity()
    mode = config.getoption("regbudget_summary") or ("all" if verbosity > 0 else "changes")
    # Capped to the terminal as pytest's own lines are (COLUMNS sets it where there is none); -vv as pytest's
    # diffs: whole.
    # diffs: whole. pytest's TerminalReporter has no public width; its writer's is what write_sep uses.
    width = None if verbosity > 1 else int(terminalreporter._tw.fullwidth)
    lines = session_of(config).summary(mode, width)
    if lines:
        terminalreporter.write_sep("-", "regbudget")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionstart(session: pytest.Session) -> None:
    regbudget = session_of(session.config)
    if regbudget.settings.gpu_mode == "require" and regbudget.gpu.device() is None:
        raise pytest.UsageError(f"--regbudget-gpu=require, but no GPU is usable: {regbudget.gpu.reason()}")
    if regbudget.settings.sass:
        try:
            regbudget.builder.nvdisasm()
        except CompileError as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    config = session.config
    regbudget = session_of(config)
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
    if not config.pluginmanager.has_plugin(manifest.PLUGIN_NAME):
        return ()

    return collect.full_prefixes(config)


class _XdistController:
    """Registered only under pytest-xdist: the controller collects its workers' records."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", {})
        session_of(self.config).merge_worker(output.get(WORKEROUTPUT_KEY, {}))
