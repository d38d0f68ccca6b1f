"""Headless Chromium, for the tests that render a report and read its pixels or its DOM."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str | None:
    """The browser's path, or None where there is none (the test skips, saying how to install it)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def near(pixel: tuple[int, ...], colour: str, tolerance: int = 12) -> bool:
    """Whether a screenshot's `pixel` is within `tolerance` of `colour` (#rrggbb) in each channel."""
    rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return all(abs(a - b) <= tolerance for a, b in zip(pixel[:3], rgb, strict=True))


def dom_answer(browser: str, flags: list[str], page: str, script: str, element: str, where: Path) -> Any:
    """What `script`, run in `page` (an HTML text) as the browser lays it out, wrote as JSON into the
    `<pre id=element>` it adds; `where`: the file the harnessed page is written to."""
    where.write_text(page.replace("</body>", f"<script>{script}</script></body>", 1))
    run = subprocess.run(
        [browser, *flags, "--dump-dom", where.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(rf'<pre id="{element}"[^>]*>(.*?)</pre>', run.stdout, re.DOTALL)
    assert found is not None, run.stdout[-2000:]
    return json.loads(unescape(found[1]))
