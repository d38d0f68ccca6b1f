"""The report renderers (record.py, terminal.py, markdown.py, html.py, charts.py) on canned records: no
toolkit, no pytest run, no GPU.

Strings that the docs quote (docs/getting-started.md, usage.md, baseline.md, ci.md, troubleshooting.md) are
asserted exactly: they are what users and CI scripts read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
from msgspec.structs import replace

from pytest_regbudget.core.baseline import Key
from pytest_regbudget.core.baseline_schema import key_text, unknown_arch_lines
from pytest_regbudget.core.checks import check
from pytest_regbudget.core.kernel_report import KernelReport
from pytest_regbudget.core.limits import Launch, Level, Limits
from pytest_regbudget.core.liveness import PeakLive
from pytest_regbudget.core.metrics import Callee
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.core.ratchet import BaselineRule, entry_of_report, ratchet
from pytest_regbudget.report import charts, compare, html
from pytest_regbudget.report.counts import count_checks
from pytest_regbudget.report.links import GithubLinks
from pytest_regbudget.report.markdown import FOLD_AFTER, MARKDOWN_LIMIT, NEW_ROWS, markdown_report
from pytest_regbudget.report.record import DeltaRecord, ReportRecord, json_text, to_record
from pytest_regbudget.report.terminal import (
    STALE_SHOWN,
    baseline_lines,
    compilers_line,
    enforced_line,
    github_annotations,
    summary_lines,
    summary_table,
)

NODEID = "tests/test_kernels.py::test_poly_eval[sm_90]"
ROOT = Path("/repo")


def record(**overrides: Any) -> ReportRecord:
    """The kernel of docs/getting-started.md: poly_eval on sm_90, 102 registers, 25% at 256 threads."""
    rec: ReportRecord = {
        "nodeid": NODEID,
        "kernel": "poly_eval",
        "entry": "poly_eval",
        "arch": "sm_90",
        "source": "/repo/kernels/poly.cu",
        "registers": 102,
        "spill_stores": 0,
        "spill_loads": 0,
        "spill_stores_callees": 0,
        "spill_loads_callees": 0,
        "spilling_callees": [],
        "stack_frame": 0,
        "shared_mem": 0,
        "const_mem": 0,
        "barriers": 0,
        "max_threads": None,
        "min_blocks_per_sm": None,
        "launch": [256],
        "dynamic_smem": 0,
        "occupancy": 0.25,
        "active_blocks": 2,
        "limiter": "registers",
        "outcome": "passed",
        "level": "fail",
        "violations": [],
        "error": None,
        "ptxas_line": "ptxas info    : Used 102 registers, used 0 barriers",
        "ptxas_version": "12.9.86",
        "nvrtc_version": "12.9.86",
        "compiler": "nvrtc",
        "release": "12.9",
        "options_hash": "a2769e93734c",
        "options_changed": False,
        "settings_change": None,
        "key": ["kernels/poly.cu", "poly_eval", "-", "sm_90", "12.9"],
        "found_under": None,
        "line": 12,
        "baseline_status": "none",
        "other_releases": [],
        "baseline": None,
        "deltas": [],
        "gpu_device": None,
        "driver_registers": None,
        "driver_local_bytes": None,
        "driver_max_threads": None,
        "driver_blocks": None,
        "driver_occupancy": None,
        "model_defects": [],
        "time_ms": None,
        "ptxas_messages": [],
        "setmaxnreg": [],
        "setmaxnreg_dropped": False,
        "ci_low_ms": None,
        "ci_high_ms": None,
        "time_status": None,
        "timing_spent_s": None,
        "timing_launches": None,
        "too_short": None,
        "max_sm_clock_mhz": None,
        "noise": None,
        "samples": None,
        "sm_clock_mhz": None,
        "baseline_time_ms": None,
        "time_ratio": None,
        "gpu_note": None,
        "spill_instructions": None,
        "spill_instructions_in_loops": None,
        "local_instructions": None,
        "local_share": None,
        "instructions_executed": None,
        "local_executed": None,
        "spill_executed": None,
        "local_lines": [],
        "loops": [],
        "peak_live": None,
        "diagnosis": [],
        "cliff_blocks": 2,
        "cliff_grow": 26,
        "cliff_shed": 22,
        "cliff_blocks_if_shed": 3,
        "tmem_cols": None,
        "tmem_blocks": None,
        "tmem_source": None,
        "cluster_dims": None,
        "cluster": None,
        "driver_active_clusters": None,
        "triton_signature": None,
        "triton_config": None,
        # The entry the numbers above make, as the plugin's to_record writes it.
        "measured": {
            "registers": 102,
            "spill_stores": 0,
            "spill_loads": 0,
            "stack": 0,
            "smem": 0,
            "ptxas": "12.9.86",
            "nvrtc": "12.9.86",
            "compiler": "nvrtc",
            "options_hash": "",
            "occupancy": {"256 threads": 0.25},
            "tests": ["tests/test_kernels.py::test_poly_eval"],
        },
    }
    unknown = set(overrides) - set(rec)
    assert not unknown, f"not a ReportRecord field: {sorted(unknown)}"
    return cast(ReportRecord, {**rec, **overrides})


def delta(metric: str, baseline: float, now: float, verdict: str) -> DeltaRecord:
    return DeltaRecord(metric=metric, baseline=baseline, now=now, delta=now - baseline, verdict=verdict)


def entry(**overrides: object) -> dict[str, object]:
    """A baseline entry as `BaselineEntry.to_toml()` writes it into a record."""
    return {
        "registers": 102,
        "spill_stores": 0,
        "spill_loads": 0,
        "stack": 0,
        "smem": 0,
        "const_mem": 0,
        "ptxas": "12.9.86",
        "nvrtc": "12.9.86",
        "compiler": "nvrtc",
        "options_hash": "a2769e93734c",
        "tests": [NODEID],
        "occupancy": {"256 threads": 0.25},
        **overrides,
    }


def failed_poly() -> ReportRecord:
    """docs/getting-started.md section 6: NACC 32 -> 40 took poly_eval from 102 to 126 registers."""
    return record(
        registers=126,
        cliff_grow=2,
        cliff_shed=46,
        cliff_blocks_if_shed=3,
        outcome="failed",
        violations=[
            "poly_eval [sm_90]: registers 102 -> 126 (+24) is worse than the baseline; if intended, "
            "accept it with pytest --regbudget-update and commit regbudget-baseline.toml"
        ],
        baseline_status="compared",
        baseline=entry(),
        deltas=[delta("registers", 102, 126, "worse")],
    )


def errored(error: str = 'bad.cu(2): error: identifier "x" is undefined\n  x = 1;\n  ^\n') -> ReportRecord:
    """A kernel that did not compile: no ptxas figures at all."""
    return record(
        nodeid="tests/test_kernels.py::test_bad[sm_90]",
        kernel="bad",
        entry=None,
        source="/repo/kernels/bad.cu",
        registers=None,
        spill_stores=None,
        spill_loads=None,
        stack_frame=None,
        shared_mem=None,
        const_mem=None,
        barriers=None,
        occupancy=None,
        active_blocks=None,
        limiter=None,
        outcome="error",
        error=error,
        ptxas_line=None,
        key=None,
        line=2,
        cliff_blocks=None,
        cliff_grow=None,
        cliff_shed=None,
        cliff_blocks_if_shed=None,
    )


def columns(line: str) -> list[str]:
    """A summary line's cells: the table separates columns by two or more spaces, cells hold at most one."""
    return re.split(r" {2,}", line.strip())


def test_the_helper_record_has_exactly_the_typed_fields() -> None:
    assert set(record()) == set(ReportRecord.__required_keys__)
    with pytest.raises(AssertionError, match="not a ReportRecord field"):
        record(regs=1)


# --- summary_lines: the terminal table --------------------------------------------------------------------


def test_summary_of_no_records_is_empty() -> None:
    assert summary_lines([]) == []


def test_summary_matches_the_getting_started_table_for_a_new_kernel() -> None:
    # The arch the plugin adds to a test's id is the arch column's: the test cell leaves it out.
    assert summary_lines([record(baseline_status="new")]) == [
        "test            kernel     arch   regs  spill st/ld  stack  smem  occupancy  cliff    baseline  "
        "verdict",
        "--------------  ---------  -----  ----  -----------  -----  ----  ---------  -------  --------  "
        "-------",
        "test_poly_eval  poly_eval  sm_90   102  0/0              0     0  25% @256   +26/-22  new       ok",
    ]


def test_summary_matches_the_getting_started_table_for_a_regression() -> None:
    assert summary_lines([failed_poly()]) == [
        "test            kernel     arch   regs  spill st/ld  stack  smem  occupancy  cliff   baseline  "
        "verdict",
        "--------------  ---------  -----  ----  -----------  -----  ----  ---------  ------  --------  "
        "-------",
        "test_poly_eval  poly_eval  sm_90   126  0/0              0     0  25% @256   +2/-46  regs +24  "
        "FAILED",
    ]
    # At pytest's width in CI (COLUMNS=80) the test column goes first (the kernel names the row), and two
    # headers take their short forms.
    assert summary_lines([failed_poly()], width=80) == [
        "kernel     arch   regs  spills  stack  smem  occ       cliff   baseline  verdict",
        "---------  -----  ----  ------  -----  ----  --------  ------  --------  -------",
        "poly_eval  sm_90   126  0/0         0     0  25% @256  +2/-46  regs +24  FAILED",
    ]


def test_summary_rows_are_sorted_by_test_kernel_and_arch_whatever_the_input_order() -> None:
    records = [
        record(nodeid="tests/test_b.py::test_x[sm_90]", kernel="a"),
        record(nodeid="tests/test_a.py::test_x[sm_90]", kernel="z", arch="sm_90"),
        record(nodeid="tests/test_a.py::test_x[sm_90]", kernel="z", arch="sm_100"),
        record(nodeid="tests/test_a.py::test_x[sm_90]", kernel="m", arch="sm_90"),
    ]
    rows = [columns(line)[:3] for line in summary_lines(records)[2:]]
    # Plain string order: sm_100 sorts before sm_90. test_x[sm_90] is in two files: each row names its file.
    assert rows == [
        ["tests/test_a.py::test_x", "m", "sm_90"],
        ["tests/test_a.py::test_x[sm_90]", "z", "sm_100"],
        ["tests/test_a.py::test_x", "z", "sm_90"],
        ["tests/test_b.py::test_x", "a", "sm_90"],
    ]


def _suite(n: int) -> list[ReportRecord]:
    """`n` unchanged manifest kernels with long CUB-like names, one changed, one new and one regressed."""
    recs = [
        record(
            nodeid=f"kernels/k{i % 7}.cu::flash_attn_combine_results<128,{i}>[sm_80]",
            kernel=f"flash_attn_combine_results<128,{i}>",
            arch="sm_80",
            baseline_status="compared",
        )
        for i in range(n)
    ]
    changed = [DeltaRecord(metric="registers", baseline=100, now=102, delta=2, verdict="tolerated")]
    recs[3] = replace_record(recs[3], deltas=changed)
    recs[5] = replace_record(recs[5], baseline_status="new")
    worse = [DeltaRecord(metric="registers", baseline=64, now=102, delta=38, verdict="worse")]
    recs[1] = replace_record(recs[1], outcome="failed", deltas=worse)
    return recs


def replace_record(rec: ReportRecord, **changes: Any) -> ReportRecord:
    return cast(ReportRecord, {**rec, **changes})


def test_summary_table_shows_failing_changed_and_new_rows_then_counts_the_rest_failures_last() -> None:
    lines = summary_table(_suite(1200))
    assert len(lines) == 2 + 3 + 2
    body = [columns(line)[0] for line in lines[2:5]]
    # Changed and new first, in test order; the failure last, next to pytest's own summary.
    assert body == [
        "flash_attn_combine_results<128,3>",
        "flash_attn_combine_results<128,5>",
        "flash_attn_combine_results<128,1>",
    ]
    assert lines[4].endswith("FAILED")
    # The failing kernel's numbers moved: it is changed as well as failed (report/counts.py).
    assert lines[-2:] == [
        "1,200 kernel checks: 1 failed, 0 warned, 1,199 passed; against the baseline: 2 changed (2 worse, "
        "0 improved), 1 new, 1,197 unchanged",
        "1,197 rows not shown: pytest -v or --regbudget-summary=all shows all",
    ]


def test_summary_table_modes() -> None:
    suite = _suite(20)
    assert len(summary_table(suite, mode="all")) == 2 + 20 + 1
    failures = summary_table(suite, mode="failures")
    assert [columns(line)[-1] for line in failures[2:-2]] == ["FAILED"]
    assert failures[-2].startswith("20 kernel checks: 1 failed, 0 warned, 19 passed; against the baseline: ")
    assert failures[-2].endswith(" 1 new, 17 unchanged")
    assert failures[-1] == "19 rows not shown: pytest -v or --regbudget-summary=all shows all"


def test_summary_table_fits_the_terminal_and_keeps_names_apart() -> None:
    suite = _suite(30)
    long = "cub::DeviceRadixSortOnesweepKernel<" + "cub::detail::radix::policy_hub<float,int>," * 8 + ">"
    suite[1] = replace_record(suite[1], kernel=long, nodeid=f"kernels/cub.cu::{long}[sm_80]")
    wide = summary_table(suite, mode="all")
    assert max(map(len, wide)) > 400
    lines = summary_table(suite, mode="all", width=120)
    assert max(map(len, lines)) <= 120
    # One column names each row (each test is its kernel); the one long name is cut in its middle, keeping
    # its start and its closing arguments; the family's names keep the argument that differs.
    assert columns(lines[0])[:2] == ["kernel", "arch"]
    cut = next(line for line in lines if line.startswith("cub::"))
    assert "..." in cut
    assert columns(cut)[0].endswith("_hub<float,int>,>")
    rows = [columns(line)[0] for line in lines[2 : 2 + 30]]
    assert len(set(rows)) == len(rows) == 30
    assert sorted(row.rsplit(",", 1)[-1] for row in rows if row.startswith("flash_")) == sorted(
        f"{i}>" for i in range(30) if i != 1
    )
    assert lines[2 + 30].startswith("30 kernel checks: ")  # the counts, wrapped to the width too
    # Where the names fit, every column stays.
    assert columns(summary_table(_suite(8), mode="all", width=120)[0]) == [
        h for h in BASE_HEADER if h != "test"
    ]


def test_summary_table_drops_the_test_column_first_where_a_kernel_column_names_each_row() -> None:
    a = record(baseline_status="new")
    b = replace_record(
        failed_poly(), nodeid="tests/test_kernels.py::test_other[sm_90]", kernel="other_kernel"
    )
    lines = summary_lines([a, b], width=80)
    assert columns(lines[0]) == [
        "kernel",
        "arch",
        "regs",
        "spills",
        "stack",
        "smem",
        "occ",
        "cliff",
        "baseline",
        "verdict",
    ]
    assert max(map(len, lines)) <= 80
    # Two tests of one kernel and arch: only the test tells their rows apart, so it stays, and the kernel
    # column goes first instead.
    twice = summary_lines([a, replace_record(a, nodeid="tests/test_kernels.py::test_b[sm_90]")], width=80)
    assert columns(twice[0])[:2] == ["test", "arch"]
    assert [columns(row)[0] for row in twice[2:]] == ["test_b", "test_poly_eval"]
    assert max(map(len, twice)) <= 80


def test_summary_table_names_the_file_where_a_test_name_repeats() -> None:
    a = record(nodeid="kernels/a.cu::k[sm_80]", kernel="k", baseline_status="new")
    b = record(nodeid="kernels/b.cu::k[sm_80]", kernel="k", baseline_status="compared")
    c = record(nodeid="kernels/b.cu::other[sm_80]", kernel="other", baseline_status="new")
    # b is unchanged and not shown, but its name still makes a's row name its file.
    rows = [columns(line)[0] for line in summary_table([a, b, c])[2:-2]]  # the counts, the rows not shown
    assert rows == ["kernels/a.cu::k[sm_80]", "other[sm_80]"]


def test_compilers_line_names_what_built_the_kernels() -> None:
    nvcc = replace_record(record(), compiler="nvcc", nvrtc_version="nvcc 13.0.88", ptxas_version="13.0.88")
    where = "nvcc 13.0.88 (/usr/local/cuda/bin/nvcc, from PATH)"
    line = compilers_line([nvcc, nvcc, record()], where)
    assert line == f"{where} built 2 kernel(s); NVRTC 12.9.86 with ptxas 12.9.86 built 1 kernel(s)"
    assert compilers_line([], where) is None


def test_summary_test_column_drops_only_the_file_part_of_the_node_id() -> None:
    lines = summary_lines([record(nodeid="tests/test_k.py::TestK::test_k[4-sm_90]")])
    assert lines[2].startswith("TestK::test_k[4]  poly_eval  sm_90")


@pytest.mark.parametrize(
    ("outcome", "verdict"),
    [("passed", "ok"), ("failed", "FAILED"), ("warned", "WARNED"), ("error", "ERROR")],
)
def test_summary_verdict_column(outcome: str, verdict: str) -> None:
    assert columns(summary_lines([record(outcome=outcome)])[2])[-1] == verdict


def test_summary_of_a_compile_error_is_dashes_and_error() -> None:
    (row,) = summary_lines([errored()])[2:]
    assert columns(row) == ["test_bad", "bad", "sm_90", "-", "-", "-", "-", "-", "-", "-", "ERROR"]


def test_summary_cells_for_what_is_not_known() -> None:
    # A binary records no spills; no launch means no occupancy; a cliff with nothing to shed.
    rec = record(spill_stores=None, spill_loads=None, launch=None, cliff_grow=153, cliff_shed=None)
    assert columns(summary_lines([rec])[2]) == [
        "test_poly_eval",
        "poly_eval",
        "sm_90",
        "102",
        "-",
        "0",
        "0",
        "-",
        "+153/-",
        "-",
        "ok",
    ]


def test_summary_spill_and_occupancy_cells() -> None:
    rec = record(spill_stores=16, spill_loads=24, stack_frame=40, shared_mem=4096, occupancy=0.1875)
    assert columns(summary_lines([rec])[2])[3:8] == ["102", "16/24", "40", "4096", "19% @256"]


def baseline_cell(rec: ReportRecord) -> str:
    lines = summary_lines([rec])
    start = lines[0].index("baseline")
    end = lines[0].index("verdict")
    return lines[2][start:end].rstrip()


@pytest.mark.parametrize(
    ("status", "deltas", "cell"),
    [
        ("none", [], "-"),
        ("new", [], "new"),
        ("compared", [], "="),
        # The example the docs give (usage.md, baseline.md): occupancy in points, rounded.
        (
            "compared",
            [delta("registers", 72, 80, "worse"), delta("occupancy", 0.375, 0.25, "worse")],
            "regs +8, occ -12pt",
        ),
        ("compared", [delta("registers", 126, 102, "better")], "regs -24"),
        ("compared", [delta("stack", 0, 8, "tolerated")], "stack +8"),
        (
            "compared",
            [
                delta("spill_stores", 0, 16, "worse"),
                delta("spill_loads", 8, 0, "better"),
                delta("smem", 1024, 2048, "worse"),
                delta("occupancy", 0.25, 0.5, "better"),
            ],
            # The failing changes first, then those within a tolerance, then the gains.
            "spill st +16, smem +1024, spill ld -8, occ +25pt",
        ),
        # A metric of the table shows by its column name, with nothing more here (core/metrics.py).
        ("compared", [delta("local_instructions", 12, 16, "worse")], "local instr +4"),
    ],
)
def test_summary_baseline_cell(status: str, deltas: list[DeltaRecord], cell: str) -> None:
    rec = record(
        baseline_status=status, deltas=deltas, baseline=None if status in ("none", "new") else entry()
    )
    assert baseline_cell(rec) == cell


def test_summary_baseline_cell_of_another_ptxas_is_shown_but_not_enforced() -> None:
    old = entry(ptxas="12.4.131")
    changed = record(
        baseline_status="toolkit-mismatch", baseline=old, deltas=[delta("registers", 94, 102, "worse")]
    )
    same = record(baseline_status="toolkit-mismatch", baseline=old)
    assert baseline_cell(changed) == "regs +8 (ptxas 12.4.131, not enforced)"
    assert baseline_cell(same) == "= (ptxas 12.4.131, not enforced)"


def test_summary_baseline_cell_of_a_new_release_names_the_releases_that_have_entries() -> None:
    # A CUDA upgrade: the kernel has entries, but none for the release that built it. Not compared.
    rec = record(baseline_status="new-release", other_releases=["12.8", "13.5"])
    assert baseline_cell(rec) == "new for 12.9 (entries: 12.8, 13.5)"
    assert baseline_cell(record(baseline_status="new-release", release="13.5", other_releases=["12.9"])) == (
        "new for 13.5 (entries: 12.9)"
    )


def test_summary_baseline_cell_of_changed_build_settings_is_its_numbers_alone() -> None:
    # docs/baseline.md: the entry is still enforced; the settings are named once, by settings_lines, and a
    # row whose numbers did not move is unchanged: it is neither shown nor counted as changed.
    old = entry(options_hash="0123456789ab")
    worse = record(
        baseline_status="compared",
        baseline=old,
        options_changed=True,
        settings_change="added -DUNUSED",
        deltas=[delta("registers", 94, 102, "worse")],
    )
    same = record(baseline_status="compared", baseline=old, options_changed=True, settings_change="added -DX")
    assert baseline_cell(worse) == "regs +8"
    assert baseline_cell(same) == "="
    assert baseline_cell(record(baseline_status="compared", baseline=entry())) == "="
    table = summary_table([same, replace_record(same, nodeid="tests/test_kernels.py::test_b[sm_90]")])
    assert table == [
        "2 kernel checks: 0 failed, 0 warned, 2 passed; against the baseline: 0 changed, 0 new, 2 unchanged",
        "2 rows not shown: pytest -v or --regbudget-summary=all shows all",
    ]
    assert [line for line in baseline_lines([same], [], updating=False) if "build settings" in line] == [
        "build settings changed for 1 entry: added -DX (each entry is still held to its numbers; "
        "pytest --regbudget-update records the new settings)"
    ]


def test_summary_baseline_cell_of_a_compile_error_is_a_dash() -> None:
    rec = errored()
    rec["baseline_status"] = "compared"
    rec["baseline"] = entry()
    assert columns(summary_lines([rec])[2])[9] == "-"


BASE_HEADER = [
    "test",
    "kernel",
    "arch",
    "regs",
    "spill st/ld",
    "stack",
    "smem",
    "occupancy",
    "cliff",
    "baseline",
    "verdict",
]
GPU_HEADER = ["drv regs", "drv occ", "time ms", "noise", "base ms", "ratio"]


def timed(**overrides: Any) -> ReportRecord:
    return record(
        gpu_device="NVIDIA H200",
        driver_registers=102,
        driver_occupancy=0.25,
        time_ms=0.31623,
        noise=0.0123,
        samples=50,
        baseline_time_ms=0.3156,
        time_ratio=0.31623 / 0.3156,
        **overrides,
    )


def test_summary_has_no_gpu_columns_without_gpu_data() -> None:
    assert columns(summary_lines([record(), failed_poly()])[0]) == BASE_HEADER


def test_summary_gpu_columns_sit_before_the_verdict_when_any_kernel_ran_on_a_gpu() -> None:
    lines = summary_lines([timed(), record(nodeid="tests/test_kernels.py::test_z[sm_90]")])
    assert columns(lines[0]) == [*BASE_HEADER[:-1], *GPU_HEADER, "verdict"]
    assert columns(lines[2])[-7:] == ["102", "25%", "0.3162", "1.2%", "0.3156", "x1.002", "ok"]
    # A kernel that did not run on the GPU gets dashes in the same columns.
    assert columns(lines[3])[-7:] == ["-", "-", "-", "-", "-", "-", "ok"]


def test_summary_sass_column_follows_spill_bytes_when_any_kernel_has_sass() -> None:
    sass = record(spill_instructions=7, spill_instructions_in_loops=3, local_share=0.631)
    plain = record(nodeid="tests/test_kernels.py::test_z[sm_90]")
    lines = summary_lines([plain, sass])
    assert columns(lines[0]) == [*BASE_HEADER[:5], "spill instr loop/all", "local %", *BASE_HEADER[5:]]
    assert columns(lines[2])[3:8] == ["102", "0/0", "3/7", "63%", "0"]
    assert columns(lines[3])[3:8] == ["102", "0/0", "-", "-", "0"]


def test_summary_keeps_stack_and_smem_right_justified_with_the_sass_column() -> None:
    rec = record(stack_frame=8, shared_mem=4, spill_instructions=7, spill_instructions_in_loops=3)
    header, _, row = summary_lines([rec])
    smem_end = header.index("smem") + len("smem")
    assert row[smem_end - 1] == "4"


# --- baseline_lines: improvements and stale entries --------------------------------------------------------


def improved(**overrides: Any) -> ReportRecord:
    return record(
        baseline_status="compared",
        baseline=entry(registers=126, stack=16),
        deltas=[delta("registers", 126, 102, "better"), delta("stack", 16, 0, "better")],
        **overrides,
    )


def test_a_kernel_worse_in_any_metric_is_never_called_improved() -> None:
    """Registers 167 -> 64 while spills went 0 -> 704: a trade (failed or tolerated), never one to lock in."""
    traded = [delta("registers", 167, 64, "better"), delta("spill_stores", 0, 704, "worse")]
    failed = record(baseline_status="compared", deltas=traded, outcome="failed")
    tolerated = record(
        baseline_status="compared",
        deltas=[delta("registers", 167, 64, "better"), delta("spill_stores", 0, 4, "tolerated")],
    )
    assert baseline_lines([failed, tolerated], [], updating=False) == []
    assert baseline_lines([improved()], [], updating=False)[0] == "1 kernel(s) improved on the baseline:"


def test_no_improvement_and_nothing_stale_says_nothing() -> None:
    assert baseline_lines([record(), failed_poly()], [], updating=False) == []


def test_improvements_list_the_better_metrics_and_end_with_the_update_hint() -> None:
    records = [
        improved(nodeid="tests/test_z.py::test_k[sm_90]", kernel="zeta"),
        failed_poly(),  # compared, but worse: not an improvement
        improved(),
        # Another ptxas's figures are not enforced, so they are not offered to lock in either.
        record(
            kernel="other",
            baseline_status="toolkit-mismatch",
            baseline=entry(ptxas="12.4.131"),
            deltas=[delta("registers", 110, 102, "better")],
        ),
    ]
    assert baseline_lines(records, [], updating=False) == [
        "2 kernel(s) improved on the baseline:",
        f"  poly_eval [sm_90] ({NODEID}): registers 126 -> 102 (-24), stack 16 -> 0 (-16)",
        "  zeta [sm_90] (tests/test_z.py::test_k[sm_90]): registers 126 -> 102 (-24), stack 16 -> 0 (-16)",
        "  Run pytest --regbudget-update to lock the improvements in.",
    ]


def test_build_setting_changes_are_one_line_per_change_with_the_entries_it_touches() -> None:
    def changed(i: int, change: str | None, arch: str = "sm_90", **more: Any) -> ReportRecord:
        return record(
            kernel=f"k{i}",
            key=["k.cu", f"k{i}", "-", arch, "12.9"],
            baseline_status="compared",
            baseline=entry(),
            options_changed=change is not None,
            settings_change=change,
            **more,
        )

    records = [changed(i, "added -DGGML_CUDA_F16") for i in range(1200)]
    # Two tests of one kernel variant are one entry; a new kernel has no entry to have changed.
    records += [changed(0, "added -DGGML_CUDA_F16", nodeid="tests/t.py::other"), changed(0, None)]
    records += [record(kernel="fresh", baseline_status="new", settings_change="added -DX")]
    records += [changed(i, f"added -DFLAG{i}", arch="sm_80") for i in range(7)]
    lines = baseline_lines(records, [], updating=False)
    assert lines[0] == (
        "build settings changed for 1,200 entries: added -DGGML_CUDA_F16 (each entry is still held to its "
        "numbers; pytest --regbudget-update records the new settings)"
    )
    assert len(lines) == 6  # SETTINGS_SHOWN (5) changes, then the rest counted
    assert lines[-1] == "build settings changed in 3 other ways for 3 entries"
    assert baseline_lines(records, [], updating=True)[0] == (
        "build settings changed for 1,200 entries: added -DGGML_CUDA_F16 (recorded by this update)"
    )
    # Entries read under an older version's key: said until an update moves them.
    old_key = ["k.cu", "k0", "TILE=16", "sm_90", "12.9"]
    found = [changed(0, None, found_under=old_key)]
    assert baseline_lines(found, [], updating=False) == [
        "1 entry read under the key an older pytest-regbudget gave them (build-wide defines or a Triton "
        "kernel's num_warps and num_stages in the variant, or `..` out of the rootdir); pytest "
        "--regbudget-update moves them to their new key"
    ]
    assert baseline_lines(found, [], updating=True) == []


def key(i: int) -> tuple[str, str, str, str, str]:
    """A kernel's baseline key: (source, kernel, variant, arch, release)."""
    return (f"kernels/gone_{i:02d}.cu", "k", "-", "sm_90", "12.9")


def test_one_stale_entry_is_named_with_the_fix() -> None:
    assert baseline_lines([], [key(1)], updating=False) == [
        "1 stale baseline entry (test or kernel gone):",
        "  kernels/gone_01.cu k [sm_90, CUDA 12.9]",
        "  pytest --regbudget-update removes them.",
    ]


def test_stale_lines_name_the_variant_and_version_1_entries_their_test() -> None:
    stale = [
        ("kernels/poly.cu", "poly_eval", "NACC=8", "sm_90", "12.9"),
        ("<string acc>", "acc", "-", "sm_80", "13.5"),
    ]
    # An entry names its arch and CUDA release.
    assert baseline_lines([], stale, updating=False)[1:-1] == [
        "  kernels/poly.cu poly_eval (NACC=8) [sm_90, CUDA 12.9]",
        "  <string acc> acc [sm_80, CUDA 13.5]",
    ]
    assert key_text(("kernels/poly.cu", "poly_eval", "NACC=8,N=4", "sm_90", "12.9")) == (
        "kernels/poly.cu poly_eval (NACC=8,N=4) [sm_90, CUDA 12.9]"
    )
    assert key_text(("kernels/poly.cu", "poly_eval", "-", "sm_90", "13.5")) == (
        "kernels/poly.cu poly_eval [sm_90, CUDA 13.5]"
    )


@pytest.mark.parametrize("count", [2, STALE_SHOWN, STALE_SHOWN + 1, 25])
def test_stale_entries_are_capped_at_ten_then_counted(count: int) -> None:
    assert STALE_SHOWN == 10
    stale = [key(i) for i in range(count)]
    lines = baseline_lines([], stale, updating=False)
    shown = [f"  kernels/gone_{i:02d}.cu k [sm_90, CUDA 12.9]" for i in range(min(count, 10))]
    more = [f"  ... and {count - 10} more"] if count > 10 else []
    assert lines == [
        f"{count} stale baseline entries (test or kernel gone):",
        *shown,
        *more,
        "  pytest --regbudget-update removes them.",
    ]


def test_improvements_come_before_stale_entries_then_kept_lines() -> None:
    kept = ["2 entries kept: sm_80 was not built (this run's archs: sm_90)"]
    lines = baseline_lines([improved()], [key(1)], updating=False, kept=kept)
    assert [line for line in lines if not line.startswith("  ")] == [
        "1 kernel(s) improved on the baseline:",
        "1 stale baseline entry (test or kernel gone):",
        "2 entries kept: sm_80 was not built (this run's archs: sm_90)",
    ]


def test_an_update_shows_neither_improvements_nor_stale_entries_only_what_it_kept() -> None:
    kept = ["1 entry kept: tests/test_b.py was not collected (error)"]
    assert baseline_lines([improved()], [key(1)], updating=True) == []
    assert baseline_lines([improved()], [key(1)], updating=True, kept=kept) == kept


def test_baseline_lines_cannot_forge_a_workflow_command() -> None:
    stale: list[Key] = [
        ("t.cu\n::error::forged", "k", "-", "sm_90", "12.9"),
        ("k.cu", "k\n::error::forged", "N=\n::x::", "sm_90", "12.9"),
    ]
    lines = baseline_lines([], stale, updating=False, kept=["::warning::kept"])
    assert lines[1:3] == [
        "  t.cu\\n::error::forged k [sm_90, CUDA 12.9]",
        "  k.cu k\\n::error::forged (N=\\n::x::) [sm_90, CUDA 12.9]",
    ]
    assert lines[-1] == "> ::warning::kept"


# --- enforced_line: the count at the end of the summary --------------------------------------------------


def keyed(kernel: str, release: str = "12.9", **overrides: Any) -> ReportRecord:
    """A record of `kernel` with its own baseline key (records of one key are one entry)."""
    return record(
        kernel=kernel, release=release, key=["kernels/k.cu", kernel, "-", "sm_90", release], **overrides
    )


def test_every_kernel_held_to_an_entry_of_its_release_is_counted() -> None:
    records = [keyed(k, baseline_status="compared", baseline=entry()) for k in "abc"]
    assert enforced_line(records) == "3 of 3 baseline entries enforced (CUDA 12.9)"
    # Two tests of one kernel variant share one entry: counted once.
    twice = keyed("a", baseline_status="compared", baseline=entry(), nodeid="tests/test_other.py::t[sm_90]")
    assert enforced_line([*records, twice]) == "3 of 3 baseline entries enforced (CUDA 12.9)"
    # A compile error measured nothing: not counted either way; with nothing measured, no line.
    assert enforced_line([*records, errored()]) == "3 of 3 baseline entries enforced (CUDA 12.9)"
    assert enforced_line([errored()]) is None
    assert enforced_line([]) is None


def test_the_enforced_line_counts_what_was_not_enforced_and_why() -> None:
    records = [
        keyed("held", baseline_status="compared", baseline=entry()),
        keyed("nvcc", "13.5", compiler="nvcc", baseline_status="compared", baseline=entry()),
        # A CUDA upgrade: entries of another release only.
        keyed("up1", baseline_status="new-release", other_releases=["12.8"]),
        keyed("up2", baseline_status="new-release", other_releases=["12.8"]),
        keyed("fresh", baseline_status="new"),
        # A binary's entry cannot hold spills it does not record.
        keyed("bin", baseline_status="compared", spill_stores=None, spill_loads=None, baseline=entry()),
        # An entry of another release than its key (a hand edit) is shown, not enforced.
        keyed("v1", baseline_status="toolkit-mismatch", baseline=entry(ptxas="12.4.131")),
    ]
    assert enforced_line(records) == (
        "2 of 7 baseline entries enforced (CUDA 12.9, 13.5); not enforced: 1 new, "
        "2 no entry for CUDA 12.9 yet, 1 recorded with another ptxas, 1 spills unknown (prebuilt binary) "
        "(--regbudget-strict fails them)"
    )
    # An update records them (it is never strict); a prebuilt binary's numbers have no CUDA release.
    prebuilt = keyed("lib", "prebuilt", compiler="binary", baseline_status="new")
    assert enforced_line([keyed("fresh", baseline_status="new"), prebuilt], updating=True) == (
        "0 of 2 baseline entries enforced (CUDA 12.9; prebuilt); not enforced: 2 new "
        "(this update records them)"
    )
    assert enforced_line([keyed("k")]) == (
        "0 of 1 baseline entries enforced (CUDA 12.9); not enforced: 1 no baseline file "
        "(--regbudget-strict fails them)"
    )


# --- unknown_arch_lines ------------------------------------------------------------------------------------


def test_known_archs_and_variants_give_no_line() -> None:
    keys = [
        ("a.cu", "k", "-", "sm_90", "12.9"),
        ("b.cu", "k", "N=1", "sm_90a", "12.9"),
        ("c.cu", "k", "-", "sm_100f", "13.5"),
    ]
    assert unknown_arch_lines(keys, "regbudget-baseline.toml") == []


def test_an_unknown_arch_gets_one_line_with_a_count_an_example_and_the_fix() -> None:
    keys = [
        ("kernels/b.cu", "k2", "-", "sm_999", "12.9"),
        ("kernels/a.cu", "k1", "NACC=8", "sm_999", "12.9"),
        ("kernels/c.cu", "k3", "-", "sm_999", "13.5"),
        ("kernels/a.cu", "k", "-", "sm_90", "12.9"),
        ("kernels/c.cu", "k", "-", "sm_9O", "12.9"),
    ]
    lines = unknown_arch_lines(keys, "regbudget-baseline.toml")
    assert len(lines) == 2
    # One line per arch, in string order ('9' < 'O'); the example is the smallest key.
    assert lines[0].startswith(
        "baseline regbudget-baseline.toml: 3 entries for arch 'sm_999' (e.g. kernels/a.cu k1 (NACC=8) "
        "[sm_999, CUDA 12.9]) are never checked and never removed: correct the arch or delete them; "
        "unknown arch 'sm_999' (supported: sm_70, "
    )
    assert lines[1].startswith(
        "baseline regbudget-baseline.toml: 1 entry for arch 'sm_9O' (e.g. kernels/c.cu k [sm_9O, CUDA 12.9]) "
        "are never checked and never removed: correct the arch or delete them; unknown arch 'sm_9O'"
    )


# --- markdown_report: the pull-request comment and job summary ---------------------------------------------

MEASURED = """\
ptxas info    : Compiling entry function '{kernel}' for 'sm_90'
ptxas info    : Function properties for {kernel}
    {stack} bytes stack frame, {spills} bytes spill stores, {spills} bytes spill loads
ptxas info    : Used {regs} registers, used 0 barriers
"""


def judged(
    kernel: str,
    regs: int,
    spills: int = 0,
    *,
    was: tuple[int, int] | None = None,
    recorded: bool = True,
    limits: Limits | None = None,
    level: Level = "fail",
    nodeid: str = "",
) -> ReportRecord:
    """The record the plugin writes for `kernel` on sm_90 with `regs` registers and `spills` spill bytes,
    held to `limits` (a 256-thread launch by default) and, given `was` (registers, spills), to that entry;
    judged by budget.check and budget.ratchet themselves, so the violations are worded as a user sees them."""

    def build(regs: int, spills: int) -> KernelReport:
        text = MEASURED.format(kernel=kernel, stack=spills, spills=spills, regs=regs)
        report = check(
            nodeid or f"t.py::test_{kernel}[sm_90]",
            kernel,
            "sm_90",
            "/repo/k.cu",
            parse_ptxas_output(text)[kernel],
            limits or Limits(launch=Launch(256)),
            level,
        )
        key = ("k.cu", kernel, "-", "sm_90", "12.9")
        return replace(report, ptxas_version="12.9.86", compiler="nvrtc", release="12.9", key=key)

    old = None if was is None else entry_of_report(build(*was))
    rule = BaselineRule(old, recorded=recorded, name="regbudget-baseline.toml")
    return to_record(ratchet(build(regs, spills), rule))


TABLE = "| verdict | kernel | arch | file | changes |\n|---|---|---|---|---|\n"
FOLD = "| kernel | arch | regs | spill st/ld | occupancy |\n|---|---|---|---|---|\n"
FIX = "Fix: `if intended, accept it with pytest --regbudget-update and commit regbudget-baseline.toml`\n"


def md_rows(text: str) -> list[str]:
    """The rows of the report's tables, without their headers."""
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| verdict")]


def test_markdown_gives_each_check_one_row_failures_first_failing_changes_first_in_bold() -> None:
    records = [
        judged("fresh", 20),
        judged("faster", 32, was=(40, 0)),
        judged("same", 40, was=(40, 0)),
        judged("warm", 48, was=(40, 0), level="warn"),
        # Fewer registers, but it spills now: the spills fail, the registers are an improvement.
        judged("mixed", 32, 96, was=(40, 0)),
        judged("poly_eval", 126, was=(102, 0), limits=Limits(max_regs=112, launch=Launch(256))),
        errored(),
    ]
    assert markdown_report(records, rootdir="/repo") == (
        "### pytest-regbudget (sm_90)\n"
        "\n"
        "7 kernel checks: 2 failed, 1 did not build, 1 warned, 3 passed; against the baseline: 4 changed "
        "(3 worse, 1 improved), 1 new, 1 unchanged, 1 with no baseline\n"
        "\n"
        "5 of 6 baseline entries enforced (CUDA 12.9); not enforced: 1 new (--regbudget-strict fails them)\n"
        "\n"
        f"{TABLE}"
        "| **FAILED** | `mixed` | sm_90 | `k.cu` | **spill st 0 -> 96 (+96), spill ld 0 -> 96 (+96), "
        "stack 0 -> 96 (+96)**, regs 40 -> 32 (-8), occ 75% -> 100% (+25pt) |\n"
        "| **FAILED** | `poly_eval` | sm_90 | `k.cu` | **`registers 126 > max_regs 112`, regs 102 -> 126 "
        "(+24)** |\n"
        "| **ERROR** | `bad` | sm_90 | `kernels/bad.cu:2` | did not compile: `bad.cu(2): error: identifier "
        '"x" is undefined` |\n'
        "| warning | `warm` | sm_90 | `k.cu` | **regs 40 -> 48 (+8), occ 75% -> 62% (-13pt)** |\n"
        "| improved | `faster` | sm_90 | `k.cu` | regs 40 -> 32 (-8), occ 75% -> 100% (+25pt) |\n"
        "| new | `fresh` | sm_90 | `k.cu` | 20 registers, no spills, occupancy 100% at 256 threads |\n"
        "\n"
        f"{FIX}"
        "\n"
    )


def test_markdown_lists_no_unchanged_kernel() -> None:
    records = [keyed(f"k{i:02d}", baseline_status="compared", baseline=entry()) for i in range(1199)]
    records.append(judged("gemm", 40, 96, was=(40, 0)))
    text = markdown_report(records)
    assert text.splitlines()[2] == (
        "1,200 kernel checks: 1 failed, 0 warned, 1,199 passed; against the baseline: 1 changed (1 worse, "
        "0 improved), 0 new, 1,199 unchanged"
    )
    assert "`k0" not in text  # the unchanged kernels are counted, not listed
    assert md_rows(text) == [
        "| **FAILED** | `gemm` | sm_90 | `/repo/k.cu` | **spill st 0 -> 96 (+96), spill ld 0 -> 96 (+96), "
        "stack 0 -> 96 (+96)** |"
    ]
    assert len(text) < 1_000


def test_markdown_without_a_baseline_file_folds_the_passing_kernels_apart() -> None:
    records = [judged("a", 40, recorded=False), judged("b", 100, recorded=False)]
    assert markdown_report(records) == (
        "### pytest-regbudget (sm_90)\n\n"
        "2 kernel checks: 0 failed, 0 warned, 2 passed; against the baseline: 0 changed, 0 new, 0 unchanged, "
        "2 with no baseline\n\n"
        "0 of 2 baseline entries enforced (CUDA 12.9); not enforced: 2 no baseline file (--regbudget-strict "
        "fails them)\n\n"
        "<details><summary>2 kernels with no baseline file</summary>\n\n"
        f"{FOLD}"
        "| `a` | sm_90 | 40 | 0/0 | 75% at 256 |\n"
        "| `b` | sm_90 | 100 | 0/0 | 25% at 256 |\n\n"
        "</details>\n\n"
    )


def test_markdown_new_kernels_get_a_row_each_then_a_fold() -> None:
    upgrade = keyed("up", baseline_status="new-release", other_releases=["12.8", "13.5"])
    spilling = judged("spilly", 64, 24)
    assert md_rows(markdown_report([upgrade, spilling])) == [
        "| new | `spilly` | sm_90 | `/repo/k.cu` | 64 registers, 24 B spill stores, 24 B spill loads, "
        "occupancy 50% at 256 threads |",
        "| new | `up` | sm_90 | `/repo/kernels/poly.cu:12` | 102 registers, no spills, occupancy 25% at 256 "
        "threads; no entry for CUDA 12.9 yet (entries: `12.8, 13.5`) |",
    ]
    many = [judged(f"n{i:02d}", 40) for i in range(NEW_ROWS + 1)]
    text = markdown_report(many)
    assert "| new |" not in text
    assert f"<details><summary>{NEW_ROWS + 1} new kernels</summary>\n\n{FOLD}| `n00` | sm_90 | 40 |" in text
    assert text.count("| `n") == NEW_ROWS + 1
    assert markdown_report(many[:NEW_ROWS]).count("| new | `n") == NEW_ROWS


def test_markdown_folds_the_improvements_past_ten_rows() -> None:
    worse = [judged(f"w{i}", 48, was=(40, 0), level="warn") for i in range(FOLD_AFTER)]
    better = [judged(f"b{i}", 32, was=(40, 0)) for i in range(2)]
    text = markdown_report([*worse, *better])
    assert [row.split(" | ")[1] for row in md_rows(text)] == [
        *(f"`w{i}`" for i in range(FOLD_AFTER)),
        "`b0`",
        "`b1`",
    ]
    assert f"\n\n<details><summary>2 improved kernel checks</summary>\n\n{TABLE}| improved | `b0` |" in text
    # Ten rows in all: no fold.
    assert "<details>" not in markdown_report([*worse[:-1], better[0]])


def test_markdown_gives_one_kernels_archs_one_row_where_their_changes_agree() -> None:
    def on(arch: str, regs: int, nodeid: str = "") -> ReportRecord:
        rec = judged("k", regs, was=(40, 0), nodeid=nodeid or f"t.py::test_k[{arch}]")
        return replace_record(rec, arch=arch)

    rows = md_rows(markdown_report([on("sm_80", 48), on("sm_90", 48), on("sm_90", 48, "t.py::again[sm_90]")]))
    assert rows == [
        "| **FAILED** | `k` | sm_80, sm_90 | `/repo/k.cu` | **regs 40 -> 48 (+8), occ 75% -> 62% (-13pt)** |"
    ]
    rows = md_rows(markdown_report([on("sm_80", 56), on("sm_90", 48)]))
    assert [row.split(" | ")[2] for row in rows] == ["sm_80", "sm_90"]


@pytest.mark.parametrize(
    ("records", "line"),
    [
        ([], "no kernels checked"),
        # A compile error measured nothing: nothing to compare.
        (
            [errored()],
            "1 kernel check: 0 failed, 1 did not build, 0 warned, 0 passed; against the baseline: 0 "
            "changed, 0 new, 0 unchanged, 1 with no baseline",
        ),
        (
            [keyed("a", outcome="warned", baseline_status="compared", baseline=entry())] * 2,
            "2 kernel checks: 0 failed, 2 warned, 0 passed; against the baseline: 0 changed, 0 new, "
            "2 unchanged",
        ),
        (
            [
                *(keyed(k, outcome="failed", baseline_status="compared", baseline=entry()) for k in "ab"),
                keyed("i", baseline_status="compared", deltas=[delta("registers", 110, 102, "better")]),
                *(keyed(f"u{i:02d}", baseline_status="compared", baseline=entry()) for i in range(49)),
            ],
            "52 kernel checks: 2 failed, 0 warned, 50 passed; against the baseline: 1 changed (0 worse, "
            "1 improved), 0 new, 51 unchanged",
        ),
        (
            # Worse within its tolerance: worse all the same.
            [keyed("t", baseline_status="compared", deltas=[delta("registers", 96, 102, "tolerated")])],
            "1 kernel check: 0 failed, 0 warned, 1 passed; against the baseline: 1 changed (1 worse, "
            "0 improved), 0 new, 0 unchanged",
        ),
    ],
)
def test_markdown_verdict_line_is_the_runs_counts(records: list[ReportRecord], line: str) -> None:
    text = markdown_report(records)
    assert text.splitlines()[:3] == ["### pytest-regbudget" + (" (sm_90)" if records else ""), "", line]


def test_markdown_of_no_records_is_the_heading_and_the_verdict() -> None:
    assert markdown_report([]) == "### pytest-regbudget\n\nno kernels checked\n\n"


def test_markdown_compile_error_shows_the_first_non_blank_line_or_a_dash() -> None:
    text = markdown_report([errored("\n\n  x.cu(3): error: expected a ;\nmore\n"), errored("")])
    assert [line for line in text.splitlines() if line.startswith("| **ERROR**")] == [
        "| **ERROR** | `bad` | sm_90 | `/repo/kernels/bad.cu:2` | did not compile: `x.cu(3): error: "
        "expected a ;` |",
        "| **ERROR** | `bad` | sm_90 | `/repo/kernels/bad.cu:2` | did not compile: - |",
    ]


def test_markdown_says_which_changes_are_not_enforced_and_why() -> None:
    records = [
        keyed(
            "v1",
            baseline_status="toolkit-mismatch",
            baseline=entry(ptxas="11.8.89"),
            deltas=[delta("registers", 98, 102, "worse")],
        ),
        keyed(
            "opts", baseline_status="compared", options_changed=True, deltas=[delta("stack", 9, 8, "better")]
        ),
        keyed("tol", baseline_status="compared", deltas=[delta("occupancy", 0.5, 0.375, "tolerated")]),
    ]
    assert [row.split(" | ", 4)[::4] for row in md_rows(markdown_report(records))] == [
        ["| worse", "occ 50% -> 38% (-12pt) (tolerated) |"],
        ["| worse", "regs 98 -> 102 (+4) (not enforced) (entry recorded with ptxas `11.8.89`) |"],
        ["| improved", "stack 9 -> 8 (-1) (built with other options) |"],
    ]


def test_markdown_names_the_variant_and_with_several_toolkits_the_release() -> None:
    variant = record(baseline_status="new", key=["k.cu", "poly_eval", "NACC=8", "sm_90", "12.9"])
    other = keyed("poly_eval", "13.5", baseline_status="new")
    rows = [line for line in markdown_report([variant, other]).splitlines() if line.startswith("| new")]
    assert [row.split(" | ")[1:3] for row in rows] == [
        ["`poly_eval (NACC=8)`", "sm_90 (12.9)"],
        ["`poly_eval`", "sm_90 (13.5)"],
    ]


def test_markdown_says_a_failure_two_tests_share_once() -> None:
    records = [judged("k", 48, was=(40, 0), nodeid=f"t.py::test_{i}[sm_90]") for i in "ab"]
    text = markdown_report(records)
    assert md_rows(text) == [
        "| **FAILED** | `k` | sm_90 | `/repo/k.cu` | **regs 40 -> 48 (+8), occ 75% -> 62% (-13pt)** |"
    ]
    assert text.count(FIX) == 1


def test_markdown_names_a_file_relative_to_the_rootdir_and_links_it_on_github() -> None:
    rec = judged("k", 48, was=(40, 0))
    rec = replace_record(rec, source="/repo/kernels/a b(1).cu", line=22)
    links = GithubLinks("https://github.com", "o/r", "a" * 40, "77")
    text = markdown_report([rec], rootdir="/repo", links=links)
    (row,) = md_rows(text)
    url = "https://github.com/o/r/blob/" + "a" * 40 + "/kernels/a%20b%281%29.cu#L22"
    assert row.split(" | ")[3] == f"[`kernels/a b(1).cu:22`]({url})"
    assert text.endswith(
        "\n\nThe HTML and JSON reports: [the run's artifacts](https://github.com/o/r/actions/runs/77)\n\n"
    )
    # Off GitHub Actions, a code span; outside the rootdir, the path as it is, never a link.
    assert md_rows(markdown_report([rec], rootdir="/repo"))[0].split(" | ")[3] == "`kernels/a b(1).cu:22`"
    outside = markdown_report([rec], rootdir="/elsewhere", links=links)
    assert md_rows(outside)[0].split(" | ")[3] == "`/repo/kernels/a b(1).cu:22`"


def failing_suite(n: int) -> list[ReportRecord]:
    """`n` kernels that each fail three budgets, and three unchanged ones."""
    limits = Limits(max_regs=32, caps={"spills": 0}, launch=Launch(256))
    failed = judged("kernel", 40, 8, limits=limits, recorded=False)
    names = [f"kernel_{i:04d}" for i in range(n)]
    named = [record(**{**failed, "kernel": k, "key": ["k.cu", k, "-", "sm_90", "12.9"]}) for k in names]
    return [*named, *(judged(f"same{i}", 40, was=(40, 0)) for i in range(3))]


def md_cells(row: str) -> list[str]:
    """A GFM table row's cells: split at pipes that no backslash escapes."""
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


def test_markdown_past_its_limit_leaves_out_whole_rows_and_counts_them() -> None:
    row = (
        "| **FAILED** | `kernel_0000` | sm_90 | `/repo/k.cu` | **`registers 40 > max_regs 32`, "
        "`spill stores 8 bytes > spills 0`, `spill loads 8 bytes > spills 0`** |\n"
    )
    cut = (
        "### pytest-regbudget (sm_90)\n\n"
        "6 kernel checks: 3 failed, 0 warned, 3 passed; against the baseline: 0 changed, 0 new, 3 unchanged, "
        "3 with no baseline\n\n"
        "3 of 6 baseline entries enforced (CUDA 12.9); not enforced: 3 no baseline file (--regbudget-strict "
        "fails them)\n\n"
        f"{TABLE}{row}"
        "\n"
        "... and 2 more kernel checks (2 of them failing): see the job's artifacts\n"
        "\n"
    )
    assert markdown_report(failing_suite(3), limit=len(cut)) == cut
    # One character less, and the first row does not fit either: the count line alone says it.
    assert markdown_report(failing_suite(3), limit=len(cut) - 1) == (
        cut.split(TABLE)[0] + "... and 3 more kernel checks (3 of them failing): see the job's artifacts\n\n"
    )
    # With room for it all, nothing is left out.
    whole = markdown_report(failing_suite(3))
    assert "more kernel checks" not in whole
    assert markdown_report(failing_suite(3), limit=len(whole)) == whole


@pytest.mark.parametrize("limit", range(500, 4000, 97))
def test_markdown_never_passes_its_limit_nor_cuts_a_row(limit: int) -> None:
    links = GithubLinks("https://github.com", "o/r", "a" * 40, "77")
    text = markdown_report(failing_suite(12), limit=limit, links=links, rootdir="/")
    assert len(text) <= limit
    rows = [line for line in text.splitlines() if line.startswith("| **FAILED**")]
    assert all(len(md_cells(row)) == 5 and row.endswith(" |") for row in rows)
    if len(rows) < 12:
        left = 12 - len(rows)
        checks = "check" if left == 1 else "checks"
        assert f"... and {left} more kernel {checks} ({left} of them failing): see the job's" in text
        assert "<details>" not in text  # a cut report ends with what it left out
    # The links come after the rows: a row without one is never above a row with one.
    linked = ["](https://github.com/o/r/blob/" in row for row in rows]
    assert linked == sorted(linked, reverse=True)
    assert linked[:10] == [True] * min(10, len(rows))
    # A cut table is closed by a blank line before the count line: Markdown would read the line as a row.
    assert "|\n..." not in text


def test_markdown_of_a_huge_suite_fits_a_pull_request_comment() -> None:
    suite = failing_suite(2000)
    text = markdown_report(suite)
    assert MARKDOWN_LIMIT < 65_536
    assert MARKDOWN_LIMIT - 300 < len(text) <= MARKDOWN_LIMIT
    assert re.search(
        r"\n\n\.\.\. and [\d,]+ more kernel checks \([\d,]+ of them failing\): see the job's", text
    )
    fresh = markdown_report([replace_record(r, baseline_status="new") for r in failing_suite(0) * 700])
    assert len(fresh) <= MARKDOWN_LIMIT  # 2,100 new kernels: the fold is cut too
    assert "<details><summary>2100 new kernels</summary>" in fresh
    assert re.search(r"\n\n\.\.\. and \d+ more: see the job's artifacts\n\n</details>\n\n$", fresh)


# --- github_annotations ------------------------------------------------------------------------------------


def test_annotations_only_for_kernels_that_did_not_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    warned = record(
        nodeid="t.py::test_w[sm_90]",
        outcome="warned",
        level="warn",
        line=None,
        violations=["poly_eval [sm_90]: registers 102 > max_regs 96", "poly_eval [sm_90]: stack 8 > stack 0"],
    )
    # Sorted by node id: "t.py::..." comes before "tests/...".
    assert github_annotations([record(), failed_poly(), errored(), warned], ROOT) == [
        "::warning file=kernels/poly.cu,title=regbudget poly_eval [sm_90]::"
        "poly_eval [sm_90]: registers 102 > max_regs 96%0Apoly_eval [sm_90]: stack 8 > stack 0",
        "::error file=kernels/bad.cu,line=2,title=regbudget bad [sm_90]::"
        'bad.cu(2): error: identifier "x" is undefined%0A  x = 1;%0A  ^',
        "::error file=kernels/poly.cu,line=12,title=regbudget poly_eval [sm_90]::"
        "poly_eval [sm_90]: registers 102 -> 126 (+24) is worse than the baseline; if intended, accept it "
        "with pytest --regbudget-update and commit regbudget-baseline.toml",
    ]


def test_annotation_paths_are_relative_to_github_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_WORKSPACE", "/repo/kernels")
    (line,) = github_annotations([failed_poly()], ROOT)
    assert line.startswith("::error file=poly.cu,line=12,")


def test_annotation_properties_and_message_are_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    rec = record(
        kernel="ns::k<1,2>",
        source="/repo/a,b:c/k.cu",
        outcome="failed",
        violations=["ns::k<1,2> [sm_90]: 100% of it, first", "second"],
    )
    assert github_annotations([rec], ROOT) == [
        "::error file=a%2Cb%3Ac/k.cu,line=12,title=regbudget ns%3A%3Ak<1%2C2> [sm_90]::"
        "ns::k<1,2> [sm_90]: 100%25 of it, first%0Asecond"
    ]


# --- json_text: the JSON report ---------------------------------------------------------------------------


def test_json_round_trips_every_field_sorted() -> None:
    records = [timed(kernel="z"), failed_poly(), errored(), improved(kernel="m")]
    text = json_text(records)
    loaded = json.loads(text)
    expected = sorted(records, key=lambda r: (r["nodeid"], r["kernel"], r["arch"]))
    assert loaded == {"kernels": expected}
    assert [(r["nodeid"], r["kernel"]) for r in loaded["kernels"]] == [
        ("tests/test_kernels.py::test_bad[sm_90]", "bad"),
        (NODEID, "m"),
        (NODEID, "poly_eval"),
        (NODEID, "z"),
    ]
    assert set(loaded["kernels"][0]) == set(ReportRecord.__required_keys__)
    assert text.startswith('{\n  "kernels": [\n    {\n      "nodeid": ')
    assert text.endswith("}\n")


def test_to_record_carries_the_baseline_key_and_options_changed() -> None:
    ptxas = (
        "ptxas info    : Compiling entry function 'poly_eval' for 'sm_90'\n"
        "ptxas info    : Function properties for poly_eval\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 102 registers, used 0 barriers\n"
    )
    report = replace(
        check(
            NODEID,
            "poly_eval",
            "sm_90",
            "/repo/kernels/poly.cu",
            parse_ptxas_output(ptxas)["poly_eval"],
            Limits(),
        ),
        key=("kernels/poly.cu", "poly_eval", "NACC=8", "sm_90", "12.9"),
        options_changed=True,
        compiler="nvrtc",
        release="12.9",
        baseline_status="new-release",
        other_releases=("12.8", "13.5"),
    )
    rec = to_record(report)
    assert (rec["key"], rec["options_changed"]) == (
        ("kernels/poly.cu", "poly_eval", "NACC=8", "sm_90", "12.9"),
        True,
    )
    assert (rec["compiler"], rec["release"], rec["baseline_status"], rec["other_releases"]) == (
        "nvrtc",
        "12.9",
        "new-release",
        ("12.8", "13.5"),
    )
    assert set(rec) == set(ReportRecord.__required_keys__)
    failed = KernelReport(NODEID, "bad", "sm_90", "/repo/kernels/bad.cu", None, error="bad.cu(2): error")
    assert (to_record(failed)["key"], to_record(failed)["options_changed"]) == (None, False)
    assert json.loads(json_text([rec]))["kernels"][0]["key"] == list(rec["key"] or ())


def test_a_record_says_which_callees_spills_its_spills_count() -> None:
    # A kernel that spills 8/8 itself, and calls a function that spills 100/120 (ptxas.with_callees).
    res = replace(
        parse_ptxas_output(SPILL_PTXAS)["k"],
        spill_stores=108,
        spill_loads=128,
        spilling_callees=(Callee("_Z5heavyPKfiii", 100, 120),),
    )
    rec = to_record(check(NODEID, "k", "sm_90", "/repo/kernels/k.cu", res, Limits()))
    assert (rec["spill_stores"], rec["spill_loads"]) == (108, 128)
    assert (rec["spill_stores_callees"], rec["spill_loads_callees"]) == (100, 120)
    assert rec["spilling_callees"] == ({"name": "_Z5heavyPKfiii", "spill_stores": 100, "spill_loads": 120},)
    measured = rec["measured"]
    assert measured is not None
    assert (measured["spill_stores_callees"], measured["spill_loads_callees"]) == (100, 120)
    # A binary records no spills: nor its callees'.
    binary = to_record(check(NODEID, "k", "sm_90", "k.cubin", replace(res, spills_known=False), Limits()))
    assert (binary["spill_stores"], binary["spill_stores_callees"]) == (None, None)
    assert binary["measured"] is not None
    assert "spill_stores_callees" not in binary["measured"]


SPILL_PTXAS = """\
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
"""


def test_the_json_record_holds_the_peak_of_live_registers_where_it_was_read() -> None:
    text = MEASURED.format(kernel="poly_eval", stack=0, spills=0, regs=167)
    report = check(
        NODEID, "poly_eval", "sm_90", "/repo/k.cu", parse_ptxas_output(text)["poly_eval"], Limits()
    )
    assert to_record(report)["peak_live"] is None
    peaked = replace(report, peak_live=PeakLive(158, "poly.cu:23", "poly.cu:17"))
    rec = json.loads(json_text([to_record(peaked)]))["kernels"][0]
    assert rec["peak_live"] == {"live": 158, "where": "poly.cu:23", "loop": "poly.cu:17"}


def test_json_of_no_records_is_an_empty_list() -> None:
    assert json_text([]) == '{\n  "kernels": []\n}\n'


# --- html: the page and its staircase ----------------------------------------------------------------------


def _label_boxes(svg: str) -> list[tuple[float, float, float, float]]:
    """Each marker label's box (left, right, top, bottom) as the chart lays it out: its anchor, its row and
    the width the layout assumes for the 11 px font (charts.label_width)."""
    boxes = []
    for x, y, anchor, text in re.findall(
        r'<text class="marker" x="([\d.]+)" y="([\d.]+)" font-size="11" text-anchor="(\w+)"[^>]*>([^<]*)<',
        svg,
    ):
        w = charts.label_width(text)
        left = float(x) if anchor == "start" else float(x) - w
        boxes.append((left, left + w, float(y) - 11, float(y) + 2))
    return boxes


@pytest.mark.parametrize("now", [2, 24, 102, 200, 250, 255])
@pytest.mark.parametrize("delta", [-12, -6, -3, -2, -1, 1, 2, 3, 6, 12])
def test_staircase_labels_never_overlap_nor_leave_the_chart(now: int, delta: int) -> None:
    base = now - delta
    if not 1 <= base <= 255:
        return
    svg = charts.staircase_svg(record(registers=now, baseline=entry(registers=base)))
    a, b = _label_boxes(svg)
    apart = a[1] <= b[0] or b[1] <= a[0] or a[3] <= b[2] or b[3] <= a[2]
    assert apart, (a, b)
    for left, right, _, _ in (a, b):
        assert left >= 0
        assert right <= charts.WIDTH


def test_staircase_has_the_steps_the_kernel_and_its_cliffs() -> None:
    svg = charts.staircase_svg(record(baseline=entry(registers=96)))
    assert svg.startswith(
        '<svg xmlns="http://www.w3.org/2000/svg" width="640" height="260" viewBox="0 0 640 260" role="img" '
    )
    assert 'aria-label="resident blocks against registers for poly_eval"' in svg
    assert svg.endswith("</svg>")
    (points,) = re.findall(r'<polyline class="steps" [^>]*points="([^"]*)"', svg)
    # Two corners per step, 1..255 registers. sm_90 at 256 threads: 8 blocks up to 32 registers, then 6, 5,
    # 4, 3, 2, and 1 block from 129 to 255.
    assert points.split() == [
        "48.0,16.0",
        "114.5,16.0",
        "114.5,68.0",
        "131.4,68.0",
        "131.4,94.0",
        "148.2,94.0",
        "148.2,120.0",
        "182.0,120.0",
        "182.0,146.0",
        "215.8,146.0",
        "215.8,172.0",
        "317.1,172.0",
        "317.1,198.0",
        "584.0,198.0",
    ]
    assert f'stroke="{charts.KERNEL_COLOUR}"' in svg
    assert ">102 regs</text>" in svg
    assert f'stroke="{charts.BASELINE_COLOUR}" stroke-width="2.5" stroke-dasharray="5,4"/>' in svg
    assert ">baseline 96</text>" in svg
    # 102 + 26 = 128 is the last count with 2 blocks; 102 - 22 = 80 fits 3.
    assert re.findall(
        r'<circle class="cliff" cx="([\d.]+)" cy="([\d.]+)"[^>]*><title>([^<]*)</title>', svg
    ) == [
        ("316.0", "172.0", "loses a block after 128 registers"),
        ("214.7", "146.0", "gains a block at 80 registers"),
    ]
    # Left axis: each block count on the staircase; right axis: its occupancy (8 warps a block of 64).
    left = re.findall(r'text-anchor="end">(\d+)</text>', svg)
    right = re.findall(r'font-size="11">(\d+%)</text>', svg)
    assert left == ["0", "1", "2", "3", "4", "5", "6", "8"]
    assert right == ["0%", "12%", "25%", "38%", "50%", "62%", "75%", "100%"]


def test_staircase_marks_no_baseline_when_it_is_the_same() -> None:
    svg = charts.staircase_svg(record(baseline=entry(registers=102)))
    assert "stroke-dasharray" not in svg
    assert "baseline" not in svg
    assert ">102 regs</text>" in svg


def test_staircase_without_a_cliff_or_a_baseline_has_only_the_kernel_marker() -> None:
    svg = charts.staircase_svg(record(cliff_blocks=None, cliff_grow=None, cliff_shed=None))
    assert 'class="cliff"' not in svg
    assert svg.count("<line ") == 1
    assert ">102 regs</text>" in svg


def test_staircase_marks_no_lost_block_for_a_kernel_on_the_last_step() -> None:
    # sm_90 at 256 threads: 129..255 registers all fit 1 block; 128 fits 2.
    rec = record(
        registers=129, occupancy=0.125, cliff_blocks=1, cliff_grow=126, cliff_shed=1, cliff_blocks_if_shed=2
    )
    svg = charts.staircase_svg(rec)
    assert re.findall(r"<title>([^<]*)</title>", svg) == ["gains a block at 128 registers"]


def test_html_page_has_failures_first_with_a_staircase_where_it_can() -> None:
    hostile = record(
        nodeid="tests/test_kernels.py::test_h[sm_90]",
        kernel="<k&>",
        outcome="failed",
        violations=["<k&> [sm_90]: registers 102 > max_regs 64"],
        diagnosis=["spills <inside> the loop"],
    )
    page = html.render([failed_poly(), errored(), record(kernel="no_launch", launch=None), hostile])
    assert page.startswith('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">')
    assert page.endswith("</script>\n</body></html>\n")
    # The headline: the run's counts, as every face says them.
    assert (
        "<h1>pytest-regbudget</h1>\n<p><strong>4 kernel checks: 2 failed, 1 did not build, 0 warned, "
        "1 passed; against the baseline: 1 changed (1 worse, 0 improved), 0 new, 0 unchanged, 3 with no "
        "baseline</strong></p>"
    ) in page
    assert page.count("<script") == 1  # the index's sort, inline
    assert "<k&>" not in page
    headings = re.findall(r"<h3>(.*?) <span class=\"(\w+)\">", page)
    assert headings == [
        ("bad [sm_90]", "error"),
        ("&lt;k&amp;&gt; [sm_90]", "failed"),
        ("poly_eval [sm_90]", "failed"),
        ("no_launch [sm_90]", "passed"),
    ]
    sections = page.split("<section ")[1:]
    # A compile error has no figures: its log, no table, no chart.
    assert "<li>bad.cu(2): error: identifier &quot;x&quot; is undefined\n  x = 1;\n  ^\n</li>" in sections[0]
    assert "<table>" not in sections[0]
    assert "<svg" not in sections[0]
    assert '<ul class="diag"><li>spills &lt;inside&gt; the loop</li></ul>' in sections[1]
    assert "<svg" in sections[1]
    assert '<tr><th class="l">registers</th><td>126</td><td>102</td></tr>' in sections[2]
    # The baseline's occupancy column: test_html_shows_the_baseline_occupancy_at_the_kernels_launch.
    assert '<tr><th class="l">occupancy</th><td>25.0% at 256</td>' in sections[2]
    assert (
        '<tr><th class="l">occupancy cliff</th>'
        "<td>2 blocks; +2 before losing one; -46 to gain one (3 blocks)</td><td>-</td></tr>"
    ) in sections[2]
    assert ">126 regs</text>" in sections[2]
    assert ">baseline 102</text>" in sections[2]
    # Passed unchanged: its figures in a sentence, no table, no chart.
    assert sections[3].startswith('id="k-no_launch-sm_90-')
    assert "102 registers, spills 0 / 0 B, stack 0 B, smem 0 B, cliff +26/-22" in sections[3]
    assert "<table>" not in sections[3]
    # With every kernel in detail, a kernel without a launch size has its table, still no chart.
    full = html.render([record(kernel="no_launch", launch=None)], all_kernels=True).split("<section ")[1]
    assert '<tr><th class="l">registers</th><td>102</td><td>-</td></tr>' in full
    assert "<svg" not in full


def test_html_shows_the_baseline_occupancy_at_the_kernels_launch() -> None:
    rec = record(baseline=entry(occupancy={"1024 threads": 0.5, "256 threads": 0.375}))
    page = html.render([rec], all_kernels=True)
    assert '<tr><th class="l">occupancy</th><td>25.0% at 256</td><td>37.5%</td></tr>' in page


def test_html_shows_the_time_row_only_for_a_timed_kernel() -> None:
    assert "time on" not in html.render([record()], all_kernels=True)
    row = '<tr><th class="l">time on NVIDIA H200 (ms)</th><td>0.3162</td><td>0.3156</td></tr>'
    assert row in html.render([timed()], all_kernels=True)
    # Unchanged, without the table: the time in the section's sentence.
    assert "time on NVIDIA H200 0.3162 ms (baseline 0.3156)" in html.render([timed()])


@pytest.mark.parametrize(
    ("metric", "old", "new", "delta", "text"),
    [
        ("registers", 64, 72, "+8, +12.5%", "registers 64 -> 72 (+8, +12.5%)"),
        ("spill_stores", 0, 704, "+704", "spill stores 0 -> 704 (+704)"),
        ("occupancy", 0.5, 0.375, "-12.5 pts", "occupancy 50% -> 38% (-12.5 pts)"),
        ("registers", None, 72, "", "registers - -> 72"),
        ("time_ms", 2.0, 1.5, "-0.5, -25.0%", "time (ms) 2.0 -> 1.5 (-0.5, -25.0%)"),
    ],
)
def test_compare_changes_show_the_delta_and_its_percent(
    metric: str, old: object, new: object, delta: str, text: str
) -> None:
    change = compare.Change(metric, old, new)
    assert change.delta() == delta
    assert change.text() == text


def test_compare_markdown_is_bounded_like_a_pull_request_comment() -> None:
    diffs = tuple(
        compare.KernelDiff(
            ("k.cu", f"cub::DeviceRadixSortOnesweepKernel<{i}, float, int>", "-", "sm_90"),
            "old.json",
            "new.json",
            (compare.Change("registers", 64, 72), compare.Change("spill_stores", 0, 16)),
        )
        for i in range(3000)
    )
    text = compare.markdown([compare.Comparison("old.json", "new.json", 5000, diffs, releases=False)])
    assert len(text) <= compare.COMMENT_LIMIT < 65_536
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    shown = len(rows) // 2
    assert 100 < shown < 3000
    assert len(rows) % 2 == 0  # a kernel's rows are kept together
    assert f"... and {3000 - shown} more kernel builds differ: see the JSON reports" in text
    assert rows[0].endswith("| registers | 64 | 72 | +8, +12.5% |")
    # Small comparisons are whole.
    small = compare.markdown([compare.Comparison("a", "b", 5, diffs[:3], releases=False)])
    assert small.count("\n| `") == 6
    # The report files' names are quoted like every outside text: a file name is the user's, or an artifact's.
    assert "#### Compared: `a` -> `b`, 3 of 5 kernel builds differ" in small
    assert "| kernel | arch | metric | `a` | `b` | change |" in small
    assert "more kernel builds" not in small


def test_records_render_the_same_before_and_after_the_json_report() -> None:
    # A run's records hold tuples where a JSON report's hold lists (tuples of strings and numbers leave the
    # collector's walks, which a library of thousands of kernels pays for): every renderer must read both
    # alike, or `regbudget merge` and the run itself would say different things of one kernel.
    roles = replace(
        check(
            NODEID,
            "ws",
            "sm_90",
            "/repo/k.cu",
            parse_ptxas_output(SPILL_PTXAS)["k"],
            Limits(launch=Launch(256)),
        ),
        setmaxnreg=(("inc", 232), ("dec", 40)),
        cluster=(2, 1, 1),
        key=("k.cu", "ws", "-", "sm_90", "12.9"),
        other_releases=("12.8",),
        baseline_status="new-release",
    )
    fresh = [
        judged("faster", 32, was=(40, 0)),
        judged("mixed", 32, 96, was=(40, 0)),
        judged("poly_eval", 126, was=(102, 0), limits=Limits(max_regs=112, launch=Launch(256))),
        judged("warm", 48, was=(40, 0), level="warn"),
        to_record(roles),
        errored(),
    ]
    read = cast(list[ReportRecord], json.loads(json_text(fresh))["kernels"])
    assert any(isinstance(rec["deltas"], tuple) and rec["deltas"] for rec in fresh)  # what this test is about
    for show in (
        lambda rs: markdown_report(rs, rootdir="/repo"),
        lambda rs: summary_lines(rs, width=120),
        lambda rs: summary_table(rs, mode="all", width=120),
        lambda rs: github_annotations(rs, ROOT),
        lambda rs: baseline_lines(rs, [], updating=False),
        lambda rs: html.render(rs, all_kernels=True),
        lambda rs: count_checks(rs),
    ):
        assert show(fresh) == show(read)
