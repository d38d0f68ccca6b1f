"""A new kernel source is one class and one registration: a conftest registers a source that compiles CUDA
held in a Python module's string constant (as CuPy users write kernels), and a marked test runs through it
with the real NVRTC and ptxas from the wheels."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers.data import KERNELS
from helpers.runs import run_json

from pytest_regbudget import sources

HUNGRY = KERNELS / "hungry.cu"

SOURCE_MODULE = '''
import ast
from pathlib import Path

from pytest_regbudget.tools.compiler import CompileOptions
from pytest_regbudget.sources import SourceSpec
from pytest_regbudget.sources.nvrtc import facts_of


class EmbeddedCuda:
    """CUDA source in a Python module's CUDA_SOURCE constant, compiled by NVRTC + ptxas."""

    loadable = True

    def __init__(self, spec: SourceSpec) -> None:
        self.where = spec.path
        self.kernel = spec.kernel
        self.options = spec.options or CompileOptions()

    def plan(self, arch, env):
        return None

    def build(self, arch, env):
        module = ast.parse(self.where.read_text())
        text = next(
            ast.literal_eval(node.value)
            for node in module.body
            if isinstance(node, ast.Assign) and node.targets[0].id == "CUDA_SOURCE"
        )
        spec = (self.where.with_suffix(".cu"), self.kernel, arch, self.options, None)
        compiled = env.compile(spec, source_text=text)
        return [facts_of(compiled, self.options, env)]
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> Iterator[pytest.Pytester]:
    pytester.makepyfile(embedded_source=SOURCE_MODULE)
    pytester.makeconftest(
        "from embedded_source import EmbeddedCuda\n"
        "from pytest_regbudget.sources import register\n"
        "register('embedded', EmbeddedCuda)\n"
    )
    pytester.makepyfile(kernels_py=f"CUDA_SOURCE = {HUNGRY.read_text()!r}\n")
    yield pytester
    # The registry is the process's: leave it as the other tests expect it.
    sources.unregister("embedded")


def test_a_registered_source_runs_a_marked_test(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_k="""
import pytest

@pytest.mark.regbudget(source="kernels_py.py", kernel="poly_eval", compiler="embedded",
                       defines={"NACC": 8}, max_regs=255)
def test_fits():
    pass

@pytest.mark.regbudget(source="kernels_py.py", kernel="poly_eval", compiler="embedded",
                       defines={"NACC": 32}, max_regs=24)
def test_too_many():
    pass
"""
    )
    result, records = run_json(project)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*poly_eval [[]sm_90[]]: registers * > max_regs 24*"])
    fits = next(r for r in records if "test_fits" in r["nodeid"])
    assert fits["registers"] > 8
    assert fits["source"].endswith("kernels_py.cu")


def test_fixture_measure_takes_any_source(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_m="""
import pytest
from pathlib import Path
from embedded_source import EmbeddedCuda
from pytest_regbudget.sources import SourceSpec

@pytest.mark.regbudget(max_regs=255)
def test_measure(regbudget):
    source = EmbeddedCuda(SourceSpec(Path(__file__).parent / "kernels_py.py", "poly_eval"))
    (report,) = regbudget.measure(source)
    assert report.registers > 0 and report.arch == "sm_90"
"""
    )
    run_json(project)[0].assert_outcomes(passed=1)


def test_unknown_compiler_names_the_registered_ones(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_k="""
import pytest
@pytest.mark.regbudget(source="kernels_py.py", kernel="poly_eval", compiler="embeded")
def test_x():
    pass
"""
    )
    result, _ = run_json(project)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*compiler='embeded': expected one of 'nvrtc', 'nvcc', 'embedded'*"])
