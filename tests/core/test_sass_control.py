"""Every branch form of sm_90 to sm_120 is read (core/sass.py `control`): a form the parser did not know once
ended the path there, so Blackwell's loops (`BRA.U !UP0, ...`) were never found and their spills counted as
outside loops."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_regbudget.core import branches, sass, sass_report
from pytest_regbudget.core.branches import Control, control
from pytest_regbudget.core.sass import parse_sass
from pytest_regbudget.core.sass_report import stated_trips, unmatched_trips

DATA = Path(__file__).parent.parent / "data" / "sass"
# nvdisasm 13.5 -c -gi over NVRTC + ptxas 12.9 -lineinfo builds (tests/data/sass/README.md).
LISTINGS = {
    "sm_90": DATA / "spills_sm90.sass",
    "sm_100a": DATA / "spills_sm100a_gi.txt",
    "sm_120": DATA / "spills_sm120_gi.txt",
}
ROLES_SM100A = DATA / "roles_sm100a_gi.txt"


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [
        ("BRA `(.L_x_1)", Control((".L_x_1",), falls_through=False)),
        ("@P0 BRA `(.L_x_1)", Control((".L_x_1",))),
        ("@!P0 BRA `(.L_x_1)", Control((".L_x_1",))),
        ("BRA.U !UP0, `(.L_x_0)", Control((".L_x_0",))),
        ("BRA.U UP1, `(.L_x_9)", Control((".L_x_9",))),
        ("@!P0 BRA P1, `(.L_x_4)", Control((".L_x_4",))),
        ("BRA.DIV UR4, `(.L_x_12)", Control((".L_x_12",))),
        ("@PT BRA `(.L_x_1)", Control((".L_x_1",), falls_through=False)),
        ("@!PT BRA `(.L_x_1)", Control()),
        ("BRA !PT, `(.L_x_1)", Control()),
        ("BRA PT, `(.L_x_1)", Control((".L_x_1",), falls_through=False)),
        (
            "BRX R2 -0x1a0 `(.L_x_3,.L_x_4,.L_x_5)",
            Control((".L_x_3", ".L_x_4", ".L_x_5"), falls_through=False),
        ),
        ("JMX R4 `(.L_x_7)", Control((".L_x_7",), falls_through=False)),
        ("BRX R2 -0x1a0", Control(falls_through=True, read=False)),
        ("EXIT", Control(falls_through=False)),
        ("@P0 EXIT", Control()),
        ("@!P1 RET.REL.NODEC R20 `(hot)", Control()),
        ("RET.REL.NODEC R20 `(hot)", Control(falls_through=False)),
        ("CALL.REL.NOINC `(.L_x_5)", Control((".L_x_5",))),
        ("CALL.ABS.NOINC `(vprintf)", Control()),
        ("BPT.TRAP 0x1", Control(falls_through=False)),
        ("ISETP.GE.AND P0, PT, R2, R3, PT", Control()),
        ("BSSY B0, `(.L_x_3)", Control()),
    ],
)
def test_each_control_form(instruction: str, expected: Control) -> None:
    assert control(instruction) == expected


@pytest.mark.parametrize("arch", list(LISTINGS))
def test_every_control_instruction_of_every_listing_is_read(arch: str) -> None:
    text = LISTINGS[arch].read_text()
    for function in ("hot", "cold"):
        assert parse_sass(text, function).unread == ()
    for other in DATA.glob("*_gi.txt"):
        for report in sass.parse_sass_functions(other.read_text()).values():
            assert report.unread == (), other.name


@pytest.mark.parametrize("arch", ["sm_90", "sm_100a", "sm_120"])
def test_the_runtime_loop_is_found_and_named_by_its_statement_on_every_arch(arch: str) -> None:
    hot = parse_sass(LISTINGS[arch].read_text(), "hot")
    assert [loop.where() for loop in hot.loops] == ["spills.cu:11"]  # `for (int d = 0; d < n; ++d)`
    if arch == "sm_120":
        assert hot.spill_instructions == 0  # 63 registers there: no spills to place
    else:
        expected = {"sm_90": (78, 160), "sm_100a": (76, 156)}[arch]
        assert (hot.spill_instructions_in_loops, hot.spill_instructions) == expected


def test_blackwell_roles_are_reachable_and_the_consumers_loop_is_found() -> None:
    text = ROLES_SM100A.read_text()
    [lines] = [body for name, body in sass._split(text)[0].items() if name == "roles"]
    instrs, labels = sass._instructions(lines)
    index = {ins.address: n for n, ins in enumerate(instrs)}
    successors = [
        branches.successors(control(ins.text), n, len(instrs), labels, index) for n, ins in enumerate(instrs)
    ]
    reached = sass._reachable(successors)
    unreached = [instrs[n].text for n in range(len(instrs)) if n not in reached]
    # All but the trailing self-branch and its padding (before branch forms were read: 19 of 160).
    assert unreached[0].startswith("BRA `(")
    assert set(unreached[1:]) == {"NOP"}
    roles = sass._roles(instrs, successors)
    report = parse_sass(text, "roles")
    assert {loop.where() for loop in report.loops} == {"roles.cu:10"}
    for loop in report.loops:
        inside = [r for ins, r in zip(instrs, roles, strict=True) if loop.contains(ins.address)]
        assert inside
        assert all(r == sass_report.Role("inc", 232) for r in inside)


def test_a_noinline_callee_runs_at_its_call_sites_count() -> None:
    # tests/data/local_share/kernels/noinline_spill.cu: `heavy` (a __noinline__ function whose spills are its
    # own) called from a loop of 16 trips (`#pragma unroll 1`), whose counter is itself spilled.
    report = parse_sass((DATA / "noinline_sm90_gi.txt").read_text(), "noinline_spill")
    assert report.unread == ()
    assert report.externs == ()  # the callee's code is in the kernel's section: not an extern call
    [loop] = report.loops
    assert (loop.where(), loop.trips, loop.known) == ("noinline_spill.cu:30", 16, True)
    callee = [a for a in report.local if a.loop is None and a.line is not None and a.line < 22]
    assert callee
    assert {a.runs for a in callee} == {16.0}
    hottest = [where for where, _ in report.local_lines()[:3]]
    assert all(int(where.rsplit(":", 1)[1]) < 22 for where in hottest)  # heavy's lines, not the kernel's
    assert report.local_share > 0.3


def test_a_stated_count_names_a_loop_by_any_line_of_its_span() -> None:
    trips = (("poly.cu", 18, 50),)
    assert stated_trips("/src/kernels/poly.cu", (17, 19), trips) == 50
    assert stated_trips("/src/kernels/poly.cu", (20,), trips) is None
    assert stated_trips("/src/other.cu", (18,), trips) is None
    assert stated_trips(None, (), 12) == 12
    assert unmatched_trips([("/src/kernels/poly.cu", (20,))], trips) == ["poly.cu:18"]
    assert unmatched_trips([("/src/kernels/poly.cu", (17, 19))], trips) == []
