"""`python -m pytest_regbudget`: the `regbudget` command (cli/__init__.py)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
