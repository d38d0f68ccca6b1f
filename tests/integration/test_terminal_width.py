"""The `regbudget` section at pytest's width in CI (COLUMNS=80), end to end with the real NVRTC and ptxas: a
kernel that got worse in several numbers on two archs, beside kernels that did not."""

from __future__ import annotations

import json
import re

import pytest
from helpers.data import KERNELS

from pytest_regbudget.core.metrics import BY_NAME

HUNGRY = KERNELS / "hungry.cu"
WIDTH = 80


def write_project(pytester: pytest.Pytester, nacc: int) -> None:
    """poly_eval capped at 32 registers (1024 threads, 2 blocks per SM) with `nacc` accumulators: 8 fit,
    48 spill; and saxpy, untouched, under a long test id."""
    source = HUNGRY.read_text().replace("#define NACC 64", f"#define NACC {nacc}")
    (pytester.path / "k_poly.cu").write_text(source)
    various = KERNELS / "various.cu"
    pytester.makepyfile(
        test_k=f"""
import pytest

@pytest.mark.regbudget(
    source="k_poly.cu", kernel="poly_eval", launch=(1024,), defines={{"BOUNDS": "__launch_bounds__(1024, 2)"}}
)
def test_poly():
    pass

@pytest.mark.parametrize("size", ["a_rather_long_parameter_for_the_test_id"] * 1)
@pytest.mark.regbudget(source={str(various)!r}, kernel="saxpy", launch=(256,))
def test_saxpy_with_a_long_name_that_does_not_fit_beside_the_numbers(size):
    pass
"""
    )


def section(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"-+ regbudget -+", line))
    end = next((i for i in range(start, len(lines)) if "short test summary info" in lines[i]), len(lines))
    return lines[start + 1 : end]


def test_a_failing_kernel_is_one_row_per_arch_within_80_columns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    archs = ["--regbudget-arch=sm_80,sm_90", "-p", "no:cacheprovider"]
    write_project(pytester, 8)
    pytester.runpytest("--regbudget-update", *archs).assert_outcomes(passed=4)
    write_project(pytester, 48)
    result = pytester.runpytest("--regbudget-json=out.json", "--regbudget-summary=all", *archs)
    result.assert_outcomes(passed=2, failed=2)
    lines = section(result.stdout.str())
    # Every line fits, but a single word longer than the width (a path), which no break can shorten.
    assert all(len(line) <= WIDTH or len(line.split()) == 1 for line in lines), lines
    # The header too: wrapped at spaces, continued four columns in, the same words in the same order.
    out = result.stdout.lines
    first = next(i for i, line in enumerate(out) if line.startswith("regbudget: "))
    rest = out[first + 1 :]
    top = [out[first], *rest[: next(i for i, line in enumerate(rest) if not line.startswith("    "))]]
    assert len(top) > 1, top
    assert all(len(line) <= WIDTH for line in top), top
    assert " ".join(line.strip() for line in top).endswith(
        "; archs sm_80,sm_90; baseline regbudget-baseline.toml (4 entries); gpu auto"
    )
    header = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    assert re.fullmatch(r"[- ]+", lines[header + 1])
    rows = lines[header + 2 :]
    records = json.loads((pytester.path / "out.json").read_text())["kernels"]
    failed = [r for r in records if r["outcome"] == "failed"]
    assert {r["arch"] for r in failed} == {"sm_80", "sm_90"}
    for rec in failed:
        worse = [d for d in rec["deltas"] if d["verdict"] == "worse"]
        assert len(worse) >= 3, rec["deltas"]  # registers, spill stores and loads, stack: several metrics
        signed = [f"{BY_NAME[d['metric']].column} {d['delta']:+g}" for d in worse]
        (row,) = [r for r in rows if "poly_eval" in r and rec["arch"] in r.split()]
        assert row.split()[-1] == "FAILED"
        # The first change the row shows is a failing one, signed; the others are counted.
        assert any(f"  {s}" in row for s in signed), (row, signed)
        assert re.search(r", \+\d+ more  FAILED$", row), row
    # The passing kernel's rows, one per arch; the test column, the first to go, is gone.
    assert len([r for r in rows if r.startswith("saxpy ") and r.endswith(" ok")]) == 2
    assert "test_saxpy" not in "\n".join(rows)

    # -vv, as pytest's own: every column and every change in full, whatever the width.
    whole = pytester.runpytest("-vv", *archs)
    full = section(whole.stdout.str())
    (line,) = [line for line in whole.stdout.lines if line.startswith("regbudget: ")]
    assert line.endswith("; archs sm_80,sm_90; baseline regbudget-baseline.toml (4 entries); gpu auto")
    full_header = next(line for line in full if line.startswith("test "))
    assert full_header.split() == [
        "test",
        "kernel",
        "arch",
        "regs",
        "spill",
        "st/ld",
        "stack",
        "smem",
        "occupancy",
        "cliff",
        "baseline",
        "verdict",
    ]
    for rec in failed:
        (row,) = [r for r in full if r.startswith("test_poly ") and f" {rec['arch']} " in r]
        worse = [
            f"{BY_NAME[d['metric']].column} {d['delta']:+g}" for d in rec["deltas"] if d["verdict"] == "worse"
        ]
        assert ", ".join(worse) in row
        assert "more" not in row
    assert max(map(len, full)) > WIDTH
