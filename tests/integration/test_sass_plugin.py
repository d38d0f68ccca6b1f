"""SASS diagnostics end to end: nvdisasm from the wheel over the cubins ptxas measured."""

from __future__ import annotations

import pytest
from helpers.data import KERNELS
from helpers.runs import run_json

from pytest_regbudget.tools import nvdisasm as disasm

SPILLS = KERNELS / "spills.cu"
VARIOUS = KERNELS / "various.cu"
HUNGRY = KERNELS / "hungry.cu"


def write(pytester: pytest.Pytester, body: str) -> None:
    pytester.makepyfile(test_k=f"import pytest\nSPILLS = {str(SPILLS)!r}\nVARIOUS = {str(VARIOUS)!r}\n{body}")


def test_hot_spills_fail_on_the_loop_kernel_and_pass_on_the_branch_kernel(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        """
@pytest.mark.regbudget(source=SPILLS, kernel="hot", hot_spills=0)
def test_hot():
    pass

@pytest.mark.regbudget(source=SPILLS, kernel="cold", hot_spills=0)
def test_cold():
    pass
""",
    )
    result, records = run_json(pytester)
    result.assert_outcomes(passed=1, failed=1)
    hot, cold = sorted(records, key=lambda r: r["kernel"], reverse=True)
    assert hot["spill_instructions_in_loops"] > 0
    assert hot["spill_instructions"] == hot["local_instructions"]
    assert cold["spill_instructions_in_loops"] == 0
    assert cold["spill_instructions"] > 0
    assert cold["spill_stores"] > 0  # ptxas alone cannot tell the two apart
    result.stdout.fnmatch_lines(
        [
            f"hot [[]sm_90[]]: spill instructions in loops {hot['spill_instructions_in_loops']} >"
            " hot_spills 0 (loop at spills.cu:11)",
            "    ptxas: *",
            f"    diagnosis: {hot['spill_instructions_in_loops']} spill/refill instruction(s) inside the loop"
            " at spills.cu:11 run on every iteration*",
        ]
    )
    # Behind `flag == 12345`: a few per cent of what a thread runs, stated, and never called cheap.
    assert cold["diagnosis"][0].startswith("local loads/stores: about ")
    assert cold["local_share"] < 0.05
    assert hot["local_share"] > 0.3
    assert not any("cheap" in d for d in cold["diagnosis"] + hot["diagnosis"])
    result.stdout.fnmatch_lines(["test_hot *hot *sm_90*32*/*?/160*FAILED*"])


def test_local_array_is_diagnosed_at_its_line_without_spills(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        """
@pytest.mark.regbudget(source=VARIOUS, kernel="local_lookup", stack=0)
def test_local():
    pass
""",
    )
    result, (rec,) = run_json(pytester, "--regbudget-sass")
    result.assert_outcomes(failed=1)
    assert rec["spill_stores"] == rec["spill_loads"] == 0
    assert rec["spill_instructions"] == 0
    assert rec["local_instructions"] > 0
    result.stdout.fnmatch_lines(
        [
            "local_lookup [[]sm_90[]]: stack frame 1,024 bytes > stack 0",
            "    ptxas: *",
            "    diagnosis: a local array lives in local memory (1024 bytes of stack, no spills), accessed at"
            " various.cu:25, various.cu:26: almost always an index the compiler cannot fold. Fix: a"
            " compile-time trip count*shared memory.",
        ]
    )


def test_line_info_does_not_change_what_ptxas_reports(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        f"""
@pytest.mark.parametrize("n", [8, 64])
@pytest.mark.regbudget(source={str(HUNGRY)!r}, kernel="poly_eval", launch=(256,))
def test_x(regbudget, n):
    regbudget.compile({str(HUNGRY)!r}, "poly_eval", defines={{"NACC": n}})
""",
    )
    _, plain = run_json(pytester)
    _, with_sass = run_json(pytester, "--regbudget-sass")
    keys = ("registers", "spill_stores", "spill_loads", "stack_frame", "shared_mem")
    assert [[r[k] for k in keys] for r in plain] == [[r[k] for k in keys] for r in with_sass]
    assert all(r["spill_instructions"] is not None for r in with_sass)


def test_cliff_in_summary_and_json_matches_the_calculator(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        f"""
@pytest.mark.regbudget(source={str(HUNGRY)!r}, kernel="poly_eval", launch=(128,))
def test_x():
    pass
""",
    )
    result, (rec,) = run_json(pytester, "--regbudget-gpu=off")
    from pytest_regbudget.core.occupancy import occupancy

    def blocks(r: int) -> int:
        return occupancy("sm_90", r, 128).active_blocks

    assert rec["cliff_blocks"] == blocks(rec["registers"]) == rec["active_blocks"]
    assert blocks(rec["registers"] + rec["cliff_grow"] + 1) < rec["cliff_blocks"]
    assert blocks(rec["registers"] - rec["cliff_shed"]) == rec["cliff_blocks_if_shed"] > rec["cliff_blocks"]
    result.stdout.fnmatch_lines([f"test_x *sm_90*+{rec['cliff_grow']}/-{rec['cliff_shed']}*ok"])


def test_launch_bounds_and_maxrregcount_diagnoses(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        f"""
@pytest.mark.regbudget(source={str(HUNGRY)!r}, kernel="poly_eval",
                       defines={{"BOUNDS": "__launch_bounds__(256)"}}, ptxas_options=["-maxrregcount=32"],
                       max_regs=32)
def test_cap():
    pass
""",
    )
    result, (rec,) = run_json(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "    diagnosis: -maxrregcount=32 does not apply: the kernel's __launch_bounds__ win*"
            f"(it uses {rec['registers']} > 32 registers)*"
        ]
    )


def test_sass_without_nvdisasm_names_the_extra(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a machine without the nvidia-cuda-nvdisasm wheel and no nvdisasm in the toolkit or on PATH.
    monkeypatch.setattr(disasm, "find_nvdisasm", lambda toolkit: None)
    write(
        pytester,
        """
@pytest.mark.regbudget(source=SPILLS, kernel="hot", hot_spills=0)
def test_hot():
    pass
""",
    )
    result, _ = run_json(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*need nvdisasm*Fix: pip install 'pytest-regbudget[[]sass[]]'*"])
    result = pytester.runpytest("--regbudget-sass")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*need nvdisasm*pytest-regbudget[[]sass[]]*"])


def test_local_instructions_are_a_ratchet_where_the_sass_is_read(pytester: pytest.Pytester) -> None:
    # The metric added through the metrics table alone (issue 41): recorded where the SASS was read, held
    # as a ratchet against the baseline, and never a change where it was not read.
    pytester.makeini("[pytest]\nregbudget_baseline = bl.toml\n")
    write(
        pytester,
        """
@pytest.mark.regbudget(source=SPILLS, kernel="hot")
def test_hot():
    pass

@pytest.mark.regbudget(source=VARIOUS, kernel="saxpy")
def test_clean():
    pass
""",
    )
    result, records = run_json(pytester, "--regbudget-update", "--regbudget-sass")
    result.assert_outcomes(passed=2)
    by_kernel = {r["kernel"]: r for r in records}
    count = by_kernel["hot"]["local_instructions"]
    assert count > 0
    assert by_kernel["saxpy"]["local_instructions"] == 0  # no local memory: no SASS needed to know it
    baseline = pytester.path / "bl.toml"
    text = baseline.read_text()
    assert text.count("local_instructions = ") == 1  # the clean kernel's 0 is not written
    assert f"local_instructions = {count}\n" in text

    # Without the SASS the count is unknown: the strict run passes and the file stays as it was.
    result, records = run_json(pytester, "--regbudget-strict")
    result.assert_outcomes(passed=2)
    assert {r["kernel"]: r["local_instructions"] for r in records} == {"hot": None, "saxpy": 0}
    result, _ = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(passed=2)
    assert baseline.read_text() == text

    # A count above the entry's is a regression, named as one, unless tolerated.
    baseline.write_text(
        text.replace(f"local_instructions = {count}\n", f"local_instructions = {count - 4}\n")
    )
    result, _ = run_json(pytester, "--regbudget-sass")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [f"*local_instructions {count - 4} -> {count} (+4) is worse than the baseline*"]
    )
    result, _ = run_json(pytester, "--regbudget-sass", "-o", "regbudget_tolerance=local_instructions=4")
    result.assert_outcomes(passed=2)


def test_hot_spills_fail_on_blackwell_as_on_hopper(pytester: pytest.Pytester) -> None:
    # sm_100a and sm_103a write the loop's back edge as `BRA.U !UP0, ...`: read as a branch that may fall
    # through, the loop is found and named by its statement (the back edge itself carries the body's line
    # there); sm_120 as well. `cold`'s spills behind `flag == 12345` stay a small share on every arch.
    write(
        pytester,
        """
@pytest.mark.regbudget(source=SPILLS, kernel="hot", hot_spills=0)
def test_hot():
    pass

@pytest.mark.regbudget(source=SPILLS, kernel="cold", max_local_share=0.05)
def test_cold():
    pass
""",
    )
    archs = ("sm_90", "sm_100a", "sm_103a", "sm_120")
    result, records = run_json(pytester, f"--regbudget-arch={','.join(archs)}")
    # sm_120 runs at most 1536 threads per SM: two blocks of 1024 cannot be resident, ptxas says so and
    # gives `hot` 63 registers, which it needs no spill for.
    result.assert_outcomes(passed=5, failed=3)
    by = {(r["kernel"], r["arch"]): r for r in records}
    assert (
        by["hot", "sm_100a"]["spill_instructions_in_loops"],
        by["hot", "sm_100a"]["spill_instructions"],
    ) == (
        76,
        156,
    )
    on_hopper = {lp["where"] for lp in by["hot", "sm_90"]["loops"]}
    for arch in archs:
        hot, cold = by["hot", arch], by["cold", arch]
        assert {lp["where"] for lp in hot["loops"]} == on_hopper, arch
        assert cold["local_share"] < 0.05, arch
        assert not any("costly" in d for d in cold["diagnosis"]), arch
        if arch == "sm_120":
            assert hot["spill_stores"] == hot["local_share"] == 0
            continue
        assert hot["local_share"] > 0.3, arch
        result.stdout.fnmatch_lines(
            [f"hot [[]{arch}[]]: spill instructions in loops * > hot_spills 0 (loop at spills.cu:11)"]
        )


def test_one_source_loop_in_three_copies_is_named_once_with_each_copys_count(
    pytester: pytest.Pytester,
) -> None:
    # tests/kernels/copies.cu: the loop of an inlined template helper, instantiated in three branches of a
    # switch (40, 44 and 48 live values: the first fits its registers, the others spill in the loop).
    pytester.makepyfile(
        test_k=f"""
import pytest

@pytest.mark.regbudget(source={str(KERNELS / "copies.cu")!r}, kernel="copies", hot_spills=0)
def test_copies():
    pass
"""
    )
    result, [rec] = run_json(pytester)
    result.assert_outcomes(failed=1)
    [loop] = rec["loops"]
    assert (loop["where"], loop["copies"], loop["known"]) == ("copies.cu:8", 3, False)
    [sentence] = [d for d in rec["diagnosis"] if "inside the loop at copies.cu:8" in d]
    counts = sentence.split(", in 3 copies (", 1)[1].split(" per iteration)", 1)[0]
    first, last = counts.split(" and ")
    assert sum(map(int, [*first.split(", "), last])) == rec["spill_instructions_in_loops"]
    assert (
        "assumed 16 trips where the code does not fix the count (loop at copies.cu:8; state the count with "
        'loop_trips={"copies.cu:8": N})' in rec["diagnosis"][0]
    )
