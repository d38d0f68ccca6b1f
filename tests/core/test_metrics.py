"""The metrics table (core/metrics.py): what reads it agrees with it, and the metric added through it,
local_instructions, from its parsers to the ratchet and the baseline file."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from helpers.data import SAMPLE_ENTRY
from msgspec.structs import replace

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core import metrics
from pytest_regbudget.core.checks import check
from pytest_regbudget.core.cuobjdump import ElfInfo, ResourceUsage, combine_listings
from pytest_regbudget.core.errors import BaselineError
from pytest_regbudget.core.kernel_report import RATCHET_METRICS, KernelReport, compare
from pytest_regbudget.core.limits import Limits
from pytest_regbudget.core.metrics import BY_NAME, METRICS, KernelResources
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.core.ratchet import BaselineRule, entry_of_report, ratchet
from pytest_regbudget.core.sass_report import LocalAccess, SassReport
from pytest_regbudget.project.markers import BUDGET_KEYS, parse_tolerance
from pytest_regbudget.report.record import ReportRecord, to_record

PTXAS = """\
ptxas info    : Compiling entry function 'clean' for 'sm_90'
ptxas info    : Function properties for clean
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
ptxas info    : Compiling entry function 'spilling' for 'sm_90'
ptxas info    : Function properties for spilling
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 48 bytes cumulative stack size
ptxas info    : Compiling entry function 'array' for 'sm_90'
ptxas info    : Function properties for array
    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 0 barriers, 64 bytes cumulative stack size
"""
# The same kernel beside a device function that keeps a frame: any kernel may call it, and its LDL/STL are
# in its caller's SASS.
WITH_CALLEE = (
    PTXAS
    + """\
ptxas info    : Function properties for _Z6helperv
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""
)


# --- the table ------------------------------------------------------------------------------------------


def test_each_metric_has_one_name_field_and_column() -> None:
    for column in ("name", "field", "column", "label"):
        values = [getattr(m, column) for m in METRICS]
        assert len(values) == len(set(values)), column


def test_the_whole_number_metrics_are_the_records_fields_and_the_baselines_keys() -> None:
    fields = set(KernelResources.__struct_fields__)
    entry = set(bl.BaselineEntry.__struct_fields__)
    for m in metrics.COUNTS:
        assert m.name in fields, m.name
        assert m.name in entry, m.name
        assert m.baseline == m.name, m.name  # the file's key is the in-memory name
    assert tuple(m.name for m in metrics.COUNTS) == bl.INT_FIELDS


def test_the_json_record_and_its_check_hold_every_metric() -> None:
    from pytest_regbudget.update import shards

    keys = typing.get_type_hints(ReportRecord)
    checked = shards._Record.__struct_fields__
    for m in METRICS:
        assert m.field in keys, m.field
        assert m.field in checked, m.field


def test_keys_read_off_the_table_keep_their_order() -> None:
    assert metrics.TOLERANCE_KEYS == (
        "registers",
        "spills",
        "spill_stores",
        "spill_loads",
        "stack",
        "smem",
        "occupancy",
        "local_instructions",
    )
    assert BUDGET_KEYS[:6] == ("max_regs", "spills", "spill_stores", "spill_loads", "stack", "smem")
    assert RATCHET_METRICS == (
        "registers",
        "spill_stores",
        "spill_loads",
        "stack",
        "smem",
        "occupancy",
        "local_instructions",
    )


def test_each_key_names_the_json_fields_it_covers() -> None:
    assert metrics.key_fields(metrics.COMPARED) == {
        "registers": ("registers",),
        "spills": ("spill_stores", "spill_loads"),
        "spill_stores": ("spill_stores",),
        "spill_loads": ("spill_loads",),
        "stack": ("stack_frame",),
        "occupancy": ("occupancy",),
    }


def test_a_group_tolerance_covers_its_metrics_and_a_metric_key_wins() -> None:
    loads = BY_NAME["spill_loads"]
    assert metrics.tolerance_of(loads, {"spills": 16}) == 16
    assert metrics.tolerance_of(loads, {"spills": 16, "spill_loads": 4}) == 4
    assert metrics.tolerance_of(BY_NAME["stack"], {"spills": 16}) == 0


def test_the_renamed_fields_read_as_before() -> None:
    res = parse_ptxas_output(PTXAS)["spilling"]
    assert (res.stack, res.stack_frame, res.smem, res.shared_mem) == (48, 48, 0, 0)
    assert (res.spills, res.spill_bytes) == ((40, 36), 76)
    report = check("t", "spilling", "sm_90", "k.cu", res, Limits())
    assert (report.stack_frame, report.shared_mem, report.spill_loads) == (48, 0, 36)
    assert KernelReport("t", "k", "sm_90", "k.cu", None).spill_loads is None


# --- local_instructions: the parsers ---------------------------------------------------------------------


def test_a_kernel_without_local_memory_has_no_local_instructions_without_its_sass() -> None:
    found = parse_ptxas_output(PTXAS)
    assert found["clean"].local_instructions == 0
    # A stack frame holds spills and local arrays alike: their count needs the SASS.
    assert found["spilling"].local_instructions is None
    assert found["array"].local_instructions is None


def test_a_device_function_with_a_frame_leaves_every_kernel_unknown() -> None:
    assert parse_ptxas_output(WITH_CALLEE)["clean"].local_instructions is None


def test_the_sass_counts_them_where_it_was_read() -> None:
    res = parse_ptxas_output(PTXAS)["array"]
    local = tuple(LocalAccess(0x10 * n, "STL" if n % 2 else "LDL", False, None, None, None) for n in range(5))
    sass = SassReport("array", 40, local, ())
    checked = check("t", "array", "sm_90", "k.cu", res, Limits(), sass=sass)
    assert checked.resources is not None
    assert checked.resources.local_instructions == 5
    assert to_record(checked)["local_instructions"] == 5
    # Without it, the record says what the build knows: 0 for a kernel without local memory, else unknown.
    assert to_record(check("t", "array", "sm_90", "k.cu", res, Limits()))["local_instructions"] is None
    clean = parse_ptxas_output(PTXAS)["clean"]
    assert to_record(check("t", "clean", "sm_90", "k.cu", clean, Limits()))["local_instructions"] == 0


def _usage(name: str, stack: int, local: int = 0) -> ResourceUsage:
    return ResourceUsage(name, 0, "sm_90", 32, stack, 0, local, (), f"REG:32 STACK:{stack}")


def test_a_binary_counts_them_from_the_sass_it_read_or_from_no_local_memory() -> None:
    elf = ElfInfo(0, "sm_90", False, "13.0", ("clean", "spilled", "unread", "global_local"))
    usages = [_usage("clean", 0), _usage("spilled", 64), _usage("unread", 64), _usage("global_local", 0, 8)]
    accesses = [{"spilled": {0x10: "STL", 0x20: "LDL.64", 0x30: "LDL"}}]
    kernels = {k.name: k for k in combine_listings(usages, [elf], accesses)}
    assert kernels["clean"].local_instructions == 0
    assert kernels["spilled"].local_instructions == 3
    assert kernels["unread"].local_instructions is None
    assert kernels["global_local"].local_instructions is None  # .nv.local bytes: local memory after all
    assert kernels["spilled"].resources().local_instructions == 3
    # An unlinked object's STACK is 0 until nvlink settles it: no local memory is not known there.
    relocatable = replace(elf, relocatable=True)
    (k,) = combine_listings([_usage("clean", 0)], [relocatable])
    assert k.local_instructions is None


# --- local_instructions: the ratchet and the baseline ------------------------------------------------------


def _report(res: KernelResources) -> KernelReport:
    return replace(
        check("t.py::t", res.name, "sm_90", "k.cu", res, Limits()),
        ptxas_version="12.9.86",
        nvrtc_version="12.9.86",
        compiler="nvrtc",
        release="12.9",
    )


def _counted(n: int | None) -> KernelReport:
    res = replace(parse_ptxas_output(PTXAS)["array"], local_instructions=n)
    return _report(res)


def test_more_local_instructions_than_the_baseline_fail_and_unknown_never_does() -> None:
    old = entry_of_report(_counted(12))
    assert old.local_instructions == 12
    worse = ratchet(_counted(16), BaselineRule(old, recorded=True))
    assert worse.violations[0].startswith("local_instructions 12 -> 16 (+4) is worse than the baseline")
    assert [(d.metric, d.verdict) for d in worse.deltas] == [("local_instructions", "worse")]
    tolerated = ratchet(_counted(16), BaselineRule(old, recorded=True, tolerance={"local_instructions": 4}))
    assert tolerated.violations == []
    # A run that did not read the SASS knows no count: no delta, nothing fails.
    unread = ratchet(_counted(None), BaselineRule(old, recorded=True))
    assert (unread.deltas, unread.violations) == ([], [])
    assert parse_tolerance("local_instructions=2", "ini") == {"local_instructions": 2.0}


def test_an_entry_written_before_the_metric_is_unchanged_by_it(tmp_path: Path) -> None:
    # No line in the file: 0 is not written, and an entry of an older version has none.
    clean = entry_of_report(_report(parse_ptxas_output(PTXAS)["clean"]))
    assert clean.local_instructions is None
    assert "local_instructions" not in clean.to_toml()
    # An entry of a kernel with local memory, as an older version wrote it: no count, so no change.
    older = {k: v for k, v in entry_of_report(_counted(12)).to_toml().items() if k != "local_instructions"}
    assert compare(bl.entry_from_table(older), entry_of_report(_counted(12)), {}) == []
    path = tmp_path / "b.toml"
    key: bl.Key = ("k.cu", "clean", bl.NO_VARIANT, "sm_90", "12.9")
    bl.update(path, {key: clean}, set(), lock_dir=tmp_path)
    text = path.read_text()
    counts = bl.update(path, {key: clean}, set(), lock_dir=tmp_path)
    assert (counts.unchanged, counts.updated, path.read_text()) == (1, 0, text)


def test_a_count_round_trips_and_an_update_that_did_not_read_it_keeps_it(tmp_path: Path) -> None:
    counted = replace(SAMPLE_ENTRY, local_instructions=24)
    assert "local_instructions = 24" in bl.dumps(bl.Baseline({("k.cu", "k", "-", "sm_90", "12.9"): counted}))
    assert bl.entry_from_table(counted.to_toml()) == counted
    unread = replace(SAMPLE_ENTRY, local_instructions=None)
    assert unread.merged(counted).local_instructions == 24
    # Another build (other numbers): the old count is not this one's.
    assert replace(unread, stack=32).merged(counted).local_instructions is None


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_a_count_in_the_file_is_a_whole_number(bad: object) -> None:
    table = {**SAMPLE_ENTRY.to_toml(), "local_instructions": bad}
    with pytest.raises(BaselineError, match=r"local_instructions = .*expected a whole number >= 0"):
        bl.entry_from_table(table, "entry")
