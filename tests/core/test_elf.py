"""core/elf.py's call tree over real cubins: tests/kernels/callees.cu built for sm_90 whole-program by NVRTC
12.9 and relocatable (-rdc=true) by nvcc 13.5 (tests/data/callees, made by record_callees.py there)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pytest_regbudget.core.elf import Called, _edges, call_tree, callees

DATA = Path(__file__).parents[1] / "data" / "callees"
WHOLE = (DATA / "nvrtc_12.9.86_sm_90.cubin").read_bytes()
RDC = (DATA / "nvcc_rdc_13.5.37_sm_90.cubin").read_bytes()
HEAVY, HEAVY_INTO, MIDDLE, LIGHT = (
    "_Z5heavyPKfiii",
    "_Z10heavy_intoPKfPfii",
    "_Z6middlePKfiii",
    "_Z5lightPKfi",
)
FACT, EVEN, ODD = "_Z4facti", "_Z4eveni", "_Z3oddi"


def names(cubin: bytes, kernel: str) -> set[str]:
    return {c.name for c in call_tree(cubin, kernel) or ()}


def test_a_whole_program_kernel_reaches_its_own_copies() -> None:
    # Each kernel's callees are copies in its own section, "$kernel$function", which no edge of the call
    # graph names: they are read by their section, and named as ptxas names them.
    assert call_tree(WHOLE, "only_callee") == (Called(HEAVY_INTO, True, True), Called(HEAVY, True, True))
    assert names(WHOLE, "first") == {HEAVY}
    assert names(WHOLE, "second") == {HEAVY, MIDDLE, LIGHT}
    assert names(WHOLE, "calls_light") == {LIGHT}
    assert names(WHOLE, "recursive") == {FACT, EVEN, ODD}


def test_a_relocatable_kernel_follows_the_call_graph_through_clones_and_cycles() -> None:
    # -rdc: each function once, in a section of its own, reached by the graph's edges. ptxas made clones of
    # heavy_into and middle ("$6", "$5") for the kernels, beside the exported originals no kernel calls.
    only = call_tree(RDC, "only_callee")
    assert only == (Called(f"{HEAVY_INTO}$6", False, True), Called(HEAVY, False, True))
    assert names(RDC, "second") == {f"{MIDDLE}$5", HEAVY, LIGHT}
    assert names(RDC, "first") == {HEAVY}
    # even and odd call each other, fact itself: each is reached once.
    recursive = call_tree(RDC, "recursive")
    assert recursive is not None
    assert sorted(c.name for c in recursive) == sorted({FACT, EVEN, ODD})


def test_each_function_is_reached_once_along_several_paths() -> None:
    # second calls heavy itself and through middle.
    for cubin in (WHOLE, RDC):
        found = [c.name for c in call_tree(cubin, "second") or ()]
        assert len(found) == len(set(found)) == 3


def test_an_unreadable_cubin_or_an_unknown_kernel_has_no_tree() -> None:
    assert call_tree(b"not an ELF", "first") is None
    assert call_tree(WHOLE, "no_such_kernel") is None
    assert call_tree(WHOLE, HEAVY) is None  # a copy's symbol is "$kernel$name", never the plain name
    assert callees(b"", "first") == ()


def test_callees_lists_the_copies_too() -> None:
    # C7510's reader: a whole-program kernel's calls were () before the copies were read by their section.
    assert callees(WHOLE, "only_callee") == (HEAVY_INTO, HEAVY)


def _words(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}i", *values)


# ptxas 13.5 -rdc on indirect calls (recorded): the calls (-1); the functions 15 and 26 whose address is
# taken, with their prototype 432 (-2); a call through a pointer of that prototype in 27 (-3); what that call
# may reach (-4).
CALLS = (0, -1, 28, 29, 30, 31, 31, 30, 32, 31, 32, 28)
INDIRECT = (*CALLS, 0, -2, 15, 432, 26, 432, 0, -3, 27, 432, 0, -4, 27, 26)


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ((*INDIRECT, 27, 15), {28: [29], 30: [31], 31: [30], 32: [31, 28], 27: [26, 15]}),
        # ptxas 12.9 numbered the prototype 1, a valid symbol index: still not a call.
        ((0, -1, 26, 27, 0, -2, 22, 1, 24, 1, 0, -3, 25, 1, 0, -4, 25, 24), {26: [27], 25: [24]}),
        # A whole-program kernel's graph: only its externs.
        ((0, -1, 20, 21, 0, -2, 0, -3, 0, -4), {20: [21]}),
    ],
)
def test_only_the_call_parts_of_the_graph_are_edges(
    records: tuple[int, ...], expected: dict[int, list[int]]
) -> None:
    assert _edges(_words(*records), 500) == expected
