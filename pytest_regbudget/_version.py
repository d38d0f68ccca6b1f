"""The package's version, in one place: pyproject.toml reads it (tool.setuptools.dynamic),
`pytest_regbudget.__version__` and `regbudget --version` show it, and the release workflow refuses a tag that
differs from it. A module of its own, so that the command line names it without the public API's imports.
"""

__version__ = "0.1.0"
