#!/usr/bin/env python3
"""pre-commit's `regbudget-baseline-check` hook (.pre-commit-hooks.yaml): `regbudget baseline check`, run from
pre-commit's clone of this repository with the standard library alone (and tomli on Python 3.10), so that the
hook installs nothing: no CUDA wheel, none of the plugin's dependencies. It is the command's own code
(pytest_regbudget/core/baseline_schema.py), with the same messages and exit status.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The clone's package, imported without installing it: the modules the check needs import only the standard
# library (tests/test_purity.py holds them to it).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_regbudget.core.baseline_schema import check

if __name__ == "__main__":
    sys.exit(check(sys.argv[1:]))
