"""`python -m pytest_regbudget.cli`: the `regbudget` command, as `python -m pytest_regbudget` runs it."""

from __future__ import annotations

from . import main

raise SystemExit(main())
