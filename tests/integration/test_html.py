"""The HTML report: its content, and how it renders in a real headless Chromium: a small suite, and a copy of
example_project with two kernels made worse (issue 46) in a 1,400 px window."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest
from helpers.browser import CHROMIUM_FLAGS, chromium, dom_answer, near
from helpers.data import KERNELS
from helpers.projects import copy_example
from helpers.runs import run_json, run_pytest
from PIL import Image

from pytest_regbudget.report.html import KERNEL_COLOUR, SPILL_COLOUR, STEP_COLOUR

TESTS = f"""
import pytest
HUNGRY = "hungry.cu"
VARIOUS = {str(KERNELS / "various.cu")!r}

@pytest.mark.regbudget(source=HUNGRY, kernel="poly_eval", launch=(128,))
def test_poly():
    pass

@pytest.mark.regbudget(source=VARIOUS, kernel="gemm<32, 32>", launch=(256,), max_regs=16)
def test_gemm():
    pass

@pytest.mark.regbudget(source=VARIOUS, kernel="local_lookup")
def test_local():
    pass
"""


@pytest.fixture
def report(pytester: pytest.Pytester) -> Path:
    # The kernel's source changes between the update and the run, as in a pull request.
    hungry = (KERNELS / "hungry.cu").read_text()
    pytester.makepyfile(test_k=TESTS)
    (pytester.path / "hungry.cu").write_text(hungry.replace("#define NACC 64", "#define NACC 32"))
    run_json(pytester, "--regbudget-update")
    (pytester.path / "hungry.cu").write_text(hungry.replace("#define NACC 64", "#define NACC 48"))
    out = pytester.path / "report.html"
    result, _ = run_json(pytester, f"--regbudget-html={out}", "--regbudget-sass", "--regbudget-gpu=off")
    result.assert_outcomes(failed=2, passed=1)
    return out


def test_html_has_a_staircase_per_launch_budgets_and_diagnosis(report: Path) -> None:
    text = report.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert text.count("<script") == 1  # the index's sort, inline: nothing to fetch
    assert "src=" not in text
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    # The suite's picture, and a staircase each for poly_eval and gemm (local_lookup has no launch size).
    assert text.count('<svg class="suite"') == 1
    assert text.count("<svg ") == 3
    assert text.count('class="steps"') == 2
    assert "gemm&lt;32, 32&gt; [sm_90]" in text  # names are escaped
    assert 'stroke-dasharray="5,4"' in text  # poly_eval's baseline marker (its registers changed)
    assert "a local array lives in local memory" in text
    assert "various.cu:25" in text
    assert text.count('class="cliff"') >= 1
    # The index: the two failures first, then local_lookup, which passed unchanged (a section, no chart).
    index = text[text.index('<table class="index">') : text.index("</table>")]
    # (A name may wrap after a separator: a <wbr> there.)
    assert re.findall(r'<a href="#k-[\w-]+">([^<]*)</a>', index.replace("<wbr>", "")) == [
        "gemm&lt;32, 32&gt;",
        "poly_eval",
        "local_lookup",
    ]
    assert re.search(r'<section id="k-local_lookup-sm_90-\w+" class="compact">', text)


def test_html_all_draws_the_staircase_of_a_passing_unchanged_kernel(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_one=f"""
import pytest

@pytest.mark.regbudget(source={str(KERNELS / "various.cu")!r}, kernel="gemm<32, 32>", launch=(256,))
def test_gemm():
    pass
"""
    )
    run_json(pytester, "--regbudget-update")  # without an entry the kernel is new: shown in detail
    out = pytester.path / "report.html"
    result, _ = run_json(pytester, f"--regbudget-html={out}", "--regbudget-gpu=off")
    result.assert_outcomes(passed=1)
    assert out.read_text().count("<svg") == 1  # the suite's picture only
    assert 'class="compact"' in out.read_text()
    result, _ = run_json(pytester, f"--regbudget-html={out}", "--regbudget-html-all", "--regbudget-gpu=off")
    result.assert_outcomes(passed=1)
    assert out.read_text().count('class="steps"') == 1


# Installed before the page's script runs: any error it throws is kept for the harness to report.
CATCH = 'window.seenErrors = []; addEventListener("error", (e) => seenErrors.push(String(e.message)));'
# Runs after the page's script: reads the index, clicks headers, and leaves what it saw in <pre id="harness">.
HARNESS = """
const table = document.querySelector("table.index");
const heads = Array.from(table.tHead.rows[0].cells);
const column = (name) => heads.findIndex((th) => th.textContent === name);
const read = () => {
  const out = {};
  for (const name of ["kernel", "verdict", "registers"]) {
    out[name] = Array.from(table.tBodies[0].rows, (tr) => tr.cells[column(name)].textContent);
  }
  out.sort = heads[column("registers")].getAttribute("aria-sort");
  return out;
};
const click = (name) => heads[column(name)].querySelector("button").click();
const seen = { initial: read() };
click("registers");
seen["registers up"] = read();
click("registers");
seen["registers down"] = read();
click("kernel");
seen["kernel up"] = read();
seen.links = Array.from(table.querySelectorAll("a"), (a) => a.getAttribute("href"));
seen.missing = seen.links.filter((href) => !document.getElementById(href.slice(1)));
// The element the URL's fragment names (the page is still loading: :target is not set yet).
seen.target = document.getElementById(location.hash.slice(1))?.id ?? null;
seen.errors = window.seenErrors;
const pre = document.createElement("pre");
pre.id = "harness";
pre.textContent = JSON.stringify(seen);
document.body.append(pre);
"""


@pytest.mark.slow
def test_html_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium: apt-get install chromium (.ci/run installs it)")
    shot = tmp_path / "report.png"
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=1400,2200", report.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    # The page with a harness around it, opened at its first index link's anchor: the harness records any
    # error the page's script throws, clicks column headers, and writes what it saw into the DOM.
    first = re.search(r'<a href="#([^"]+)">', report.read_text())
    assert first is not None
    harnessed = tmp_path / "harnessed.html"
    text = report.read_text().replace("<head>", f"<head><script>{CATCH}</script>", 1)
    harnessed.write_text(text.replace("</body>", f"<script>{HARNESS}</script></body>", 1))
    run = subprocess.run(
        [
            browser,
            *flags,
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            f"{harnessed.as_uri()}#{first[1]}",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = run.stdout
    assert dom.count("<polyline") == 2
    # Nothing on the console: no uncaught error, no warning (the page logs nothing of its own).
    assert [line for line in run.stderr.splitlines() if ":CONSOLE" in line] == []
    shown = re.search(r'<pre id="harness">(.*?)</pre>', dom, re.DOTALL)
    assert shown is not None, dom[-2000:]
    seen = json.loads(unescape(shown[1]))
    assert seen["errors"] == []
    assert seen["target"] == first[1]  # the URL's anchor names a section of the page
    assert len(seen["links"]) == 3
    assert seen["missing"] == []
    # The default order is failures first; a click on "registers" sorts numerically, another reverses it.
    assert seen["initial"]["verdict"][:2] == ["FAILED", "FAILED"]
    regs = [int(r) for r in seen["initial"]["registers"]]
    assert [int(r) for r in seen["registers up"]["registers"]] == sorted(regs)
    assert [int(r) for r in seen["registers down"]["registers"]] == sorted(regs, reverse=True)
    assert seen["registers down"]["sort"] == "descending"
    kernels = seen["initial"]["kernel"]
    assert seen["kernel up"]["kernel"] == sorted(kernels, key=str.lower)
    keep = os.environ.get("REGBUDGET_SCREENSHOT_DIR")
    if keep:  # CI can upload it as an artifact
        shutil.copy(shot, Path(keep) / "regbudget-report.png")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 2200)
    data = image.tobytes()
    pixels = [tuple(data[i : i + 3]) for i in range(0, len(data), 3)]
    steps = sum(1 for p in pixels if near(p, STEP_COLOUR))
    kernel = sum(1 for p in pixels if near(p, KERNEL_COLOUR))
    # Two staircases drawn 2.5 px wide over ~550 px, and red markers and failure text.
    assert steps > 1000, steps
    assert kernel > 200, kernel
    assert len(set(pixels)) > 50  # text, axes and charts, not a blank page


# A test named as a tuning table names its cases: its id and its variant (the defines) are far wider than a
# column of the index. The variant is new, so the strict example fails it until an update records it.
LONG_NAMES = """
import pytest

SHAPES = ["float32-4096x4096x4096-row_major-tile_128x256x64-stages_4-split_k_1-swizzle_8-epilogue_bias_gelu"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.regbudget(
    source="../kernels/poly.cu",
    kernel="poly_eval",
    defines={"NACC": 16, "TUNING_TABLE_ENTRY": "float32_4096x4096x4096_row_major_tile_128x256x64_stages_4"},
    launch=(256,),
)
def test_poly_eval_holds_its_budget_for_every_shape_of_the_shipped_tuning_table(shape):
    pass
"""
LONG_ID = (
    "tests/test_long_names.py::test_poly_eval_holds_its_budget_for_every_shape_of_the_shipped_tuning_table["
    "float32-4096x4096x4096-row_major-tile_128x256x64-stages_4-split_k_1-swizzle_8-epilogue_bias_gelu-sm_90]"
)


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML report of example_project with median.cu's MIN_BLOCKS 8 (more spills, fewer registers) and
    softmax.cu's UNROLL 8 (more registers), and the long-named test."""
    project = copy_example(tmp_path_factory.mktemp("regressed") / "my-kernels")
    (project / "tests" / "test_long_names.py").write_text(LONG_NAMES)
    env = {**os.environ, "GITHUB_ACTIONS": ""}
    done = run_pytest(
        project, "-p", "no:cacheprovider", "-q", "--regbudget-html=report.html", env=env, timeout=900
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert "median7x7 [sm_80]: spill_stores 112 -> 584 (+472)" in done.stdout
    return project / "report.html"


# What the browser lays out, in <pre id="layout">: the page's width, the suite picture's improvement corner
# and each mark of its left panel (centre and radius in the window's pixels), and the index's long cells.
LAYOUT = """
const svg = document.querySelector("svg.suite");
const box = (e) => { const r = e.getBoundingClientRect(); return { left: r.left, top: r.top, right: r.right,
  bottom: r.bottom }; };
const seen = {
  scrollWidth: document.documentElement.scrollWidth,
  better: box(svg.querySelector("rect.better")),
  marks: Array.from(svg.querySelectorAll("circle.mark"), (c) => ({ ...box(c), kind: c.dataset.kind,
    fill: c.getAttribute("fill"), title: c.querySelector("title").textContent })),
  cells: Array.from(document.querySelectorAll("table.index td"), (td) => ({ ...box(td),
    text: td.textContent })),
};
const pre = document.createElement("pre");
pre.id = "layout";
pre.hidden = true;
pre.textContent = JSON.stringify(seen);
document.body.append(pre);
"""


@pytest.mark.slow
def test_a_regressed_example_fits_1400_px_and_its_spill_failure_is_no_improvement(
    regressed: Path, tmp_path: Path
) -> None:
    text = regressed.read_text()
    # median7x7 failed on its spills (its registers fell from 40 to 32): its mark says so on both archs.
    marks = re.findall(
        r'<circle class="mark" data-kind="(\w+)"[^>]*fill="([^"]+)"[^>]*><title>median7x7 ', text
    )
    assert marks == [("spills", SPILL_COLOUR)] * 2
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium: apt-get install chromium (.ci/run installs it)")
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000"]
    seen = dom_answer(browser, flags, text, LAYOUT, "layout", tmp_path / "layout.html")
    assert seen["scrollWidth"] <= 1400, seen["scrollWidth"]
    # The long test id and variant wrap inside the window, whole.
    for whole in (
        LONG_ID,
        "NACC=16,TUNING_TABLE_ENTRY=float32_4096x4096x4096_row_major_tile_128x256x64_stages_4",
    ):
        cell = next(c for c in seen["cells"] if c["text"] == whole)
        assert cell["right"] <= 1400
    assert max(c["right"] for c in seen["cells"]) <= 1400
    # Every failing kernel's mark sits outside the improvement corner; median7x7's above the zero line.
    better = seen["better"]
    for mark in seen["marks"]:
        x, y = (mark["left"] + mark["right"]) / 2, (mark["top"] + mark["bottom"]) / 2
        inside = better["left"] <= x <= better["right"] and better["top"] <= y <= better["bottom"]
        if "FAILED" in mark["title"]:
            assert not inside, mark
        if mark["title"].startswith("median7x7 "):
            assert mark["bottom"] < better["top"], mark

    # The screenshot: the spill failure's colour where median7x7's marks are, no failure's in the corner.
    shot = tmp_path / "regressed.png"
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", regressed.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    keep = os.environ.get("REGBUDGET_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / "regressed-example.png")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 1000)

    def count(colour: str, left: float, top: float, right: float, bottom: float) -> int:
        area = image.crop((int(left), int(top), int(right) + 1, int(bottom) + 1))
        data = area.tobytes()
        return sum(1 for i in range(0, len(data), 3) if near(tuple(data[i : i + 3]), colour))

    for mark in (m for m in seen["marks"] if m["title"].startswith("median7x7 ")):
        assert count(SPILL_COLOUR, mark["left"], mark["top"], mark["right"], mark["bottom"]) > 30, mark
    corner = (better["left"] + 1, better["top"] + 1, better["right"] - 1, better["bottom"] - 1)
    assert count(SPILL_COLOUR, *corner) == 0
    assert count(KERNEL_COLOUR, *corner) == 0
