"""The HTML report of a run inside a git repository draws the failing kernel's registers and spill bytes over
the baseline's commits, with the run as the last point, and the suite's spill bytes and occupancy bands over
time. The baseline's history is made by real `pytest --regbudget-update` runs (NVRTC and ptxas of the wheels)
committed with git; the page is rendered in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.browser import CHROMIUM_FLAGS, chromium, near
from helpers.data import KERNELS
from helpers.history import git
from helpers.projects import copy_kernels
from helpers.runs import run_pytest
from PIL import Image

from pytest_regbudget.report.html import KERNEL_COLOUR, STEP_COLOUR

# (NACC, -maxrregcount or None): the registers grow, then a cap makes it spill, then it is fixed.
STEPS = [(8, None), (16, None), (24, 32), (16, None)]
TEST = """
import pytest

@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", launch=(256,), ptxas_options={options})
def test_poly():
    pass

@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", launch=(128,), defines={{"NACC": 4}})
def test_small():
    pass
"""


def write(root: Path, nacc: int, cap: int | None) -> None:
    """The kernel's own default (an edit of the source, not a define: one kernel variant throughout)."""
    options = f'["-maxrregcount={cap}"]' if cap else "[]"
    (root / "test_k.py").write_text(TEST.format(options=options))
    source = (KERNELS / "hungry.cu").read_text()
    (root / "hungry.cu").write_text(source.replace("#define NACC 64", f"#define NACC {nacc}"))


def pytest_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pytest(root, "-q", "-p", "no:cacheprovider", "--regbudget-arch=sm_90", *args)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("charted")
    (root / "pytest.ini").write_text("[pytest]\n")
    git(root, "init", "-q", "-b", "main")
    for n, (nacc, cap) in enumerate(STEPS):
        write(root, nacc, cap)
        done = pytest_in(root, "--regbudget-update")
        assert done.returncode == 0, done.stdout[-2000:]
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"step {n}: NACC={nacc}" + (f", cap {cap}" if cap else ""))
    write(root, 64, 32)  # the change under review: more accumulators under the cap, and it spills
    return root


@pytest.mark.slow
def test_the_failing_kernels_chart_over_the_baselines_commits(project: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    done = pytest_in(project, f"--regbudget-html={report}")
    assert done.returncode == 1, done.stdout[-2000:]
    page = report.read_text()
    # The failing kernel's section: 4 commits and this run; the unchanged kernel has no section of its own.
    section = page[page.index('<section id="') :]
    charts = re.findall(r'<svg class="history".*?</svg>', section, re.DOTALL)
    assert len(charts) == 1
    points = re.findall(r"<title>([^<]*): registers (\d+)</title>", charts[0])
    assert len(points) == len(STEPS) + 1
    assert points[-1][0] == "this run"
    commits = git(project, "log", "--format=%h", "--abbrev=10").split()[::-1]
    assert [p[0].split()[0] for p in points[:-1]] == commits
    spills = [int(s) for s in re.findall(r": spill bytes (\d+)</title>", charts[0])]
    assert spills[0] == spills[1] == spills[3] == 0 < spills[2] < spills[-1]  # capped, fixed, worse now
    assert "Over the baseline's last 4 commits" in page  # the suite's picture over time
    assert page.count('<svg class="suite-history"') == 1
    # Rendered: the chart's two lines are on the screen, in their colours.
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium: apt-get install chromium (.ci/run installs it)")
    alone = tmp_path / "chart.html"
    alone.write_text(f"<!DOCTYPE html><html><body style='margin:0'>{charts[0]}</body></html>")
    shots = {}
    for name, target, size in (("chart", alone, "600,400"), ("page", report, "900,2600")):
        shot = tmp_path / f"{name}.png"
        flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / ('profile-' + name)}"]
        subprocess.run(
            [browser, *flags, f"--screenshot={shot}", f"--window-size={size}", target.as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )
        shots[name] = shot
    data = Image.open(shots["chart"]).convert("RGB").tobytes()
    pixels = [tuple(data[i : i + 3]) for i in range(0, len(data), 3)]
    assert sum(1 for p in pixels if near(p, STEP_COLOUR)) > 150  # the registers' line
    assert sum(1 for p in pixels if near(p, KERNEL_COLOUR)) > 150  # the spill bytes' line
    keep = os.environ.get("REGBUDGET_SCREENSHOT_DIR")
    if keep:  # the closing note shows them
        shutil.copy(shots["chart"], Path(keep) / "history-chart.png")
        shutil.copy(shots["page"], Path(keep) / "history-page.png")


@pytest.mark.slow
def test_no_history_asked_for_draws_none(project: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    pytest_in(project, f"--regbudget-html={report}", "-o", "regbudget_html_history=0")
    page = report.read_text()
    assert '<svg class="history"' not in page
    assert "suite-history" not in page


def test_outside_git_the_page_says_why_and_a_bad_count_is_a_usage_error(pytester: pytest.Pytester) -> None:
    copy_kernels(pytester.path, "hungry.cu")
    pytester.makepyfile(test_k=TEST.format(options="[]"))
    report = pytester.path / "r.html"
    pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-html={report}", "--regbudget-update")
    assert "No history charts: " in report.read_text()
    assert "is not in a git repository" in report.read_text()
    bad = pytester.runpytest("-p", "no:cacheprovider", "-o", "regbudget_html_history=lots")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*regbudget_html_history = 'lots': expected a whole number >= 0, e.g. 50*"])
