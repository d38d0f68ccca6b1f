"""A repository of 300 kernels x 2 archs (600 items) with one regression, read as a reviewer reads it: the
whole `pytest -q` output fits a screen with the failure at its end, the Markdown fits a pull-request comment
with the failure at its top, and the HTML is small and shows the suite's picture, in a real headless
Chromium, with no two chart labels on top of each other. Real NVRTC and ptxas from the wheels."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.browser import CHROMIUM_FLAGS, chromium, dom_answer, near
from helpers.runs import run_pytest
from PIL import Image

from pytest_regbudget.report.html import CALM_COLOUR, KERNEL_COLOUR
from pytest_regbudget.report.markdown import MARKDOWN_LIMIT

FILES, PER_FILE = 3, 100
REGRESSED = "k01_042"


def kernel(name: str, accumulators: int) -> str:
    """A kernel whose registers grow with its accumulators (each stays live across the loop)."""
    return f"""
extern "C" __global__ void {name}(const float* __restrict__ x, float* __restrict__ y, int n) {{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[{accumulators}];
#pragma unroll
    for (int k = 0; k < {accumulators}; ++k) acc[k] = x[(t + k * 131) % n];
    for (int d = 0; d < n; ++d) {{
#pragma unroll
        for (int k = 0; k < {accumulators}; ++k) acc[k] = fmaf(acc[k], acc[(k + 1) % {accumulators}], x[d]);
    }}
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < {accumulators}; ++k) s += acc[k];
    if (t < n) y[t] = s;
}}
"""


def write_kernels(root: Path, extra: int = 0) -> None:
    (root / "kernels").mkdir(exist_ok=True)
    for f in range(FILES):
        names = [f"k{f:02d}_{i:03d}" for i in range(PER_FILE)]
        text = "".join(kernel(n, 2 + i % 24 + (extra if n == REGRESSED else 0)) for i, n in enumerate(names))
        (root / "kernels" / f"k{f:02d}.cu").write_text(text)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("large")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "regbudget.toml").write_text(
        'arch = ["sm_80", "sm_90"]\n[[kernels]]\nsource = ["kernels/*.cu"]\nlaunch = [256]\n'
    )
    write_kernels(root)
    done = pytest_in(root, "--regbudget-update")
    assert done.returncode == 0, done.stdout[-3000:]
    write_kernels(root, extra=6)  # one kernel of 300 grows: it fails on both archs
    return root


def pytest_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The screen a reviewer reads at their desk: off CI (pytest reads CI and BUILD_NUMBER), pytest cuts each
    # short-summary line to the width, where on CI it prints every failure's whole message.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")} | {"COLUMNS": "120"}
    return run_pytest(root, "-q", "-p", "no:cacheprovider", *args, env=env, timeout=900)


@pytest.mark.slow
def test_a_600_item_run_reads_as_a_reviewer_needs(suite: Path, tmp_path: Path) -> None:
    done = pytest_in(suite, "--regbudget-markdown=report.md", "--regbudget-html=report.html")
    assert done.returncode == 1, done.stdout[-3000:]
    lines = done.stdout.splitlines()
    keep = os.environ.get("REGBUDGET_SCREENSHOT_DIR")
    if keep:  # the closing note quotes it
        (Path(keep) / "large-suite-output.txt").write_text(done.stdout)
    assert len(lines) < 40, done.stdout
    assert re.search(r"2 failed, 598 passed", lines[-1])
    assert REGRESSED in "\n".join(lines[-15:])
    section = lines[lines.index(next(line for line in lines if " regbudget " in line)) :]
    table = section[section.index(next(line for line in section if line.startswith("kernel "))) :]
    table = table[: next(i for i, line in enumerate(table) if "short test summary info" in line)]
    assert all(len(line) <= 120 for line in table), table
    # A kernel's two regressions name their fix once.
    assert done.stdout.count("if intended, accept it with pytest --regbudget-update") == 2
    table = [line for line in lines if re.match(rf"{REGRESSED} +sm_\d+ ", line)]
    assert len(table) == 2
    assert all(line.endswith("FAILED") for line in table)
    # The counts, wrapped at the width with a hanging indent, then the rows left out.
    start = next(i for i, line in enumerate(lines) if line.startswith("600 kernel checks: "))
    end = lines.index("598 rows not shown: pytest -v or --regbudget-summary=all shows all")
    assert all(line.startswith("  ") for line in lines[start + 1 : end])
    assert " ".join(line.strip() for line in lines[start:end]) == (
        "600 kernel checks: 2 failed, 0 warned, 598 passed; against the baseline: 2 changed (2 worse, "
        "0 improved), 0 new, 598 unchanged"
    )

    markdown = (suite / "report.md").read_text()
    assert len(markdown) < 65_536
    assert len(markdown) <= MARKDOWN_LIMIT
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert rows[1].startswith(f"| **FAILED** | `{REGRESSED}` | sm_80 | ")  # under the header
    assert "**regs " in rows[1]
    # Each failing check on one row (its two archs share one where their changes agree); the unchanged
    # ones only counted.
    archs = [arch for row in rows[1:] for arch in row.split(" | ")[2].split(", ")]
    assert sorted(archs) == ["sm_80", "sm_90"]
    assert "598 unchanged" in markdown.splitlines()[2]

    page = suite / "report.html"
    assert page.stat().st_size < 1_500_000, page.stat().st_size
    text = page.read_text()
    assert text.count('<svg class="suite"') == 1
    assert text.count('class="steps"') == 2  # a staircase for each failing item only
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium: apt-get install chromium (.ci/run installs it)")
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "suite.png"
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=1000,800", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    if keep:
        shutil.copy(shot, Path(keep) / "large-suite.png")
    image = Image.open(shot).convert("RGB")
    data = image.tobytes()
    pixels = [tuple(data[i : i + 3]) for i in range(0, len(data), 3)]
    # The suite's picture is in the first screen: grey points and bars, and the red failing points.
    assert sum(1 for p in pixels if near(p, CALM_COLOUR)) > 2000
    assert sum(1 for p in pixels if near(p, KERNEL_COLOUR)) > 50
    # The labels of every chart as the browser lays them out: no two of one chart overlap.
    charts = dom_answer(browser, flags, text, BOXES, "boxes", tmp_path / "boxes.html")
    assert len(charts) == 2
    for labels in charts:
        assert len(labels) == 2  # the baseline's and the kernel's
        a, b = labels
        assert (
            a["right"] <= b["left"]
            or b["right"] <= a["left"]
            or a["bottom"] <= b["top"]
            or b["bottom"] <= a["top"]
        )


# Each staircase's marker labels, as rendered boxes, in <pre id="boxes">.
BOXES = """
const charts = Array.from(document.querySelectorAll("svg:not(.suite)"), (svg) =>
  Array.from(svg.querySelectorAll("text.marker"), (t) => {
    const r = t.getBoundingClientRect();
    return { text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom };
  }));
const pre = document.createElement("pre");
pre.id = "boxes";
pre.textContent = JSON.stringify(charts);
document.body.append(pre);
"""
