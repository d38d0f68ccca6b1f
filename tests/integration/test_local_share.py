"""The local-traffic estimate end to end (core/estimate.py): `poly_eval` as written, squeezed to 64 registers
by `__launch_bounds__(1024)` and to 32 by `(1024, 2)`. Nsight Compute 2025.3.1 measured 0 %, 55.0 % and
63.0 % of their executed warp instructions as local loads and stores on an H200 (NVRTC + ptxas 12.9, sm_90:
issue 43).
`max_local_share` reads the SASS of its own kernels, without --regbudget-sass."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.runs import regbudget, run_json

from pytest_regbudget.tools import nvdisasm as disasm

# The validation set's kernel (benchmarks/local_share_ncu.py measures it on a GPU).
POLY = Path(__file__).parent.parent / "data" / "local_share" / "kernels" / "poly_eval.cu"
# The line of the unrolled accumulation, `acc[k] = fmaf(acc[k], v, acc[(k + 7) & (N - 1)])`.
FMA_LINE = next(n for n, text in enumerate(POLY.read_text().splitlines(), 1) if "fmaf(acc[k]" in text)
TESTS = """
import pytest
BOUNDS = {
    "none": {},
    "1024": {"BOUNDS": "__launch_bounds__(1024)"},
    "1024x2": {"BOUNDS": "__launch_bounds__(1024,2)"},
}

def marked(defines):
    return pytest.mark.regbudget(
        source="poly_eval.cu", kernel="poly_eval", defines=defines, max_local_share=0.05
    )

@pytest.mark.parametrize("bounds", [pytest.param(b, marks=marked(d)) for b, d in BOUNDS.items()])
def test_poly(bounds):
    pass
"""


@pytest.fixture(autouse=True)
def _nvdisasm() -> None:
    if disasm.find_nvdisasm(None) is None:
        pytest.skip("no nvdisasm (the sass extra)")


def test_poly_eval_shares_match_the_profiler_and_the_budget_fails_the_squeezed_ones(
    pytester: pytest.Pytester,
) -> None:
    shutil.copy(POLY, pytester.path / "poly_eval.cu")
    pytester.makepyfile(test_p=TESTS)
    result, records = run_json(pytester)  # no --regbudget-sass: max_local_share reads the SASS itself
    result.assert_outcomes(passed=1, failed=2)
    by_bounds = {r["nodeid"].split("[")[1].split("-")[0]: r for r in records}
    assert by_bounds["none"]["local_share"] == 0
    assert by_bounds["1024"]["local_share"] == pytest.approx(0.55, abs=0.10)
    assert by_bounds["1024x2"]["local_share"] == pytest.approx(0.63, abs=0.10)
    for bounds in ("1024", "1024x2"):
        rec = by_bounds[bounds]
        assert rec["local_lines"][0]["where"] == f"poly_eval.cu:{FMA_LINE}"
        assert rec["diagnosis"][0].startswith("local loads/stores: about ")
        assert "(estimated from the SASS): costly; hottest poly_eval.cu:" in rec["diagnosis"][0]
        assert not any("cheap" in d for d in rec["diagnosis"])
        assert rec["local_executed"] <= rec["instructions_executed"]
        share = f"{rec['local_share']:.1%}"
        result.stdout.fnmatch_lines(
            [
                f"poly_eval [[]sm_90[]]: local_share {share} > max_local_share 5.0% (estimated from the SASS;"
                f" hottest: poly_eval.cu:{FMA_LINE}, *%)"
            ]
        )


@pytest.mark.parametrize("value", [1.5, -0.1, "0.05", True])
def test_a_share_outside_0_1_names_the_key(pytester: pytest.Pytester, value: object) -> None:
    shutil.copy(POLY, pytester.path / "poly_eval.cu")
    pytester.makepyfile(
        test_p=f"""
import pytest

@pytest.mark.regbudget(source="poly_eval.cu", kernel="poly_eval", max_local_share={value!r})
def test_poly():
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)  # this test's error alone, at its setup
    result.stdout.fnmatch_lines(
        [f"*bad regbudget marker: max_local_share={value!r}: expected a fraction in [[]0, 1[]]*"]
    )


SPILLS = Path(__file__).parent.parent / "kernels" / "spills.cu"
# `hot`'s loop over its argument n, `for (int d = 0; d < n; ++d)`: the code does not fix its count.
HOT_LOOP = next(n for n, text in enumerate(SPILLS.read_text().splitlines(), 1) if "d < n" in text)
MANIFEST = """
arch = ["sm_90"]
[[kernels]]
source = "spills.cu"
kernels = ["hot"]
max_local_share = 1.0
{trips}
"""


@pytest.mark.parametrize(
    ("trips", "count"), [("", 16), ("loop_trips = 200", 200), ('loop_trips = {{"spills.cu:{line}" = 2}}', 2)]
)
def test_a_stated_trip_count_weighs_the_loop_the_code_does_not_count(
    pytester: pytest.Pytester, trips: str, count: int
) -> None:
    shutil.copy(SPILLS, pytester.path / "spills.cu")
    (pytester.path / "regbudget.toml").write_text(MANIFEST.format(trips=trips.format(line=HOT_LOOP)))
    result, records = run_json(pytester)
    result.assert_outcomes(passed=1)
    (rec,) = records
    (loop,) = [lp for lp in rec["loops"] if lp["where"] == f"spills.cu:{HOT_LOOP}"]
    assert (loop["trips"], loop["known"]) == (count, bool(trips))
    assert ("assumed 16 trips" in rec["diagnosis"][0]) == (not trips)


def test_more_stated_trips_give_the_loops_spills_a_larger_share(pytester: pytest.Pytester) -> None:
    shutil.copy(SPILLS, pytester.path / "spills.cu")
    shares = []
    for trips in (2, 16, 200):
        (pytester.path / "regbudget.toml").write_text(MANIFEST.format(trips=f"loop_trips = {trips}"))
        result, (rec,) = run_json(pytester)
        result.assert_outcomes(passed=1)
        shares.append(rec["local_share"])
    # The loop holds the spills: the more it runs, the larger their share of what the thread runs.
    assert shares == sorted(shares)
    assert shares[0] < shares[2] - 0.05, shares


def test_a_stated_loop_that_is_not_there_fails_naming_the_loops_there_are(pytester: pytest.Pytester) -> None:
    shutil.copy(SPILLS, pytester.path / "spills.cu")
    pytester.makepyfile(
        test_p="""
import pytest

@pytest.mark.regbudget(source="spills.cu", kernel="hot", hot_spills=1000, loop_trips={"spills.cu:99": 5})
def test_hot():
    pass
"""
    )
    result, _ = run_json(pytester, "--regbudget-arch=sm_90")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*hot [[]sm_90[]]: loop_trips names spills.cu:99, where the SASS has no loop (its loops: "
            f"*spills.cu:{HOT_LOOP}*"
        ]
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "loop_trips=0: expected a trip count >= 1 or counts by loop"),
        ("'50'", "loop_trips='50': expected a trip count >= 1*got a string '50': write 50"),
        ({"spills.cu": 5}, "loop_trips: 'spills.cu': 5 is not a loop's FILE:LINE with a trip count >= 1"),
        ({"spills.cu:11": 0}, "loop_trips: 'spills.cu:11': 0 is not a loop's FILE:LINE*"),
    ],
)
def test_a_bad_trip_count_names_the_key(pytester: pytest.Pytester, value: object, message: str) -> None:
    shutil.copy(SPILLS, pytester.path / "spills.cu")
    pytester.makepyfile(
        test_p=f"""
import pytest

@pytest.mark.regbudget(source="spills.cu", kernel="hot", loop_trips={value})
def test_hot():
    pass
"""
    )
    result, _ = run_json(pytester, "--regbudget-arch=sm_90")
    assert result.ret != 0
    result.stdout.fnmatch_lines([f"*{message}*"])


def test_explain_shows_each_bounds_variants_local_share(pytester: pytest.Pytester) -> None:
    shutil.copy(POLY, pytester.path / "poly_eval.cu")
    done = regbudget(
        "explain",
        "poly_eval.cu::poly_eval",
        "--bounds",
        "none,1024,1024x2",
        "--arch",
        "sm_90",
        cwd=pytester.path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("bounds"))
    assert header.split()[-2:] == ["local", "share"]
    shares = {
        line.split("  ")[0]: float(line.split()[-1].rstrip("%")) / 100
        for line in lines
        if line.startswith(("as written", "(1024"))
    }
    # The profiler's 0 %, 55.0 % and 63.0 % (issue 43), estimated from the SASS of each variant's build.
    assert shares["as written"] == 0
    assert shares["(1024)"] == pytest.approx(0.55, abs=0.10)
    assert shares["(1024, 2)"] == pytest.approx(0.63, abs=0.10)
