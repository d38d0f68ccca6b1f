"""The records of one kernel's SASS as core/sass.py reads it: its local-memory instructions, loops, calls,
warpgroup roles and the estimate's figures (`SassReport`). Plain data, apart from the parser, so that a run
which reads no SASS (a warm run) loads the records a kernel's report names without the parser and its
control-flow and estimate modules. With them, what a `loop_trips` budget states for a loop, and the
count a loop the code does not count is assumed to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePath

from msgspec import Struct

from .liveness import PeakLive

DEFAULT_TRIPS = 16  # loops whose count the code does not fix run tens of times in practice
# A `loop_trips` value (core/limits.py): one count for every loop the code does not count, or counts by
# (file name, line, count).
StatedTrips = int | tuple[tuple[str, int, int], ...] | None


Frame = tuple[str, int]  # (file, line) of one level of an inline stack


class Role(Struct, frozen=True):
    """The warpgroup role code runs in: after `setmaxnreg.dec N` the producer's, after `inc N` a consumer."""

    direction: str  # "dec" or "inc"
    count: int

    @property
    def name(self) -> str:
        return "producer" if self.direction == "dec" else "consumer"

    def describe(self) -> str:
        return f"{self.name} (after setmaxnreg.{self.direction} {self.count})"


class Loop(Struct, frozen=True):
    start: int  # address of the branch target (the loop head)
    end: int  # address of the backward branch
    # Where the loop is written: the file of the function its backward branch belongs to, once inlining is
    # undone (`nvdisasm -gi`), so a loop of a library header inlined into the kernel is named in that header.
    file: str | None
    # The lines it is named by: its backward branch's, the loop statement (`for`, `while`). Without line info
    # on the branch, those of its instructions in `file` (they may reach far from the loop: a value computed
    # before it and rematerialized in it brings its line along).
    lines: tuple[int, ...]
    depth: int = 1  # 1 for an outermost loop, 2 for a loop in it, and so on
    # Its instructions, as (first, last) address runs: a loop's code need not be one stretch of the listing.
    ranges: tuple[tuple[int, int], ...] = ()
    trips: int = 0  # per entry, as the estimate weighs it (core/estimate.py); 0 where none was made
    known: bool = False  # whether the code fixes that count (else it is assumed)

    def where(self) -> str:
        return place(self.file, self.lines)

    def contains(self, address: int) -> bool:
        return any(first <= address <= last for first, last in self.ranges or ((self.start, self.end),))

    @property
    def size(self) -> int:
        """How much code it holds (bytes of instructions), to order loops innermost first."""
        return sum(last - first for first, last in self.ranges or ((self.start, self.end),))


class LocalAccess(Struct, frozen=True):
    address: int
    opcode: str  # "STL" or "LDL"
    spill: bool  # a spill or refill, not an access to a local array
    file: str | None
    line: int | None
    loop: Loop | None  # the innermost loop holding it
    role: Role | None = None  # the warpgroup role it runs in, where every path to it agrees
    runs: float = 0.0  # how often a thread runs it, estimated (core/estimate.py)

    def where(self) -> str:
        return place(self.file, (self.line,) if self.line else ())


class Call(Struct, frozen=True):
    """A call that leaves the kernel: `CALL.ABS` to an extern function (`__assertfail`, `vprintf`)."""

    address: int
    file: str | None
    line: int | None
    loop: Loop | None
    role: Role | None

    def where(self) -> str:
        return place(self.file, (self.line,) if self.line else ())


class SassReport(Struct, frozen=True):
    function: str
    instructions: int
    local: tuple[LocalAccess, ...]
    loops: tuple[Loop, ...]
    # The setmaxnreg instructions the machine code kept, in order ("inc", 232): none where ptxas dropped them.
    setmaxnreg: tuple[tuple[str, int], ...] = ()
    calls: tuple[Call, ...] = ()
    # Extern functions the module declares (nvdisasm's SYMBOLS), the candidates for what `calls` call.
    externs: tuple[str, ...] = ()
    # Control instructions of a form the parser does not know (taken to go everywhere they name, and on):
    # the test suite holds that every recorded listing has none.
    unread: tuple[str, ...] = ()
    # Instructions a thread runs, estimated (core/estimate.py): all of them, and the local loads and stores.
    executed: float = 0.0
    local_executed: float = 0.0
    spill_executed: float = 0.0
    # The most general registers live at one instruction, where nvdisasm's life ranges were read.
    peak_live: PeakLive | None = None

    @property
    def local_share(self) -> float:
        """The estimated share of a thread's executed instructions that are local loads and stores."""
        return self.local_executed / self.executed if self.executed else 0.0

    def source_loops(self) -> dict[str, list[Loop]]:
        """Each source loop once, by where it is written, with the SASS loops it became (an unrolled body
        and its remainder, an inlined helper's loop in each branch that calls it), innermost first."""
        copies: dict[str, list[Loop]] = {}
        for loop in self.loops:
            copies.setdefault(loop.where(), []).append(loop)
        return copies

    def local_lines(self) -> list[tuple[str, float]]:
        """Source lines by estimated executed local instructions, hottest first: (where, executed)."""
        by_line: dict[str, float] = {}
        for a in self.local:
            by_line[a.where()] = by_line.get(a.where(), 0.0) + a.runs
        return sorted(by_line.items(), key=lambda item: (-item[1], item[0]))

    @property
    def local_instructions(self) -> int:
        return len(self.local)

    @property
    def spill_instructions(self) -> int:
        return sum(1 for a in self.local if a.spill)

    @property
    def spill_instructions_in_loops(self) -> int:
        return sum(1 for a in self.local if a.spill and a.loop is not None)


def place(file: str | None, lines: tuple[int, ...]) -> str:
    """`kernel.cu:12`, or `kernel.cu:12-15` for a range of lines: where a record is written."""
    name = Path(file).name if file else "?"
    if not lines:
        return name
    if len(lines) == 1 or lines[0] == lines[-1]:
        return f"{name}:{lines[0]}"
    return f"{name}:{lines[0]}-{lines[-1]}"


def stated_trips(file: str | None, lines: tuple[int, ...], trips: StatedTrips) -> int | None:
    """The count `trips` states for the loop written at `file`'s `lines`: the one by a FILE:LINE in the
    loop's span (`poly.cu:17` for a loop at poly.cu:17-18), else the count for every loop."""
    if trips is None or isinstance(trips, int):
        return trips
    name = PurePath(file).name if file else None
    found = (c for f, line, c in trips if f == name and lines and lines[0] <= line <= lines[-1])
    return next(found, None)


def unmatched_trips(loops: Sequence[tuple[str | None, tuple[int, ...]]], trips: StatedTrips) -> list[str]:
    """The FILE:LINEs of `trips` that name none of `loops` ((file, lines) each): a typo, or a loop that the
    compiler unrolled away on this arch."""
    if trips is None or isinstance(trips, int):
        return []
    return [
        f"{f}:{line}"
        for f, line, c in trips
        if not any(stated_trips(file, lines, ((f, line, c),)) for file, lines in loops)
    ]
