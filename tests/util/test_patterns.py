"""util/patterns.py: a pattern compiled on first use answers as `re.compile` of the same source does."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from pytest_regbudget.util.patterns import LazyPattern, lazy

TEXT = "ptxas info    : Used 32 registers, 8 bytes spill stores\nptxas info    : Used 4 registers"


def test_nothing_is_compiled_until_first_use() -> None:
    # An invalid pattern shows when it is compiled: not at definition, at first use.
    bad = lazy(r"(unclosed")
    assert isinstance(bad, LazyPattern)
    with pytest.raises(re.error, match="missing \\), unterminated subpattern"):
        bad.search("x")


def test_it_is_compiled_once() -> None:
    pattern = lazy(r"Used (\d+) registers")
    first = pattern.compiled
    assert pattern.compiled is first
    assert first.pattern == pattern.pattern == r"Used (\d+) registers"


@pytest.mark.parametrize(
    ("source", "flags"),
    [(r"Used (\d+) registers", 0), (r"^ptxas\s+INFO", re.IGNORECASE | re.MULTILINE), (r"\d+", 0)],
)
def test_every_method_answers_as_the_compiled_pattern(source: str, flags: int) -> None:
    mine, theirs = lazy(source, flags), re.compile(source, flags)

    def spans(m: re.Match[str] | None) -> tuple[int, int] | None:
        return m.span() if m else None

    assert spans(mine.match(TEXT)) == spans(theirs.match(TEXT))
    assert spans(mine.match(TEXT, 14)) == spans(theirs.match(TEXT, 14))
    assert spans(mine.fullmatch("32")) == spans(theirs.fullmatch("32"))
    assert spans(mine.search(TEXT, 5, 60)) == spans(theirs.search(TEXT, 5, 60))
    assert [m.span() for m in mine.finditer(TEXT)] == [m.span() for m in theirs.finditer(TEXT)]
    assert mine.findall(TEXT) == theirs.findall(TEXT)
    assert mine.sub("<>", TEXT, count=1) == theirs.sub("<>", TEXT, count=1)
    assert mine.sub(lambda m: m.group(0).upper(), TEXT) == theirs.sub(lambda m: m.group(0).upper(), TEXT)
    assert mine.split(TEXT, maxsplit=1) == theirs.split(TEXT, maxsplit=1)


# Every module a warm run with kernels imports (the engine's hooks, the end of a run, the fixture), with each
# module-level re.compile recorded by where it stands.
WARM_IMPORTS = """
import re, sys
compiled = []
original = re.compile
def recording(pattern, flags=0):
    frame = sys._getframe(1)
    if frame.f_code.co_name == "<module>" and "pytest_regbudget" in frame.f_code.co_filename:
        compiled.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
    return original(pattern, flags)
re.compile = recording
import pytest
import pytest_regbudget.plugin.entry, pytest_regbudget.plugin.hooks, pytest_regbudget.engine.finish
import pytest_regbudget.plugin.fixture
print(len(compiled), compiled)
"""


def test_the_modules_a_warm_run_imports_compile_no_pattern_at_import() -> None:
    out = subprocess.run([sys.executable, "-c", WARM_IMPORTS], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("0 "), out.stdout


def test_once_compiled_each_method_is_the_compiled_patterns_own() -> None:
    pattern = lazy(r"\d+")
    assert pattern.sub("#", "a1b22") == "a#b#"
    assert pattern.sub == pattern.compiled.sub  # bound to the compiled pattern: no call through the class
    assert pattern.findall("1 2 3") == ["1", "2", "3"]
