"""Where the registers go (core/liveness.py): nvdisasm's live-register counts read from a recorded `-plr -lrm
count` listing, joined by address with the `-gi` listing of the same cubin, and the peak named by its line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_regbudget.core.liveness import NEAR, PeakLive, live_counts, peak_at
from pytest_regbudget.core.sass import instruction, parse_sass_functions

DATA = Path(__file__).parents[1] / "data" / "sass"
# nvdisasm 13.5 over tests/kernels/unrolled.cu's `dot`, UNROLL=8, built by NVRTC + ptxas 13.5 for sm_90 with
# -lineinfo (README.md there): the code with its lines, and the live registers at each instruction.
CODE = (DATA / "unrolled_sm90_gi.txt").read_text()
RANGES = (DATA / "unrolled_sm90_plr.txt").read_text()
SOURCE = (Path(__file__).parents[1] / "kernels" / "unrolled.cu").read_text().splitlines()
BODY = next(n for n, text in enumerate(SOURCE, 1) if "fmaf(a[i]" in text)
LOOP = next(n for n, text in enumerate(SOURCE, 1) if text.lstrip().startswith("for ("))


def counts_of(listing: str) -> list[int]:
    """The `#` cells of the listing's instructions, read apart from the parser (the first after `//`)."""
    return [int(n) for n in re.findall(r"^\s*/\*[0-9a-f]+\*/.*//\s*\|\s*(\d+)", listing, re.MULTILINE)]


def test_every_instruction_of_the_code_gets_its_count_by_address() -> None:
    counts = live_counts(RANGES.splitlines())
    code = [found for line in CODE.splitlines() if (found := instruction(line))]
    # The line-info listing pads the section with NOPs that the life-range listing leaves out.
    assert {address for address, text, _ in code if text != "NOP"} == set(counts)
    assert sorted(counts.values()) == sorted(counts_of(RANGES))


def test_the_peak_is_the_unrolled_body_inside_its_loop() -> None:
    peak = parse_sass_functions(CODE, RANGES)["dot"].peak_live
    assert peak is not None
    assert peak.live == max(counts_of(RANGES))
    assert (peak.where, peak.loop) == (f"unrolled.cu:{BODY}", f"unrolled.cu:{LOOP}")
    # No more live at once than the registers the code names (R0 to the highest), which ptxas counts.
    highest = max(int(n) for n in re.findall(r"\bR(\d+)\b", CODE))
    assert peak.live <= highest + 1
    assert peak.text() == f"peak {peak.live} live at unrolled.cu:{BODY} (in the loop at unrolled.cu:{LOOP})"
    assert peak.cell() == f"{peak.live} @ unrolled.cu:{BODY}"


def test_without_life_ranges_there_is_no_peak() -> None:
    assert parse_sass_functions(CODE)["dot"].peak_live is None


def test_the_count_column_is_found_by_its_header() -> None:
    lines = [
        "        // +--------+-------+",
        "        // | PRED   | GPR   |",
        "        // |   #    |   #   |",
        "        /*0000*/   LDC R1, c[0x0][0x28] ;   // |        |   1   |",
        "        /*0010*/   ISETP.GE.AND P0, PT, R0, 0x1, PT ;   // |   1    |   3   |",
        "        /*0020*/   EXIT ;   // |        |       |",
    ]
    assert live_counts(lines) == {0x0: 1, 0x10: 3}  # a blank cell: none live, no entry


A, B = ("k.cu", 10), ("k.cu", 20)


def test_the_line_with_most_instructions_near_the_peak_names_it() -> None:
    # A and B both reach the peak; B holds more instructions within NEAR of it (an unrolled statement).
    counts = [60, 60 - NEAR, 60 - 1, 60, 60 - NEAR - 1]
    assert peak_at(counts, [A, B, B, B, A]) == 3  # B's first instruction at the peak
    assert peak_at(counts, [A, A, A, B, A]) == 0
    assert peak_at([60, 60 - NEAR - 1, 60 - NEAR - 1, 60], [A, B, B, B]) == 0  # not near: a tie, the first


def test_a_peak_without_line_info_yields_to_one_with_it() -> None:
    assert peak_at([9, 9, None], [None, A, None]) == 1
    assert peak_at([9, 8], [None, A]) == 0
    assert peak_at([None, None], [A, B]) is None
    assert peak_at([], []) is None


@pytest.mark.parametrize(
    ("peak", "text", "cell"),
    [
        (
            PeakLive(102, "poly.cu:19", "poly.cu:17"),
            "peak 102 live at poly.cu:19 (in the loop at poly.cu:17)",
            "102 @ poly.cu:19",
        ),
        (PeakLive(158, "poly.cu:23"), "peak 158 live at poly.cu:23", "158 @ poly.cu:23"),
        (PeakLive(30, None), "peak 30 live", "30"),
    ],
)
def test_the_peak_reads_as_the_messages_and_tables_end(peak: PeakLive, text: str, cell: str) -> None:
    assert (peak.text(), peak.cell()) == (text, cell)
