"""The tutorial pages run as printed: docs/getting-started.md and docs/manifest.md, block by block, in a
scratch project, with the plugin already installed (the suite's own environment).

How a page is read (docs/contributing.md, "Pages that run"):
- a fenced block with `title="PATH"` is a file of the project: written there, unless a command of the page
  made that file, in which case the block shows what the command wrote and must equal it;
- a `console` block's `$ COMMAND` lines run in the project, and the lines after each are output the command
  must print: in order, each stretch of lines consecutive, `...` on a line of its own skipping any number of
  lines, and `...` inside a line standing for any text;
- a `bash` block's lines run and must succeed; a `python` block without a title runs with the suite's Python;
- `pip install` lines are skipped: the plugin is installed already; every other block only illustrates.
Absolute paths, durations and the number of compile threads are not compared: they differ by machine. The
`regbudget` section wraps its prose at the width (COLUMNS=80, as in CI), where a path's length moves the
breaks: a line that starts with spaces is compared as part of the line above it, on the page and in the
output.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[2] / "docs"
RUN_PAGES = ["getting-started.md", "manifest.md", "blackwell.md"]

_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")
_TITLE = re.compile(r'title="([^"]+)"')
# What differs by machine: absolute paths, durations, the compile pool's size.
_NORMALIZE = [
    (re.compile(r"(?<![\w.~-])(/[\w.+~-]+)+/?"), "<path>"),
    (re.compile(r"\b\d+\.\d+s\b"), "<time>"),
    (re.compile(r"\b\d+\.\d+ s\b"), "<time> s"),  # a build's time (`slowest builds:`)
    (re.compile(r"\(\d+:\d\d:\d\d\)"), "(<time>)"),
    (re.compile(r"\(\d+ compile thread"), "(<n> compile thread"),
]


@dataclass
class Block:
    lang: str
    title: str | None
    text: str
    line: int  # where it starts in the page, for messages


def blocks(page: str) -> Iterator[Block]:
    """The page's fenced code blocks, with the fence's indentation removed from their lines."""
    lines = page.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None or not opening["info"].strip():
            i += 1
            continue
        indent, info = len(opening["indent"]), opening["info"].strip()
        body: list[str] = []
        j = i + 1
        while not lines[j].strip().startswith("```"):
            body.append(lines[j][indent:])
            j += 1
        title = _TITLE.search(info)
        yield Block(info.split()[0], title[1] if title else None, "\n".join(body) + "\n", i + 1)
        i = j + 1


def normalize(line: str) -> str:
    line = line.rstrip()
    for pattern, replacement in _NORMALIZE:
        line = pattern.sub(replacement, line)
    return line


def _line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in normalize(expected).split("...")))


def unwrapped(lines: list[str]) -> list[str]:
    """`lines` with each that starts with spaces (a wrapped line's continuation) joined to the one above."""
    out: list[str] = []
    for line in lines:
        if line.startswith(" ") and out and line.strip() != "...":
            out[-1] = out[-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
    return out


def missing_output(expected: str, actual: str) -> str | None:
    """None when `actual` shows every expected line as the page's rules say, else what was not found."""
    got = [normalize(line) for line in unwrapped([line for line in actual.splitlines() if line.strip()])]
    stretches: list[list[str]] = [[]]
    for line in expected.splitlines():
        if line.strip() == "...":
            stretches.append([])
        elif line.strip():
            stretches[-1].append(line)
    stretches = [unwrapped(stretch) for stretch in stretches]
    at = 0
    for stretch in filter(None, stretches):
        patterns = [_line_pattern(line) for line in stretch]
        for start in range(at, len(got) - len(patterns) + 1):
            if all(p.fullmatch(got[start + k]) for k, p in enumerate(patterns)):
                at = start + len(patterns)
                break
        else:
            return "\n".join(stretch)
    return None


def skipped(command: str) -> bool:
    return re.match(r"(python -m )?pip install\b", command.strip()) is not None


class Project:
    """A scratch project that a page's blocks build and run in."""

    def __init__(self, root: Path, cache: Path) -> None:
        self.root = root
        self.written: set[str] = set()
        bin_dir = str(Path(sys.executable).parent)
        # A user's shell: no settings of this test run, a cache of its own (the page shows its first misses).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_", "REGBUDGET_"))}
        self.env = {**env, "PATH": bin_dir + os.pathsep + env["PATH"], "COLUMNS": "80"}
        self.env["REGBUDGET_CACHE_DIR"] = str(cache)

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )

    def file(self, block: Block, where: str) -> None:
        assert block.title is not None
        path = self.root / block.title
        if path.exists() and block.title not in self.written:
            # A command of the page made it: the block shows it as it is.
            expected, actual = block.text, path.read_text()
            missing = missing_output(expected, actual)
            assert missing is None, f"{where}: {block.title} differs from the page at:\n{missing}\n\n{actual}"
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text)
        self.written.add(block.title)

    def console(self, block: Block, where: str) -> None:
        steps: list[tuple[str, list[str]]] = []
        for line in block.text.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
        assert steps, f"{where}: a console block without a `$ ` command"
        for command, shown in steps:
            if skipped(command):
                continue
            done = self.run(command)
            missing = missing_output("\n".join(shown), done.stdout)
            assert missing is None, (
                f"{where}: `{command}` did not print, in order:\n{missing}\n\nIt printed:\n{done.stdout}"
            )

    def commands(self, block: Block, where: str) -> None:
        for line in block.text.splitlines():
            command = line.split(" #")[0].strip()
            if not command or command.startswith("#") or skipped(command):
                continue
            done = self.run(command)
            assert done.returncode == 0, f"{where}: `{command}` failed:\n{done.stdout}"

    def python(self, block: Block, where: str) -> None:
        done = self.run(f"{shlex.quote(sys.executable)} -c {shlex.quote(block.text)}")
        assert done.returncode == 0, f"{where}: the Python block failed:\n{done.stdout}"


def run_page(name: str, text: str, project: Project) -> int:
    """Runs the page's blocks in order; returns how many it ran or wrote."""
    done = 0
    for block in blocks(text):
        where = f"docs/{name}, line {block.line}"
        if block.title is not None:
            project.file(block, where)
        elif block.lang == "console":
            project.console(block, where)
        elif block.lang in ("bash", "sh", "shell"):
            project.commands(block, where)
        elif block.lang == "python":
            project.python(block, where)
        else:
            continue
        done += 1
    return done


@pytest.mark.parametrize("page", RUN_PAGES)
def test_docs_page_runs_as_printed(page: str, tmp_path: Path) -> None:
    project = Project(tmp_path / "project", tmp_path / "cache")
    project.root.mkdir()
    assert run_page(page, (DOCS / page).read_text(), project) >= 6


# -- the reader itself: a page that drifts from the code must fail ------------------------------------------
def test_output_is_matched_in_order_with_gaps_and_without_machine_details() -> None:
    actual = """header
regbudget: baseline x.toml (1 entries); gpu auto
compile cache /home/ci/.cache/pytest-regbudget: 3 hits, 0 misses (4 compile thread(s))

=== 1 failed in 0.21s ===
"""
    shown = (
        "regbudget: baseline x.toml ...\n"
        "compile cache /home/you/.cache/x: 3 hits, 0 misses (2 compile thread(s))"
    )
    assert missing_output(shown, actual) is None
    assert missing_output("header\n...\n=== 1 failed in 9.99s ===", actual) is None
    # A number that drifted, lines out of order, a gap the page does not mark: each is reported.
    assert missing_output("compile cache /x: 2 hits, 0 misses (2 compile thread(s))", actual) is not None
    assert missing_output("=== 1 failed in 0.21s ===\n...\nheader", actual) is not None
    assert missing_output("header\n=== 1 failed in 0.21s ===", actual) is not None
    # Prose wrapped elsewhere than the page wraps it (a longer path) reads as the same line; other words not.
    wrapped = "compile cache /tmp/a/much/longer/path: 3 hits,\n    0 misses (4 compile thread(s))\n"
    assert (
        missing_output("compile cache /home/you/x: 3 hits, 0 misses\n    (2 compile thread(s))", wrapped)
        is None
    )
    assert (
        missing_output("compile cache /x: 3 hits,\n    1 misses (2 compile thread(s))", wrapped) is not None
    )


def test_a_drifted_page_fails(tmp_path: Path) -> None:
    page = '```python title="t.py"\nprint(41 + 1)\n```\n\n```console\n$ python t.py\n43\n```\n'
    project = Project(tmp_path, tmp_path / "cache")
    drifted = r"`python t\.py` did not print, in order:\s+43\s+It printed:\s+42"
    with pytest.raises(AssertionError, match=drifted):
        run_page("drift.md", page, project)
    # A shown file that a command wrote differently fails too.
    page = "```bash\necho 'x = 1' > out.toml\n```\n\n```toml title=\"out.toml\"\nx = 2\n```\n"
    with pytest.raises(AssertionError, match=r"out\.toml differs from the page"):
        run_page("drift.md", page, Project(tmp_path, tmp_path / "cache"))
