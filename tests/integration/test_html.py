"""The HTML report: its content, and how it renders in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest
from helpers.browser import CHROMIUM_FLAGS, chromium, near
from helpers.data import KERNELS
from helpers.runs import run_json
from PIL import Image

from pytest_regbudget.report.html import KERNEL_COLOUR, STEP_COLOUR

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
    assert re.findall(r'<a href="#k-[\w-]+">([^<]*)</a>', index) == [
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
        [browser, *flags, f"--screenshot={shot}", "--window-size=900,2200", report.as_uri()],
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
    assert image.size == (900, 2200)
    data = image.tobytes()
    pixels = [tuple(data[i : i + 3]) for i in range(0, len(data), 3)]
    steps = sum(1 for p in pixels if near(p, STEP_COLOUR))
    kernel = sum(1 for p in pixels if near(p, KERNEL_COLOUR))
    # Two staircases drawn 2.5 px wide over ~550 px, and red markers and failure text.
    assert steps > 1000, steps
    assert kernel > 200, kernel
    assert len(set(pixels)) > 50  # text, axes and charts, not a blank page
