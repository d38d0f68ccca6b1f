"""The pure core imports no pytest, no CuPy, no NVRTC and none of the modules that run tools.

The core (parsers, calculator, limits, verdict, baseline, report) is tested without a GPU or a toolkit,
and a CLI outside pytest can use it, only as long as it imports nothing but itself, the standard library
and the baseline's file libraries. Checked on the source (every import, also those inside functions or
under TYPE_CHECKING) and by importing it in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_regbudget

PACKAGE = Path(pytest_regbudget.__file__).parent
CORE = (
    "arch",
    "baseline",
    "budget",
    "compare",
    "diagnosis",
    "dirs",
    "errors",
    "facts",
    "gpu_facts",
    "html",
    "limits",
    "manifest_files",
    "occupancy",
    "ptxas",
    "report",
    "sass",
    "scope",
    "text",
    "timing",
    "update",
)
# Outside the package, the core may use the standard library and the baseline's TOML and lock libraries.
THIRD_PARTY = {"filelock", "tomli", "tomli_w"}


def _imports(module: str) -> tuple[set[str], set[str]]:
    """(modules of this package, other top-level modules) that `module` imports anywhere."""
    return _imported((PACKAGE / f"{module}.py").read_text())


def _imported(source: str) -> tuple[set[str], set[str]]:
    tree = ast.parse(source)
    ours: set[str] = set()
    others: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top, _, rest = alias.name.partition(".")
                if top != "pytest_regbudget":
                    others.add(top)
                elif rest:
                    ours.add(rest.partition(".")[0])
        elif isinstance(node, ast.ImportFrom):
            name = node.module or ""
            if node.level == 0 and not name.startswith("pytest_regbudget"):
                others.add(name.partition(".")[0])
                continue
            inside = name.removeprefix("pytest_regbudget").lstrip(".")
            # `from . import x` names modules; `from .x import y` names one.
            ours |= {inside.partition(".")[0]} if inside else {alias.name for alias in node.names}
    return ours, others


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_only_the_core(module: str) -> None:
    ours, others = _imports(module)
    assert ours <= set(CORE), f"{module}.py imports {sorted(ours - set(CORE))}, outside the core"
    outside = {name for name in others if name not in sys.stdlib_module_names and name not in THIRD_PARTY}
    assert not outside, f"{module}.py imports {sorted(outside)}"
    assert not others & {"ctypes", "subprocess"}, f"{module}.py loads libraries or runs tools"


def test_the_ptxas_parser_needs_nothing_but_pure_stdlib_modules() -> None:
    # The parser is tested against recordings of every toolkit only as long as it runs nothing
    # (functools: a remembered result; collections.abc: a type; typing: NamedTuple).
    ours, others = _imports("ptxas")
    assert ours <= {"errors"}
    assert others <= {"__future__", "re", "dataclasses", "functools", "collections", "typing"}


def test_the_import_check_sees_every_form_of_import() -> None:
    source = (
        "from __future__ import annotations\n"
        "import os.path\n"
        "from . import gpu, ptxas\n"
        "from .compiler import CompileOptions\n"
        "from .sources.nvrtc import CodeString\n"
        "import pytest_regbudget.session\n"
        "from pytest_regbudget.arch import get_arch\n"
        "def late():\n"
        "    import pytest\n"
        "    from cupy import cuda\n"
    )
    ours, others = _imported(source)
    assert ours == {"gpu", "ptxas", "compiler", "sources", "session", "arch"}
    assert others == {"__future__", "os", "pytest", "cupy"}


def test_the_core_imports_without_pytest_cupy_or_nvrtc() -> None:
    code = (
        "import sys, pytest_regbudget.budget, pytest_regbudget.ptxas, pytest_regbudget.occupancy, "
        "pytest_regbudget.report; assert 'pytest' not in sys.modules and 'cupy' not in sys.modules; "
        "assert 'ctypes' not in sys.modules, 'ctypes (for NVRTC) is loaded'; "
        "print(' '.join(m.split('.')[1] for m in sys.modules if m.startswith('pytest_regbudget.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert {"budget", "ptxas", "occupancy", "report"} <= loaded
    assert loaded <= set(CORE), f"importing the core loads {sorted(loaded - set(CORE))}"


def test_the_public_api_loads_the_plugin_on_first_use() -> None:
    code = (
        "import sys, pytest_regbudget as p; assert 'pytest' not in sys.modules; "
        "p.RegbudgetFixture; assert 'pytest' in sys.modules; "
        "assert {'RegbudgetFixture', 'compile_kernel', 'discover'} <= set(dir(p))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
