"""The HTML report: its content, and how it renders in a real headless Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_json
from PIL import Image

from pytest_regbudget.html import KERNEL_COLOUR, STEP_COLOUR

KERNELS = Path(__file__).parent.parent / "kernels"

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
    assert "<script" not in text
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert text.count("<svg ") == 2  # poly_eval and gemm have a launch size; local_lookup has none
    assert text.count('class="steps"') == 2
    assert "gemm&lt;32, 32&gt; [sm_90]" in text  # names are escaped
    assert 'stroke-dasharray="5,4"' in text  # poly_eval's baseline marker (its registers changed)
    assert "a local array lives in local memory" in text
    assert "various.cu:25" in text
    assert text.count('class="cliff"') >= 1


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _near(pixel: tuple[int, ...], colour: str, tolerance: int = 12) -> bool:
    rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return all(abs(a - b) <= tolerance for a, b in zip(pixel[:3], rgb, strict=True))


def test_html_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium: apt-get install chromium (.ci/run installs it)")
    shot = tmp_path / "report.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=900,2200", report.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", report.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert dom.count("<polyline") == 2
    keep = os.environ.get("REGBUDGET_SCREENSHOT_DIR")
    if keep:  # CI can upload it as an artifact
        shutil.copy(shot, Path(keep) / "regbudget-report.png")
    image = Image.open(shot).convert("RGB")
    assert image.size == (900, 2200)
    data = image.tobytes()
    pixels = [tuple(data[i : i + 3]) for i in range(0, len(data), 3)]
    steps = sum(1 for p in pixels if _near(p, STEP_COLOUR))
    kernel = sum(1 for p in pixels if _near(p, KERNEL_COLOUR))
    # Two staircases drawn 2.5 px wide over ~550 px, and red markers and failure text.
    assert steps > 1000, steps
    assert kernel > 200, kernel
    assert len(set(pixels)) > 50  # text, axes and charts, not a blank page
