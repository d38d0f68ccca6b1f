"""A fully cached run loads no NVRTC and starts no process: no `ptxas --version`, no `nvcc --version`, no
compiler, no `ldconfig` for the demangler. Everything it would ask comes from the compile cache (the
toolkit's identity is remembered there, keyed on the tools' stat).

The warm run is a pytest process whose conftest makes every way to start a process fail (and records the
try), and refuses to load NVRTC; at its end it records any libnvrtc mapped into the process.
"""

from __future__ import annotations

import sys

import pytest
from helpers.projects import write

from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.toolkit import discover

CONFTEST = """
import ctypes
import os
import subprocess
from pathlib import Path

RECORD = os.environ.get("REGBUDGET_QUIET_RECORD")

if RECORD:
    def _refuse(what):
        def refused(*args, **kwargs):
            with open(RECORD, "a") as fh:
                fh.write(f"{what} {args[1:3] if what == 'Popen' else args[:2]}\\n")
            raise RuntimeError(f"a fully cached run tried to {what}")
        return refused

    subprocess.Popen._execute_child = _refuse("Popen")  # every subprocess call goes through it
    for name in ("system", "posix_spawn", "posix_spawnp", "fork", "forkpty", "execv", "execve"):
        if hasattr(os, name):
            setattr(os, name, _refuse(name))
    _load = ctypes.CDLL.__init__

    def _guarded(self, name, *args, **kwargs):
        if name is not None and "nvrtc" in str(name):
            _refuse("load " + str(name))(self, name)
        _load(self, name, *args, **kwargs)

    ctypes.CDLL.__init__ = _guarded

    def pytest_unconfigure(config):
        maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
        with open(RECORD, "a") as fh:
            fh.writelines(f"mapped {line}\\n" for line in maps.splitlines() if "nvrtc" in line)
"""

KERNELS = r"""
extern "C" __global__ void scale(float* y, float a) { y[threadIdx.x] *= a; }

__global__ void square(float* y) { y[threadIdx.x] *= y[threadIdx.x]; }

template <int B>
__global__ void tile(float* y) { y[threadIdx.x * B] += 1.0f; }
"""

APP = (
    KERNELS
    + """
int main() {
    tile<4><<<1, 32>>>(nullptr);
    return 0;
}
"""
)

TESTS = """
import pytest

@pytest.mark.regbudget(source="kernels/kernels.cu", kernel="scale", launch=(256,))
def test_extern_c():
    pass

@pytest.mark.regbudget(source="kernels/kernels.cu", kernel="square")
def test_cpp():
    pass

@pytest.mark.regbudget(source="kernels/kernels.cu", kernel="tile<8>")
def test_template():
    pass

@pytest.mark.regbudget(max_regs=64)
def test_fixture(regbudget):
    assert regbudget.compile("kernels/kernels.cu", "scale").registers > 0
    assert regbudget.compile_source(KERNEL, "inline_k", name="kernels/inline.cu").registers > 0

KERNEL = 'extern "C" __global__ void inline_k(float* y) { y[threadIdx.x] += 1.0f; }'
"""

NVCC_TESTS = """

@pytest.mark.regbudget(source="kernels/app.cu", kernel="tile<4>", compiler="nvcc")
def test_nvcc_template():
    pass

@pytest.mark.regbudget(source="kernels/app.cu", kernel="square", compiler="nvcc")
def test_nvcc_cpp():
    pass
"""


def has_nvcc() -> bool:
    try:
        find_nvcc(discover())
    except Exception:  # CompileError: no nvcc wheel or toolkit here
        return False
    return True


def test_a_fully_cached_run_loads_no_nvrtc_and_starts_no_process(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(pytester.path / "cache"))
    pytester.makeconftest(CONFTEST)
    # Kernels in a directory of their own: each run writes files beside the tests (its basetemp).
    write(pytester.path, "kernels/kernels.cu", KERNELS)
    tests = TESTS
    if has_nvcc():
        (pytester.path / "kernels" / "app.cu").write_text(APP)
        tests += NVCC_TESTS
    pytester.makepyfile(test_k=tests)
    expected = tests.count("def test_") * 2
    args = ["-p", "no:cacheprovider", "--regbudget-arch=sm_80,sm_90", "--regbudget-gpu=off"]

    cold = pytester.runpytest_subprocess(*args)
    cold.assert_outcomes(passed=expected)
    record = pytester.path / "record.txt"
    monkeypatch.setenv("REGBUDGET_QUIET_RECORD", str(record))
    # The conftest's guards work: a process started in this mode is recorded and refused.
    probe = pytester.path / "probe.py"
    probe.write_text(
        "import subprocess, sys\nsys.path.insert(0, '.')\nimport conftest\n"
        "try:\n    subprocess.run(['true'])\nexcept RuntimeError:\n    pass\n"
    )
    pytester.run(sys.executable, str(probe))
    assert record.read_text().startswith("Popen ")
    record.unlink()

    warm = pytester.runpytest_subprocess(*args)
    warm.assert_outcomes(passed=expected)
    warm.stdout.fnmatch_lines(["compile cache *: * hits, 0 misses*"])
    assert not record.exists() or record.read_text() == "", record.read_text()


MODULES_CONFTEST = """
import os
import sys

def pytest_unconfigure(config):
    with open(os.environ["REGBUDGET_MODULES_RECORD"], "w") as fh:
        fh.write("\\n".join(sorted(sys.modules)))
"""

# What a warm run imports only where it is used, each for a cost a user would see: the file lock (about
# 11 ms: it imports asyncio) and the demangler (about 9 ms: it runs ldconfig to find libstdc++) serve only a
# build or an update; CuPy only a GPU run (--regbudget-gpu=off here), Triton only a Triton kernel, pyelftools
# (35-55 ms) only a kernel with a C7510/C7517 note or of a build in which a function spills. Everything else
# is imported at module level (docs/contributing.md).
NOT_IMPORTED = ("filelock", "cxxfilt", "pycxxfilt", "cupy", "triton", "elftools")
# Smaller, and none of them imported by pytest itself: each costs every run with kernels its import and its
# teardown at exit (benchmarks/import_speed.py): the TOML reader and writer (an update's: it also keeps the
# parsed baseline it wrote, which this first run after it reads back), ctypes (a GPU cluster kernel's,
# gpu/clusters.py), sysconfig (a torch extension's recorded flags), the thread pool (a build's), the report
# files' writers (a run that writes one), the fixture's other kinds of kernel (a test that builds one).
NOT_IMPORTED_EITHER = (
    "tomli",
    "tomli_w",
    "ctypes",
    "sysconfig",
    "concurrent.futures.thread",
    "pytest_regbudget.report.writers",
    "pytest_regbudget.report.links",
    "pytest_regbudget.engine.provenance",
    "pytest_regbudget.sources.prebuilt",
    "pytest_regbudget.sources.python",
)


def test_a_warm_run_imports_nothing_it_does_not_use(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(pytester.path / "cache"))
    record = pytester.path / "modules.txt"
    monkeypatch.setenv("REGBUDGET_MODULES_RECORD", str(record))
    pytester.makeconftest(MODULES_CONFTEST)
    write(pytester.path, "kernels/kernels.cu", KERNELS)
    pytester.makepyfile(test_k=TESTS)
    # pytest.ini, not pyproject.toml: pytest reads a pyproject.toml with tomllib itself.
    pytester.makeini("[pytest]\nregbudget_baseline = budgets.toml\n")
    args = ["-p", "no:cacheprovider", "--regbudget-arch=sm_90", "--regbudget-gpu=off"]
    # The cold run writes the baseline (so the warm one reads it) and imports the TOML writer: the record
    # shows what it imports.
    pytester.runpytest_subprocess(*args, "--regbudget-update").assert_outcomes(passed=4)
    assert "tomli_w" in record.read_text().split()
    assert (pytester.path / "budgets.toml").is_file()

    warm = pytester.runpytest_subprocess(*args)
    warm.assert_outcomes(passed=4)
    loaded = set(record.read_text().split())
    assert {"pytest_regbudget.plugin", "pytest_regbudget.core.baseline"} <= loaded
    assert loaded.isdisjoint(NOT_IMPORTED), sorted(loaded & set(NOT_IMPORTED))
    assert loaded.isdisjoint(NOT_IMPORTED_EITHER), sorted(loaded & set(NOT_IMPORTED_EITHER))
