"""A venv that has the plugin pays for it on every pytest run, CUDA or not (plugin/entry.py): a run without
kernels loads none of the engine, and a run whose kernels only collection finds (no baseline, no manifest, no
option) loads it then and judges every kernel as a run that named them would."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.projects import write, write_tree
from helpers.runs import run_pytest

# Prints, after the run, which of the package's modules (and msgspec, which the engine's records need) it
# loaded. At unconfigure nothing is captured any more.
PROBE = """
import sys

def pytest_unconfigure(config):
    loaded = sorted(m for m in sys.modules if m.startswith("pytest_regbudget") or m == "msgspec")
    print("LOADED " + " ".join(loaded))
"""
KERNEL = 'extern "C" __global__ void scale(float* y, float a) { y[threadIdx.x] *= a; }\n'
# A budget that 8 registers break, given three ways that collection alone reveals, and a marker that a hook
# adds after parametrization (which builds nothing and must fail, not pass).
TESTS = """
import pytest

@pytest.mark.regbudget(source="k.cu", kernel="scale", max_regs=2)
def test_marked():
    pass

CASE = pytest.param(1, marks=pytest.mark.regbudget(source="k.cu", kernel="scale", max_regs=2))

@pytest.mark.parametrize("n", [CASE])
def test_case(n):
    pass

@pytest.mark.regbudget(max_regs=2)
def test_fixture(regbudget):
    regbudget.compile("k.cu", "scale")

def test_added():
    pass
"""
ADDS_MARKER = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "test_added":
            item.add_marker(pytest.mark.regbudget(source="k.cu", kernel="scale"))
"""
LIGHT = {
    "pytest_regbudget",
    "pytest_regbudget._version",
    "pytest_regbudget.core",
    "pytest_regbudget.core.defaults",
    "pytest_regbudget.plugin",
    "pytest_regbudget.plugin.entry",
    "pytest_regbudget.plugin.marked",
    "pytest_regbudget.plugin.options",
    "pytest_regbudget.project",
    "pytest_regbudget.project.options",
}


def loaded(stdout: str) -> set[str]:
    lines = [line for line in stdout.splitlines() if line.startswith("LOADED ")]
    assert len(lines) == 1, stdout
    return set(lines[0].split()[1:])


def env_for(tmp_path: Path) -> dict[str, str]:
    # COLUMNS: pytest's short summary cuts its lines to the width (CI=true does not).
    return {**os.environ, "REGBUDGET_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "250"}


def test_a_run_without_kernels_loads_no_engine(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write_tree(
        root, {"pytest.ini": "[pytest]\n", "conftest.py": PROBE, "test_plain.py": "def test_x():\n    pass\n"}
    )
    done = run_pytest(root, "-p", "no:cacheprovider", env=env_for(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert loaded(done.stdout) == LIGHT
    assert "regbudget:" not in done.stdout  # no header: nothing was asked of a toolkit


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    write_tree(
        root,
        {"pytest.ini": "[pytest]\n", "conftest.py": PROBE + ADDS_MARKER, "k.cu": KERNEL, "test_k.py": TESTS},
    )
    return root


def test_kernels_that_collection_finds_load_the_engine_then(project: Path, tmp_path: Path) -> None:
    done = run_pytest(project, "-p", "no:cacheprovider", "-rA", env=env_for(tmp_path))
    out = done.stdout
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, out + done.stderr
    for test in ("test_marked[sm_90]", "test_case[1-sm_90]", "test_fixture[sm_90]"):
        assert f"FAILED test_k.py::{test} - Failed: scale [sm_90]: registers 8 > max_regs 2" in out, out
    assert "ERROR test_k.py::test_added - Failed: test_k.py::test_added: a regbudget mark" in out, out
    assert {"pytest_regbudget.engine.session", "msgspec"} <= loaded(out)
    # The header, which names the toolkit, follows pytest's count: the engine was loaded after the header.
    lines = out.splitlines()
    collected = next(i for i, line in enumerate(lines) if line.startswith("collected "))
    header = next(i for i, line in enumerate(lines) if line.startswith("regbudget: "))
    assert header == collected + 1, out


def test_a_baseline_file_loads_the_engine_at_configure(project: Path, tmp_path: Path) -> None:
    write(project, "test_k.py", TESTS.replace("max_regs=2", "max_regs=64").split("def test_added")[0])
    args = ("-p", "no:cacheprovider", "--regbudget-update")
    done = run_pytest(project, *args, env=env_for(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / "regbudget-baseline.toml").is_file()
    done = run_pytest(project, "-p", "no:cacheprovider", env=env_for(tmp_path))  # the file alone
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout
    collected = next(i for i, line in enumerate(lines) if line.startswith("collected "))
    header = next(i for i, line in enumerate(lines) if line.startswith("regbudget: "))
    assert header < collected, done.stdout
