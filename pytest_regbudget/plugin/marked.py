"""Which tests ask for the engine: a regbudget marker (on the test, its class or module, or a `pytest.param`
case) or the `regbudget` fixture. Light, as entry.py is: it decides whether a run loads the engine at all.
"""

from __future__ import annotations

from typing import Any

import pytest

MARKER = "regbudget"


def wants_engine(metafunc: pytest.Metafunc) -> bool:
    if metafunc.definition.get_closest_marker(MARKER) is not None or MARKER in metafunc.fixturenames:
        return True
    return any(m is not None for m in case_markers(metafunc))


def case_markers(metafunc: pytest.Metafunc) -> list[Any]:
    """The regbudget marker of each case parametrized so far (`pytest.param(..., marks=...)`, a fixture's
    params), None for a case without one. pytest shows a case's marks only on the item it makes, after this
    hook: its planned calls (private, hence read defensively) are the one place to see them now."""
    calls = getattr(metafunc, "_calls", None) or ()
    found = []
    for call in calls:
        marks = [m for m in getattr(call, "marks", ()) if getattr(m, "name", None) == MARKER]
        found.append(marks[0] if marks else None)
    return found


def marked(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER) is not None or MARKER in getattr(item, "fixturenames", ())
