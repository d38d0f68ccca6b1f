"""The local-traffic estimate end to end (core/estimate.py): `poly_eval` as written, squeezed to 64 registers
by `__launch_bounds__(1024)` and to 32 by `(1024, 2)`. Nsight Compute 2025.3.1 measured 0 %, 55.0 % and
63.0 % of their executed warp instructions as local loads and stores on an H200 (NVRTC + ptxas 12.9, sm_90:
issue 43).
`max_local_share` reads the SASS of its own kernels, without --regbudget-sass."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.runs import run_json

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
