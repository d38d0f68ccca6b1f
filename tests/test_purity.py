"""The floor plan holds: each folder of the package imports only the folders below it, only plugin/ imports
pytest, only gpu/ imports CuPy, the pure core runs no tool, and no module imports itself through others.

Checked on the source, counting every import (module level, inside functions and under TYPE_CHECKING), so a
new module is held to its folder's rule without being listed here; and by importing the core in a fresh
interpreter.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import pytest_regbudget

PACKAGE = Path(pytest_regbudget.__file__).parent
NAME = "pytest_regbudget"

# What each folder (or top-level module) may import from the package: the floor plan of
# docs/contributing.md. `plugin` is the pytest adapter and may use everything but the command line.
BELOW_ENGINE = {"util", "core", "tools", "cache", "sources", "project", "gpu", "report", "update", "history"}
ALLOWED: dict[str, set[str]] = {
    "util": {"util"},
    "core": {"util", "core"},
    "tools": {"util", "core", "tools"},
    "cache": {"util", "core", "tools", "cache"},
    "sources": {"util", "core", "tools", "sources"},
    "project": {"util", "core", "tools", "sources", "project"},
    "gpu": {"core", "gpu"},
    "report": {"util", "core", "report"},
    "update": {"util", "core", "report", "update"},
    "history": {"util", "core", "history"},
    "engine": {"_version", *BELOW_ENGINE, "engine"},
    "plugin": {"__init__", "_version", *BELOW_ENGINE, "engine", "plugin"},
    "cli": {"_version", *(BELOW_ENGINE - {"gpu"}), "engine", "cli"},
    "__main__": {"cli"},
    "__init__": {"_version", "core", "tools", "cache", "plugin"},
    "_version": set(),
}
# Third-party modules by folder; the standard library is free, but for the tool-running parts of it.
THIRD_PARTY: dict[str, set[str]] = {
    "util": set(),
    "core": {"filelock", "tomli", "tomli_w", "cxxfilt", "pycxxfilt", "elftools"},
    "tools": {"filelock", "triton", "numba", "cuda"},
    "cache": {"filelock"},
    "sources": set(),
    "project": {"tomli"},
    "gpu": {"cupy", "pynvml"},
    "report": set(),
    "update": set(),
    "history": set(),
    "engine": set(),
    "plugin": {"pytest", "_pytest", "xdist", "tomli"},
    "cli": {"tomli"},
    "__main__": set(),
    "__init__": set(),
    "_version": set(),
}
# The record type every layer defines its records with (docs/contributing.md, "Records").
EVERYWHERE = {"msgspec"}
TOOL_RUNNING = {"subprocess", "ctypes"}
# Folders that neither run a tool nor load a library: their code is tested on recorded data alone.
PURE = {"util", "core", "report", "update"}
# The floor plan's height: the longest chain of imports between rooms (a folder, or a module at the top of
# the package), a room that imports no other being level 1. The goal of issue 25 is at most 7.
MAX_LEVELS = 7


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (without the package's own name)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        out[".".join(parts).removesuffix(".__init__") or "__init__"] = path
    return out


def folder(module: str) -> str:
    return module.partition(".")[0]


def imported(source: str, module: str, is_package: bool) -> tuple[set[str], set[str]]:
    """(modules of this package, other top-level modules) that a module's source imports anywhere."""
    known = modules()
    here = module.split(".") if is_package else module.split(".")[:-1]
    if module == "__init__":
        here = []
    ours: set[str] = set()
    others: set[str] = set()

    def ours_add(dotted: str) -> None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        ours.add(dotted or "__init__")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top, _, rest = alias.name.partition(".")
                if top == NAME:
                    ours_add(rest)
                else:
                    others.add(top)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                top, _, rest = (node.module or "").partition(".")
                if top != NAME:
                    others.add(top)
                    continue
                base = rest
            else:
                parent = here[: len(here) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            for alias in node.names:  # `from . import x` names modules, `from .x import y` one module
                candidate = f"{base}.{alias.name}".lstrip(".")
                ours_add(candidate if candidate in known else base)
    ours.discard(module)
    return ours, others


@cache
def graph() -> dict[str, tuple[set[str], set[str]]]:
    return {
        name: imported(path.read_text(), name, path.name == "__init__.py") for name, path in modules().items()
    }


@pytest.mark.parametrize("module", sorted(modules()))
def test_module_imports_only_the_layers_below(module: str) -> None:
    ours, others = graph()[module]
    where = folder(module)
    outside = {m for m in ours if folder(m) not in ALLOWED[where]}
    assert not outside, f"{module} ({where}/) imports {sorted(outside)}: {where}/ may import {ALLOWED[where]}"
    foreign = {m for m in others if m not in sys.stdlib_module_names and m != "__future__"}
    allowed = THIRD_PARTY[where] | EVERYWHERE
    assert foreign <= allowed, f"{module} imports {sorted(foreign - allowed)}"
    if where in PURE:
        assert not others & TOOL_RUNNING, f"{module} runs tools or loads libraries: {others & TOOL_RUNNING}"


def test_only_plugin_imports_pytest_and_only_gpu_imports_cupy() -> None:
    pytest_users = {m for m, (_, others) in graph().items() if others & {"pytest", "_pytest"}}
    cupy_users = {m for m, (_, others) in graph().items() if "cupy" in others}
    assert {folder(m) for m in pytest_users} == {"plugin"}
    assert {folder(m) for m in cupy_users} == {"gpu"}


def heights(edges: dict[str, set[str]]) -> dict[str, int]:
    """Each node's height: 1 for one that imports no other, else 1 + its highest import. Raises on a
    circle, naming it."""
    height: dict[str, int] = {}
    visiting: list[str] = []

    def visit(node: str) -> int:
        if node in height:
            return height[node]
        if node in visiting:
            circle = [*visiting[visiting.index(node) :], node]
            raise AssertionError(f"import circle: {' -> '.join(circle)}")
        visiting.append(node)
        height[node] = 1 + max((visit(m) for m in edges[node]), default=0)
        visiting.pop()
        return height[node]

    for node in edges:
        visit(node)
    return height


def levels() -> dict[str, int]:
    """Heights of the modules (each module apart)."""
    return heights({module: imports for module, (imports, _) in graph().items()})


def rooms() -> dict[str, set[str]]:
    """The floor plan: which rooms (folders, top-level modules) import which."""
    edges: dict[str, set[str]] = {}
    for module, (imports, _) in graph().items():
        edges.setdefault(folder(module), set()).update(
            folder(m) for m in imports if folder(m) != folder(module)
        )
    return edges


def folders() -> dict[str, set[str]]:
    """The rooms that are folders, and the folders each imports (the top-level modules left out: the
    package's facade and `python -m`'s entry sit above every floor)."""
    edges = rooms()
    return {
        room: {m for m in imports if m in ALLOWED and (PACKAGE / m).is_dir()}
        for room, imports in edges.items()
        if (PACKAGE / room).is_dir()
    }


def test_no_import_circle_and_at_most_seven_floors() -> None:
    levels()  # no circle between modules
    heights(rooms())  # no circle between rooms
    floors = heights(folders())
    assert max(floors.values()) <= MAX_LEVELS, floors
    assert floors["util"] == 1, floors
    assert floors["core"] == 2, floors


def test_the_command_line_imports_no_plugin_module() -> None:
    cli = {m: ours for m, (ours, _) in graph().items() if folder(m) == "cli"}
    assert len(cli) > 1  # a package, one module per command
    assert not {m for ours in cli.values() for m in ours if folder(m) == "plugin"}, cli


def test_no_module_is_over_600_lines_and_nothing_is_named_build() -> None:
    long = {m: n for m, path in modules().items() if (n := len(path.read_text().splitlines())) > 600}
    assert not long, f"modules over 600 lines: {long}"
    named_build = [p for p in PACKAGE.rglob("*") if p.stem == "build"]
    assert not named_build, named_build


# Where a metric may be spelled out (issue 41): its row in the metrics table, the two parsers that read it
# from the tools, the baseline file's format and the JSON report's record. Anywhere else reads the row.
# The baseline format is two modules since the pre-commit hook (issue 46) checks a baseline with the standard
# library alone: baseline_schema.py names the file's fields without msgspec, and baseline.py holds at import
# that they are the metrics table's.
METRIC_SPELLED_IN = {
    "core/metrics.py",
    "core/ptxas.py",
    "core/cuobjdump.py",
    "core/baseline.py",
    "core/baseline_schema.py",
    "report/record.py",
}


def test_a_metric_is_spelled_out_in_the_five_places_only() -> None:
    # `grep -rl spill_loads pytest_regbudget`, over the package's modules.
    spelled = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "spill_loads" in path.read_text(encoding="utf-8")
    }
    assert len(METRIC_SPELLED_IN) == 6, sorted(spelled)
    assert spelled <= METRIC_SPELLED_IN, (
        f"spill_loads is spelled out in {sorted(spelled - METRIC_SPELLED_IN)}: read core/metrics.py's "
        "row (BY_NAME, SPLIT_BY_CALLEE, Metric.callees) there instead"
    )


def test_the_checks_see_every_form_of_import_and_a_circle() -> None:
    source = (
        "from __future__ import annotations\n"
        "import os.path\n"
        "from .. import tools\n"
        "from ..tools import nvrtc\n"
        "from ..sources.nvrtc import CodeString\n"
        "import pytest_regbudget.engine.session\n"
        "from pytest_regbudget.core.arch import get_arch\n"
        "from . import ptxas\n"
        "def late():\n"
        "    import pytest\n"
        "    from cupy import cuda\n"
    )
    ours, others = imported(source, "core.verdict", is_package=False)
    assert ours == {"tools", "tools.nvrtc", "sources.nvrtc", "engine.session", "core.arch", "core.ptxas"}
    assert others == {"__future__", "os", "pytest", "cupy"}
    graph()  # filled
    saved = graph()["core.arch"]
    graph()["core.arch"] = ({"core.verdict"}, set())
    try:
        with pytest.raises(AssertionError, match=r"import circle: core\.\w+ -> .*core\.arch"):
            levels()
    finally:
        graph()["core.arch"] = saved


@pytest.mark.parametrize("module", ["engine.session", "engine.state"])
def test_the_session_imports_no_pytest(module: str) -> None:
    # The run's flow and state take what pytest gave from the hooks, so that they run (and are tested)
    # without it.
    _, others = graph()[module]
    assert not others & {"pytest", "_pytest", "xdist"}, f"{module} imports {sorted(others)}"


def test_the_core_imports_without_pytest_cupy_or_nvrtc() -> None:
    code = (
        "import sys, pytest_regbudget.core.verdict, pytest_regbudget.core.ptxas, "
        "pytest_regbudget.core.occupancy, pytest_regbudget.report.record; "
        "assert 'pytest' not in sys.modules and 'cupy' not in sys.modules; "
        "assert 'ctypes' not in sys.modules, 'ctypes (for NVRTC) is loaded'; "
        "print(' '.join(m for m in sys.modules if m.startswith('pytest_regbudget.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    loaded = {m.removeprefix("pytest_regbudget.") for m in done.stdout.split()}
    assert {"core.verdict", "core.ptxas", "report.record"} <= loaded
    assert {folder(m) for m in loaded} <= {"_version", "util", "core", "report"}, loaded


def test_the_public_api_loads_the_plugin_on_first_use() -> None:
    code = (
        "import sys, pytest_regbudget as p; assert 'pytest' not in sys.modules; "
        "p.RegbudgetFixture; assert 'pytest' in sys.modules; "
        "assert {'RegbudgetFixture', 'compile_kernel', 'discover'} <= set(dir(p))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_pytest_collects_every_test_folder() -> None:
    # The tests mirror the package under pytest's default norecursedirs (which holds "build"): a test folder
    # that matched one would pass while skipping its tests whole.
    tests = Path(__file__).parent
    pyproject = tomllib.loads((tests.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert "norecursedirs" not in pyproject["tool"]["pytest"]["ini_options"]
    default = ["*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}"]
    folders = [d.name for d in tests.iterdir() if d.is_dir() and any(d.glob("test_*.py"))]
    assert {"core", "tools", "cache", "report", "update", "plugin", "integration", "gpu"} <= set(folders)
    assert not [f for f in folders if any(fnmatch.fnmatch(f, pattern) for pattern in default)]


def test_contributing_quotes_the_floor_plan_as_it_stands() -> None:
    # docs/contributing.md gives the floor plan's figures and names the files its recipes touch: both are
    # checked here, so the page cannot drift from the package again.
    page = (PACKAGE.parent / "docs" / "contributing.md").read_text(encoding="utf-8")
    edges = folders()
    floors = heights(edges)
    quoted = re.search(r"at most 7 floors: today (\d+)", page)
    assert quoted, "contributing.md no longer says how many floors the folders stand on"
    assert int(quoted.group(1)) == max(floors.values()), floors
    arrows = re.search(r"(\d+) arrows between (\d+) folders", page)
    assert arrows, "contributing.md no longer counts the arrows between folders"
    assert (int(arrows.group(1)), int(arrows.group(2))) == (sum(map(len, edges.values())), len(edges)), edges
    count = re.search(r"(\d+) modules", page)
    assert count, "contributing.md no longer counts the modules"
    assert int(count.group(1)) == len(modules())
    # Every table row names a folder that exists, and every module path the page names exists.
    table = set(re.findall(r"^\| `(\w+)/` \|", page, flags=re.MULTILINE))
    assert table == set(edges), (
        f"the floor plan's table lists {sorted(table)}, the package has {sorted(edges)}"
    )
    named = set(re.findall(r"`((?:\w+/)+\w+\.py)`", page))
    assert len(named) > 20
    missing = [n for n in named if not (PACKAGE / n).is_file() and not (PACKAGE.parent / n).is_file()]
    assert not missing, f"contributing.md names files that do not exist: {sorted(missing)}"
    recipes = re.findall(r"^## (Add [^\n]+)\n(.*?)(?=^## )", page, flags=re.MULTILINE | re.DOTALL)
    assert {title for title, _ in recipes} >= {
        "Add a kernel source",
        "Add a report format",
        "Add a metric",
        "Add a command",
    }
    for title, body in recipes:
        assert re.search(r"`(?:\w+/)+\w+\.py`", body), f"the recipe '{title}' names no file it touches"


def test_the_add_a_metric_recipe_names_every_module_its_example_touches() -> None:
    # The recipe shows local_instructions being added: every module that spells it out today is a file the
    # next metric may touch too, so the recipe must name it (issue 41).
    page = (PACKAGE.parent / "docs" / "contributing.md").read_text(encoding="utf-8")
    recipe = re.search(r"^## Add a metric\n(.*?)(?=^## )", page, flags=re.MULTILINE | re.DOTALL)
    assert recipe, "contributing.md has no 'Add a metric' recipe"
    assert "`local_instructions`" in recipe.group(1)
    named = set(re.findall(r"`((?:\w+/)+\w+\.py)`", recipe.group(1)))
    touched = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "local_instructions" in path.read_text(encoding="utf-8")
    }
    assert len(touched) > 3
    assert touched <= named, f"the 'Add a metric' recipe does not name {sorted(touched - named)}"
