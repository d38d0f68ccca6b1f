"""The faces a reviewer sees, tried as a new user would (issue 46): a copy of example_project with two kernels
made worse (median.cu MIN_BLOCKS 6 -> 8: more spills; softmax.cu UNROLL 4 -> 8: more registers) and one better
(saxpy's baseline entries record 4 more registers than it uses, as they would after a change that saved them),
run by `COLUMNS=80 pytest -q` with the JSON, Markdown and HTML reports. Real NVRTC and ptxas from the wheels.

Every face says the same counts in the same words (report/counts.py): the JSON `summary` is a recount of its
records, and the terminal's count line, the Markdown verdict line and the HTML headline say as many failed and
as many changed. The Markdown has a row per failing, warned, changed or new check, at most, each failing check
on exactly one, naming its file relative to the rootdir."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from helpers.runs import run_pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).parent.parent.parent / "example_project"
SAXPY = re.compile(r'(\[kernels\."<nvrtc>tests/saxpy\.cu"\.saxpy\.-\.sm_\d+\."12\.9"\]\nregisters = )(\d+)')


@dataclass
class Run:
    project: Path
    stdout: str
    doc: dict[str, Any]
    markdown: str
    html: str


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer has {old!r}"
    path.write_text(text.replace(old, new))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    project = tmp_path_factory.mktemp("faces") / "my-kernels"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    edit(project / "kernels" / "median.cu", "#define MIN_BLOCKS 6\n", "#define MIN_BLOCKS 8\n")
    edit(project / "kernels" / "softmax.cu", "#define UNROLL 4\n", "#define UNROLL 8\n")
    baseline = project / "regbudget-baseline.toml"
    text, n = SAXPY.subn(lambda m: f"{m[1]}{int(m[2]) + 4}", baseline.read_text())
    assert n == 2, "the example's baseline no longer has saxpy's two entries"
    baseline.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    reports = ("--regbudget-json=run.json", "--regbudget-markdown=run.md", "--regbudget-html=run.html")
    done = run_pytest(
        project, "-q", "-p", "no:cacheprovider", *reports, env={**env, "COLUMNS": "80"}, timeout=900
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return Run(
        project,
        done.stdout,
        json.loads((project / "run.json").read_text()),
        (project / "run.md").read_text(),
        (project / "run.html").read_text(),
    )


def recount(records: list[dict[str, Any]]) -> dict[str, int]:
    """The summary, counted again from the records by the issue's words, not by the plugin's code."""
    n = dict.fromkeys(
        (
            *("checks", "failed", "errors", "warned", "passed"),
            *("changed", "worse", "improved", "new", "unchanged", "no_baseline"),
        ),
        0,
    )
    for rec in records:
        n["checks"] += 1
        n[
            {"failed": "failed", "error": "errors", "warned": "warned", "passed": "passed"}[rec["outcome"]]
        ] += 1
        moved = [d["verdict"] for d in rec["deltas"] if d["verdict"] in ("worse", "tolerated", "better")]
        if rec["baseline_status"] in ("new", "new-release"):
            n["new"] += 1
        elif moved:
            n["changed"] += 1
            n["worse" if {"worse", "tolerated"} & set(moved) else "improved"] += 1
        elif rec["baseline_status"] in ("compared", "toolkit-mismatch"):
            n["unchanged"] += 1
        else:
            n["no_baseline"] += 1
    return n


def section(stdout: str) -> list[str]:
    """The lines of the `regbudget` section of pytest's terminal summary."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"-+ regbudget -+", line))
    end = next(i for i, line in enumerate(lines) if i > start and re.fullmatch(r"=+ .* =+", line))
    return lines[start:end]


def counts(text: str) -> tuple[int, int]:
    """(failed, changed) from the counts sentence in `text`, wherever it wraps."""
    flat = " ".join(text.split())
    found = re.search(r"kernel checks?: ([\d,]+) failed, .*?; against the baseline: ([\d,]+) changed", flat)
    assert found, flat
    return int(found[1].replace(",", "")), int(found[2].replace(",", ""))


def md_rows(markdown: str) -> Iterator[list[str]]:
    """The cells of each row of the comment's tables of checks (the main one and the folded improvements)."""
    for line in markdown.splitlines():
        if line.startswith("| ") and not line.startswith(("| verdict ", "|---")):
            yield [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def check_of(rec: dict[str, Any]) -> tuple[str, str]:
    """A check as the comment names it: the kernel (and its variant) in a code span, and its arch."""
    variant = rec["key"][2] if rec["key"] else "-"
    return (f"`{rec['kernel']}`" if variant == "-" else f"`{rec['kernel']} ({variant})`"), rec["arch"]


def kind(rec: dict[str, Any]) -> str | None:
    """Why a check has a row: failing, warned, changed or new; None for one that has none."""
    if rec["outcome"] in ("failed", "error"):
        return "failing"
    if rec["outcome"] == "warned":
        return "warned"
    if rec["baseline_status"] in ("new", "new-release"):
        return "new"
    if any(d["verdict"] in ("worse", "tolerated", "better") for d in rec["deltas"]):
        return "changed"
    return None


def test_every_face_says_the_same_counts_and_the_comment_gives_each_check_one_row(run: Run) -> None:
    records = run.doc["kernels"]
    summary = run.doc["summary"]
    assert summary == recount(records)
    failed, changed = summary["failed"], summary["changed"]
    # The run the issue describes: both regressed kernels fail on both archs, saxpy improved on both.
    by_check = {(r["kernel"], r["arch"]): r for r in records}
    for arch in ("sm_80", "sm_90"):
        assert by_check["median7x7", arch]["outcome"] == "failed"
        assert by_check["softmax<256>", arch]["outcome"] == "failed"
        assert [d["verdict"] for d in by_check["saxpy", arch]["deltas"]] == ["better"]
    assert failed >= 4
    assert changed >= failed + 2  # each failing kernel here failed because its numbers moved

    # The three faces: the terminal's count line, the Markdown verdict line, the HTML headline.
    terminal = "\n".join(section(run.stdout))
    assert counts(terminal) == (failed, changed)
    verdict = run.markdown.split("\n\n")[1]
    assert counts(verdict) == (failed, changed)
    top = run.html[run.html.index("<body>") : run.html.index("<h2")]
    assert counts(unescape(re.sub(r"<[^>]+>", " ", top))) == (failed, changed)

    # The comment: at most one row per failing, warned, changed or new check, each failing one on exactly
    # one, every changed one naming its file relative to the rootdir.
    rows = list(md_rows(run.markdown))
    named: dict[tuple[str, str], list[list[str]]] = {}
    for row in rows:
        for arch in row[2].split(", "):
            named.setdefault((row[1], arch), []).append(row)
    listed = [r for r in records if kind(r)]
    assert len(rows) <= len(listed)
    for rec in listed:
        found = named.get(check_of(rec), [])
        assert len(found) == 1, (check_of(rec), found)
        if kind(rec) == "changed" or any(d["verdict"] != "same" for d in rec["deltas"]):
            path = Path(os.path.relpath(rec["source"], run.project)).as_posix()
            assert not path.startswith("..")
            assert found[0][3] == f"`{path}:{rec['line']}`", found[0]
    # No row for a kernel and arch that no listed check has (two tests may check one kernel, one warned).
    assert set(named) <= {check_of(r) for r in listed}
    median = named[check_of(by_check["median7x7", "sm_80"])][0]
    assert median[0] == "**FAILED**"
    assert median[3] == "`kernels/median.cu:22`"
    # The failing changes first, in bold; the register count that fell after them.
    assert re.fullmatch(r"\*\*spill st \d+ -> \d+ \(\+\d+\), .*\*\*, regs 40 -> 32 \(-8\), .*", median[4])


def test_the_terminal_table_fits_80_columns_with_one_row_per_failing_check(run: Run) -> None:
    lines = section(run.stdout)
    for line in lines:
        assert len(line) <= 80 or len(line.split()) == 1, line
    rule = next(i for i, line in enumerate(lines) if re.fullmatch(r"[- ]*-{3,}[- ]*", line) and i > 1)
    header, table = lines[rule - 1], lines[rule + 1 :]
    assert "arch" in header.split(), header
    for rec in run.doc["kernels"]:
        if rec["outcome"] != "failed":
            continue
        rows = [
            line
            for line in table
            if rec["kernel"] in line and rec["arch"] in line and "FAILED" in line.split()
        ]
        assert len(rows) == 1, (rec["kernel"], rec["arch"], rows)
        # The failing change, as a signed delta: a change the baseline caught, or the budget's number.
        worse = [d for d in rec["deltas"] if d["verdict"] == "worse"]
        assert worse, rec["violations"]
        signed = [re.escape(f"{d['delta']:+g}") for d in worse]
        assert any(re.search(rf"(?<![\d.]){s}(?![\d.])", rows[0]) for s in signed), rows[0]
