"""Marker values that used to pass silently and build the wrong thing: each is an error with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_regbudget.core.errors import MarkerError
from pytest_regbudget.project.markers import duplicate_markers, parse_marker

BASE = Path("/proj/tests")


def error(**kwargs: object) -> str:
    with pytest.raises(MarkerError) as info:
        parse_marker((), {"source": "k.cu", "kernel": "k", **kwargs}, BASE)
    return str(info.value)


def options(**kwargs: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    budget = parse_marker((), {"source": "k.cu", "kernel": "k", **kwargs}, BASE)
    return budget.options.options, budget.options.ptxas_options


@pytest.mark.parametrize(
    ("defines", "needle"),
    [
        ([("NACC", 4)], "item ('NACC', 4) is not a string (for ('NACC', 4) write 'NACC=4' or {'NACC': 4})"),
        ((("NACC", "4"),), "write 'NACC=4'"),
        (
            ["-DNACC=4"],
            "'-DNACC=4' does not start with a macro name (write 'NACC=4': the -D is added for you)",
        ),
        (["4=NACC"], "does not start with a macro name"),
        ({"NACC": (4,)}, "defines['NACC']=(4,): expected a string, a number or None"),
        ({"DEBUG": True}, "defines['DEBUG']=True would define DEBUG as True: write 1 or 0"),
        ({4: "x"}, "4 is not a macro name"),
        (4, "defines=4: expected a dict or a list of strings"),
    ],
)
def test_defines_accept_only_names_and_name_value_strings(defines: object, needle: str) -> None:
    msg = error(defines=defines)
    assert needle in msg
    assert "write" in msg


def test_valid_defines_still_work() -> None:
    for defines, expected in [
        ({"N": 4, "DEBUG": None, "S": "x y"}, (("N", "4"), ("DEBUG", None), ("S", "x y"))),
        (["N=4", "DEBUG", "F(x)=x*2"], (("N", "4"), ("DEBUG", None), ("F(x)", "x*2"))),
        ("N=4", (("N", "4"),)),
    ]:
        budget = parse_marker((), {"defines": defines}, BASE)
        assert budget.options.defines == expected


def test_an_options_string_is_split_as_a_shell_would() -> None:
    assert options(options="-std=c++17 -O3") == (("-std=c++17", "-O3"), ())
    assert options(options="-DMSG='a b' --use_fast_math") == (("-DMSG=a b", "--use_fast_math"), ())
    assert options(ptxas_options="-O2 -v") == ((), ("-O2", "-v"))
    assert options(options=["-std=c++17", "-O3"]) == (("-std=c++17", "-O3"), ())
    assert options(options="") == ((), ())


def test_an_options_string_that_cannot_be_split() -> None:
    msg = error(options="-DMSG='a b")
    assert "cannot be split into options (No closing quotation)" in msg
    assert "options=['-std=c++17', '-O3']" in msg


@pytest.mark.parametrize(
    ("key", "value", "arch"),
    [
        ("options", "-arch=sm_80", "sm_80"),
        ("options", ["-arch", "sm_75"], "sm_75"),
        ("options", "--gpu-architecture=compute_86", "sm_86"),
        ("options", "-gencode arch=compute_80,code=sm_80", "sm_80"),
        ("options", "--generate-code=arch=compute_80,code=sm_80", "sm_80"),
        ("options", "-code=sm_89", "sm_89"),
        ("options", "--gpu-code=sm_89", "sm_89"),
        ("options", "-Xptxas=-v,-arch=sm_75", "sm_75"),
        ("ptxas_options", "--gpu-name sm_80", "sm_80"),
        ("ptxas_options", "-arch=sm_100a", "sm_100a"),
        ("ptxas_options", ["--gpu-name"], "sm_90"),
    ],
)
def test_an_arch_option_is_rejected_naming_archs_and_the_run_option(
    key: str, value: object, arch: str
) -> None:
    msg = error(**{key: value})
    assert msg.startswith(f"{key}: '")
    assert "sets the target arch, which the run chooses for each test" in msg
    assert f"archs=[{arch!r}] on the marker" in msg
    assert f"--regbudget-arch={arch} (ini regbudget_arch)" in msg


def test_options_that_only_look_like_arch_options_pass() -> None:
    assert options(options="-archive-x --gpu-architecture-like") == (
        ("-archive-x", "--gpu-architecture-like"),
        (),
    )


@pytest.mark.parametrize("archs", [[], (), ""])
def test_empty_archs_is_rejected(archs: object) -> None:
    msg = error(archs=archs)
    assert f"archs={archs!r} selects no arch; drop it to use every arch of the run" in msg


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        (
            "max_regs",
            "64",
            "max_regs='64': expected 1..255 registers per thread; got a string '64': write 64",
        ),
        ("max_regs", 256, "max_regs=256: expected 1..255 registers per thread"),
        ("max_regs", True, "max_regs=True: expected 1..255"),
        (
            "max_regs",
            {"sm_90": "64"},
            "max_regs['sm_90']='64': expected 1..255 registers per thread; got a string",
        ),
        ("spills", "0", "spills='0': expected a whole number >= 0 bytes; got a string '0': write 0"),
        ("launch", "256", "got a string '256': write 256"),
        ("max_time_ratio", "1.1", "got a string '1.1': write 1.1"),
        ("tolerance", {"registers": "4"}, "registers='4': expected a number >= 0; got a string '4': write 4"),
        ("spills", "none", "spills='none': expected a whole number >= 0 bytes"),
    ],
)
def test_numbers_in_quotes_say_how_to_write_them(key: str, value: object, needle: str) -> None:
    msg = error(**{key: value})
    assert needle in msg
    if value == "none":
        assert "got a string" not in msg


def test_min_occupancy_in_quotes() -> None:
    msg = error(min_occupancy="0.5", launch=(256,))
    assert "min_occupancy='0.5': expected a fraction in (0, 1]; got a string '0.5': write 0.5" in msg


def test_duplicate_markers_name_each_and_where() -> None:
    assert duplicate_markers([]) is None
    assert duplicate_markers([("function test_a", (), {"max_regs": 64})]) is None
    msg = duplicate_markers(
        [("function test_a[sm_90]", (), {"max_regs": 64}), ("module test_k.py", (), {"spills": 0})]
    )
    assert msg == (
        "2 regbudget markers apply to this test: regbudget(max_regs=64) on function test_a[sm_90]; "
        "regbudget(spills=0) on module test_k.py. Markers are not merged: put every key into one marker, "
        "on the test or on its class or module"
    )
