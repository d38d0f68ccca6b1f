"""The plugin end to end, through pytester, with the real NVRTC and ptxas from the wheels."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from helpers.data import KERNELS

from pytest_regbudget import discover

HUNGRY = KERNELS / "hungry.cu"
VARIOUS = KERNELS / "various.cu"


def write_test(pytester: pytest.Pytester, body: str) -> None:
    pytester.makepyfile(
        test_k=f"import pytest\nHUNGRY = {str(HUNGRY)!r}\nVARIOUS = {str(VARIOUS)!r}\n\n{body}"
    )


def test_passing_budget_prints_header_and_summary_table(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy", max_regs=32, spills=0, launch=(1024,))
def test_saxpy():
    pass
""",
    )
    result = pytester.runpytest("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"regbudget: {discover().describe()}; archs sm_90;"
            " baseline regbudget-baseline.toml (not yet written); gpu auto",
            "*test_saxpy?sm_90?*PASSED*",
            "*- regbudget -*",
            "test*kernel*arch*regs*spill st/ld*stack*smem*occupancy*verdict",
            "test_saxpy *saxpy *sm_90*0/0*0*0*100% @1024*ok",
        ]
    )


def test_register_budget_violation_is_one_line_plus_ptxas_line(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", max_regs=64, spills=0)
def test_poly():
    pass
""",
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*poly_eval [[]sm_90[]]: registers 1?? > max_regs 64",
            "*ptxas: *Used 1?? registers*",
            "test_poly *poly_eval *sm_90*FAILED*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_each_marked_test_runs_once_per_arch_after_user_params(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy")
def test_x(n, regbudget_arch):
    assert regbudget_arch in ("sm_80", "sm_90")
""",
    )
    result = pytester.runpytest(
        "-v", "--regbudget-arch=sm_80", "--regbudget-arch", "sm_90", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=4)
    for test_id in ("1-sm_80", "1-sm_90", "2-sm_80", "2-sm_90"):
        result.stdout.fnmatch_lines([f"*test_x[[]{test_id}[]] PASSED*"])
    result.stdout.fnmatch_lines(["*archs sm_80,sm_90*"])


def test_comma_separated_archs_and_ini(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy")
def test_x():
    pass
""",
    )
    pytester.makeini("[pytest]\nregbudget_arch = sm_75,sm_86\n")
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_x[[]sm_75[]] PASSED*", "*test_x[[]sm_86[]] PASSED*"])
    result = pytester.runpytest("-v", "--regbudget-arch=sm_80,sm_89")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_x[[]sm_80[]] PASSED*", "*test_x[[]sm_89[]] PASSED*"])


def test_unknown_arch_is_a_usage_error_listing_supported(pytester: pytest.Pytester) -> None:
    write_test(pytester, "def test_x():\n    pass\n")
    result = pytester.runpytest("--regbudget-arch=sm_91")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*sm_91*sm_80*sm_90*"])


def test_unknown_arch_in_ini_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_test(pytester, "def test_x():\n    pass\n")
    pytester.makeini("[pytest]\nregbudget_arch = sm_99\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*regbudget_arch*sm_99*supported*"])


def test_misspelt_key_errors_that_test_only(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy", max_reg=32)
def test_bad():
    pass

@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy", max_regs=32)
def test_good():
    pass
""",
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_bad[[]sm_90[]]: bad regbudget marker: unknown regbudget key 'max_reg'"
            " (did you mean 'max_regs'?)*"
        ]
    )


def test_unknown_kernel_compile_error_and_missing_source_fail_alone(pytester: pytest.Pytester) -> None:
    broken = KERNELS / "broken.cu"
    write_test(
        pytester,
        f"""
@pytest.mark.regbudget(source=VARIOUS, kernel="saxpi")
def test_unknown():
    pass

@pytest.mark.regbudget(source={str(broken)!r}, kernel="broken")
def test_broken():
    pass

@pytest.mark.regbudget(source="missing.cu", kernel="k")
def test_missing():
    pass

@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy")
def test_fine():
    pass
""",
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    assert "kernel 'saxpi' not found" in out
    assert "the module contains: saxpy, transpose" in out
    assert f'{broken}(5): error: identifier "undefined_function" is undefined' in out
    assert "cannot read CUDA source" in out
    assert str(pytester.path / "missing.cu") in out
    assert "During handling" not in out
    for name in ("test_unknown", "test_broken", "test_missing"):
        result.stdout.fnmatch_lines([f"{name} *sm_90*-*ERROR"])


def registers_of(out: Path) -> int:
    (record,) = json.loads(out.read_text())["kernels"]
    regs = record["registers"]
    assert isinstance(regs, int)
    return regs


def test_launch_that_cannot_fit_explains_the_arithmetic(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", launch=(512,))
def test_launch():
    pass
""",
    )
    out = pytester.path / "r.json"
    result = pytester.runpytest(f"--regbudget-json={out}")
    result.assert_outcomes(failed=1)
    # The arithmetic, done independently: registers per warp round up to units of 256 on sm_90.
    regs = registers_of(out)
    per_warp = -(-regs * 32 // 256) * 256
    assert per_warp * 16 > 65536, "the hungry kernel no longer needs > 128 registers"
    result.stdout.fnmatch_lines(
        [
            f"*poly_eval [[]sm_90[]]: launch=(512,) cannot launch on sm_90: {regs} registers -> {per_warp:,}"
            f" per warp (units of 256) x 16 warps = {per_warp * 16:,} > 65,536 registers per block on sm_90;"
            " at run time this is cudaErrorLaunchOutOfResources. Fix: a smaller block,"
            " __launch_bounds__(512) (ptxas then keeps it to 128 registers), or fewer live values*",
        ]
    )


def test_resident_blocks_and_min_occupancy(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", launch=(128, 4), min_occupancy=0.5)
def test_occ():
    pass
""",
    )
    out = pytester.path / "r.json"
    # The static calculator's wording; on a GPU machine min_occupancy is judged on the driver's value.
    result = pytester.runpytest(f"--regbudget-json={out}", "--regbudget-gpu=off")
    result.assert_outcomes(failed=1)
    per_block = -(-registers_of(out) * 32 // 256) * 256 * 4
    blocks = 65536 // per_block
    assert blocks < 4
    result.stdout.fnmatch_lines(
        [
            f"*launch=(128, 4): only {blocks} blocks of 128 threads fit per SM on sm_90, 4 needed"
            " (limited by registers: * registers -> * per warp (units of 256)*). Fix: a smaller block,"
            " __launch_bounds__(128, 4) (ptxas then keeps it to 128 registers)*",
            f"*occupancy {blocks * 4 / 64:.1%} at 128 threads < min_occupancy 50.0% ({blocks} blocks x 4"
            f" warps = {blocks * 4} of 64 warps per SM (*) on sm_90, limited by registers)*",
        ]
    )


def test_spill_budget_with_ptxas_options(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", ptxas_options=["-maxrregcount=32"], spills=0,
                       stack=16)
def test_spills():
    pass
""",
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*poly_eval [[]sm_90[]]: spill stores * bytes > spills 0",
            "*poly_eval [[]sm_90[]]: spill loads * bytes > spills 0",
            "*poly_eval [[]sm_90[]]: stack frame * bytes > stack 16",
        ]
    )


def test_warn_level_passes_with_a_warning(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", max_regs=64, level="warn")
def test_poly():
    pass
""",
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*RegbudgetWarning: poly_eval [[]sm_90[]]: registers * > max_regs 64*"])
    result.stdout.fnmatch_lines(["*poly_eval*sm_90*WARNED*"])
    # The warning's class is public: pytest's -W names it, and here turns it into an error.
    strict = pytester.runpytest("-W", "error::pytest_regbudget.RegbudgetWarning")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*RegbudgetWarning: poly_eval [[]sm_90[]]: registers * > max_regs 64*"])


def test_per_arch_budget_and_arch_restriction(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", defines={"NACC": 16},
                       max_regs={"sm_80": 8, "sm_90": 255})
def test_dict():
    pass

@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy", archs=["sm_80"])
def test_only_80():
    pass
""",
    )
    result = pytester.runpytest("-v", "-rs", "--regbudget-arch=sm_80,sm_90")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_dict[[]sm_80[]] FAILED*",
            "*test_dict[[]sm_90[]] PASSED*",
            "*test_only_80[[]sm_80[]] PASSED*",
        ]
    )
    result = pytester.runpytest("-rs", "--regbudget-arch=sm_90", "-k", "only_80")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*regbudget archs=sm_80 not among this run's archs sm_90*"])


def test_fixture_compiles_for_the_current_arch_under_the_marker_budget(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(max_regs=100)
def test_fixture(regbudget):
    small = regbudget.compile(HUNGRY, "poly_eval", defines={"NACC": 8})
    assert small.arch == regbudget.arch
    assert small.registers < 100 and small.violations == []
    big = regbudget.compile(HUNGRY, "poly_eval")
    assert big.violations

def test_unmarked_fixture(regbudget):
    r = regbudget.compile(VARIOUS, "gemm<32, 32>", options=["-std=c++17"])
    assert r.registers > 0 and r.outcome == "passed"
""",
    )
    result = pytester.runpytest("--regbudget-arch=sm_80,sm_90")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*poly_eval #2 [[]sm_80[]]: registers * > max_regs 100*"])


def test_a_torn_down_test_keeps_no_kernels_and_its_records_stay(pytester: pytest.Pytester) -> None:
    # A finished test's facts, reports and loaded kernels are dropped at teardown (a run of thousands of
    # items would otherwise keep them all to its end); what the run reports was recorded before.
    write_test(
        pytester,
        """
@pytest.mark.regbudget(max_regs=100, source=HUNGRY, kernel="poly_eval", defines={"NACC": 8})
def test_a(regbudget):
    assert [r.kernel for r in regbudget.reports] == ["poly_eval"]
    regbudget.compile(HUNGRY, "poly_eval", defines={"NACC": 4})
    assert len(regbudget.reports) == 2

def test_z_after(request):
    from pytest_regbudget.plugin.hooks import ITEM_KEY

    state = request.session.items[0].stash[ITEM_KEY]
    assert (state.reports, state.facts, state.loaded, state.timings) == ([], {}, {}, {})
""",
    )
    result = pytester.runpytest("--regbudget-arch=sm_90", f"--regbudget-json={pytester.path / 'r.json'}")
    result.assert_outcomes(passed=2)
    records = json.loads((pytester.path / "r.json").read_text())["kernels"]
    assert sorted(r["kernel"] for r in records) == ["poly_eval", "poly_eval #2"]


def test_fixture_compile_error_can_be_caught(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
from pytest_regbudget import KernelNotFoundError

def test_fixture(regbudget):
    with pytest.raises(KernelNotFoundError, match="saxpy"):
        regbudget.compile(VARIOUS, "nope")
""",
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_json_report(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", max_regs=64, launch=(256,))
def test_poly():
    pass

@pytest.mark.regbudget(source=VARIOUS, kernel="nope")
def test_missing_kernel():
    pass
""",
    )
    out = pytester.path / "out" / "regbudget.json"
    result = pytester.runpytest(f"--regbudget-json={out}")
    result.assert_outcomes(failed=2)
    records = json.loads(out.read_text())["kernels"]
    assert [r["nodeid"] for r in records] == [
        "test_k.py::test_missing_kernel[sm_90]",
        "test_k.py::test_poly[sm_90]",
    ]
    missing, poly = records
    required = {
        "nodeid",
        "kernel",
        "arch",
        "registers",
        "spill_stores",
        "spill_loads",
        "stack_frame",
        "shared_mem",
        "const_mem",
        "max_threads",
        "launch",
        "occupancy",
        "outcome",
        "violations",
        "ptxas_version",
    }
    assert required <= poly.keys()
    assert poly["outcome"] == "failed"
    assert poly["launch"] == [256]
    assert poly["registers"] > 64
    assert 0 < poly["occupancy"] <= 1
    assert poly["violations"][0].startswith("registers ")
    assert missing["outcome"] == "error"
    assert "not found" in missing["error"]


def test_an_explicit_toolkit_that_is_missing_is_one_usage_error(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy")
def test_k():
    pass

def test_plain():
    pass
""",
    )
    result = pytester.runpytest(f"--regbudget-cuda-home={tmp_path / 'nowhere'}")
    # Once, at startup, not once per marked test; no test runs.
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*found no CUDA toolkit with both NVRTC and ptxas. Searched, in order:",
            "*--regbudget-cuda-home=*nowhere*is not a directory",
            "*pip install*nvidia-cuda-nvcc-cu12*",
        ]
    )
    assert result.stderr.str().count("found no CUDA toolkit") == 1
    assert "test_k" not in result.stdout.str()


def test_xdist_run_collects_every_worker_report(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.parametrize("n", [4, 8, 16, 32])
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", defines={"NACC": 8})
def test_x(n, regbudget):
    regbudget.compile(HUNGRY, "poly_eval", defines={"NACC": n})
""",
    )
    out = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "-n", "2", "--regbudget-arch=sm_80,sm_90", f"--regbudget-json={out}"
    )
    result.assert_outcomes(passed=8)
    records = json.loads(out.read_text())["kernels"]
    assert len(records) == 16
    result.stdout.fnmatch_lines(["*- regbudget -*"])
    assert result.stdout.str().count("poly_eval") >= 16


TIMED_WITHOUT_GPU = """
@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy", max_time_ratio=1.05)
def test_timed(regbudget):
    assert regbudget.gpu is None
    assert regbudget.benchmark("saxpy", 1, 32, ()) is None
"""


def test_gpu_off_never_touches_the_gpu(pytester: pytest.Pytester) -> None:
    write_test(pytester, TIMED_WITHOUT_GPU)
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-gpu=off")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["GPU checks: off (--regbudget-gpu=off)"])


def test_gpu_auto_without_cupy_skips_gpu_checks_with_the_reason(pytester: pytest.Pytester) -> None:
    """On a CPU-only runner: compile checks run, benchmark() returns None, the summary says why."""
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here; this test is about a machine without it")
    write_test(pytester, TIMED_WITHOUT_GPU)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["GPU checks: none ran (GPU checks skipped: CuPy is not installed*)"])


def test_gpu_require_without_a_gpu_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_test(pytester, "def test_x():\n    pass\n")
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here; this test is about a machine without it")
    result = pytester.runpytest("--regbudget-gpu=require")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--regbudget-gpu=require, but no GPU is usable: CuPy is not installed*"])


def test_budget_failure_is_not_hidden_by_a_skipping_body(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", max_regs=32)
def test_skips():
    pytest.skip("no GPU here")
""",
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*poly_eval [[]sm_90[]]: registers * > max_regs 32*"])


def test_time_budget_keys_are_validated(pytester: pytest.Pytester) -> None:
    write_test(
        pytester,
        """
@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy", max_time_ratio=0.9)
def test_x():
    pass
""",
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*max_time_ratio=0.9: expected a number >= 1, e.g. 1.10*"])
