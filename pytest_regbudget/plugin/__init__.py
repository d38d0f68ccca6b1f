"""The pytest adapter: options, hooks, the marker, the fixture, the kernel manifest's collection and the run's
session. The only folder that imports pytest.

This package is the pytest11 entry point (`pytest_regbudget.plugin`): pytest registers it and finds the hooks
and the `regbudget` fixture among its names, so they are imported here from hooks.py. Users import the
fixture's class from here too (`from pytest_regbudget.plugin import RegbudgetFixture`).
"""

from __future__ import annotations

from .fixture import RegbudgetFixture, regbudget
from .hooks import (
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_deselected,
    pytest_generate_tests,
    pytest_report_header,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    pytest_sessionfinish,
    pytest_sessionstart,
    pytest_terminal_summary,
)
from .options import pytest_addoption

__all__ = [
    "RegbudgetFixture",
    "pytest_addoption",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_deselected",
    "pytest_generate_tests",
    "pytest_report_header",
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_terminal_summary",
    "regbudget",
]
