"""Where pytest-regbudget keeps files of its own: the compile cache, and the baseline's update locks.

Pure: the cache (cache/store.py) and the baseline (baseline.py) both need the place, and neither should import
the other's module for it.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """REGBUDGET_CACHE_DIR, else $XDG_CACHE_HOME/pytest-regbudget, else ~/.cache/pytest-regbudget."""
    if env.get("REGBUDGET_CACHE_DIR"):
        return Path(env["REGBUDGET_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-regbudget"
