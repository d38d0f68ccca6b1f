"""The SASS parser on recorded nvdisasm output, the diagnosis rules, and the occupancy cliff."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from msgspec.structs import replace

from pytest_regbudget.core.diagnosis import diagnose
from pytest_regbudget.core.errors import SassError
from pytest_regbudget.core.occupancy import occupancy, register_cliff
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.core.sass import (
    instruction,
    local_opcode,
    parse_sass,
    parse_sass_functions,
    without_spills,
)

DATA = Path(__file__).parents[1] / "data" / "sass"
# nvdisasm 13.5 (-c -g) over cubins that ptxas 12.9 built for sm_90 with -lineinfo (see README.md there).
SPILLS = (DATA / "spills_sm90.sass").read_text()
VARIOUS = (DATA / "various_sm90.sass").read_text()


def test_spills_inside_the_runtime_loop() -> None:
    hot = parse_sass(SPILLS, "hot")
    assert hot.spill_instructions == 160
    assert hot.spill_instructions_in_loops == 78
    assert hot.local_instructions == 160  # every local access of `hot` is a spill or refill
    assert [lp.where() for lp in hot.loops] == ["spills.cu:11"]


def test_spills_confined_to_a_rare_branch_are_outside_loops() -> None:
    cold = parse_sass(SPILLS, "cold")
    assert cold.spill_instructions == 388
    assert cold.spill_instructions_in_loops == 0
    assert all(lp.where() == "spills.cu:25" for lp in cold.loops)
    assert {a.line for a in cold.local if a.spill} <= set(range(26, 36))


def test_local_array_accesses_are_not_spills() -> None:
    local = parse_sass(VARIOUS, "local_lookup")
    assert local.spill_instructions == 0
    assert local.local_instructions == 9
    assert {a.where() for a in local.local} == {"various.cu:25", "various.cu:26"}
    assert {a.opcode for a in local.local} == {"STL", "LDL"}


def test_unmarked_output_falls_back_to_stack_pointer_accesses() -> None:
    old_style = SPILLS.replace('(*"SpillRefill"*)', "")
    hot = parse_sass(old_style, "hot")
    assert hot.spill_instructions == 160
    local = parse_sass(VARIOUS.replace('(*"SpillRefill"*)', ""), "local_lookup")
    assert local.spill_instructions == 0


def test_one_line_reader_for_nvdisasm_and_cuobjdump() -> None:
    # nvdisasm -c -g (a spill mark before the ;) and cuobjdump --dump-sass (the encoding after it).
    nvdisasm = (
        '        /*0840*/                   STL [R1+0xa8], R0                          (*"SpillRefill"*);'
    )
    cuobjdump = "        /*0050*/              @!P0 LDL.LU.64 R2, [R1+0x8] ;         /* 0x0000080001027983 */"
    assert instruction(nvdisasm) == (
        0x840,
        'STL [R1+0xa8], R0                          (*"SpillRefill"*)',
        "",
    )
    address, text, rest = instruction(cuobjdump) or (0, "", "")
    assert (address, text, rest.strip()) == (0x50, "@!P0 LDL.LU.64 R2, [R1+0x8]", "/* 0x0000080001027983 */")
    assert local_opcode(text) == "LDL.LU.64"
    assert local_opcode("STL.128 [R1], R4") == "STL.128"
    assert local_opcode("LDG.E R2, desc[UR4][R2.64]") is None
    assert instruction("        Function : hot") is None


def test_unknown_function_names_what_is_there() -> None:
    with pytest.raises(SassError, match=r"no function 'warm' \(it has: .*hot"):
        parse_sass(SPILLS, "warm")


RESOURCES = parse_ptxas_output(
    "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
    "ptxas info    : Function properties for k\n"
    "    168 bytes stack frame, 320 bytes spill stores, 320 bytes spill loads\n"
    "ptxas info    : Used 32 registers, used 0 barriers, 168 bytes cumulative stack size\n"
)["k"]


def test_diagnosis_names_the_hot_loop() -> None:
    share, sentence, outside = diagnose(RESOURCES, "sm_90", parse_sass(SPILLS, "hot"))
    assert share.startswith(
        "local loads/stores: about 49% of executed instructions (estimated from the SASS)"
    )
    assert ": costly; hottest spills.cu:13 (74%)" in share
    assert (
        "assumed 16 trips where the code does not fix the count (loop at spills.cu:11; state the count with "
        'loop_trips={"spills.cu:11": N})'
    ) in share
    assert sentence.startswith("78 spill/refill instruction(s) inside the loop at spills.cu:11 run on every")
    assert "(78 of 160 spill instructions are in loops)" in sentence
    assert "in the producer" not in sentence  # no setmaxnreg, no role
    assert outside.startswith("82 spill instruction(s) are outside loops (at spills.cu:")


def test_diagnosis_of_branch_spills_states_their_share_and_says_they_cost_little() -> None:
    # The spills sit behind `flag == 12345`: the equal way of an integer compared with a constant is taken
    # to run 1 time in 1024, so they are a fraction of a per cent of what a thread runs, not half.
    share, sentence = diagnose(RESOURCES, "sm_90", parse_sass(SPILLS, "cold"))
    assert share.startswith(
        "local loads/stores: about 0.2% of executed instructions (estimated from the SASS)"
    )
    assert ": negligible; " in share
    assert sentence.startswith("all 388 spill instruction(s) are outside loops (at spills.cu:")
    assert sentence.endswith("they run at most once per thread, and cost little.")


def test_straight_line_spills_above_the_lowest_band_are_never_said_to_cost_little() -> None:
    # The same spills, in a kernel where little else runs: the share, not where they sit, decides.
    cold = parse_sass(SPILLS, "cold")
    for executed, band in ((cold.local_executed * 20, "moderate"), (cold.local_executed * 2, "costly")):
        _, sentence = diagnose(RESOURCES, "sm_90", replace(cold, executed=executed))
        assert sentence.endswith(
            f"but local traffic is about {100 / (executed / cold.local_executed):.0f}% of "
            f"what the thread runs ({band})."
        )
        assert "cost little" not in sentence
        assert "cheap" not in sentence


def test_diagnosis_of_a_demoted_local_array_names_its_line() -> None:
    stack_only = replace(RESOURCES, spill_stores=0, spill_loads=0, stack=1024)
    share, sentence = diagnose(stack_only, "sm_90", parse_sass(VARIOUS, "local_lookup"))
    # Its loop of 32 trips is fixed in the code (a counter from 0 by 1 below 32), so the count is known.
    assert share.startswith("local loads/stores: about 10% of executed instructions")
    assert "hottest various.cu:25 (100%)" in share
    assert "assumed" not in share
    assert "a local array lives in local memory (1024 bytes of stack, no spills)" in sentence
    assert "accessed at various.cu:25, various.cu:26" in sentence
    assert "compile-time trip count" in sentence
    assert "shared memory" in sentence
    (without_sass,) = diagnose(stack_only, "sm_90", None)
    assert "run with --regbudget-sass to name the line" in without_sass


def test_diagnosis_of_an_unreachable_minimum_of_blocks() -> None:
    bounded = replace(
        RESOURCES, smem=48 * 1024, max_threads=256, min_blocks_per_sm=8, spill_stores=8, spill_loads=8
    )
    sentences = diagnose(bounded, "sm_90", None)
    assert (
        "__launch_bounds__(256, 8) asks for 8 blocks per SM, but 49,152 bytes of shared memory per block "
        "allow only 4 on sm_90: the minimum is unreachable and only caps registers (and causes 16 bytes of "
        "spills). Fix: lower it to 4 or drop it."
    ) in sentences


def test_diagnosis_of_maxrregcount_under_launch_bounds() -> None:
    bounded = replace(RESOURCES, registers=232, max_threads=256, spill_stores=0, spill_loads=0, stack=0)
    (sentence,) = diagnose(bounded, "sm_90", None, ptxas_options=["-maxrregcount=32"])
    assert sentence.startswith("-maxrregcount=32 does not apply: the kernel's __launch_bounds__ win")
    assert "(it uses 232 > 32 registers)" in sentence


def test_cliff_agrees_with_the_calculator() -> None:
    rng = random.Random(20261129)
    for _ in range(300):
        arch = rng.choice(["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_120"])
        regs, threads = rng.randint(16, 255), rng.choice([64, 128, 192, 256, 384, 512])
        smem = rng.choice([0, 4096, 20000])

        def blocks(r: int, arch: str = arch, threads: int = threads, smem: int = smem) -> int:
            return occupancy(arch, r, threads, smem).active_blocks

        cliff = register_cliff(arch, regs, threads, smem)
        assert cliff.blocks == blocks(regs)
        top = regs + cliff.grow
        assert all(blocks(r) == cliff.blocks for r in range(regs, top + 1))
        assert top == 255 or blocks(top + 1) < cliff.blocks
        if cliff.shed is None:
            assert all(blocks(r) <= cliff.blocks for r in range(1, regs))
        else:
            assert cliff.blocks_if_shed is not None
            assert blocks(regs - cliff.shed) == cliff.blocks_if_shed > cliff.blocks
            assert all(blocks(r) == cliff.blocks for r in range(regs - cliff.shed + 1, regs + 1))


GI = Path(__file__).parents[1] / "data" / "sass"


def test_a_loop_is_named_by_its_own_lines_not_an_inlined_helpers() -> None:
    """nvdisasm -gi prints an inlined helper's lines with their call site: the loop at lines 7-8 calls a
    helper defined at line 2, and is named 7-8 (with -g alone, the range would start at the helper)."""
    text = (GI / "inlined_helper_sm90_gi.txt").read_text()
    assert 'line 2 inlined at "inlined_helper.cu", line 8' in text
    report = parse_sass(text, "hot")
    assert report.loops
    assert {loop.where() for loop in report.loops} == {"inlined_helper.cu:7"}
    assert all(loop.depth == 1 for loop in report.loops)


def test_setmaxnregs_allocation_retry_is_not_a_loop() -> None:
    text = (GI / "roles_sm90a_gi.txt").read_text()
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL" in text
    report = parse_sass(text, "roles")
    # Only the kernel's own loop (roles.cu line 10), never one at the kernel's first line around USETMAXREG.
    assert {loop.where() for loop in report.loops} == {"roles.cu:10"}


# nvdisasm 13.5 -c -gi over a real nvcc 13.5 -lineinfo build of tests/kernels/ws_gemm (sm_90a): CUTLASS's
# shape, every collective inlined into one `op(params, smem)` call (ws_gemm.cu:8).
WS_GEMM = (DATA / "ws_gemm_sm90a_gi.txt").read_text()
WS_ASSERT = (DATA / "ws_gemm_assert_sm90a_gi.txt").read_text()
ENTRY = "_Z13device_kernelI10GemmKernelEv6Params"
WS_RESOURCES = replace(RESOURCES, arch="sm_90a", registers=168, spill_stores=416, spill_loads=420, stack=448)


def test_a_loop_of_an_inlined_library_header_is_named_in_that_header() -> None:
    # Each location is printed one level per comment, innermost first: the spill's own line is in the
    # collective, its call chain goes through kernel_op.hpp to ws_gemm.cu:8.
    assert 'File "ws_gemm/collective.hpp", line 22 inlined at "ws_gemm/kernel_op.hpp", line 11' in WS_GEMM
    report = parse_sass(WS_GEMM, ENTRY)
    in_loops = [a for a in report.local if a.spill and a.loop is not None]
    assert in_loops
    assert {a.loop.where() for a in in_loops if a.loop} == {"collective.hpp:22"}
    assert {a.file for a in in_loops} == {"ws_gemm/collective.hpp"}
    assert all(lp.file != "ws_gemm/ws_gemm.cu" for lp in report.loops)


def test_roles_come_from_the_machine_code_over_the_control_flow() -> None:
    report = parse_sass(WS_GEMM, ENTRY)
    assert report.setmaxnreg == (("inc", 232), ("dec", 40))  # TRY_ALLOC 0xe8, DEALLOC 0x28
    # The producer's code follows the consumers' EXIT in the listing; every spill is the producer's.
    assert {a.role.describe() for a in report.local if a.spill and a.role} == {
        "producer (after setmaxnreg.dec 40)"
    }
    assert all(a.role is not None for a in report.local if a.spill)
    # The consumers' assert is a call in the consumer role; nvdisasm declares what it calls.
    (call,) = report.calls
    assert call.role is not None
    assert call.role.describe() == "consumer (after setmaxnreg.inc 232)"
    assert call.where() == "collective.hpp:34"
    assert report.externs == ("__assertfail",)
    # Without the USETMAXREG instructions (ptxas dropped the roles) nothing has a role.
    dropped = "\n".join(line for line in WS_GEMM.splitlines() if "USETMAXREG" not in line)
    bare = parse_sass(dropped, ENTRY)
    assert bare.setmaxnreg == ()
    assert all(a.role is None for a in bare.local)


def test_producer_spills_advise_the_dec_target_and_an_assert_in_the_loop_advises_ndebug() -> None:
    _, hot, outside = diagnose(WS_RESOURCES, "sm_90a", parse_sass(WS_GEMM, ENTRY))
    assert hot.startswith(
        "101 spill/refill instruction(s) inside the loop at collective.hpp:22, in the producer"
    )
    assert "Fix: raise the dec target (to 48 or more" in hot
    assert "NDEBUG" not in hot
    assert outside.startswith(
        "60 spill instruction(s) are outside loops (at collective.hpp:21, collective.hpp:31;"
    )
    # The consumers' assert saves none of the producer's registers: not blamed.
    checked = replace(WS_RESOURCES, spill_stores=64, spill_loads=64, stack=128)
    _, hot, *_ = diagnose(checked, "sm_90a", parse_sass(WS_ASSERT, ENTRY))
    assert "inside the loop at collective.hpp:22, in the producer (after setmaxnreg.dec 40)" in hot
    assert "The loop calls __assertfail (assert() compiled without NDEBUG) at collective.hpp:26" in hot
    assert hot.endswith('Fix: build with -DNDEBUG (defines={"NDEBUG": 1}, or -DNDEBUG in the nvcc flags).')


def test_without_spill_bytes_no_local_access_is_a_spill() -> None:
    unmarked = WS_GEMM.replace('(*"SpillRefill"*)', "")
    assert parse_sass(unmarked, ENTRY).spill_instructions > 0  # the stack-pointer fallback
    assert parse_sass(unmarked, ENTRY, spills=False).spill_instructions == 0


OUT_OF_LINE = """
	.section	.text.k,"ax",@progbits
k:
	//## File "k.cu", line 1
        /*0000*/                   S2R R0, SR_TID.X ;
.L_x_1:
	//## File "k.cu", line 3
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R2], R3 ;
        /*0020*/              @!P0 BRA `(.L_x_9) ;
.L_x_2:
	//## File "k.cu", line 4
        /*0030*/                   STL [R1], R0                  (*"SpillRefill"*);
	//## File "k.cu", line 3
        /*0040*/               @P1 BRA `(.L_x_1) ;
	//## File "k.cu", line 6
        /*0050*/                   LDL R0, [R1]                  (*"SpillRefill"*);
        /*0060*/                   EXIT ;
.L_x_9:
	//## File "barrier.h", line 9 inlined at "k.cu", line 3
        /*0070*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R2], R3 ;
        /*0080*/              @!P0 BRA `(.L_x_9) ;
        /*0090*/                   BRA `(.L_x_2) ;
.L_x_3:
        /*00a0*/                   BRA `(.L_x_3);
"""


def test_loops_are_the_control_flows_not_the_listings_spans() -> None:
    """A barrier wait's retry block sits after EXIT and jumps back into the loop: it is part of the k-loop,
    its spin is a loop of its own, and its jump back is no loop (the refill after the k-loop is outside)."""
    report = parse_sass(OUT_OF_LINE, "k")
    assert [(lp.where(), lp.depth) for lp in report.loops] == [("barrier.h:9", 2), ("k.cu:3", 1)]
    k_loop = report.loops[1]
    assert k_loop.contains(0x80)
    assert k_loop.contains(0x30)
    assert not k_loop.contains(0x50)
    store, load = report.local
    assert store.loop == k_loop
    assert load.loop is None  # after the loop: the listing's span 0x30-0x90 would have held it


def test_every_function_read_from_one_listing_is_what_each_reading_gives() -> None:
    # A unit's kernels are parsed from one listing (tools/nvdisasm.py keeps them): the same reports as one
    # parse per kernel, and without_spills is parse_sass(..., spills=False).
    every = {**parse_sass_functions(SPILLS), **parse_sass_functions(VARIOUS)}
    assert {"hot", "cold", "local_lookup"} <= set(every)
    for text, name in ((SPILLS, "hot"), (SPILLS, "cold"), (VARIOUS, "local_lookup")):
        assert every[name] == parse_sass(text, name)
        assert without_spills(every[name]) == parse_sass(text, name, spills=False)
    assert without_spills(every["hot"]).spill_instructions == 0
