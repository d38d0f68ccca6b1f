"""budget.check over ptxas numbers: one sentence per violated budget."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_regbudget.baseline import Entry
from pytest_regbudget.budget import check, compare
from pytest_regbudget.limits import Launch, Limits
from pytest_regbudget.ptxas import parse_ptxas_output

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'poly_eval' for 'sm_90'
ptxas info    : Function properties for poly_eval
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 167 registers, used 1 barriers, 4096 bytes smem, 56 bytes cumulative stack size
"""
POLY = parse_ptxas_output(PTXAS)["poly_eval"]


def verdict(**limits: object) -> list[str]:
    return check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(**limits)).violations  # type: ignore[arg-type]


def test_parsed_fixture_numbers() -> None:
    assert (POLY.registers, POLY.spill_stores, POLY.spill_loads, POLY.stack_frame, POLY.shared_mem) == (
        167,
        40,
        36,
        48,
        4096,
    )


def test_no_limits_no_violations() -> None:
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits())
    assert report.violations == []
    assert report.outcome == "passed"
    assert report.occupancy is None


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"max_regs": 64}, ["registers 167 > max_regs 64"]),
        ({"max_regs": 167}, []),
        ({"spills": 0}, ["spill stores 40 bytes > spills 0", "spill loads 36 bytes > spills 0"]),
        ({"spills": 38}, ["spill stores 40 bytes > spills 38"]),
        ({"spill_stores": 40, "spill_loads": 30}, ["spill loads 36 bytes > spill_loads 30"]),
        ({"stack": 32}, ["stack frame 48 bytes > stack 32"]),
        ({"smem": 1024}, ["static shared memory 4,096 bytes > smem 1024"]),
    ],
)
def test_each_budget_is_one_sentence(limits: dict[str, object], expected: list[str]) -> None:
    assert verdict(**limits) == expected


def test_failure_text_names_kernel_arch_and_quotes_ptxas() -> None:
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(max_regs=64))
    assert report.outcome == "failed"
    assert report.failure_text().splitlines() == [
        "poly_eval [sm_90]: registers 167 > max_regs 64",
        "    ptxas: Used 167 registers, used 1 barriers, 4096 bytes smem, 56 bytes cumulative stack size",
        "    diagnosis: 40 bytes of spill stores and 36 bytes of loads: run with --regbudget-sass to see"
        " whether they sit in a loop (costly) or not (probably cheap).",
    ]


def test_warn_level_outcome() -> None:
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(max_regs=64), level="warn")
    assert report.outcome == "warned"


def test_launch_that_cannot_fit_gives_arithmetic_and_register_cap() -> None:
    (msg,) = verdict(launch=Launch(512))
    assert msg.startswith(
        "launch=(512,) cannot launch on sm_90: 167 registers -> 5,376 per warp (units of 256) x 16 warps"
        " = 86,016 > 65,536 registers per block on sm_90; at run time this is cudaErrorLaunchOutOfResources."
    )
    assert "__launch_bounds__(512) (ptxas then keeps it to 128 registers)" in msg


def test_launch_that_fits_has_occupancy() -> None:
    report = check("t.py::test", "poly_eval", "sm_90", "k.cu", POLY, Limits(launch=Launch(256)))
    assert report.violations == []
    assert report.occupancy is not None
    assert report.occupancy.active_blocks == 1
    assert report.occupancy.occupancy == pytest.approx(8 / 64)


def test_resident_blocks_requirement() -> None:
    (msg,) = verdict(launch=Launch(128, 4))
    assert msg.startswith("launch=(128, 4): only 3 blocks of 128 threads fit per SM on sm_90, 4 needed")
    assert "__launch_bounds__(128, 4) (ptxas then keeps it to 128 registers)" in msg


def test_dynamic_smem_counts_toward_launch() -> None:
    small = replace(POLY, registers=32)
    report = check("t", "k", "sm_90", "k.cu", small, Limits(launch=Launch(256, 2), dynamic_smem=150 * 1024))
    (msg,) = report.violations
    assert "only 1 block of 256 threads fits per SM" in msg
    assert "shared memory" in msg


def test_min_occupancy() -> None:
    (msg,) = verdict(launch=Launch(256), min_occupancy=0.25)
    assert msg.startswith("occupancy 12.5% at 256 threads < min_occupancy 25.0% (1 block x 8 warps")
    assert "limited by registers" in msg


def test_max_threads_from_launch_bounds_blocks_a_bigger_launch() -> None:
    bounded = replace(POLY, registers=32, max_threads=256)
    (msg,) = check("t", "k", "sm_90", "k.cu", bounded, Limits(launch=Launch(512))).violations
    assert "cannot launch on sm_90" in msg
    assert "256" in msg


def entry(**changes: object) -> Entry:
    base = {
        "registers": 72,
        "spill_stores": 0,
        "spill_loads": 0,
        "stack": 0,
        "smem": 0,
        "const_mem": 0,
        "ptxas": "12.9.86",
        "nvrtc": "12.9.86",
        "options_hash": "x",
        "occupancy": 0.5,
        "occupancy_at": "256 threads",
    }
    return Entry(**{**base, **changes})  # type: ignore[arg-type]


def test_compare_reports_each_changed_metric() -> None:
    deltas = compare(entry(), entry(registers=80, spill_stores=8, occupancy=0.375), {})
    assert [(d.metric, d.verdict, d.text()) for d in deltas] == [
        ("registers", "worse", "registers 72 -> 80 (+8)"),
        ("spill_stores", "worse", "spill_stores 0 -> 8 (+8)"),
        ("occupancy", "worse", "occupancy 50.0% -> 37.5% (-12.5 pts)"),
    ]


def test_compare_improvements_and_tolerance() -> None:
    better = compare(entry(), entry(registers=64, occupancy=0.75), {})
    assert [d.verdict for d in better] == ["better", "better"]
    tolerated = compare(entry(), entry(registers=76, spill_loads=16), {"registers": 4, "spills": 16})
    assert [d.verdict for d in tolerated] == ["tolerated", "tolerated"]
    assert [d.verdict for d in compare(entry(), entry(registers=77), {"registers": 4})] == ["worse"]
    assert [d.verdict for d in compare(entry(), entry(occupancy=0.45), {"occupancy": 0.05})] == ["tolerated"]


def test_compare_skips_occupancy_at_another_launch_size() -> None:
    assert compare(entry(), entry(occupancy=0.25, occupancy_at="512 threads"), {}) == []


def test_spill_budget_on_a_binary_without_spill_figures_fails_instead_of_guessing() -> None:
    unknown = replace(POLY, spill_stores=0, spill_loads=0, spills_known=False)
    (msg,) = check("t", "k", "sm_90", "k.so", unknown, Limits(spills=0)).violations
    assert msg.startswith("spill budgets cannot be checked: this binary does not record spill bytes")
    assert check("t", "k", "sm_90", "k.so", unknown, Limits(max_regs=255)).violations == []
