"""Text from outside the plugin (kernel names, paths, test ids, compiler logs) made safe to print.

Owns two rules. A name is printed on one line: every character that is not printable (a newline, a tab,
an escape sequence, a Unicode line separator) is shown escaped, as `repr` shows it. A multi-line log keeps
its lines, but no line may read as a GitHub workflow command: the runner strips leading whitespace and obeys
any line that then starts with `::` (actions/runner, ActionCommand.TryParseV2), so indenting is not enough.

It also owns the two spellings of a source's bytes (`source_bytes` for a compiler, `readable` for a
person) and the "did you mean" hint for a misspelt key, which markers, the manifest and the command line
share.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

# What a log line that would start a workflow command is shown with, in place of its last two spaces of
# indentation (NVRTC indents the source line it quotes by two, so its caret line stays aligned).
COMMAND_GUARD = "> "


def _escaped(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")


def one_line(text: str) -> str:
    """`text` with each non-printable character escaped (a newline shows as `\\n`): it cannot start a line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def _guard(line: str) -> str:
    rest = line.lstrip()
    if not rest.startswith("::"):
        return line
    indent = line[: len(line) - len(rest)]
    return indent[:-2] + COMMAND_GUARD + rest


# What makes a text need safe_block's care: a character other than printable ASCII and tabs, or a line whose
# text starts with "::" (\r, \v, \f and other line breaks are outside printable ASCII).
_PLAIN = re.compile(r"[^\t\x20-\x7e\n]|^[^\S\n]*::", re.MULTILINE)


def safe_block(text: str) -> str:
    """Multi-line `text` (a compiler log, a failure message) with no line GitHub would run as a command.

    Every line break (`\\r` too) ends a line; other non-printable characters but tabs are escaped, and a
    line that would start with `::` after its indentation gets `> ` in front of the `::`.
    """
    if _PLAIN.search(text) is None:  # the usual log: printable ASCII, no "::" (escaping is per character)
        return "\n".join(text.splitlines())
    lines = []
    for line in text.splitlines():
        escaped = "".join(c if c.isprintable() or c == "\t" else _escaped(c) for c in line)
        lines.append(_guard(escaped))
    return "\n".join(lines)


def close_key_hint(key: str, valid: Sequence[str]) -> str:
    """` (did you mean 'max_regs'?)` for a misspelt key of `valid`, else nothing (markers, tolerances,
    the manifest's tables and the command line say it alike)."""
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def source_bytes(text: str) -> bytes:
    """The bytes of a CUDA source read by `tools.compiler.read_source` (its bytes that are not UTF-8 kept
    as lone surrogates), or of a code string: what a compiler is given and a cache key hashes."""
    return text.encode("utf-8", "surrogateescape")


def readable(text: str) -> str:
    """Source text for a person: a byte that is not UTF-8 (a Latin-1 `©`) shown as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
