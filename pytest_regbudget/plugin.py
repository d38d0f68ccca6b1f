"""The pytest11 entry point: options, ini keys, the marker, the fixture, and hooks that hand off to
RegbudgetSession. Nothing here imports NVRTC or a GPU library.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from .arch import UnknownArchError
from .budget import KernelReport
from .compiler import DEFAULT_PTXAS_TIMEOUT, CompileError, CompileOptions
from .markers import VALID_KEYS
from .session import WORKEROUTPUT_KEY, ItemState, RegbudgetSession, parse_archs
from .toolchain import ToolchainError

SESSION_KEY = pytest.StashKey[RegbudgetSession]()
ITEM_KEY = pytest.StashKey[ItemState]()
ARCH_PARAM = "regbudget_arch"
DEFAULT_ARCH = "sm_90"


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
        "--regbudget-json",
        default=None,
        metavar="PATH",
        help='write every kernel\'s numbers and verdict to PATH as {"kernels": [...]}.',
    )
    parser.addini("regbudget_arch", "target archs, comma- or line-separated (default sm_90)", type="linelist")
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
    config.stash[SESSION_KEY] = _make_session(config)
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistController(config), "regbudget-xdist-controller")


def _make_session(config: pytest.Config) -> RegbudgetSession:
    cli: Sequence[str] | None = config.getoption("regbudget_arch")
    ini: list[str] = config.getini("regbudget_arch")
    try:
        archs = parse_archs(cli or ini or [DEFAULT_ARCH])
    except UnknownArchError as exc:
        raise pytest.UsageError(f"regbudget_arch (ini): {exc}") from None
    timeout_text = str(config.getini("regbudget_ptxas_timeout"))
    try:
        timeout = float(timeout_text)
    except ValueError:
        raise pytest.UsageError(
            f"regbudget_ptxas_timeout = {timeout_text!r}: expected a number of seconds"
        ) from None
    json_opt: str | None = config.getoption("regbudget_json")
    return RegbudgetSession(
        archs=archs,
        cuda_home=config.getoption("regbudget_cuda_home"),
        json_path=Path(json_opt) if json_opt else None,
        ptxas_timeout=timeout,
    )


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
    if archs:
        metafunc.parametrize(ARCH_PARAM, archs, ids=archs)
        return
    wanted = ",".join(budget.archs or ()) if budget else ""
    reason = f"regbudget archs={wanted} not among this run's archs {','.join(session.archs)}"
    metafunc.parametrize(ARCH_PARAM, [pytest.param(None, marks=pytest.mark.skip(reason=reason), id=wanted)])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
        arch = params.get(ARCH_PARAM)
        if arch is None:
            continue
        budget, error = RegbudgetSession.parse(item.get_closest_marker("regbudget"), Path(item.path))
        item.stash[ITEM_KEY] = ItemState(arch=arch, budget=budget, marker_error=error)


def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.stash.get(ITEM_KEY, None)
    if state is not None and state.marker_error is not None:
        # An error of this test alone: the rest of the run goes on.
        pytest.fail(f"{item.nodeid}: bad regbudget marker: {state.marker_error}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    state = item.stash.get(ITEM_KEY, None)
    if state is None:
        return (yield)
    session = _session(item.config)
    try:
        _compile_marker_kernel(session, state, item.nodeid)
        result = yield
    finally:
        failure = session.verdict(state)
    if failure:
        pytest.fail(failure, pytrace=False)
    return result


def _compile_marker_kernel(session: RegbudgetSession, state: ItemState, nodeid: str) -> None:
    budget = state.budget
    if budget is None or budget.source is None or budget.kernel is None:
        return
    try:
        session.compile_and_check(state, nodeid, budget.source, budget.kernel, budget.options)
        return
    except (CompileError, ToolchainError) as exc:
        message = str(exc)
        session.record_error(state, nodeid, budget.kernel, budget.source, message)
    # Outside the except block, so the report shows the message and not a chain of exceptions.
    pytest.fail(message, pytrace=False)


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
        return list(self._state.reports)

    def compile(
        self,
        source: str | os.PathLike[str],
        kernel: str,
        *,
        defines: dict[str, object] | Sequence[str] | None = None,
        include_dirs: Sequence[str | os.PathLike[str]] = (),
        options: Sequence[str] = (),
        ptxas_options: Sequence[str] = (),
    ) -> KernelReport:
        """Compile `kernel` of `source` (relative paths: from the test file's dir) for `self.arch`."""
        __tracebackhide__ = True
        path = self._test_dir / source
        opts = CompileOptions.make(
            defines=defines,
            include_dirs=[str(self._test_dir / d) for d in include_dirs],
            options=options,
            ptxas_options=ptxas_options,
        )
        try:
            return self._session.compile_and_check(self._state, self._nodeid, path, kernel, opts)
        except CompileError as exc:
            self._session.record_error(self._state, self._nodeid, kernel, path, str(exc))
            # A fresh exception keeps the plugin's internals out of the user's traceback.
            raise type(exc)(str(exc), exc.log) from None


@pytest.fixture
def regbudget(request: pytest.FixtureRequest) -> RegbudgetFixture:
    state = request.node.stash.get(ITEM_KEY, None)
    if state is None:  # pragma: no cover - every test using the fixture is parametrized by arch
        raise pytest.UsageError("the regbudget fixture has no arch; is the plugin registered?")
    return RegbudgetFixture(_session(request.config), state, request.node.nodeid, Path(request.path).parent)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    lines = _session(config).summary()
    if lines:
        terminalreporter.write_sep("-", "regbudget")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[WORKEROUTPUT_KEY] = _session(config).worker_payload()
        return
    _session(config).write_outputs()


class _XdistController:
    """Registered only under pytest-xdist: the controller collects its workers' records."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", {})
        _session(self.config).merge_worker(output.get(WORKEROUTPUT_KEY, []))
