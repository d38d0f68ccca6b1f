"""Text from outside the plugin (kernel names, paths, test ids, baseline keys, commit subjects, compiler
logs) made safe to print.

One rule set, applied by one function (`_guarded`) to every line that carries such text, whatever prints
it (the plugin's terminal lines, failure messages, warnings and annotations, and everything the `regbudget`
command writes). A printed line carries:
- no character that is not printable (a newline, ESC, BEL, CSI `\\x9b` and the other C0 and C1 controls,
  format characters such as U+200B, Unicode line and paragraph separators): each is shown escaped, as
  `repr` shows it (`\\x1b`, `\\u2028`); a multi-line block keeps its tabs and its line breaks;
- no `##[`: shown as `## [`;
- no `::` at its start after its indentation: shown as `> ::`.

Why: the GitHub runner reads a job's output line by line (a line ends at `\\n` or `\\r`) and obeys two forms
of workflow command (actions/runner, `src/Runner.Common/ActionCommand.cs`): `::name args::data` where a
line starts with it once its leading whitespace is trimmed (`TryParseV2`), and the legacy `##[name args]data`
anywhere in a line (`TryParse`: `message.IndexOf("##[")`). Names match in any case (`ActionCommandManager`
registers them `OrdinalIgnoreCase`), and one forged `stop-commands` silences every command after it, the
plugin's own annotations included. Both searches are .NET's culture-sensitive `IndexOf` and `StartsWith`,
which skip what the collation ignores: controls and format characters (escaped, so they cannot hide a
command) and a few printable ones, variation selectors and the like (`_IGNORED`), which may stand between
the characters of a `##[` or a `::` and are defused with them. A terminal obeys ESC, BEL and CSI.

A second spelling of the same rules, lossless, is for JSON printed to a log (`json_text`): a character is
escaped as `\\uXXXX` and the `[` of a `##[` as `\\u005b`, so that the document reads back as written.

It also owns the two spellings of a source's bytes (`source_bytes` for a compiler, `readable` for a
person) and the "did you mean" hint for a misspelt key, which markers, the manifest and the command line
share.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

from ..util.patterns import lazy

# What a line that would start a workflow command is shown with, in place of its last two spaces of
# indentation (NVRTC indents the source line it quotes by two, so its caret line stays aligned).
COMMAND_GUARD = "> "
# What the `[` of a `##[` is shown as: a space before it, which a person reads past and the runner does not.
LEGACY_GUARD = " ["

# Printable characters that are Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt; the rest
# of that set is not printable, so escaped anyway): ICU's collation, under .NET's culture-sensitive search,
# skips them, so that `#\ufe0f#[` is found as `##[`. Kept as they are elsewhere (an emoji's U+FE0F).
_IGNORED = "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef"
_LEGACY = lazy(f"#[{_IGNORED}]*#[{_IGNORED}]*\\[")
_COMMAND = lazy(f"[ \\t]*[{_IGNORED}]*:[{_IGNORED}]*:")
# What makes a text need a guard: a character other than printable ASCII, tabs and newlines, a `##[`, or a
# line whose text starts with "::" (\r, \v, \f and other line breaks are outside printable ASCII).
_PLAIN = lazy(r"[^\t\x20-\x7e\n]|##\[|^[ \t]*::", re.MULTILINE)


def _escaped(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")


def _json_escaped(char: str) -> str:
    """`char` as a JSON string escape: `\\u001b`, or a surrogate pair for a character beyond U+FFFF."""
    units = char.encode("utf-16-be", "surrogatepass")  # a lone surrogate: a file name's byte
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def _guarded(
    line: str, *, tabs: bool = False, escape: Callable[[str], str] = _escaped, bracket: str = LEGACY_GUARD
) -> str:
    """The one guard: `line` with every character that is not printable escaped by `escape` (a tab kept
    where `tabs`), each `##[` given `bracket` for its `[`, and a `::` at its start after its indentation
    shown as `> ::`."""
    if not line.isprintable():
        line = "".join(c if c.isprintable() or (tabs and c == "\t") else escape(c) for c in line)
    if "[" in line:
        line = _LEGACY.sub(lambda m: m[0][:-1] + bracket, line)
    if ":" in line and _COMMAND.match(line) is not None:
        rest = line.lstrip(" \t")
        indent = line[: len(line) - len(rest)]
        line = indent[:-2] + COMMAND_GUARD + rest
    return line


def one_line(text: str) -> str:
    """`text` on one line, guarded: each non-printable character escaped (a newline shows as `\\n`), no
    `##[`, and no `::` at its start (it may start a line where it is printed)."""
    return _guarded(text)


def safe_block(text: str) -> str:
    """Multi-line `text` (a compiler log, a failure message) with no line GitHub would run as a command.

    Every line break (`\\r` too) ends a line; each line is guarded as `one_line` guards a name, but for its
    tabs, which it keeps.
    """
    if _PLAIN.search(text) is None:  # the usual log: printable ASCII, no "##[", no "::" to start a line
        return "\n".join(text.splitlines())
    return "\n".join(_guarded(line, tabs=True) for line in text.splitlines())


def json_text(text: str) -> str:
    """A JSON document as printed to a log, guarded losslessly: every character that is not printable (but
    the newlines of its layout) escaped as `\\uXXXX`, and each `##[` written `##\\u005b`. It reads back as
    the same document: a JSON string is the only place such text can be, and `#` is nowhere else."""
    return "\n".join(_guarded(line, escape=_json_escaped, bracket="\\u005b") for line in text.split("\n"))


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
