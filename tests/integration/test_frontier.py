"""Warp-specialized kernels as CUTLASS writes them, built by the real nvcc (the CUDA 13 wheel) for sm_90a and
read back with the nvdisasm wheel: spills named by the inlined loop of the library header that holds them
and by the warpgroup role they run in, advice by cause (an assert's __assertfail call: -DNDEBUG), and ptxas's
C7510 explained by the callee the cubin's call graph names."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from helpers.data import KERNELS

from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.toolkit import discover

TESTS = """
import pytest

KERNEL = "device_kernel<GemmKernel>"

@pytest.mark.regbudget(source="ws_gemm/ws_gemm.cu", kernel=KERNEL, compiler="nvcc", launch=(384,))
def test_window():
    pass

@pytest.mark.regbudget(
    source="ws_gemm/ws_gemm.cu", kernel=KERNEL, compiler="nvcc", launch=(384,),
    defines={"WINDOW": 24, "CHECK_IN_LOOP": 1},
)
def test_checked():
    pass

@pytest.mark.regbudget(
    source="ws_gemm/ws_gemm.cu", kernel=KERNEL, compiler="nvcc", launch=(384,), spills=0,
    defines={"WINDOW": 24, "CHECK_IN_LOOP": 1, "NDEBUG": 1},
)
def test_release():
    pass

@pytest.mark.regbudget(source="wgmma_assert.cu", kernel="wg_assert", compiler="nvcc", launch=(128,))
def test_wgmma():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    try:
        find_nvcc(discover())
    except Exception as exc:
        pytest.skip(f"no nvcc: {exc}")
    shutil.copytree(KERNELS / "ws_gemm", pytester.path / "ws_gemm")
    shutil.copy(KERNELS / "wgmma_assert.cu", pytester.path)
    pytester.makepyfile(test_k=TESTS)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, dict[str, Any]]]:
    out = pytester.path / "r.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={out}", "-v", *args)
    # On a GPU machine a test also records the build it loads there (sm_90 for an sm_75 test): not its own.
    kernels = json.loads(out.read_text())["kernels"]
    records = {r["nodeid"].split("::")[-1]: r for r in kernels if f"[{r['arch']}" in r["nodeid"]}
    return result, records


def test_cutlass_shaped_spills_are_named_by_loop_role_and_cause(project: pytest.Pytester) -> None:
    result, recs = run(project, "--regbudget-arch=sm_90a", "--regbudget-sass")
    result.assert_outcomes(passed=4)
    # 48 values live across the producer's k-loop, in 40 registers: the spills sit in that loop of the
    # collective's header (lines 22-28), after setmaxnreg.dec 40, and the fix is the dec target.
    window = recs["test_window[sm_90a]"]
    assert window["spill_stores"] > 0
    assert window["spill_instructions_in_loops"] > 0
    assert sorted(map(tuple, window["setmaxnreg"])) == [("dec", 40), ("inc", 232)]
    assert window["setmaxnreg_dropped"] is False  # its SASS keeps both USETMAXREG
    share, hot = window["diagnosis"][:2]
    assert share.startswith("local loads/stores: about ")
    assert f"{window['spill_instructions_in_loops']} spill/refill instruction(s) inside the loop at " in hot
    assert "collective.hpp:22, in the producer (after setmaxnreg.dec 40)" in hot
    assert "raise the dec target (to 48 or more" in hot
    assert not any("ws_gemm.cu" in d for d in window["diagnosis"])  # never the kernel's entry call
    # 24 values fit, but the loop asserts: the spills save registers around the call to __assertfail.
    checked = recs["test_checked[sm_90a]"]
    assert checked["spill_stores"] > 0
    hot = checked["diagnosis"][1]
    assert "inside the loop at collective.hpp:22, in the producer (after setmaxnreg.dec 40)" in hot
    assert "The loop calls __assertfail (assert() compiled without NDEBUG) at collective.hpp:26" in hot
    assert 'Fix: build with -DNDEBUG (defines={"NDEBUG": 1}' in hot
    # ... and with NDEBUG they are gone (the window array is still local memory, and not a spill).
    release = recs["test_release[sm_90a]"]
    assert release["spill_stores"] == release["spill_loads"] == 0
    assert release["spill_instructions"] == 0
    assert release["local_instructions"] > 0
    assert release["stack_frame"] > 0
    assert release["outcome"] == "passed"


def test_c7510_names_the_call_that_serialized_the_wgmma_pipeline(project: pytest.Pytester) -> None:
    """No --regbudget-sass: the callee comes from the cubin's call graph."""
    result, recs = run(project, "--regbudget-arch=sm_90a", "-k", "wgmma")
    result.assert_outcomes(passed=1)
    wgmma = recs["test_wgmma[sm_90a]"]
    assert any(m.startswith("(C7510)") or "C7510" in m for m in wgmma["ptxas_messages"])
    (said,) = [d for d in wgmma["diagnosis"] if d.startswith("C7510")]
    assert said.startswith("C7510: ptxas serialized the wgmma pipeline around the kernel's calls; it calls ")
    assert "__assertfail (assert() compiled without NDEBUG; fix: build with -DNDEBUG" in said
    # Budgeted, it fails with the message and the reason beside it.
    (project.path / "test_b.py").write_text(
        "import pytest\n"
        '@pytest.mark.regbudget(source="wgmma_assert.cu", kernel="wg_assert", compiler="nvcc", '
        "launch=(128,), ptxas_warnings=0)\n"
        "def test_budgeted():\n    pass\n"
    )
    failed = project.runpytest("-p", "no:cacheprovider", "--regbudget-arch=sm_90a", "test_b.py")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        ["*1 ptxas message(s) > ptxas_warnings 0: (C7510)*", "*it calls __assertfail*"]
    )
    # With -DNDEBUG the call, and the note, go.
    (project.path / "test_b.py").write_text(
        (project.path / "test_b.py")
        .read_text()
        .replace("ptxas_warnings=0", 'ptxas_warnings=0, defines={"NDEBUG": 1}')
    )
    project.runpytest("-p", "no:cacheprovider", "--regbudget-arch=sm_90a", "test_b.py").assert_outcomes(
        passed=1
    )
