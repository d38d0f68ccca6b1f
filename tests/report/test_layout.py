"""The terminal table fitted to a width (report/layout.py through terminal.summary_table): every width from
40 to 200, long and short names, families of template instances, the baseline cell's `+N more`, -vv, and
prose wrapped with a hanging indent. Canned records: no toolkit, no pytest run."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest
from test_report import BASE_HEADER, columns, delta, entry, record

from pytest_regbudget.report import layout
from pytest_regbudget.report.record import ReportRecord
from pytest_regbudget.report.terminal import summary_lines, summary_table

# vLLM's paged attention as HeCBench builds it: 48 instances that differ in their template arguments alone.
PAGED = [
    f"paged_attention_v1_kernel<{t}, {t if kv == 'kAuto' else 'uint8_t'}, {head}, 16, 128, "
    f"vllm::Fp8KVCacheDataType::{kv}, false>"
    for t in ("float", "uint16_t", "__nv_bfloat16")
    for head in (64, 80, 96, 112, 120, 128, 192, 256)
    for kv in ("kAuto", "kFp8E4M3")
]
# The median7x7 regression of issue 46: spills grew, registers fell, and three more numbers moved.
MOVED = [
    delta("registers", 40, 32, "better"),
    delta("spill_stores", 112, 584, "worse"),
    delta("spill_loads", 100, 604, "worse"),
    delta("stack", 0, 176, "tolerated"),
    delta("occupancy", 0.25, 0.5, "better"),
]


def manifest(kernel: str, arch: str = "sm_90", **overrides: object) -> ReportRecord:
    """A manifest item: its test is named after its kernel."""
    return record(
        kernel=kernel,
        nodeid=f"kernels/k.cu::{kernel}[{arch}]",
        arch=arch,
        baseline_status="compared",
        **overrides,
    )


def regressed(kernel: str, arch: str = "sm_90") -> ReportRecord:
    return manifest(kernel, arch, outcome="failed", deltas=MOVED, baseline=entry(), spill_stores=584)


def suite() -> list[ReportRecord]:
    """Short names, names of exactly NAME_KEPT characters, a CUB name of 400, the paged family, and
    failing rows of each kind."""
    long = "cub::DeviceRadixSortOnesweepKernel<" + "cub::detail::radix::policy_hub<float,int>," * 8 + ">"
    recs = [manifest(k) for k in PAGED] + [manifest("k" * 24), manifest("m" * 23 + "2"), manifest(long)]
    recs += [regressed("median7x7"), regressed(PAGED[5], "sm_80"), regressed("x" * 24, "sm_100a")]
    return recs


def table_rows(lines: list[str], count: int = 1) -> list[str]:
    return lines[2 : 2 + count]  # under the header and its rule, above the count


def test_every_width_from_40_to_200_fits_or_is_the_narrowest_table() -> None:
    recs = suite()
    narrowest = summary_table(recs, mode="all", width=1)
    floor = max(map(len, narrowest[:-1]))
    # The narrowest table: the names (41 columns keep the 48 paged instances apart, each argument in its
    # place), the arch, the first failing change with the rest counted, the verdict.
    assert columns(narrowest[0]) == ["kernel", "arch", "baseline", "verdict"]
    assert narrowest[1].split() == [
        "-" * 41,
        "-" * len("sm_100a"),
        "-" * len("spill st +472, +4 more"),
        "-" * 7,
    ]
    assert floor == 41 + 7 + 22 + 7 + 3 * layout.GAP
    rows = len(recs)
    for width in range(40, 201):
        lines = summary_table(recs, mode="all", width=width)
        # Each row is one line, under a header and a rule; the count line below wraps as prose does.
        assert lines[1].replace("-", "").strip() == ""
        assert not lines[2 + rows].startswith(" ")
        if width < floor:
            assert lines[: 2 + rows] == narrowest[: 2 + rows], width
            continue
        assert max(map(len, lines)) <= width, width
        names = [columns(row)[0] for row in table_rows(lines, rows)]
        archs = [columns(row)[1] for row in table_rows(lines, rows)]
        assert len(set(zip(names, archs, strict=True))) == rows, width
        assert len({n for n in names if n.startswith("paged_")}) == len(PAGED), width
        # A name of NAME_KEPT characters or fewer is never cut.
        assert {"k" * 24, "m" * 23 + "2", "x" * 24, "median7x7"} <= set(names), width


def test_columns_drop_in_the_documented_order() -> None:
    recs = [regressed("median7x7"), manifest("other")]
    seen: list[tuple[str, ...]] = []
    full = {"spills": "spill st/ld", "occ": "occupancy"}  # the short headers of a narrow table
    for width in range(200, 30, -1):
        header = tuple(full.get(h, h) for h in columns(summary_table(recs, mode="all", width=width)[0]))
        if not seen or seen[-1] != header:
            seen.append(header)
    dropped = [next(h for h in before if h not in after) for before, after in pairwise(seen)]
    order = [h for h in layout.DROP_ORDER if h in BASE_HEADER]
    assert dropped == [h for h in order if h not in ("test", "kernel")]
    assert seen[-1] == ("kernel", "arch", "baseline", "verdict")


def test_a_row_holds_the_failing_change_first_then_counts_the_rest() -> None:
    lines = summary_table([regressed("median7x7")], width=80)
    (row,) = table_rows(lines)
    assert columns(row)[:2] == ["median7x7", "sm_90"]
    assert columns(row)[-2:] == ["spill st +472, +4 more", "FAILED"]
    # Wider, more changes fit, the failing ones first; -vv (no width) shows every change.
    wide = table_rows(summary_table([regressed("median7x7")], width=200))[0]
    assert "spill st +472, spill ld +504, stack +176, regs -8, occ +25pt" in wide
    full = table_rows(summary_table([regressed("median7x7")], width=None))[0]
    assert columns(full)[1:] == [
        "sm_90",
        "102",
        "584/0",
        "0",
        "0",
        "25% @256",
        "+26/-22",
        MOVED_TEXT,
        "FAILED",
    ]


MOVED_TEXT = "spill st +472, spill ld +504, stack +176, regs -8, occ +25pt"


@pytest.mark.parametrize("width", [80, 100, 120])
def test_template_instances_stay_told_apart_by_their_arguments(width: int) -> None:
    lines = summary_table([manifest(k) for k in PAGED], mode="all", width=width)
    assert max(map(len, lines)) <= width
    names = [columns(row)[0] for row in table_rows(lines, len(PAGED))]
    assert len(set(names)) == len(PAGED) == 48
    # Each keeps its head size, in its place among the arguments, and starts as its kernel does.
    for name, kernel in zip(names, sorted(PAGED), strict=True):
        head = re.search(r", (\d+), 16,", kernel)
        assert head is not None
        assert f", {head[1]}, " in name, (name, kernel)
        assert name.startswith("paged_")


def test_cut_name_hides_what_a_family_shares_and_keeps_a_lone_names_ends() -> None:
    shapes = layout.shapes(f"flash_attn_combine_results<128,{i}>[sm_80]" for i in range(12))
    name = "flash_attn_combine_results<128,11>[sm_80]"
    assert layout.cut_name(name, 24, shapes[name]) == "flash_attn_...11>[sm_80]"
    assert layout.cut_name(name, 60, shapes[name]) == name
    lone = "cub::DeviceRadixSortOnesweepKernel<float,int>[sm_80]"
    assert layout.cut_name(lone, 30) == "cub::DeviceRad...t,int>[sm_80]"
    assert len(layout.cut_name(lone, 30)) == 30


def test_a_name_of_24_characters_is_kept_whole_at_any_width() -> None:
    name = "a_kernel_of_24_chars_abc"
    assert len(name) == layout.NAME_KEPT
    for width in (20, 40, 80):
        lines = summary_table([regressed(name), manifest(name + "_and_more")], mode="all", width=width)
        assert columns(table_rows(lines, 2)[-1])[0] == name


def test_without_a_width_every_column_is_in_full() -> None:
    recs = [regressed("median7x7"), manifest(PAGED[0])]
    lines = summary_lines(recs, width=None)
    assert columns(lines[0]) == [h for h in BASE_HEADER if h != "test"]
    assert columns(lines[2])[:2] == [PAGED[0], "sm_90"]


def test_prose_wraps_at_spaces_with_a_hanging_indent() -> None:
    line = (
        "build settings changed for 4 entries: added -DUNUSED_FLAG (each entry is still held to its numbers)"
    )
    wrapped = layout.wrap([line, "short"], 40)
    assert wrapped[-1] == "short"
    assert all(len(w) <= 40 for w in wrapped)
    assert wrapped[0].startswith("build settings")
    assert all(w.startswith("    ") for w in wrapped[1:-1])
    assert " ".join(w.strip() for w in wrapped[:-1]) == line
    # An indented line keeps its indent, its continuations go four further; a long word stays whole.
    path = "/a/very/long/path/" * 4
    assert layout.wrap([f"  kernel [sm_90] ({path}): regs -8"], 30) == [
        "  kernel [sm_90]",
        f"      ({path}):",
        "      regs -8",
    ]
    assert layout.wrap([line], None) == [line]


def test_the_options_page_gives_the_drop_order_as_the_code_has_it() -> None:
    page = (Path(__file__).parents[2] / "docs" / "reference" / "options.md").read_text()
    bullet = page[page.index("- The columns drop in this order") :].split("\n- ", 1)[0]
    named = re.findall(r"`([^`]+)`", " ".join(bullet.split()))
    assert [n for n in named if n in layout.DROP_ORDER] == list(layout.DROP_ORDER)
