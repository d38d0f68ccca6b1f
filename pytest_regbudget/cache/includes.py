"""The `#include`, `__has_include` and pre-include directives of a CUDA source, read as the preprocessor reads
them (line splices, comments, strings and character literals), the include options of a command line, and
where a header is looked for (`search_path`, `candidates`). What an NVRTC build may read is worked out from
these (keys.py), and what an nvcc build may have looked for (nvcc_deps.py); nothing here touches the disk.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path

from ..tools.options import CompileOptions
from ..util.patterns import lazy

# -- include directives ---------------------------------------------------------------------------------
# Read as the preprocessor does, not by a pattern over lines: line splices first, then comments become one
# space (so `#include /* c */ "x.h"` and a directive split with `\` read as written), skipping string and
# character literals, whose contents are not comments, and numbers, whose digit separators are not quotes.
_SPLICE = lazy(r"\\\r?\n")
# The lookahead first: every alternative starts with one of these characters, and the engine then skips
# the other positions at once instead of trying each alternative (and the look-behind) at every character.
_LEXEME = lazy(
    r"(?=[uULR\"'/\d.])"
    # A pp-number, kept whole: its digit separators (1'000'000, C++14) are not character literals.
    r"(?:(?<![\w.])\.?\d(?:[eEpP][+-]|'(?=\w)|[\w.])*"
    r'|(?<![\w])(?:u8|u|U|L)?R"(?P<delim>[^()\\\s"]{0,16})\((?s:.*?)\)(?P=delim)"'
    r'|"(?:\\.|[^"\\\n])*"'
    r"|'(?:\\.|[^'\\\n])*'"
    r"|//[^\n]*"
    r"|/\*(?s:.*?)\*/)"
)
_DIRECTIVE = lazy(
    r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*(?:include_next|include|import|embed)\b[ \t\f\v]*(.*)$", re.MULTILINE
)
_HAS_INCLUDE = lazy(r"\b__has_(?:include_next|include|embed)\b\s*(\(\s*(?:\"[^\"\n]*\"|<[^>\n]*>))?")
_DIRECTIVE_WORDS = ("include", "import", "embed")  # in every directive _DIRECTIVE and _HAS_INCLUDE find
_OPERAND = lazy(r'"([^"\n]*)"|<([^>\n]*)>')

# (name, as written): name None where the operand is not a literal the cache can follow.
Directive = tuple[str | None, str]
scanned: dict[str, list[Directive]] = {}  # content digest -> its directives, for this process


def _strip_comments(text: str) -> str:
    def keep(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("/"):
            return " "
        # A raw string may span lines that look like directives; other literals stay, as an #include's
        # operand is one.
        return '""' if match.group("delim") is not None else token

    return _LEXEME.sub(keep, _SPLICE.sub("", text))


def directives(text: str) -> list[Directive]:
    """Every #include-like directive and __has_include of a source, in any #if branch (a superset of what
    is read costs a rebuild at worst, never a stale hit)."""
    spliced = _SPLICE.sub("", text)
    if not any(word in spliced for word in _DIRECTIVE_WORDS):
        return []  # none can be there: comments only remove text (and a file without any is common)
    code = _strip_comments(text)
    found: list[Directive] = []
    for match in _DIRECTIVE.finditer(code):
        rest = match.group(1).strip()
        operand = _OPERAND.match(rest)
        name = None if operand is None else (operand.group(1) or operand.group(2) or "")
        found.append((name, f"#include {rest}"))
    for match in _HAS_INCLUDE.finditer(code):
        written = match.group(0).strip()
        operand = None if match.group(1) is None else _OPERAND.search(match.group(1))
        name = None if operand is None else (operand.group(1) or operand.group(2) or "")
        found.append((name, written))
    return found


@functools.lru_cache(maxsize=256)
def text_directives(text: str) -> list[Directive]:
    """directives() of a source's text, remembered: a run keys each of its files' units on it."""
    return directives(text)


def directives_of(data: bytes, digest: str) -> list[Directive]:
    known = scanned.get(digest)
    if known is None:
        # latin-1 maps every byte: the scan never fails on an encoding, and ASCII syntax reads the same.
        known = scanned[digest] = directives(data.decode("latin-1"))
    return known


def option_values(options: Sequence[str], names: Sequence[str]) -> list[str]:
    """The values of options such as -I: `-I dir`, `-Idir`, `-I=dir`, `--include-path=dir`."""
    values: list[str] = []
    i = 0
    while i < len(options):
        opt = options[i]
        for name in names:
            if opt == name and i + 1 < len(options):
                values.append(options[i + 1])
                i += 1
                break
            if opt.startswith(f"{name}="):
                values.append(opt[len(name) + 1 :])
                break
            if len(name) == 2 and opt.startswith(name) and len(opt) > 2:
                values.append(opt[2:])
                break
        i += 1
    return values


DIR_OPTIONS = ("-I", "--include-path", "-isystem", "--system-include", "-idirafter")
PRE_INCLUDE_OPTIONS = ("-include", "--pre-include")


# -- where a header is looked for ----------------------------------------------------------------------
def search_path(
    source: Path,
    options: CompileOptions,
    toolkit_dirs: Sequence[str | Path] = (),
    prepend: Sequence[str] = (),
    append: Sequence[str] = (),
) -> list[str]:
    """The directories a header is looked for in, absolute, in the order of the flags `CompileOptions.flags`
    gives both compilers: `include_dirs`, the source's own directory, the toolkit's headers, then the -I
    options (with nvcc, NVCC_PREPEND_FLAGS's -I first and NVCC_APPEND_FLAGS's last)."""
    dirs = [
        *option_values(prepend, DIR_OPTIONS),
        *options.include_dirs,
        str(source.parent),
        *map(str, toolkit_dirs),
        *option_values([*options.options, *append], DIR_OPTIONS),
    ]
    return list(dict.fromkeys(os.path.abspath(d) for d in dirs))


def candidates(name: str, includer_dir: str, search: Sequence[str]) -> list[str]:
    """Every path where an `#include` (or `__has_include`) of `name` may be found, in the order they are
    tried: the includer's directory (for a quoted name), then `search`. Angled names get the includer's
    directory too, and every path is kept, whatever is found before it: probing a superset of the
    compiler's search costs a rebuild at worst, never a stale hit."""
    if os.path.isabs(name):
        return [name]
    return [os.path.join(b, name) for b in dict.fromkeys([includer_dir, *search])]
