"""pytest's own selection acts on manifest items as on marked tests: each carries the `regbudget` marker, so
`-m` selects and deselects them, and a run whose `-m` leaves them all out builds no listing and compiles
nothing (counted with ptxas and nvcc wrappers that log each call, then run the real tools from the wheels);
`--lf`, `--ff` and `--sw` find them by their cached ids; a `kernels` pattern that matches nothing fails
`--regbudget-strict`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.data import KERNELS
from helpers.runs import verbose_outcomes

from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.nvcc import find_nvcc

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the logging tools are shell scripts")

HUNGRY = (KERNELS / "hungry.cu").read_text()  # poly_eval: 168 registers
SMALL = 'extern "C" __global__ void small(float* x) { x[threadIdx.x] *= 2.0f; }\n'
NVCC_FILE = """#include <cstdio>
__global__ void nvk(float* x) { x[threadIdx.x] += 1.0f; }
int main() { std::printf("host\\n"); return 0; }
"""
PYPROJECT = """
[tool.pytest.ini_options]
testpaths = ["tests"]
regbudget_arch = "sm_80,sm_90"
regbudget_baseline = "regbudget-baseline.toml"

[[tool.regbudget.kernels]]          # a pattern table: its kernels come from each file's listing
source = ["kernels/poly.cu", "kernels/small.cu"]
kernels = ["*"]
spills = 0

[[tool.regbudget.kernels]]          # a named kernel of NVRTC
source = "kernels/small.cu"
kernels = ["small"]
max_regs = {small_regs}

[[tool.regbudget.kernels]]          # an nvcc file, listed by its build
source = "kernels/nv.cu"
compiler = "nvcc"
max_regs = 64
"""
TESTS = """
import pytest


@pytest.mark.regbudget(source="../kernels/small.cu", kernel="small", max_regs=32)
def test_marked():
    pass


def test_plain():
    pass
"""
MANIFEST_ITEMS = [
    "kernels/nv.cu::nvk[sm_80]",
    "kernels/nv.cu::nvk[sm_90]",
    "kernels/poly.cu::poly_eval[sm_80]",
    "kernels/poly.cu::poly_eval[sm_90]",
    "kernels/small.cu::small[sm_80]",
    "kernels/small.cu::small[sm_90]",
]


def logging_home(tmp: Path, log: Path) -> Path:
    """A CUDA home whose ptxas and nvcc append their arguments to `log`, then run the wheels' real tools."""
    real = toolchain.discover()
    nvcc = find_nvcc(real).path
    home = tmp / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    for name, tool in (("ptxas", real.ptxas), ("nvcc", nvcc)):
        script = home / "bin" / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nexec "{tool}" "$@"\n')
        script.chmod(0o755)
    for lib in [real.require_nvrtc(), *real.require_nvrtc().parent.glob("libnvrtc-builtins.so.*")]:
        (home / "lib" / lib.name).symlink_to(lib)
    return home


class Project:
    """A manifest with a pattern table, a named NVRTC kernel and an nvcc file, beside marked tests; every run
    uses the logging CUDA home and a compile cache of its own."""

    def __init__(self, pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pytester = pytester
        self.log = tmp_path / "calls.log"
        self.home = logging_home(tmp_path, self.log)
        monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(tmp_path / "cache"))  # cold
        kernels = pytester.path / "kernels"
        kernels.mkdir()
        (kernels / "poly.cu").write_text(HUNGRY)
        (kernels / "small.cu").write_text(SMALL)
        (kernels / "nv.cu").write_text(NVCC_FILE)
        (pytester.path / "tests").mkdir()
        (pytester.path / "tests" / "test_k.py").write_text(TESTS)
        self.manifest(small_regs=32)

    def manifest(self, **values: object) -> None:
        (self.pytester.path / "pyproject.toml").write_text(PYPROJECT.format(**values))

    def run(self, *args: str, cache: bool = False) -> pytest.RunResult:
        self.log.unlink(missing_ok=True)
        plugins = [] if cache else ["-p", "no:cacheprovider"]
        return self.pytester.runpytest(*plugins, f"--regbudget-cuda-home={self.home}", *args)

    def compiles(self) -> list[str]:
        """The compiler runs of the last run: every call but discovery's probes (`--version`, and `--help`
        for ptxas's --gpu-name list)."""
        calls = self.log.read_text().splitlines() if self.log.exists() else []
        return [c for c in calls if c.split()[1:] not in (["--version"], ["--help"])]

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    return Project(pytester, tmp_path, monkeypatch)


def test_not_regbudget_deselects_the_manifest_and_compiles_nothing(project: Project) -> None:
    result = project.run("-m", "not regbudget", "-v")
    assert result.ret == pytest.ExitCode.OK
    assert verbose_outcomes(result) == {"tests/test_k.py::test_plain": "PASSED"}
    result.assert_outcomes(passed=1, deselected=2)  # the marked test's two archs
    assert project.compiles() == []
    # The header's toolkit, on a cold cache (a wheel toolkit's comes from its metadata): its version and the
    # archs its ptxas takes, asked once; nvcc is not asked.
    assert project.calls() == ["ptxas --version", "ptxas --help"]


def test_regbudget_runs_the_manifest_and_the_marked_tests(project: Project) -> None:
    result = project.run("-m", "regbudget", "-v")
    marked = ["tests/test_k.py::test_marked[sm_80]", "tests/test_k.py::test_marked[sm_90]"]
    assert verbose_outcomes(result) == dict.fromkeys([*MANIFEST_ITEMS, *marked], "PASSED")
    result.assert_outcomes(passed=8, deselected=1)
    assert any(c.startswith("nvcc ") for c in project.compiles())
    assert any(c.startswith("ptxas ") for c in project.compiles())


def test_an_update_that_deselects_the_manifest_leaves_the_baseline_as_it_was(project: Project) -> None:
    """The manifest's files were not seen: none of their entries is stale, and nothing is rewritten."""
    project.run("--regbudget-update").assert_outcomes(passed=9)
    baseline = project.pytester.path / "regbudget-baseline.toml"
    before = baseline.read_bytes()
    assert b"kernels/nv.cu" in before
    assert b"kernels/poly.cu" in before
    result = project.run("-m", "not regbudget", "--regbudget-update")
    result.assert_outcomes(passed=1, deselected=2)
    assert baseline.read_bytes() == before
    assert project.compiles() == []


def test_a_manifest_file_named_under_a_deselecting_m_is_skipped_with_the_reason(project: Project) -> None:
    result = project.run("-m", "not regbudget", "kernels/poly.cu", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*kernels/poly.cu: -m 'not regbudget' deselects every manifest item*"])
    assert project.compiles() == []


def test_k_still_lists_the_pattern_tables(project: Project) -> None:
    """-k matches the items' names, which a pattern table has only from its files' listings: it builds them
    (a warm run reads them from the cache). The named kernel and the nvcc file need none to be named."""
    result = project.run("-k", "test_plain")
    result.assert_outcomes(passed=1, deselected=8)
    listed = {line.split()[0] for line in project.compiles()}
    assert listed == {"ptxas", "nvcc"}  # nv.cu's listing is its nvcc build
    warm = project.run("-k", "test_plain")
    warm.assert_outcomes(passed=1, deselected=8)
    assert project.compiles() == []


def test_last_failed_failed_first_and_stepwise_select_manifest_items(project: Project) -> None:
    project.manifest(small_regs=4)  # small has 8 registers: its two manifest items fail
    first = project.run("-v", cache=True)
    failed = ["kernels/small.cu::small[sm_80]", "kernels/small.cu::small[sm_90]"]
    assert [k for k, v in verbose_outcomes(first).items() if v == "FAILED"] == failed
    last_failed = project.run("--lf", "-v", cache=True)
    last_failed.stdout.fnmatch_lines(["run-last-failure: rerun previous 2 failures*"])
    assert verbose_outcomes(last_failed) == dict.fromkeys(failed, "FAILED")
    last_failed.assert_outcomes(failed=2, passed=0)
    failed_first = project.run("--ff", "-v", cache=True)
    failed_first.stdout.fnmatch_lines(["run-last-failure: rerun previous 2 failures first*"])
    assert list(verbose_outcomes(failed_first))[:2] == failed
    stepwise = project.run("--sw", "-v", cache=True)
    order = list(verbose_outcomes(stepwise))
    assert order[-1] == failed[0]  # it stops at the first failure
    resumed = project.run("--sw", "-v", cache=True)
    resumed.stdout.fnmatch_lines([f"stepwise: skipping {len(order) - 1} already passed items*"])
    assert next(iter(verbose_outcomes(resumed))) == failed[0]


def test_a_pattern_that_matches_nothing_fails_a_strict_run(project: Project) -> None:
    text = PYPROJECT.replace('kernels = ["*"]', 'kernels = ["poly_evl*"]')
    (project.pytester.path / "pyproject.toml").write_text(text.format(small_regs=32))
    project.run("--regbudget-update").assert_outcomes(passed=7)
    plain = project.run()
    assert plain.ret == pytest.ExitCode.OK  # a warning on a plain run
    plain.stdout.fnmatch_lines(["*kernels pattern 'poly_evl[*]' matches no kernel of kernels/poly.cu*"])
    strict = project.run("--regbudget-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.assert_outcomes(passed=7, warnings=2)
    table = "--regbudget-strict: pyproject.toml, [[][[]tool.regbudget.kernels]] table 1: kernels pattern"
    table += " 'poly_evl[*]'"
    strict.stdout.fnmatch_lines(  # one line per file of the table, naming the kernels it holds
        [
            f"{table} matches no kernel of kernels/poly.cu (it holds: poly_eval). Fix: correct the pattern*",
            f"{table} matches no kernel of kernels/small.cu (it holds: small). Fix: correct the pattern*",
        ]
    )
