"""Regular expressions compiled when first used.

Every pytest run with kernels imports the modules a warm run needs, and compiling their patterns was a quarter
of that import (about 80 patterns, 8 to 10 ms, measured with `benchmarks/import_speed.py`), while a warm run
of marked kernels uses about 20 of them. A module-level `lazy(r"...")` costs nothing until its first
match; after that each method called on it is the compiled `re.Pattern`'s own. Only the modules a warm run
imports use it (docs/contributing.md); a parser that only a build imports compiles at import, as usual.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

# The methods below; once compiled, each is the compiled pattern's own, set on the instance.
_METHODS = ("match", "fullmatch", "search", "finditer", "findall", "sub", "split")


class LazyPattern:
    """`re.compile(source, flags)` on first use, with the `re.Pattern[str]` methods the package calls."""

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
            # An instance attribute comes before a method of the class: from now on `p.sub(...)` calls the
            # compiled pattern's method itself. The names' normalization calls it 72,000 times in a warm
            # run of libcublas's kernels, where the call through this class cost about 1 us each.
            for name in _METHODS:
                setattr(self, name, getattr(self._compiled, name))
        return self._compiled

    @property
    def pattern(self) -> str:
        return self._source

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.search(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        return self.compiled.findall(string, pos, endpos)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return self.compiled.split(string, maxsplit)

    def __repr__(self) -> str:
        return f"lazy({self._source!r})"


def lazy(source: str, flags: int = 0) -> LazyPattern:
    """A pattern compiled on first use (see the module's docstring)."""
    return LazyPattern(source, flags)
