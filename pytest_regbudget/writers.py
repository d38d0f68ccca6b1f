"""Where the run's records go after the run: a list of file writers built from the settings (JSON, HTML,
Markdown, the GitHub step summary), each one render function. A new format is one more entry below.
The terminal table and GitHub annotations go to the terminal summary (session.summary).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import compare, html
from .baseline import atomic_write
from .report import KernelRecord, json_text, markdown_report

Render = Callable[[Sequence[KernelRecord]], str]


@dataclass(frozen=True)
class FileWriter:
    option: str  # what the user set, as messages name it
    path: Path
    render: Render
    append: bool = False  # GitHub's step summary is shared by every command of a step
    skip_empty: bool = False  # nothing to say without records
    required: bool = True  # a file the user asked for: not writing it is an error, not a note

    def write(self, records: Sequence[KernelRecord]) -> None:
        text = self.render(records)
        if self.skip_empty and not text:
            return
        if self.append:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(text)
        else:
            atomic_write(self.path, text)


def _markdown(records: Sequence[KernelRecord]) -> str:
    return markdown_report(records) + compare.markdown(compare.across_releases(records)) if records else ""


def _json(records: Sequence[KernelRecord]) -> str:
    # Which toolkit release differs from the next on which kernel, when the run built with several.
    comparisons = [c.to_json() for c in compare.across_releases(records)]
    return json_text(records, {"toolkit_comparison": comparisons})


def file_writers(
    *,
    json_path: Path | None,
    html_path: Path | None,
    markdown_path: Path | None,
    step_summary: Path | None,
) -> list[FileWriter]:
    writers = []
    if json_path is not None:
        writers.append(FileWriter("--regbudget-json", json_path, _json))
    if html_path is not None:
        writers.append(FileWriter("--regbudget-html", html_path, html.render))
    if markdown_path is not None:
        writers.append(FileWriter("--regbudget-markdown", markdown_path, _markdown, skip_empty=True))
    if step_summary is not None:
        # The runner's file, not one the user asked for: a failure is a note, not an exit code.
        writers.append(
            FileWriter(
                "$GITHUB_STEP_SUMMARY", step_summary, _markdown, append=True, skip_empty=True, required=False
            )
        )
    return writers
