"""The test suite's own rules: what the test files share comes from tests/helpers, not from conftest.py, and
every subprocess run of pytest or `regbudget` is spelt by tests/helpers/runs.py (`pytest_argv`,
`regbudget_argv`), which names the running interpreter: no test runs a `pytest` or `regbudget` that PATH
finds, so `venv/bin/python -m pytest tests` tests this checkout whatever PATH holds.

Checked on the source of every tests/**/*.py, like tests/test_purity.py checks the package's. A test about the
installed console scripts names the fresh environment's own (`installed / "regbudget"` in test_wheel.py),
which is no PATH look-up; pytester's `runpytest_subprocess` runs `sys.executable -mpytest` itself.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from helpers.runs import pytest_argv, regbudget_argv, run_pytest

TESTS = Path(__file__).parent
RUNS = TESTS / "helpers" / "runs.py"
COMMANDS = {"pytest", "py.test", "regbudget"}
MODULES = {"pytest", "pytest_regbudget"}
# The first word of a shell command line that runs one of COMMANDS from PATH, or the running interpreter's
# `-m pytest` spelt out.
SHELL = re.compile(r"(?:^|[;&|(`])\s*(?:\S*/)?(?:pytest|py\.test|regbudget)(?=\s|$)|-m\s*pytest")
# Functions whose first argument is a command line.
RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "system", "popen", "getoutput", "spawnlp"}
HELPER_MODULES = {"conftest", "history_repo", "occupancy_header"}


def text_of(node: ast.expr) -> str | None:
    """A string constant's text, or an f-string's with each `{...}` as `{}`; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(text_of(part) or "{}" for part in node.values)
    return None


def is_running_interpreter(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "executable" and ast.unparse(node.value) == "sys"


def argv_faults(argv: list[ast.expr]) -> Iterator[str]:
    """What is wrong with a command line given as a sequence of expressions."""
    texts = [text_of(node) for node in argv]
    if texts and texts[0] is not None and Path(texts[0]).name in COMMANDS:
        yield f"runs `{texts[0]}` from PATH"
    for n, node in enumerate(argv[:-1]):
        after = texts[n + 1 : n + 3]
        if is_running_interpreter(node) and (after[0] or "").startswith("-mpytest"):
            yield "spells `sys.executable -mpytest` itself"
        if is_running_interpreter(node) and after[0] == "-m" and after[1:] and after[1] in MODULES:
            yield f"spells `sys.executable -m {after[1]}` itself"
        if texts[n] == "-c" and (command := after[0]) is not None and SHELL.search(command):
            yield f"runs {command!r} in a shell"  # bash -c "pytest ..."


def faults(source: str) -> list[str]:
    """`line: what` for each way `source` runs pytest or `regbudget` other than through tests/helpers/runs.py,
    and each import of what moved from conftest.py to tests/helpers."""
    found = []
    for node in ast.walk(ast.parse(source)):
        what: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module in HELPER_MODULES:
            what.append(f"imports from {node.module} (use helpers)")
        elif isinstance(node, ast.Import):
            what += [f"imports {a.name} (use helpers)" for a in node.names if a.name in HELPER_MODULES]
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name == "which" and node.args and text_of(node.args[0]) in COMMANDS:
                what.append(f"looks {text_of(node.args[0])} up on PATH")
            if name in RUNNERS and node.args:
                first = node.args[0]
                if isinstance(first, (ast.List, ast.Tuple)):
                    what += argv_faults(first.elts)
                elif (text := text_of(first)) is not None and SHELL.search(text):
                    what.append(f"runs {text!r} in a shell")
                what += argv_faults(list(node.args))  # pytester.run(sys.executable, "-m", "pytest", ...)
        elif isinstance(node, (ast.List, ast.Tuple)):
            what += [w for w in argv_faults(node.elts) if "itself" in w]
        found += [f"{getattr(node, 'lineno', 0)}: {w}" for w in what]
    return list(dict.fromkeys(found))


def test_no_test_runs_pytest_or_regbudget_from_path_or_spells_it_itself() -> None:
    bad = {
        str(path.relative_to(TESTS)): problems
        for path in sorted(TESTS.rglob("*.py"))
        if path != RUNS and (problems := faults(path.read_text()))
    }
    assert not bad, f"run pytest and regbudget through tests/helpers/runs.py: {bad}"


def test_the_check_sees_every_form() -> None:
    source = (
        "import conftest\n"
        "from conftest import run_json\n"
        "from history_repo import git\n"
        "subprocess.run(['pytest', '-q'], cwd=root)\n"
        "subprocess.Popen(('regbudget', 'history'))\n"
        "subprocess.run(['/usr/bin/pytest'])\n"
        "subprocess.run('pytest -q | tail -1', shell=True)\n"
        "subprocess.run(f'{sys.executable} -m pytest_regbudget history | head -3', shell=True)\n"
        "subprocess.run(['bash', '-c', 'cd x && regbudget explain'])\n"
        "os.system('regbudget compare a b')\n"
        "shutil.which('pytest')\n"
        "cmd = [sys.executable, '-m', 'pytest', '-q']\n"
        "subprocess.run([sys.executable, '-m', 'pytest_regbudget', 'merge'])\n"
        "pytester.run(sys.executable, '-m', 'pytest', '-q')\n"
        "pytester.run(sys.executable, '-mpytest')\n"
    )
    lines = {int(f.split(":")[0]) for f in faults(source)}
    assert lines == set(range(1, source.count("\n") + 1)), faults(source)
    fine = (
        "from helpers.runs import run_pytest\n"
        "run_pytest(root, '-q')\n"
        "subprocess.run([installed / 'regbudget', '--version'])\n"  # a fresh venv's own script: test_wheel
        "subprocess.run([installed / 'python', '-m', 'pytest_regbudget'])\n"
        "subprocess.run(['git', 'commit', '-m', 'pytest: fix'])\n"
        "subprocess.run([sys.executable, '-c', 'import pytest'])\n"
        "pytester.runpytest_subprocess('-p', 'no:cacheprovider')\n"
        "assert {'pytest', '_pytest'} & others\n"
        "project.run('-m', 'regbudget', '-v')\n"
    )
    assert faults(fine) == []


def test_the_helpers_run_this_interpreter_whatever_path_holds(tmp_path: Path) -> None:
    assert pytest_argv("-q")[0] == regbudget_argv()[0] == sys.executable
    assert pytest_argv("-q")[1:] == ["-m", "pytest", "-q"]
    assert regbudget_argv("--version")[1:] == ["-m", "pytest_regbudget", "--version"]
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    env = {**os.environ, "PATH": str(tmp_path / "nowhere")}
    done = run_pytest(tmp_path, "-q", "-p", "no:cacheprovider", env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
