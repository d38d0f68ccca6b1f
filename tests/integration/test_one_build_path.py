"""One build path: `compile_kernel`, `regbudget explain` and a pytest run build a kernel through the same
function (`units.build_kernel`), and give the same numbers, with NVRTC and with nvcc."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers.data import KERNELS

from pytest_regbudget import cli
from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.tools import units
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import discover


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_compile_kernel_explain_and_the_plugin_build_through_one_function(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, compiler: str
) -> None:
    built: list[tuple[str, str, str]] = []
    real = units.build_kernel

    def spy(kernel: str, base: units.Unit, *args: object, **kwargs: object) -> object:
        built.append((kernel, base.arch, "nvcc" if base.nvcc else "nvrtc"))
        return real(kernel, base, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(units, "build_kernel", spy)
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(pytester.path / "cache"))
    source = pytester.path / "hungry.cu"
    shutil.copy(KERNELS / "hungry.cu", source)
    toolkit = discover()
    nvcc = find_nvcc(toolkit) if compiler == "nvcc" else None
    numbers = []

    r = compile_kernel(source, "poly_eval", "sm_90", CompileOptions(), toolkit, nvcc=nvcc).resources
    numbers.append((r.registers, r.spill_stores, r.spill_loads, r.stack_frame))
    assert built == [("poly_eval", "sm_90", compiler)]

    (row,) = cli.explain(source, "poly_eval", ["sm_90"], [cli.Bounds(None)], CompileOptions(), compiler, None)
    numbers.append((row.registers, *row.spills, row.stack))
    assert built == [built[0]] * 2

    pytester.makepyfile(
        f"""
import pytest

@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", compiler="{compiler}")
def test_k():
    pass
"""
    )
    out = pytester.path / "r.json"
    result = pytester.runpytest("--regbudget-arch=sm_90", "--regbudget-gpu=off", f"--regbudget-json={out}")
    result.assert_outcomes(passed=1)
    assert built == [built[0]] * 3
    (record,) = json.loads(out.read_text())["kernels"]
    numbers.append(
        (record["registers"], record["spill_stores"], record["spill_loads"], record["stack_frame"])
    )

    assert numbers[0] == numbers[1] == numbers[2], numbers
    assert numbers[0][0] > 64  # the hungry kernel, not an empty build
