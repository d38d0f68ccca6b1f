"""Every Markdown output rendered by cmark-gfm, GitHub's own renderer (through `cmarkgfm`, with GitHub's
extensions), from a hostile corpus put in through kernel names, test ids, define values, baseline keys and
entries, file names and, as a fork's run could write them, every string of its JSON report.

What a reader of the comment must not get from that text: a @mention, an image, a link (an autolink too), raw
HTML, an HTML comment, an entity read as its character, a heading, quote or task list; and every table row
whole, with its header's cells. Raw HTML is rendered as it is (cmark's unsafe option), as GitHub passes it to
its sanitizer, so that any that came through shows here. The outputs: the run's comment with its toolkit
comparison (`--regbudget-toolkit=cu12,cu13`), the step summary, `regbudget compare --markdown` and
`regbudget merge --markdown`.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cmarkgfm
import pytest
import tomli_w
from helpers.runs import regbudget, run_pytest

from pytest_regbudget.core.baseline import base_nodeid
from pytest_regbudget.core.ratchet import WORSE_THAN_BASELINE
from pytest_regbudget.core.text import one_line
from pytest_regbudget.report.markdown import md_code

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXAMPLE = Path(__file__).parent.parent.parent / "example_project" / "kernels"

# Each payload brings a word of its own (MARKERS): outside a code span, none may be read.
CORPUS = (
    "x`y",
    "``z```",
    "@someone",
    "![x](http://evil.example/x.png)",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[link](javascript:alert(1))",
    "http://evil.example",
    "www.evil.example",
    "&#64;someone &lt;b&gt;",
    "a|b",
    "a\\|b",
    "<!-- commented -->",
    "# heading",
    "> quoted",
    "- [ ] tasky",
    "</details></summary></td></table>",
    "**bolded**",
)
ALL = " ".join(CORPUS)
MARKERS = (
    *("someone", "evil", "onerror", "alert", "javascript", "commented", "heading", "quoted", "tasky"),
    *("bolded", "&#64;", "&lt;b"),
)
# The elements the plugin's Markdown makes, and the <details> fold it writes as HTML.
OWN_TAGS = {"h3", "h4", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "strong"}
OWN_TAGS |= {"details", "summary"}

# Define values: the corpus at once (it compiles: the macro is not used), backticks at both ends, spaces at
# both ends, a carriage return; a newline does not compile (a row of its own, an error).
VARIANTS = {"all": ALL, "edge": "`edge`", "spaced": " spaced ", "cr": "a\rb", "newline": "a\nb"}
HOSTILE_RELEASE = "@someone <img src=x onerror=alert(1)>"
HOSTILE_PTXAS = "@someone <script>alert(1)</script> 13.5.37"  # of no release: a toolkit mismatch
BAD_SOURCE = "b`ad @someone <img src=x onerror=alert(1)> |.cu"

TESTS = f"""
import pytest

ALL = {ALL!r}

@pytest.mark.regbudget(source="kernels/stencil.cu", kernel="jac`obi5 " + ALL + "\\n::error::x", launch=(256,))
def test_kernel_name():
    pass

@pytest.mark.regbudget(source="kernels/{BAD_SOURCE}", kernel="bad")
def test_file_name():
    pass

@pytest.mark.regbudget(max_regs=1)
@pytest.mark.parametrize("n", [1, 2], ids=[ALL, "`@someone`"])
def test_id(regbudget, n):
    regbudget.compile_source('extern "C" __global__ void k(float* x) {{ x[threadIdx.x] *= 2.0f; }}', "k")
"""
# Each variant a test of its own, marked as one: the marker takes the define value.
TESTS += "".join(
    f"""
@pytest.mark.regbudget(source="kernels/stencil.cu", kernel="jacobi5", launch=(256,), defines={{"H": {v!r}}})
def test_{name}():
    pass
"""
    for name, v in VARIANTS.items()
)
BAD = 'extern "C" __global__ void bad(float* x) {\n  @someone <img src=x> `x` | <!-- c -->\n}\n'
RUN = ("-p", "no:cacheprovider", "--regbudget-arch=sm_90", "--regbudget-toolkit=cu12,cu13", "-q")


def render(markdown: str) -> str:
    """GitHub's HTML of `markdown`: cmark-gfm with the table, autolink, strikethrough, tagfilter and tasklist
    extensions, raw HTML kept (GitHub's sanitizer would then see it)."""
    return str(cmarkgfm.github_flavored_markdown_to_html(markdown, options=cmarkgfm.Options.CMARK_OPT_UNSAFE))


def gfm_cells(row: str) -> list[str]:
    """A table row's cells as cmark-gfm splits them: at each pipe not right after a backslash (its scanner's
    escape is `\\|` alone, so `\\\\|` is a backslash and an escaped pipe)."""
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


def codes(page: str) -> list[str]:
    """The text of each code span of the HTML."""
    return [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", page, re.S)]


def assert_safe(markdown: str) -> str:
    """The HTML of `markdown`, checked: only the plugin's own elements, nothing of the corpus read outside a
    code span, and every table row of its header's cells, in the Markdown and in the HTML."""
    page = render(markdown)
    tags = {t.lower() for t in re.findall(r"</?([a-zA-Z][\w-]*)", page)}
    assert tags <= OWN_TAGS, tags - OWN_TAGS
    assert "<!--" not in page
    assert page.count("<details>") == markdown.count("<details>")  # the corpus's </details> closes none
    outside = html.unescape(re.sub(r"<code>.*?</code>", "", page, flags=re.S))
    assert "@" not in outside, outside
    found = [m for m in MARKERS if m in outside.lower()]
    assert found == [], outside
    tables = re.findall(r"<table>(.*?)</table>", page, re.S)
    blocks = re.findall(r"(?:^\|.*\n)+", markdown, re.M)
    assert len(tables) == len(blocks) > 0
    for table, block in zip(tables, blocks, strict=True):
        head, _rule, *rows = block.splitlines()
        width = len(gfm_cells(head))
        assert [len(gfm_cells(row)) for row in rows] == [width] * len(rows), block
        body = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
        assert [r.count("<td") for r in body] == [width] * len(rows)
        # The kernel column: one code span and nothing else, whatever the name holds.
        column = 1 if head.startswith("| verdict") else 0
        for row in body:
            kernel = re.findall(r"<td>(.*?)</td>", row, re.S)[column]
            assert re.fullmatch(r"<code>[^<]*</code>|-", kernel), kernel
    return page


# -- the one quoting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [*CORPUS, ALL, "`", "``", "` x `", " lead", "trail ", "   ", "a\\", "\\|", "x\ny\r\x1b[2J\u2028", "-"],
)
def test_a_code_span_holds_the_text_whole_in_one_cell(text: str) -> None:
    page = assert_safe(f"| a | b |\n|---|---|\n| {md_code(text)} | after |\n")
    # What GitHub shows in the cell is the text, on one line, non-printable characters escaped.
    assert codes(page) == [one_line(text)]
    assert page.count("<td>") == 2
    assert "<td>after</td>" in page


def test_an_empty_text_is_a_dash() -> None:
    assert md_code("") == "-"


# -- a run with two toolkits, and what is made from its reports ---------------------------------------------


def variant_key(entries: dict[str, Any], value: str) -> str:
    (key,) = [k for k in entries if k == f"H={value}"]
    return key


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose kernels, tests, files and baseline carry the corpus, run with both wheel toolkits on
    sm_90, where they give jacobi5 different register counts; a baseline first written by an update, then
    edited: an entry under a release the corpus names (new-release rows), one grown by 10 registers (a
    regression caught, with its fix), one with a ptxas the corpus names (a toolkit mismatch)."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "kernels").mkdir()
    shutil.copy(EXAMPLE / "stencil.cu", root / "kernels" / "stencil.cu")
    (root / "kernels" / BAD_SOURCE).write_text(BAD)
    (root / "test_hostile.py").write_text(TESTS)
    update = run_pytest(root, *RUN, "--regbudget-update")
    assert "baseline regbudget-baseline.toml updated" in update.stdout, update.stdout + update.stderr
    path = root / "regbudget-baseline.toml"
    doc = tomllib.loads(path.read_text())
    variants = doc["kernels"]["kernels/stencil.cu"]["jacobi5"]
    edge = variants[variant_key(variants, VARIANTS["edge"])]["sm_90"]
    edge[HOSTILE_RELEASE] = edge.pop("12.9")
    del edge["13.5"]
    variants[variant_key(variants, VARIANTS["spaced"])]["sm_90"]["12.9"]["registers"] -= 10
    variants[variant_key(variants, ALL)]["sm_90"]["13.5"] |= {"ptxas": HOSTILE_PTXAS, "registers": 8}
    path.write_text(tomli_w.dumps(doc))
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(root / "summary.md")}
    env.pop("GITHUB_ACTIONS", None)
    done = run_pytest(
        root, *RUN, "--regbudget-json=run.json", "--regbudget-markdown=comment.md", env=env, timeout=300
    )
    assert (root / "comment.md").exists(), done.stdout + done.stderr
    return root


def test_the_runs_comment_and_step_summary_read_no_markup_from_the_corpus(hostile_run: Path) -> None:
    comment = (hostile_run / "comment.md").read_text()
    assert (hostile_run / "summary.md").read_text() == comment  # one renderer, appended once
    page = assert_safe(comment)
    shown = codes(page)
    # Each variant that builds differs between the toolkits: its name in full in the comparison's table.
    assert "#### Toolkits compared: CUDA 12.9 -> 13.5, 4 of 5 kernel builds differ" in comment
    comparison = comment[comment.index("#### Toolkits compared") :]
    for value in VARIANTS.values():
        if value != VARIANTS["newline"]:
            assert f"\n| {md_code(f'jacobi5 (H={value})')} | sm_90 | registers | " in comparison, value
            assert one_line(f"jacobi5 (H={value})") in shown
    # The baseline's hostile release and ptxas, the test ids' kernel, the file name in the compiler's line.
    assert f"(entries: {md_code(HOSTILE_RELEASE)})" in comment
    assert f"entry recorded with ptxas {md_code(HOSTILE_PTXAS)}" in comment
    assert re.search(r"\| \*\*regs \d+ -> \d+ \(\+10\)\*\*", comment), comment
    assert "Fix: `if intended, accept it with pytest --regbudget-update" in comment
    assert any(BAD_SOURCE in code for code in shown)
    assert any(code.startswith("jac`obi5 ") for code in shown)


def test_merge_markdown_writes_the_runs_comment_from_its_report(hostile_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "comment.md"
    done = regbudget("merge", str(hostile_run / "run.json"), "--markdown", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == (hostile_run / "comment.md").read_text()


def by_release(hostile_run: Path, where: Path, names: tuple[str, str]) -> list[Path]:
    """The run's report split into one report per release, under hostile file names."""
    doc = json.loads((hostile_run / "run.json").read_text())
    paths = []
    for release, name in zip(("12.9", "13.5"), names, strict=True):
        path = where / name
        kernels = [r for r in doc["kernels"] if r["release"] == release]
        path.write_text(json.dumps({**doc, "kernels": kernels}))
        paths.append(path)
    return paths


def test_compare_markdown_reads_no_markup_from_names_or_file_names(hostile_run: Path, tmp_path: Path) -> None:
    names = ("a`@someone <img src=x onerror=alert(1)>`.json", "b ``&#64;someone | www.evil.example``.json")
    a, b = by_release(hostile_run, tmp_path, names)
    done = regbudget("compare", str(a), str(b), "--markdown")
    assert done.returncode == 0, done.stderr
    page = assert_safe(done.stdout)
    assert f"#### Compared: {md_code(names[0])} -> {md_code(names[1])}" in done.stdout
    assert one_line(f"jacobi5 (H={ALL})") in codes(page)


# A fork's job writes its JSON report: every string in it is the corpus, each where the reader takes a string.
def _hostile(rec: dict[str, Any], n: int) -> None:
    """The corpus in each string of a record; a kernel keeps its name and variant across the releases, so
    that the comparison between them has rows."""
    rec["nodeid"] = f"{ALL} {rec['nodeid']}"
    if rec["measured"]:
        rec["measured"]["tests"] = [base_nodeid(rec["nodeid"])]  # an entry names its tests: merge checks it
    rec["kernel"] = f"{ALL} {rec['kernel']}"
    rec["source"] = ALL
    rec["release"] = f"{HOSTILE_RELEASE} {rec['release']}"
    if rec["key"]:
        rec["key"] = [ALL, rec["kernel"], f"{ALL} {rec['key'][2]}", rec["arch"], rec["release"]]
    rec["outcome"] = "failed"
    rec["error"] = f"{ALL}\nerror: {ALL}" if rec["registers"] is None else None
    rec["other_releases"] = [ALL, HOSTILE_RELEASE]
    rec["baseline"] = {"ptxas": ALL}
    rec["baseline_status"] = "toolkit-mismatch" if n % 3 == 0 else "compared"
    rec["ptxas_messages"] = [ALL]
    rec["deltas"] = [
        {"metric": ALL, "baseline": 1, "now": 2, "delta": 1, "verdict": "worse"},
        {"metric": "registers", "baseline": 8, "now": 9, "delta": 1, "verdict": ALL},
        {"metric": "registers", "baseline": 8, "now": 16, "delta": 8, "verdict": "worse"},
    ]
    rec["violations"] = [
        f"{ALL} 1 -> 2 (+1){WORSE_THAN_BASELINE}; {ALL}",
        f"registers 8 -> 16 (+8){WORSE_THAN_BASELINE}, tolerance 4 ({ALL}); {ALL}",
        ALL,
    ]


def test_merge_markdown_of_a_forks_report_reads_no_markup(hostile_run: Path, tmp_path: Path) -> None:
    doc = json.loads((hostile_run / "run.json").read_text())
    for n, rec in enumerate(doc["kernels"]):
        _hostile(rec, n)
    doc["broken_builds"] = [
        {"source": ALL, "variant": ALL, "arch": ALL, "release": "12.9", "status": "failed", "error": ALL},
        {"source": ALL, "variant": "-", "arch": "sm_90", "release": ALL, "status": "failed", "error": ALL},
    ]
    report = tmp_path / "fork.json"
    report.write_text(json.dumps(doc))
    out = tmp_path / "comment.md"
    done = regbudget("merge", str(report), "--markdown", str(out))
    assert done.returncode == 0, done.stderr
    comment = out.read_text()
    page = assert_safe(comment)
    assert "#### Builds" in comment
    assert "#### Toolkits compared" in comment
    # Caught regressions: the change in our words where the metric is ours, quoted where a report names it.
    assert (
        f"| **{md_code(f'{ALL} 1 -> 2 (+1)')}, regs 8 -> 16 (+8), {md_code(ALL)}**, regs 8 -> 9 (+1) ("
        in comment
    )
    assert one_line(f"{ALL} 1 -> 2 (+1)") in codes(page)


def _set(field: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda rec: rec.__setitem__(field, value)


# A value of the wrong type where the comment reads a field: one line naming the field, no comment written.
@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_set("launch", ["@someone"]), "launch"),
        (_set("deltas", [{"metric": "registers", "baseline": "x", "now": 1, "verdict": "worse"}]), "deltas"),
        (_set("violations", "@someone"), "violations"),
        (_set("noise", "@someone"), "noise"),
        (lambda rec: rec.pop("outcome"), "outcome"),
    ],
)
def test_merge_markdown_refuses_a_field_of_the_wrong_type(
    hostile_run: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None], field: str
) -> None:
    doc = json.loads((hostile_run / "run.json").read_text())
    edit(doc["kernels"][0])
    report = tmp_path / "bad.json"
    report.write_text(json.dumps(doc))
    done = regbudget("merge", str(report), "--markdown", str(tmp_path / "comment.md"))
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"$.{field}" in done.stderr or f"`{field}`" in done.stderr, done.stderr
    assert not (tmp_path / "comment.md").exists()
