"""What every pytest run loads: the marker, the `regbudget` fixture, and when to load the engine.

A venv that has the plugin pays for this module on every pytest run, CUDA or not, so it imports nothing of the
engine. The engine's hooks (hooks.py: the session, NVRTC, the cache, the baseline) are registered
- at configure, when the run names anything of the plugin: a manifest, a baseline file, a `--regbudget-*`
  option, a `regbudget_*` ini key, $REGBUDGET_CUDA_HOME, or pytest-xdist workers (whose controller collects
  nothing, but gathers their kernels);
- otherwise when collection meets the first test that has a regbudget marker (on the test, its class or
  module, or a `pytest.param` case) or takes the `regbudget` fixture. Such a run has no baseline and every
  setting at its default, so nothing it would have checked at configure can be missed; hooks.py's
  `started_late` does what its session-start hooks would have done, and its header is printed after
  pytest's `collected N items` instead of before.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from ..project.options import DEFAULT_BASELINE, PYPROJECT, STANDALONE
from .marked import MARKER, marked, wants_engine

if TYPE_CHECKING:
    from .fixture import RegbudgetFixture

ENGINE = "regbudget-engine"  # the name hooks.py is registered under


def pytest_configure(config: pytest.Config) -> None:
    keys = "see `pytest --markers`"
    if config.option.markers:  # the one run that shows the line: the key list is the marker table's
        from ..project.markers import VALID_KEYS

        keys = ", ".join(VALID_KEYS)
    config.addinivalue_line(
        "markers",
        f"{MARKER}(source, kernel, **budgets): compile a CUDA kernel per target arch and check its register, "
        f"spill, stack, shared-memory, launch and occupancy budgets. Keys: {keys}",
    )
    if config.option.help or config.option.version:
        return  # expand no glob and build nothing for a question about pytest itself
    if _named(config):
        load_engine(config)


def load_engine(config: pytest.Config, *, late: bool = False) -> ModuleType:
    """hooks.py, registered once; pytest calls its pytest_configure on registration. `late`: collection
    is under way, so its session-start work is done now."""
    _load_as_python_does(config)
    from . import hooks  # the engine: loaded only by a run that has kernels

    if not config.pluginmanager.is_registered(hooks):
        try:
            config.pluginmanager.register(hooks, ENGINE)
        except BaseException:
            # Its pytest_configure refused the run (a usage error): no hook of a session never made may run.
            config.pluginmanager.unregister(hooks)
            raise
        if late:
            hooks.started_late(config)
    return hooks


def _load_as_python_does(config: pytest.Config) -> None:
    """Have the engine's modules loaded by Python's own loader, not by pytest's assertion rewriter.

    pytest marks every module of a plugin's distribution for assertion rewriting, and loads each marked module
    through its own reader of cached code (`marshal.load` from a file), about 0.4 ms a module slower than
    Python's: 40 ms on every run that has kernels, for the engine's 100 modules. The engine asserts nothing
    that a user reads, so nothing is lost. The set of marked names is pytest's private
    (`AssertionRewritingHook._must_rewrite`): where a pytest has it not, the modules are rewritten as before
    and only the time is lost."""
    marked = getattr(config.pluginmanager.rewrite_hook, "_must_rewrite", None)
    if isinstance(marked, set):
        marked.discard(__name__.split(".")[0])


def engine_loaded(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin(ENGINE)


def _named(config: pytest.Config) -> bool:
    """Whether the run names anything of the plugin, short of collecting its tests."""
    root = config.rootpath
    if (root / STANDALONE).exists() or (root / DEFAULT_BASELINE).exists():
        return True
    for settings in {root / PYPROJECT, config.inipath}:
        try:
            # A file only: reading a FIFO would block the run before it starts. (Not util.files's reader:
            # its import would load msgspec into every pytest run.)
            if settings is None or not settings.is_file():
                continue
            if MARKER in settings.read_text(encoding="utf-8", errors="replace"):
                return True  # an ini key or [tool.regbudget] (even one in a comment: the engine decides)
        except OSError:
            pass
    given = vars(config.option)
    # `is`: --regbudget-jobs=0 is given (and refused), though 0 == False.
    if any(v is not None and v is not False for name, v in given.items() if name.startswith("regbudget_")):
        return True
    if any(o.startswith("regbudget_") for o in given.get("override_ini") or ()):
        return True  # -o regbudget_...=
    if os.environ.get("REGBUDGET_CUDA_HOME"):
        return True  # a toolkit named by path is checked at configure, as the option is
    return bool(given.get("numprocesses")) or hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)  # as hooks.py's: after the user's own parametrize
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if engine_loaded(config) or not wants_engine(metafunc):
        return  # loaded: its own hook parametrizes this test
    load_engine(config, late=True).pytest_generate_tests(metafunc)


def pytest_collection_modifyitems(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    # A marker that no test function carried at parametrize time (another plugin's add_marker, a unittest
    # method): the engine's checks fail it rather than let it pass unbuilt.
    if engine_loaded(config):
        return
    if any(marked(item) for item in items):
        load_engine(config, late=True).pytest_collection_modifyitems(items)


@pytest.fixture
def regbudget(request: pytest.FixtureRequest) -> RegbudgetFixture:
    from .fixture import make_fixture

    load_engine(request.config, late=True)
    return make_fixture(request)
