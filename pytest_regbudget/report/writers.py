"""Where the run's records go after the run: a list of file writers built from the settings (JSON, HTML,
Markdown, the GitHub step summary), each one render function. A new format is one more entry below.
The terminal table and GitHub annotations go to the terminal summary (engine/summary.py).

Each format's module is imported by its writer, when the run writes that format: a run of kernels that writes
no report loads none of them (docs/speed.md, "what a run pays").
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import Struct

from ..util.files import NotRegular, atomic_write, not_regular
from .record import ReportRecord, json_text

if TYPE_CHECKING:
    from ..core.trend import Trails
    from .links import GithubLinks

Render = Callable[[Sequence[ReportRecord]], str]


class FileWriter(Struct, frozen=True):
    option: str  # what the user set, as messages name it
    path: Path
    render: Render
    append: bool = False  # GitHub's step summary is shared by every command of a step
    skip_empty: bool = False  # nothing to say without records
    required: bool = True  # a file the user asked for: not writing it is an error, not a note

    def write(self, records: Sequence[ReportRecord]) -> None:
        text = self.render(records)
        if self.skip_empty and not text:
            return
        if self.append:
            _append(self.path, text)
        else:
            atomic_write(self.path, text)


def _append(path: Path, text: str) -> None:
    """`text` appended to the regular file at `path` (made if there is none); NotRegular for anything else.
    Opened without waiting and checked on the open file: a FIFO would block the run until something reads
    it (opening one that nothing reads fails at once, ENXIO, which is said as what it is)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_WAIT, 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise NotRegular(errno.EINVAL, "a FIFO, not a regular file", str(path)) from None
        raise
    with os.fdopen(fd, "ab") as fh:
        special = not_regular(os.fstat(fd).st_mode)
        if special:
            raise NotRegular(errno.EINVAL, special, str(path))
        fh.write(text.encode("utf-8"))


# Opened without waiting (where the platform has the flag): see _append.
_NO_WAIT = getattr(os, "O_NONBLOCK", 0)


def markdown_comment(
    records: Sequence[ReportRecord],
    broken_builds: Sequence[Mapping[str, object]] = (),
    *,
    rootdir: str | Path | None = None,
    links: GithubLinks | None = None,
) -> str:
    """The run's report and its failing builds, then the toolkits' differences in what room the comment has
    left: --regbudget-markdown, the step summary, and `regbudget merge --markdown` from the JSON reports.
    Files are named relative to `rootdir`; `links` (report/links.py, on GitHub Actions) link them."""
    from . import compare
    from .markdown import broken_builds_markdown, markdown_report

    builds = broken_builds_markdown(broken_builds)
    if not records:
        return builds
    report = markdown_report(records, rootdir=rootdir, links=links) + builds
    return report + compare.markdown(compare.across_releases(records), compare.COMMENT_LIMIT - len(report))


# The JSON report's schema: 2 adds "format", "version", "scope" and "toolkit_comparison" to 0.1's bare
# {"kernels": [...]}, and "compiler", "release" and a five-part "key" to each record; 3 adds "provenance"
# (commit, date, host, GPU, plugin version, compilers: engine/provenance.py). Readers (`regbudget compare`,
# `regbudget merge`) read the versions in READABLE_VERSIONS: 3 only adds a field. 4 adds "broken_builds": one
# object per manifest build that failed or that the baseline records as broken (update/broken.py), which are
# not kernels. 5 adds the local-traffic estimate to each record (local_share, instructions_executed,
# local_executed, spill_executed, local_lines, loops: report/record.py). 6 counts a kernel's callees' spills
# in its two spill figures, and adds their part (the fields core/metrics.py's rows name as Metric.callees) and
# the callees that spill (spilling_callees): a report of 5 or before holds the kernel's own spills only; and
# "peak_live", the most registers live at one instruction and its line. 7 adds a Triton kernel's
# "triton_signature" (its parameters as compiled) and "triton_config" (its autotune config), null for others,
# and "summary": the checks counted by verdict and against the baseline (report/counts.py), made from the
# records, which still say it all: a reader that needs the counts of an older report counts its records.
JSON_FORMAT = "pytest-regbudget-report"
JSON_VERSION = 7
READABLE_VERSIONS = (2, 3, 4, 5, 6, 7)


def report_json(
    records: Sequence[ReportRecord],
    scope: Mapping[str, object],
    provenance: Mapping[str, object],
    broken_builds: Sequence[Mapping[str, object]] = (),
) -> str:
    """The --regbudget-json document (also what `regbudget merge -o` writes): format, version, the summary
    and provenance first, then the kernels, the scope and the toolkit comparison."""
    from . import compare
    from .counts import count_checks

    # Which toolkit release differs from the next on which kernel, when the run built with several.
    comparisons = [c.to_json() for c in compare.across_releases(records)]
    head = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "summary": count_checks(records).to_json(),
        "provenance": dict(provenance),
        "scope": dict(scope),
    }
    extra = {**head, "broken_builds": [dict(b) for b in broken_builds], "toolkit_comparison": comparisons}
    return json_text(records, extra, first=("format", "version", "summary", "provenance"))


def file_writers(
    *,
    json_path: Path | None,
    html_path: Path | None,
    html_all: bool = False,
    trails: Trails | None = None,
    markdown_path: Path | None,
    step_summary: Path | None,
    scope: Mapping[str, object] | None = None,
    provenance: Mapping[str, object] | None = None,
    broken_builds: Sequence[Mapping[str, object]] = (),
    rootdir: Path | None = None,
    links: GithubLinks | None = None,
) -> list[FileWriter]:
    """`scope`: what the run collected and built (engine/finish.py `report_scope`), for the JSON report;
    `provenance` where it ran (engine/provenance.py); `rootdir` and `links`, how the Markdown names and links
    a kernel's file."""
    writers = []
    if json_path is not None:
        writers.append(
            FileWriter(
                "--regbudget-json",
                json_path,
                lambda records: report_json(records, scope or {}, provenance or {}, broken_builds),
            )
        )
    if html_path is not None:
        from . import html

        render = partial(html.render, all_kernels=html_all, trails=trails)
        writers.append(FileWriter("--regbudget-html", html_path, render))
    markdown = partial(markdown_comment, broken_builds=broken_builds, rootdir=rootdir, links=links)
    if markdown_path is not None:
        writers.append(FileWriter("--regbudget-markdown", markdown_path, markdown, skip_empty=True))
    if step_summary is not None:
        # The runner's file, not one the user asked for: a failure is a note, not an exit code.
        writers.append(
            FileWriter(
                "$GITHUB_STEP_SUMMARY",
                step_summary,
                markdown,
                append=True,
                skip_empty=True,
                required=False,
            )
        )
    return writers
