"""Fitting the terminal's `regbudget` section to pytest's width: the table's columns and the order in which
they drop, long names cut so that each stays told apart from the others, cells that have shorter forms (the
baseline changes), and prose lines wrapped at word boundaries with a hanging indent.

A width of None (pytest -vv) shows every column and every cell in full, as pytest's -vv shows whole diffs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

from ..util.patterns import lazy

# The table drops its columns in this order while its narrowest form is wider than the terminal; the columns
# that a run adds (the cluster, the SASS's, the timings) after the usual ones: a run shows them because it
# asked (docs/reference/options.md, --regbudget-summary). Of `test` and `kernel`, the one that does not tell
# the rows apart goes first (terminal.summary_lines): pytest's own summary names every failing test. The
# other name, the arch, the baseline and the verdict never drop.
DROP_ORDER = (
    "test",
    "kernel",
    "noise",
    "base ms",
    "drv regs",
    "drv occ",
    "smem",
    "cliff",
    "stack",
    "cluster",
    "local %",
    "spill instr loop/all",
    "time ms",
    "ratio",
    "occupancy",
    "spill st/ld",
    "regs",
)
# A name this long or shorter is never cut: most kernels' names are, and a cut one reads as another.
NAME_KEPT = 24
GAP = 2  # spaces between two columns
_WORD_KEPT = 4  # the least of a word (a template argument) that a squeezed name keeps
_LEAD = 6  # the least of a shared start a cut name keeps, so that it still reads as its kernel
# Where a name's parts start and end: template arguments, parameters, a test id's [params].
_SEPARATORS = frozenset("<>,()[] :")
_OPENING = lazy(r"[<\[(]")
_PARTS = lazy(r"([<>,()\[\] :]+)")  # a name's words and, between them, its separators


def middle_cut(text: str, width: int) -> str:
    """`text` in `width` characters, its middle replaced by "...": its start and end are kept."""
    if len(text) <= width:
        return text
    if width <= 3:
        return text[:width]
    tail = (width - 3) // 2
    return text[: width - 3 - tail] + "..." + text[len(text) - tail :]


class Shape:
    """What a name shares with the other names of its family (the names with the same identifier before
    `<`, `[` or `(`): its first `start` and last `end` characters, and the middle in between as pieces
    (`core`: text, the fewest characters it can be shortened to): each run of words that every member has
    there written `..`, and each other word shortened no further than it still differs from the family's
    words in its place (`uint1..`, `uint8..`). No pieces where the names differ in shape."""

    def __init__(
        self, start: int = 0, end: int = 0, split: list[str] | None = None, least: list[int] | None = None
    ):
        self.start, self.end = start, end
        self._split, self._least = split or [], least or []

    @cached_property
    def core(self) -> tuple[tuple[str, int], ...]:
        if not self._least:
            return ()
        return _pieces(self._split, self._least, self.start, sum(map(len, self._split)) - self.end)


_ALONE = Shape()


def cut_name(text: str, width: int, shape: Shape = _ALONE, *, whole_words: bool = False) -> str:
    """`text` in `width` characters. The parts it shares with its family go first, down to a short lead, so
    that what differs (template arguments, a test's parameters) stays; with none shared, the middle goes
    (the start and the [arch] or closing arguments stay). `whole_words`: "" rather than a family's name cut
    through its arguments' middle, where shortening its words is not enough."""
    n = len(text)
    if n <= width:
        return text
    head, core, tail = text[: shape.start], text[shape.start : n - shape.end], text[n - shape.end :]
    # A shared end longer than "..." can go whole: the lead's "..." says the name is cut.
    least_head, least_tail = min(len(head), _LEAD + 3), len(tail) if len(tail) <= 3 else 0
    room = width - least_head - least_tail
    pieces = list(shape.core)
    if len(core) > room and pieces:
        core = "".join(text for text, _ in pieces)
    if room < len(core):
        if not head and not tail:
            return middle_cut(text, width)
        pieces = pieces or [(p, len(p) if i % 2 else _WORD_KEPT) for i, p in enumerate(_PARTS.split(core))]
        squeezed = _squeeze(pieces, max(room, 5))
        if squeezed is None:
            if whole_words and shape.core:
                return ""
            squeezed = middle_cut("".join(text for text, _ in pieces), max(room, 5))
        return _lead(head, least_head) + squeezed + _trail(tail, least_tail)
    extra = room - len(core)
    # A short shared end (`>[sm_80]`) whole before more of the start: it closes what the core opens.
    t = least_tail + (len(tail) - least_tail if len(tail) - least_tail <= extra else 0)
    extra -= t - least_tail
    h = min(len(head), least_head + extra)
    t += extra - (h - least_head)
    return _lead(head, h) + core + _trail(tail, t)


def _squeeze(pieces: list[tuple[str, int]], width: int) -> str | None:
    """The pieces in `width` characters: the longest words shortened first (`__nv_bfloat16` to `__nv..`),
    none below its least, so that every argument keeps its place; None where that is not enough."""
    texts = [text for text, _ in pieces]
    over = sum(map(len, texts)) - width
    while over > 0:
        can = [i for i, (text, least) in enumerate(pieces) if len(texts[i]) == len(text) > least + 2]
        if not can:
            return None
        i = max(can, key=lambda j: len(texts[j]))
        text, least = pieces[i]
        texts[i] = text[: max(least, len(text) - 2 - over)] + ".."
        over -= len(text) - len(texts[i])
    return "".join(texts)


def _lead(head: str, width: int) -> str:
    return head if len(head) <= width else head[: max(width - 3, 0)] + "..."


def _trail(tail: str, width: int) -> str:
    if len(tail) <= width:
        return tail
    return "..." + tail[len(tail) - (width - 3) :] if width > 3 else ""


def shapes(names: Iterable[str]) -> dict[str, Shape]:
    """Each name's Shape: the longest start and end that every name of its family has, each ending at a
    separator, so that a cut shows whole template arguments; Shape() for a name alone in its family."""
    families: dict[str, list[str]] = {}
    for name in set(names):
        families.setdefault(_OPENING.split(name, maxsplit=1)[0], []).append(name)
    found: dict[str, Shape] = {}
    for members in families.values():
        if len(members) == 1:
            found[members[0]] = _ALONE
            continue
        prefix = _shared_start(members)
        suffix = len(_shared_start([m[::-1] for m in members]))
        start = max((i + 1 for i, c in enumerate(prefix) if c in _SEPARATORS), default=0)
        shortest = min(map(len, members))
        splits = [_PARTS.split(m) for m in members]
        same = len({len(p) for p in splits}) == 1
        # In each place, how much of a word tells it from the other members' words there.
        least = [_telling({p[i] for p in splits}) for i in range(len(splits[0]))] if same else None
        for name, split in zip(members, splits, strict=True):
            end = min(suffix, shortest - start)
            while end and name[len(name) - end] not in _SEPARATORS:
                end -= 1
            found[name] = Shape(start, end, split, least)
    return found


def _shared_start(texts: Sequence[str]) -> str:
    """The characters every one of `texts` starts with (of strings, not paths)."""
    first, last = min(texts), max(texts)  # the two that differ soonest bound all the others
    at = next(
        (i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), min(len(first), len(last))
    )
    return first[:at]


def _telling(words: set[str]) -> int:
    """How many first characters tell each of `words` from the others (never fewer than _WORD_KEPT); -1
    where the family has one word in that place."""
    if len(words) == 1:
        return -1
    ordered = sorted(words)
    common = (len(_shared_start([a, b])) for a, b in pairwise(ordered))
    return max(_WORD_KEPT, max(common, default=-1) + 1)


def _pieces(split: list[str], least: list[int], start: int, stop: int) -> tuple[tuple[str, int], ...]:
    """The characters start..stop of a name split into words and separators (even and odd places) as
    Shape's pieces: each run of words that its family shares, with the separators inside it, as `..`."""
    out: list[tuple[str, int]] = []
    at, run = 0, False
    for i, whole in enumerate(split):
        part = whole[max(start - at, 0) : max(stop - at, 0)]  # the piece of it inside start..stop
        at += len(whole)
        if not part:
            continue
        if i % 2 == 0 and len(least) > i and least[i] == -1 and part == whole:
            if not run:
                out.append(("..", 2))
            run = True
        elif i % 2 == 1 and run and i + 1 < len(split) and least[i + 1] == -1 and split[i + 1]:
            continue  # a separator inside a shared run
        else:
            out.append((part, least[i] if i % 2 == 0 and part == whole else len(part)))
            run = False
    return tuple(out)


@dataclass
class Column:
    """One column of the table: its header (and a shorter one, `short`) and each row's cell, in the forms it
    can take, fullest first. A name column cuts its names instead (cut_name), never one of NAME_KEPT
    characters or fewer, and never so short that two of its names read alike."""

    header: str
    forms: list[Sequence[str]]
    right: bool = False
    name: bool = False
    droppable: bool = True
    short: str = ""
    uniform: bool = False  # every row in the same form (an occupancy column either has block sizes or not)

    def __post_init__(self) -> None:
        self.natural = max(len(self.header), *(len(f[0]) for f in self.forms))

    @cached_property
    def shapes(self) -> dict[str, Shape]:
        return shapes(f[0] for f in self.forms) if self.name else {}

    @cached_property
    def least(self) -> int:
        """The narrowest this column gets: its shortest forms; for names, the narrowest width at which no two
        read alike (found by halving: the full width always tells them apart)."""
        if not self.name:
            return max(len(self.short or self.header), *(len(f[-1]) for f in self.forms))
        low = max(len(self.header), min(self.natural, NAME_KEPT))
        if self._apart(low):
            return low
        high = self.natural
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if self._apart(middle) else (middle, high)
        return high

    def _apart(self, width: int) -> bool:
        cuts = {cut_name(n, width, shape, whole_words=True) for n, shape in self.shapes.items()}
        return len(cuts) == len(self.shapes) and "" not in cuts

    def widths(self, header: bool) -> set[int]:
        """The widths at which a form of a cell (or the header) is whole."""
        if header:
            return {len(self.header)}
        if self.uniform:
            return set(self._level_widths)
        return {len(f) for forms in self.forms for f in forms}

    def _level_width(self, level: int) -> int:
        return max(len(forms[min(level, len(forms) - 1)]) for forms in self.forms)

    @cached_property
    def _level_widths(self) -> list[int]:
        return [self._level_width(level) for level in range(max(map(len, self.forms)))]

    def cell(self, row: int, width: int) -> str:
        forms = self.forms[row]
        if self.uniform:
            widths = self._level_widths
            level = next((k for k, w in enumerate(widths) if w <= width), len(widths) - 1)
            return forms[min(level, len(forms) - 1)]
        if len(forms[0]) <= width:
            return forms[0]
        if self.name:
            return cut_name(forms[0], width, self.shapes[forms[0]])
        return next((f for f in forms if len(f) <= width), forms[-1])


def line_width(widths: Iterable[int]) -> int:
    widths = list(widths)
    return sum(widths) + GAP * (len(widths) - 1)


def fit(columns: Sequence[Column], width: int | None) -> list[tuple[Column, int]]:
    """The columns kept and their widths: all, in full, where `width` is None; else columns drop in
    DROP_ORDER while even their narrowest forms are wider than `width`, and the room left goes back to the
    names, then to the other cells with shorter forms (the baseline changes). Where the narrowest table
    (the name, arch, first change and verdict) is wider still, it is that table: its rows run past the
    width rather than cut a short name."""
    if width is None:
        return [(c, c.natural) for c in columns]
    kept = list(columns)
    for header in DROP_ORDER:
        if line_width(c.least for c in kept) <= width:
            break
        kept = [c for c in kept if c.header != header or not c.droppable]
    widths = {id(c): c.least for c in kept}
    room = max(0, width - line_width(widths.values()))
    # The room left goes to the names first (they say which row is which), then to the columns that never
    # drop (more baseline changes), then to the others, the last to drop first; a column other than a name
    # grows only to a width where a form of its cells, and after every cell its header, is whole.
    rank = {h: i for i, h in enumerate(reversed(DROP_ORDER))}
    order = sorted(kept, key=lambda c: (not c.name, c.droppable, rank.get(c.header, 0)))
    for headers in (False, True):
        for column in order:
            now = widths[id(column)]
            if column.name:
                fits = [min(now + room, column.natural)]
            else:
                fits = [n for n in column.widths(headers) if now < n <= now + room]
            grow = max(fits, default=now) - now
            widths[id(column)] += grow
            room -= grow
    return [(c, widths[id(c)]) for c in kept]


def render(columns: Sequence[Column], width: int | None, guard: Callable[[str], str]) -> list[str]:
    """The header, a dashed rule and one line per row; `guard` makes a row's outside text safe to print."""
    fitted = fit(columns, width)
    if not fitted:
        return []

    def fmt(cells: Iterable[str]) -> str:
        parts = [
            c.rjust(w) if column.right else c.ljust(w) for c, (column, w) in zip(cells, fitted, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rows = len(fitted[0][0].forms)
    return [
        fmt(c.header if len(c.header) <= w else c.short for c, w in fitted),
        fmt("-" * w for _, w in fitted),
        *(guard(fmt(column.cell(row, w) for column, w in fitted)) for row in range(rows)),
    ]


def wrap(lines: Iterable[str], width: int | None) -> list[str]:
    """Prose lines in `width` columns, broken at spaces; a continued line is indented four columns past its
    first. A word longer than the width (a path) stays whole on a line of its own. None: as they are."""
    out: list[str] = []
    for line in lines:
        if width is None or len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" "))]
        out += textwrap.wrap(
            line,
            width,
            subsequent_indent=indent + "    ",
            break_long_words=False,
            break_on_hyphens=False,
            expand_tabs=False,
            replace_whitespace=False,
        ) or [line]
    return out
