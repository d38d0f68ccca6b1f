"""A job's output read as the GitHub runner reads it: the workflow commands it would obey, and the raw
terminal controls a log or terminal would act on.

Written from actions/runner (src/Runner.Worker/Handlers/OutputManager.cs, src/Runner.Common/ActionCommand.cs,
src/Runner.Worker/ActionCommandManager.cs), not from the plugin's guard (core/text.py), so that each checks
the other:
- a line ends at `\\n`, `\\r` or `\\r\\n` (the runner's StreamReader.ReadLine);
- `::name props::data` is a command where the line starts with it once its leading whitespace is trimmed
  (TryParseV2); `##[name props]data` anywhere in the line (TryParse). The runner tries the first `##[` of
  a line only; this tries each, which can only find more;
- a name is one of the runner's registered commands (or the stop token), in any case (OrdinalIgnoreCase);
- `stop-commands` (either form) stops every command until one named by its token, which resumes them;
- `add-mask` masks its value in what follows (in the data of the commands read here);
- .NET's culture-sensitive search skips what ICU's collation ignores: here every control and format
  character but the tab, and Unicode's default-ignorable code points, are dropped from a line before it is
  read (a few more than ICU ignores, never fewer of those that matter).
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

# The runner's registered commands (ActionCommandManager.Initialize and its extensions), but
# internal-set-repo-path, which only the runner's own plugins may use.
REGISTERED = frozenset(
    {
        "stop-commands",
        "set-env",
        "set-output",
        "save-state",
        "add-mask",
        "add-path",
        "add-matcher",
        "remove-matcher",
        "debug",
        "warning",
        "error",
        "notice",
        "group",
        "endgroup",
        "echo",
    }
)
# What a terminal obeys: ESC, BEL and the one-byte CSI.
CONTROLS = ("\x1b", "\x07", "\x9b")
# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), as ranges.
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


class Obeyed(NamedTuple):
    """A command the runner would run: its name (lower case), its properties as written, its data (masked
    as the runner would show it), and the output line (1-based) it came from."""

    name: str
    properties: str
    data: str
    line: int


def _ignored(char: str) -> bool:
    if char == "\t":
        return False
    if unicodedata.category(char) in ("Cc", "Cf"):
        return True
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _DEFAULT_IGNORABLE)


def _seen(line: str) -> str:
    """The line as the culture-sensitive search sees it."""
    return "".join(c for c in line if not _ignored(c))


def _named(info: str, registered: set[str]) -> tuple[str, str] | None:
    name, _, properties = info.partition(" ")
    return (name.lower(), properties) if name.lower() in registered else None


def _commands(line: str, registered: set[str]) -> list[tuple[str, str, str]]:
    """(name, properties, data) of each command `line` holds: the `::` form, else each `##[` form."""
    trimmed = line.lstrip()
    if trimmed.startswith("::"):
        end = trimmed.find("::", 2)
        if end >= 0 and (found := _named(trimmed[2:end], registered)) is not None:
            return [(*found, trimmed[end + 2 :])]
    found_legacy = []
    for match in re.finditer(r"##\[", line):
        close = line.find("]", match.end())
        if close >= 0 and (named := _named(line[match.end() : close], registered)) is not None:
            found_legacy.append((*named, line[close + 1 :]))
    return found_legacy


def replay(output: str) -> list[Obeyed]:
    """The commands the runner would obey in `output` (a job's stdout and stderr), in order."""
    registered = set(REGISTERED)
    token: str | None = None  # set while stopped
    masks: list[str] = []
    obeyed = []
    for number, raw in enumerate(re.split(r"\r\n|\r|\n", output), start=1):
        line = _seen(raw)
        if "##[" not in line and "::" not in line:
            continue
        for name, properties, data in _commands(line, registered):
            shown = data
            for secret in masks:
                shown = shown.replace(secret, "***")
            if token is not None:
                if name == token:  # the resume token: the runner obeys it, and commands again
                    registered.discard(token)
                    token = None
                    obeyed.append(Obeyed(name, properties, shown, number))
                continue
            obeyed.append(Obeyed(name, properties, shown, number))
            if name == "stop-commands" and data and data.lower() not in registered:
                token = (
                    data.lower()
                )  # (an empty or registered token fails the step instead: ValidateStopToken)
                registered.add(token)
            elif name == "add-mask" and data.strip():
                masks.append(data)
    return obeyed


def raw_controls(output: str) -> list[str]:
    """Each line of `output` (as repr shows it) that holds a raw ESC, BEL or CSI."""
    return [repr(line) for line in output.splitlines() if any(c in line for c in CONTROLS)]
