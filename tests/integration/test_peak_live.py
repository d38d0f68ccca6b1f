"""Where the registers go, end to end (core/liveness.py): the peak of live registers that nvdisasm's life
ranges give, named by its source line, in the JSON report where the SASS is read, in the message of a kernel
that fails on its registers (its SASS read for that alone), and in `regbudget explain`'s table.

The kernels are built by the CUDA 13 wheels (`--regbudget-toolkit cu13`): nvdisasm 13 prints no life ranges
for a CUDA 12 cubin of sm_90 or older (tests/tools/test_nvdisasm.py).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers.runs import NVDISASM_COUNTER, regbudget, run_json

from pytest_regbudget.tools import nvdisasm as disasm

ROOT = Path(__file__).parents[2]
POLY = ROOT / "tests" / "data" / "local_share" / "kernels" / "poly_eval.cu"
SGEMM = ROOT / "example_project" / "kernels" / "sgemm.cu"
UNROLLED = ROOT / "tests" / "kernels" / "unrolled.cu"
CU13 = "--regbudget-toolkit=cu13"
# How far under ptxas's count the peak may sit (docs/diagnostics.md says where the difference goes).
WITHIN = 12


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture(autouse=True)
def _nvdisasm() -> None:
    if disasm.find_nvdisasm(None) is None:
        pytest.skip("no nvdisasm (the sass extra)")


def test_the_peak_of_poly_eval_and_sgemm_tiled_is_in_their_unrolled_accumulation(
    pytester: pytest.Pytester,
) -> None:
    shutil.copy(POLY, pytester.path / "poly_eval.cu")
    shutil.copy(SGEMM, pytester.path / "sgemm.cu")
    pytester.makepyfile(
        test_k="""
import pytest

@pytest.mark.regbudget(source="poly_eval.cu", kernel="poly_eval")
def test_poly():
    pass

@pytest.mark.regbudget(source="sgemm.cu", kernel="sgemm_tiled")
def test_sgemm():
    pass
"""
    )
    result, records = run_json(pytester, "--regbudget-sass", "--regbudget-arch=sm_90", CU13)
    result.assert_outcomes(passed=2)
    by_kernel = {r["kernel"]: r for r in records}

    poly = by_kernel["poly_eval"]
    # `acc[k] = fmaf(acc[k], v, acc[(k + 7) & (N - 1)])`, unrolled 8 x 128 times: no loop is left around it.
    assert poly["registers"] == 167
    assert poly["peak_live"]["where"] == f"poly_eval.cu:{line_of(POLY, 'fmaf(acc[k]')}"
    assert poly["peak_live"]["loop"] is None
    assert poly["registers"] - WITHIN <= poly["peak_live"]["live"] <= poly["registers"]

    sgemm = by_kernel["sgemm_tiled"]
    # The unrolled accumulation: `for (int kk ...)` through `acc[i][j] = fmaf(...)`, in the loop over k0.
    first, last = line_of(SGEMM, "for (int kk = 0"), line_of(SGEMM, "acc[i][j] = fmaf")
    file, line = sgemm["peak_live"]["where"].split(":")
    assert (file, first <= int(line) <= last) == ("sgemm.cu", True)
    assert sgemm["peak_live"]["loop"] == f"sgemm.cu:{line_of(SGEMM, 'for (int k0 = 0')}"
    assert sgemm["registers"] - WITHIN <= sgemm["peak_live"]["live"] <= sgemm["registers"]


DOT = """
import pytest

@pytest.mark.regbudget(source="unrolled.cu", kernel="dot")
def test_dot():
    pass

@pytest.mark.regbudget(source="unrolled.cu", kernel="dot", defines={"UNROLL": 2}, max_regs=%d)
def test_dot_by_two():
    pass
"""


def test_raising_the_unroll_factor_fails_with_the_peak_line_and_only_the_failing_cubin_is_read(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "nvdisasm-runs.txt"
    monkeypatch.setenv("NVDISASM_RUNS", str(log))
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(tmp_path / "cache"))  # no listing kept by another test
    source = pytester.path / "unrolled.cu"
    shutil.copy(UNROLLED, source)
    pytester.makeconftest(NVDISASM_COUNTER)
    pytester.makepyfile(test_dot=DOT % 255)
    args = ("-p", "no:cacheprovider", "--regbudget-arch=sm_90", CU13)
    pytester.runpytest_subprocess(*args, "--regbudget-update").assert_outcomes(passed=2)
    assert not log.exists()  # nothing fails, no budget reads the SASS: no nvdisasm

    # The loop unrolled 8 times: its loads are hoisted ahead of the multiplies, and the registers grow.
    source.write_text(source.read_text().replace("#define UNROLL 1", "#define UNROLL 8"))
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess(*args, f"--regbudget-json={report}")
    result.assert_outcomes(passed=1, failed=1)
    body, loop = line_of(UNROLLED, "fmaf(a[i]"), line_of(UNROLLED, "for (int i")
    (grown,) = [
        r for r in json.loads(report.read_text())["kernels"] if r["nodeid"].endswith("test_dot[sm_90]")
    ]
    peak = grown["peak_live"]
    assert (peak["where"], peak["loop"]) == (f"unrolled.cu:{body}", f"unrolled.cu:{loop}")
    assert grown["registers"] - WITHIN <= peak["live"] <= grown["registers"]
    assert grown["local_share"] is None  # the SASS was read for the peak alone
    result.stdout.fnmatch_lines(
        [
            f"dot [[]sm_90[]]: registers * -> {grown['registers']} (+*) is worse than the baseline; peak "
            f"{peak['live']} live at unrolled.cu:{body} (in the loop at unrolled.cu:{loop}); if intended, "
            "accept it with pytest --regbudget-update and commit regbudget-baseline.toml"
        ]
    )
    # One cubin read, the failing one's: its code and its life ranges; the passing variant's never.
    runs = log.read_text().splitlines()
    assert sorted(run.split()[1:3] for run in runs) == [["-c", "-gi"], ["-c", "-plr"]], runs

    # A register budget that fails names the peak too.
    pytester.makepyfile(test_dot=DOT % 8)
    failed = pytester.runpytest_subprocess(*args)
    failed.assert_outcomes(failed=2)
    failed.stdout.fnmatch_lines(
        [f"dot [[]sm_90[]]: registers * > max_regs 8; peak * live at unrolled.cu:{body} (in the loop at *)"]
    )


def test_explain_prints_the_peak_of_each_bounds_variant() -> None:
    done = regbudget(
        "explain", f"{POLY}::poly_eval", "--arch", "sm_90", "--toolkit", "cu13", "--bounds", "none,1024"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("bounds"))
    header = re.split(r"\s{2,}", lines[start].strip())
    rows = [
        dict(zip(header, re.split(r"\s{2,}", line.strip()), strict=True))
        for line in lines[start + 2 : start + 4]
    ]
    assert [row["bounds"] for row in rows] == ["as written", "(1024)"]
    for row in rows:
        live, at, where = row["peak live"].split()
        assert (at, where) == ("@", f"poly_eval.cu:{line_of(POLY, 'fmaf(acc[k]')}"), row
        assert int(row["regs"]) - WITHIN <= int(live) <= int(row["regs"]), row
