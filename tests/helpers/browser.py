"""Headless Chromium, for the tests that render a report and read its pixels or its DOM."""

from __future__ import annotations

import shutil

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
