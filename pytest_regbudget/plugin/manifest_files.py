"""Where a rootdir's kernel manifest may be: `regbudget.toml`, or `[tool.regbudget]` in `pyproject.toml`.

Light on purpose: the plugin asks on every run, before importing the manifest's reader, its checks and a TOML
parser, which most projects (those without a manifest) never need. Each file is read at most once per run:
manifest.load parses the text found here.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct

PYPROJECT = "pyproject.toml"
STANDALONE = "regbudget.toml"
# The manifest's pytest plugin (collect.py): the plugin asks for it by name without importing collect.py.
PLUGIN_NAME = "regbudget-manifest"


# A named tuple rather than a frozen dataclass: every run defines it at import (docs/speed.md, "Records").
class Found(Struct, frozen=True):
    """The files that may hold the manifest. `pyproject` only where it mentions regbudget (a pyproject that
    does not cannot have [tool.regbudget]); `pyproject_text` is its text, or None where it could not be read
    (manifest.load then says why)."""

    standalone: Path | None
    pyproject: Path | None
    pyproject_text: str | None


def find(rootdir: Path) -> Found | None:
    """The rootdir's manifest files; None when it can have no manifest."""
    standalone, path = rootdir / STANDALONE, rootdir / PYPROJECT
    pyproject: Path | None = path
    text = None
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        pyproject = None
    except (OSError, UnicodeDecodeError):
        pass  # manifest.load reads it again, and says what is wrong with it
    if text is not None and "regbudget" not in text:
        pyproject = None
    found = Found(standalone if standalone.is_file() else None, pyproject, text if pyproject else None)
    return None if found.standalone is None and found.pyproject is None else found
