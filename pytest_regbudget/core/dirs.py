"""Where pytest-regbudget keeps files of its own: the compile cache, and the baseline's update locks; and
whether the cache may be used at all (`usable_cache_dir`).

Pure: the cache (cache/store.py) and the baseline (baseline.py) both need the place, and neither should import
the other's module for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..util.files import unsafe_dir


def default_cache_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """REGBUDGET_CACHE_DIR, else $XDG_CACHE_HOME/pytest-regbudget, else ~/.cache/pytest-regbudget."""
    if env.get("REGBUDGET_CACHE_DIR"):
        return Path(env["REGBUDGET_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-regbudget"


def usable_cache_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> tuple[Path | None, str]:
    """The compile cache directory (`default_cache_dir`), or None and the one line that says why caching is
    off for the run: others than this user could write the directory or swap it for theirs
    (util.files.unsafe_dir), so that what it holds may be theirs. pip turns its cache off so too.

    The baseline's update locks stay there even then (`default_cache_dir`): the cache's writes replace
    links rather than follow them, so the worst another user can do to a lock is hold it."""
    where = default_cache_dir(env)
    why = unsafe_dir(where)
    if not why:
        return where, ""
    return None, f"compile cache {where} is not safe to use, caching off for this run: {why}"
