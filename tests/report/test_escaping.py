"""Hostile names, paths and logs in every output: no forged GitHub command, no broken Markdown table. The
rules of core/text.py here; every writer, end to end, in tests/integration/test_hostile_output.py."""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path

import pytest
from helpers.runner_commands import raw_controls, replay
from msgspec.structs import replace

from pytest_regbudget.cli.base import GuardedLines
from pytest_regbudget.core.baseline import Key
from pytest_regbudget.core.checks import check
from pytest_regbudget.core.kernel_report import KernelReport
from pytest_regbudget.core.limits import Launch, Limits
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.core.text import json_text, one_line, safe_block
from pytest_regbudget.report import html
from pytest_regbudget.report.markdown import markdown_report
from pytest_regbudget.report.record import ReportRecord, to_record
from pytest_regbudget.report.terminal import baseline_lines, github_annotations, summary_lines

PTXAS = """\
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 0 bytes smem
"""
RES = parse_ptxas_output(PTXAS)["k"]

FORGED = "k\n::error file=x.cu::forged"
HOSTILE = ["a|b", "x`y", "``z", FORGED, "%0A", "k\r::warning::cr", "k\u2028::error::ls", "k\x1b[2J"]
# A compiler log as NVRTC writes it: it quotes the source line, indented by two spaces.
LOG = 'bad.cu(2): error: the global scope has no "error"\n  ::error file=x.cu::forged\n    ^\n'


def passed(kernel: str, nodeid: str = "t.py::test_k[sm_90]") -> ReportRecord:
    return to_record(check(nodeid, kernel, "sm_90", "/src/k.cu", RES, Limits(launch=Launch(256))))


def failed(kernel: str, nodeid: str = "t.py::test_k[sm_90]") -> ReportRecord:
    return to_record(check(nodeid, kernel, "sm_90", "/src/k.cu", RES, Limits(max_regs=32)))


def errored(kernel: str, source: str = "k.cu", error: str = LOG) -> ReportRecord:
    report = KernelReport("t.py::test_e[sm_90]", kernel, "sm_90", source, None, error=error, line=2)
    return to_record(report)


def all_records() -> list[ReportRecord]:
    return [make(name) for name in HOSTILE for make in (passed, failed, errored)]


def commands(lines: list[str]) -> list[str]:
    """The lines the GitHub runner would run: it strips leading whitespace, then looks for '::'."""
    return [line for text in lines for line in text.splitlines() if line.lstrip().startswith("::")]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("saxpy", "saxpy"),
        ("gemm<128, 64>", "gemm<128, 64>"),
        (FORGED, "k\\n::error file=x.cu::forged"),
        ("a\tb\rc\x1b", "a\\tb\\rc\\x1b"),
        ("k\u2028x\x85", "k\\u2028x\\x85"),
        ("%0A", "%0A"),
        ("::error::x", "> ::error::x"),
        ("  ::add-mask::x", "> ::add-mask::x"),
        ("a::b", "a::b"),
        ("##[stop-commands]tok", "## [stop-commands]tok"),
        ("k<##[WARNING]x>", "k<## [WARNING]x>"),
        ("###[", "### ["),
        ("##", "##"),
        ("\x9b31m\x07", "\\x9b31m\\x07"),
        ("#\u00ad#[error]x", "#\\xad#[error]x"),  # escaped: no longer a `##[` to anyone
        ("#\ufe0f#[error]x", "#\ufe0f# [error]x"),  # printable, but skipped by the runner's search
        ("\ufe0f::error::x", "> \ufe0f::error::x"),
        ("\udcff.cu", "\\udcff.cu"),  # a file name's byte that is not UTF-8
    ],
)
def test_one_line_escapes_what_could_start_a_line(text: str, shown: str) -> None:
    assert one_line(text) == shown
    assert len(shown.splitlines()) == 1
    assert one_line(shown) == shown  # guarding twice changes nothing


HOSTILE_PIECES = [
    "a",
    " ",
    "\t",
    "#",
    "[",
    "]",
    ":",
    "::",
    "##[",
    "error",
    "stop-commands",
    "\n",
    "\r",
    "\x1b",
    "\x07",
    "\x9b",
    "\x00",
    "\u00ad",
    "\u200b",
    "\ufe0f",
    "\u2028",
    "\x85",
    "\U000e0101",
]


def test_no_text_guarded_gives_the_runner_a_command_or_a_terminal_a_control() -> None:
    """Random text of the pieces that matter, read back by a reader that behaves as the GitHub runner does
    (helpers/runner_commands.py): as a name, a block, and JSON, each line alone and all together."""
    rng = random.Random(44)
    for _ in range(5_000):
        text = "".join(rng.choice(HOSTILE_PIECES) for _ in range(rng.randint(1, 14)))
        doc = json.dumps({"name": text}, ensure_ascii=False)
        for shown in (one_line(text), safe_block(text), json_text(doc)):
            assert replay(shown) == [], repr(text)
            assert raw_controls(shown) == [], repr(text)
        assert json.loads(json_text(doc)) == {"name": text}


def test_the_command_line_guards_whole_lines_whatever_the_writes() -> None:
    """`regbudget` writes through GuardedLines: a command split over two writes is guarded as one line, and
    a line is passed on only once it ends."""
    out = io.StringIO()
    guarded = GuardedLines(out)
    for piece in ["##", "[error]x\n  :", ":warning::y", "\n\nlast \x1b"]:
        guarded.write(piece)
    assert out.getvalue() == "## [error]x\n> ::warning::y\n\n"
    guarded.end()
    assert out.getvalue().endswith("\nlast \\x1b")
    assert replay(out.getvalue()) == []


def test_safe_block_guards_lines_that_would_be_commands_and_keeps_carets_aligned() -> None:
    assert safe_block(LOG).splitlines() == [
        'bad.cu(2): error: the global scope has no "error"',
        "> ::error file=x.cu::forged",
        "    ^",
    ]
    assert safe_block("::warning::x") == "> ::warning::x"
    assert safe_block("a\r::error::b") == "a\n> ::error::b"
    assert safe_block("\t::error::x") == "> ::error::x"
    assert safe_block("fine\n  indented\tline") == "fine\n  indented\tline"


def test_summary_table_has_one_line_per_row_and_no_command() -> None:
    records = all_records()
    lines = summary_lines(records)
    assert len(lines) == 2 + len(records)
    assert all("\n" not in line and "\r" not in line for line in lines)
    assert commands(lines) == []
    assert any("k\\n::error file=x.cu::forged" in line for line in lines)


def test_a_test_id_that_starts_with_a_command_is_guarded() -> None:
    lines = summary_lines([passed("k", nodeid="t.py::::error file=a.cu::forged")])
    assert commands(lines) == []
    assert lines[-1].startswith("> ::error")


def test_failure_text_has_no_command_line() -> None:
    for name in HOSTILE:
        report = check("t.py::t", name, "sm_90", "k.cu", RES, Limits(max_regs=32))
        text = report.failure_text()
        assert commands([text]) == []
        assert text.splitlines()[0].startswith(one_line(name) + " [sm_90]: registers 40 > max_regs 32")


def cells(row: str) -> list[str]:
    """A GFM table row's cells: split at pipes that no backslash escapes."""
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


def test_markdown_rows_keep_their_columns() -> None:
    text = markdown_report(all_records())
    rows = [line for line in text.splitlines() if line.startswith("|")]
    # The main table has a row per failed or broken kernel; the fold, a row per passed one (no baseline).
    main, fold = 2 + 2 * len(HOSTILE), 2 + len(HOSTILE)
    assert len(rows) == main + fold
    assert [len(cells(row)) for row in rows] == [5] * main + [5] * fold, rows
    # No name adds a line of its own: every line is a row, or one of the report's own.
    own = (
        "### pytest-regbudget (sm_90)",
        "24 kernel checks: 8 failed, 8 did not build, 0 warned",
        "<details>",
    )
    assert [line for line in text.splitlines() if line and not line.startswith(("|", *own))] == ["</details>"]
    assert "`a\\|b`" in text
    assert "``x`y``" in text
    assert "` ``z `" in text  # a backtick at the edge needs the padding space
    assert "`k\\n::error file=x.cu::forged`" in text
    assert commands(text.splitlines()) == []


def test_markdown_compile_error_is_a_code_span_on_one_line() -> None:
    text = markdown_report([errored("k", error="x.cu(1): error: a | b `c`\nsecond line")])
    (row,) = [line for line in text.splitlines() if "compile" in line]
    assert row.endswith("| did not compile: `` x.cu(1): error: a \\| b `c` `` |")
    assert len(cells(row)) == 5


def outside_code(text: str) -> str:
    """`text` without its code spans, where GitHub reads no HTML, link or @mention."""
    return re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", text)


def test_markdown_reads_no_html_link_or_mention_from_outside_text() -> None:
    names = ["</details><script>x</script>", "@octocat", "[a](https://x.example)", "#1 <!--"]
    records = [make(name) for name in names for make in (passed, failed)]
    records.append(errored("k", error="x.cu(1): error: @octocat </details> [a](https://x.example) <!--"))
    # A violation can quote a name (another test's id, a device's): it is quoted too.
    clash = replace(check("t.py::t", "c", "sm_90", "k.cu", RES, Limits()), violations=["@octocat <b>x</b>"])
    records.append(to_record(clash))
    text = markdown_report(records)
    assert "@octocat" in text
    plain = outside_code(text)
    for hostile in ("<script", "@octocat", "](", "<!--", "<b>", "#1"):
        assert hostile not in plain, plain
    assert (plain.count("<details>"), plain.count("</details>")) == (1, 1)


def test_annotations_escape_data_and_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    records = [
        failed(FORGED),
        errored("a,b:c", source="/src/dir,x/k:1.cu", error="first %0A\nsecond\r\n::error::third"),
    ]
    lines = github_annotations(records, Path("/src"))
    assert len(lines) == 2
    assert all("\n" not in line and "\r" not in line for line in lines)
    forged = next(line for line in lines if "forged" in line)
    assert forged.startswith(
        "::error file=k.cu,title=regbudget k\\n%3A%3Aerror file=x.cu%3A%3Aforged [sm_90]::"
    )
    err = next(line for line in lines if "third" in line)
    assert err.startswith("::error file=dir%2Cx/k%3A1.cu,line=2,title=regbudget a%2Cb%3Ac [sm_90]::")
    # The message's lines are guarded as every printed line is (core/text.py), though the runner reads them
    # as the annotation's data.
    assert err.endswith("::first %250A%0Asecond%0A> ::error::third")
    # Only the annotations themselves are commands.
    assert all(line.count("\n") == 0 and line.startswith(("::error ", "::warning ")) for line in lines)


def test_baseline_lines_escape_and_summarise_stale_entries() -> None:
    stale: list[Key] = [(f"k{i:05d}.cu", "k", "-", "sm_90", "12.9") for i in range(10_000)]
    stale[0] = ("k.cu\n::error::forged", "k", "-", "sm_90", "12.9")
    lines = baseline_lines([], stale, updating=False)
    assert lines[0] == "10000 stale baseline entries (test or kernel gone):"
    assert lines[1] == "  k.cu\\n::error::forged k [sm_90, CUDA 12.9]"
    assert len(lines) == 1 + 10 + 2
    assert lines[-2] == "  ... and 9990 more"
    assert commands(lines) == []


def test_baseline_lines_show_all_of_a_few_stale_entries() -> None:
    stale: list[Key] = [(f"k{i}.cu", "k", "-", "sm_90", "12.9") for i in range(10)]
    lines = baseline_lines([], stale, updating=False)
    assert len(lines) == 1 + 10 + 1
    assert "more" not in "\n".join(lines)


def test_html_escapes_hostile_names() -> None:
    page = html.render([errored("<script>alert(1)</script>", source="<b>.cu"), passed("a&b")])
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;.cu" in page
    assert "a&amp;b" in page


def test_safe_block_fast_path_equals_the_character_by_character_rule() -> None:
    """safe_block skips the per-character escaping when a text is printable ASCII with no `##[` and no `::`
    line; on every text built from the characters that matter, the result is the same as the full rule's."""
    import random

    from pytest_regbudget.core import text as text_module

    def full_rule(text: str) -> str:
        return "\n".join(text_module._guarded(line, tabs=True) for line in text.splitlines())

    pieces = [
        "a",
        " ",
        "\t",
        ":",
        "::",
        "\n",
        "\r",
        "\r\n",
        "\x1b",
        "é",
        "\u2028",
        "\x0b",
        " ::",
        "\t::x",
        "\x85",
        "#",
        "##[",
        "[",
        "\ufe0f",
    ]
    rng = random.Random(1)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert text_module.safe_block(text) == full_rule(text), repr(text)
