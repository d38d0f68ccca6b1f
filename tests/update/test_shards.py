"""A JSON report read back (update/shards.py): each record's metrics checked by the metrics table's types,
one error naming the file, the record and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_regbudget.core.checks import check
from pytest_regbudget.core.limits import Limits
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.report.record import to_record
from pytest_regbudget.report.writers import JSON_FORMAT, JSON_VERSION
from pytest_regbudget.update.shards import BadReport, read

PTXAS = """\
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
"""


def _record() -> dict[str, object]:
    res = parse_ptxas_output(PTXAS)["k"]
    return dict(to_record(check("t.py::t", "k", "sm_90", "k.cu", res, Limits())))


def _written(tmp_path: Path, rec: dict[str, object]) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"format": JSON_FORMAT, "version": JSON_VERSION, "kernels": [rec]}))
    return path


def test_a_record_reads_with_or_without_the_metrics_a_report_may_leave_out(tmp_path: Path) -> None:
    rec = _record()
    assert read(_written(tmp_path, rec)).records[0]["spill_loads"] == 8
    older = {k: v for k, v in rec.items() if k not in ("local_instructions", "const_mem", "occupancy")}
    assert read(_written(tmp_path, older)).records[0]["registers"] == 32


def test_a_report_of_version_5_reads_without_the_callees_spills(tmp_path: Path) -> None:
    # Version 6 added spill_stores_callees, spill_loads_callees and spilling_callees to each record.
    rec = _record()
    assert (rec["spill_stores_callees"], rec["spill_loads_callees"], rec["spilling_callees"]) == (0, 0, ())
    older = {k: v for k, v in rec.items() if "callees" not in k}
    path = tmp_path / "v5.json"
    path.write_text(json.dumps({"format": JSON_FORMAT, "version": 5, "kernels": [older]}))
    assert read(path).records[0]["spill_stores"] == 8


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("spill_loads", -8, r"Expected `int` >= 0 - at `\$.spill_loads`"),
        ("registers", 256, r"Expected `int` <= 255 - at `\$.registers`"),
        ("local_instructions", -1, r"Expected `int` >= 0 - at `\$.local_instructions`"),
        ("occupancy", 1.5, r"Expected `float` <= 1.0 - at `\$.occupancy`"),
    ],
)
def test_a_metric_out_of_its_units_range_is_refused(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    with pytest.raises(BadReport, match=r"kernels\[0\] \(t.py::t\): " + message):
        read(_written(tmp_path, {**_record(), field: value}))


def test_a_metric_two_builds_must_agree_on_must_be_there(tmp_path: Path) -> None:
    rec = {k: v for k, v in _record().items() if k != "stack_frame"}
    with pytest.raises(BadReport, match=r"missing required field `stack_frame`"):
        read(_written(tmp_path, rec))


def test_a_record_without_the_fields_the_comment_reads_reads_as_one_that_says_nothing(tmp_path: Path) -> None:
    # A report of a development version, or a hand-made one: what the Markdown comment reads is filled in.
    filled = ("violations", "deltas", "other_releases", "ptxas_messages", "launch", "noise", "baseline")
    rec = {k: v for k, v in _record().items() if k not in filled}
    read_back = read(_written(tmp_path, rec)).records[0]
    assert [read_back[k] for k in filled] == [[], [], [], [], None, None, None]  # type: ignore[literal-required]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("launch", ["256"], r"Expected `int`, got `str` - at `\$.launch\[0\]`"),
        ("deltas", [{"metric": "registers"}], r"missing required field `baseline` - at `\$.deltas\[0\]`"),
        ("violations", "@someone", r"Expected `array`, got `str` - at `\$.violations`"),
        ("outcome", 1, r"Expected `str`, got `int` - at `\$.outcome`"),
    ],
)
def test_a_field_the_comment_reads_of_the_wrong_type_is_refused(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    with pytest.raises(BadReport, match=r"kernels\[0\] \(t.py::t\): .*" + message):
        read(_written(tmp_path, {**_record(), field: value}))
