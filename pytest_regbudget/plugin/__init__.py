"""The pytest adapter: options, hooks, the marker, the fixture, the kernel manifest's collection and the run's
session. The only folder that imports pytest.

This package is the pytest11 entry point (`pytest_regbudget.plugin`): pytest registers it and finds its hooks
and the `regbudget` fixture among its names. Every pytest run in a venv that has the plugin loads it, so it
holds only the option table (options.py) and entry.py, which loads the engine's hooks (hooks.py) once the run
has kernels. Users import the fixture's class from here (`from pytest_regbudget.plugin import
RegbudgetFixture`): it is loaded when first named.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .entry import pytest_collection_modifyitems, pytest_configure, pytest_generate_tests, regbudget
from .options import pytest_addoption

if TYPE_CHECKING:
    from .fixture import RegbudgetFixture


def __getattr__(name: str) -> object:
    if name != "RegbudgetFixture":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(".fixture", __name__).RegbudgetFixture
    globals()[name] = value
    return value


__all__ = [
    "RegbudgetFixture",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_generate_tests",
    "regbudget",
]
