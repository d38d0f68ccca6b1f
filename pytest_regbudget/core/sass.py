"""SASS facts from the measured cubin: local-memory instructions, loops, source lines.

ptxas's spill figures are static byte counts; what matters is where the instructions sit. This module owns
a pure parser of `nvdisasm -c -g` text (tools/nvdisasm.py runs nvdisasm) that tells spill/refill
instructions (nvdisasm marks them `(*"SpillRefill"*)`) from accesses to local arrays and finds loops as
backward branches of its control-flow graph (each branch form of sm_90 to sm_120: `control`), and the reading
of one SASS instruction line, which tools/cuobjdump.py shares for cuobjdump's listings.
"""

from __future__ import annotations

import re

from msgspec import Struct
from msgspec.structs import replace

from . import branches, estimate, liveness
from .branches import condition, control
from .errors import SassError
from .liveness import PeakLive
from .sass_report import Call, Frame, LocalAccess, Loop, Role, SassReport, StatedTrips, place, stated_trips

_SECTION = re.compile(r"^\s*\.section\s+\.text\.(\S+?),")
# A label: a branch target (`.L_x_3:`), or a `__noinline__` callee's entry in its caller's section
# (`$kernel$_Z5heavyPKfiii:`), which a `CALL.REL` names.
_LABEL = re.compile(r"^(\.L_x_\d+|\$[\w$]+):")
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;(.*)$")
_LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
# `nvdisasm -gi`: an inlined instruction's location is its own line and the chain of call sites, either on one
# comment (`line 2 inlined at "k.cu", line 8`) or, in newer releases, one comment per level, innermost first.
_INLINED_AT = re.compile(r'inlined at "([^"]+)", line (\d+)')
_SETMAXREG = re.compile(r"\bUSETMAXREG\.(\w+)(?:\.\w+)*\s+(?:\w+,\s*)?(0x[0-9a-fA-F]+|\d+)")
_LOCAL = re.compile(r"\b(?:STL|LDL)(?:\.\w+)*\b")
_EXTERN_CALL = re.compile(r"\bCALL\.ABS\b")
_EXTERN = re.compile(r"^\s*\.type\s+([\w$.]+),@function")


def instruction(line: str) -> tuple[int, str, str] | None:
    """(address, instruction, what follows its `;`) of one line of SASS, as nvdisasm and cuobjdump print
    it (`/*0840*/  @!P0 STL.64 [R1+0xa8], R2 ;`); None for any other line."""
    found = _INSTR.match(line)
    return None if found is None else (int(found.group(1), 16), found.group(2), found.group(3))


def local_opcode(instruction: str) -> str | None:
    """The local-memory store or load of an instruction, with its modifiers ("LDL.LU.64"); None if the
    instruction is neither."""
    found = _LOCAL.search(instruction)
    return None if found is None else found.group(0)


class _Instruction(Struct, frozen=True):
    address: int
    text: str
    spill_mark: bool
    stack: tuple[
        Frame, ...
    ]  # its inline stack, innermost first: (file, line) of its own line, then call sites


_UNSEEN, _NONE, _MIXED = "unseen", "none", "mixed"


def parse_sass(text: str, function: str, *, spills: bool = True, trips: StatedTrips = None) -> SassReport:
    """The facts of `function` in `nvdisasm -c -g` or `-gi` output. Raises SassError if it is not there.

    `spills=False` (ptxas reported no spill bytes): no local access is a spill, whatever its address.
    `trips`: the counts a `loop_trips` budget states for loops whose count the code does not show."""
    sections, externs = _split(text)
    if function not in sections:
        raise SassError(f"nvdisasm output has no function {function!r} (it has: {', '.join(sections)})")
    return _parse_function(function, sections[function], externs, spills=spills, live={}, trips=trips)


def parse_sass_functions(
    text: str, life_ranges: str | None = None, trips: StatedTrips = None
) -> dict[str, SassReport]:
    """parse_sass of every function in the listing, read once (a unit's kernels share one listing), with
    spills counted as ptxas reported some; `without_spills` gives a kernel's report where it reported none.
    `life_ranges`: `nvdisasm -c -plr -lrm count` of the same cubin, for each function's peak_live."""
    sections, externs = _split(text)
    live = {} if life_ranges is None else _split(life_ranges)[0]
    return {
        name: _parse_function(
            name, body, externs, spills=True, live=liveness.live_counts(live.get(name, [])), trips=trips
        )
        for name, body in sections.items()
    }


def without_spills(report: SassReport) -> SassReport:
    """`report` as parse_sass(..., spills=False) reads it: no local access is a spill."""
    if not any(a.spill for a in report.local):
        return report
    return replace(report, local=tuple(replace(a, spill=False) for a in report.local), spill_executed=0.0)


def _split(text: str) -> tuple[dict[str, list[str]], tuple[str, ...]]:
    """The listing's functions (each section's lines) and the extern functions it declares."""
    sections: dict[str, list[str]] = {}
    declared: list[str] = []
    local: set[str] = set()  # callees whose code is in a caller's section: not extern
    body: list[str] | None = None
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section:
            body = sections.setdefault(section.group(1), [])
        elif body is not None:
            body.append(line)
            label = _LABEL.match(line)
            if label:
                local.add(label.group(1))
        extern = _EXTERN.match(line)
        if extern:
            declared.append(extern.group(1))
    return sections, tuple(dict.fromkeys(n for n in declared if n not in sections and n not in local))


def _parse_function(
    function: str,
    lines: list[str],
    externs: tuple[str, ...],
    *,
    spills: bool,
    live: dict[int, int],
    trips: StatedTrips,
) -> SassReport:
    instrs, labels = _instructions(lines)
    index = {ins.address: n for n, ins in enumerate(instrs)}
    texts = [ins.text for ins in instrs]
    moves = [control(text) for text in texts]
    successors = [branches.successors(moves[n], n, len(instrs), labels, index) for n in range(len(instrs))]
    found_loops = _loops(instrs, successors)
    weighed = [
        (
            head,
            latch,
            body,
            estimate.trips_of(texts, head, latch, body, stated_trips(loop.file, loop.lines, trips)),
        )
        for loop, head, latch, body in found_loops
    ]
    loops = [
        replace(loop, trips=trips, known=known)
        for (loop, *_), (*_, (trips, known)) in zip(found_loops, weighed, strict=True)
    ]
    calls_to = {
        n: index[labels[target]]
        for n, text in enumerate(texts)
        if text.startswith("CALL.REL")
        for target in moves[n].targets[:1]
        if target in labels and labels[target] in index
    }
    runs = estimate.frequencies(
        texts,
        successors,
        calls_to,
        [(h, la, body, trips) for h, la, body, (trips, _) in weighed],
        [condition(text) for text in texts],
    )
    roles = _roles(instrs, successors)

    def innermost_loop(address: int) -> Loop | None:
        return next((lp for lp in loops if lp.contains(address)), None)

    marked = any(i.spill_mark for i in instrs)
    local = []
    calls = []
    setmaxnreg = []
    for ins, role, ran in zip(instrs, roles, runs, strict=True):
        file, at = ins.stack[0] if ins.stack else (None, None)
        if _EXTERN_CALL.search(ins.text):
            calls.append(Call(ins.address, file, at, innermost_loop(ins.address), role))
        found = _SETMAXREG.search(ins.text)
        if found:
            setmaxnreg.append(_role(found))
        op = local_opcode(ins.text)
        if op is None:
            continue
        # Older nvdisasm does not mark spills; then a stack-pointer-relative access is taken for one (where
        # ptxas counted spill bytes: a local array is addressed from the stack pointer too).
        spill = spills and (
            ins.spill_mark if marked else bool(re.search(r"\[R1(?:\+0x[0-9a-f]+)?\]", ins.text))
        )
        local.append(
            LocalAccess(
                ins.address, op.partition(".")[0], spill, file, at, innermost_loop(ins.address), role, ran
            )
        )
    return SassReport(
        function=function,
        instructions=len(instrs),
        local=tuple(local),
        loops=tuple(loops),
        setmaxnreg=tuple((r.direction, r.count) for r in setmaxnreg),
        calls=tuple(calls),
        externs=externs,
        unread=tuple(dict.fromkeys(text for text, move in zip(texts, moves, strict=True) if not move.read)),
        executed=sum(runs),
        local_executed=sum(a.runs for a in local),
        spill_executed=sum(a.runs for a in local if a.spill),
        peak_live=_peak(instrs, live, loops),
    )


def _peak(instrs: list[_Instruction], live: dict[int, int], loops: list[Loop]) -> PeakLive | None:
    """The peak of live registers (core/liveness.py), named by its instruction's own line, as an access is."""
    counts = [live.get(i.address) for i in instrs]
    at = liveness.peak_at(counts, [i.stack[0] if i.stack else None for i in instrs])
    if at is None:
        return None
    file, line = instrs[at].stack[0] if instrs[at].stack else (None, 0)
    loop = next((lp.where() for lp in loops if lp.contains(instrs[at].address)), None)
    return PeakLive(counts[at] or 0, place(file, (line,)) if line else None, loop)


def setmaxnreg_of(instruction: str) -> tuple[str, int] | None:
    """("inc", 232) for `USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8`, ("dec", 40) for `USETMAXREG.DEALLOC.CTAPOOL
    0x28`; None for any other instruction. nvdisasm and cuobjdump print it alike."""
    found = _SETMAXREG.search(instruction)
    if found is None:
        return None
    role = _role(found)
    return role.direction, role.count


def _role(found: re.Match[str]) -> Role:
    # TRY_ALLOC raises the count (setmaxnreg.inc, retried until the pool has them); DEALLOC lowers it.
    return Role("dec" if found.group(1) == "DEALLOC" else "inc", int(found.group(2), 0))


def _instructions(lines: list[str]) -> tuple[list[_Instruction], dict[str, int]]:
    """The function's instructions with their inline stacks, and its labels (each resolves to the next
    instruction's address)."""
    instrs: list[_Instruction] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    stack: list[Frame] = []
    in_location = False
    for line in lines:
        loc = _LINE.search(line)
        if loc:
            # A run of location comments is one location: its first line is the instruction's own, every
            # `inlined at` (on it or on the lines after it) one call site further out.
            own = (loc.group(1), int(loc.group(2)))
            if not in_location:
                stack = [own]
            for frame in [own, *((f, int(n)) for f, n in _INLINED_AT.findall(line))]:
                if frame != stack[-1]:
                    stack.append(frame)
            in_location = True
            continue
        in_location = False
        label = _LABEL.match(line)
        if label:
            pending.append(label.group(1))
            continue
        ins = instruction(line)
        if ins:
            address, text_, _ = ins
            labels.update(dict.fromkeys(pending, address))
            pending = []
            # nvdisasm marks a spill or refill `(*"SpillRefill"*)`, before the `;` or after it.
            instrs.append(_Instruction(address, text_, "SpillRefill" in line, tuple(stack)))
    return instrs, labels


def _loops(
    instrs: list[_Instruction], successors: list[list[int]]
) -> list[tuple[Loop, int, int, frozenset[int]]]:
    """The natural loops of the control-flow graph, innermost (least code) first, each named where its
    backward branch is written. A loop is a header and every instruction that reaches a branch back to it
    without passing it: an out-of-line block (a barrier wait's retry, placed at the end of the function) is in
    the loop that branches to it, and a backward jump that is not a loop (that block's jump back to where it
    came from) is none, since its target does not dominate it."""
    predecessors: list[list[int]] = [[] for _ in instrs]
    for n, out in enumerate(successors):
        for m in out:
            predecessors[m].append(n)
    reached = _reachable(successors)
    bodies: dict[int, set[int]] = {}
    latches: dict[int, int] = {}
    for n, out in enumerate(successors):
        for head in out:
            if head > n or n not in reached:
                continue
            body = _natural_loop(predecessors, head, n)
            if body is None:
                continue
            bodies.setdefault(head, set()).update(body)
            latches[head] = max(latches.get(head, n), n)
    loops = []
    for head, body in bodies.items():
        if any(_SETMAXREG.search(instrs[i].text) for i in body):
            continue  # setmaxnreg's register-allocation retry
        inside = sorted(body)
        file, lines_in = _loop_source(instrs, latches[head], inside)
        depth = sum(1 for other in bodies.values() if body <= other)
        loop = Loop(
            instrs[head].address,
            instrs[latches[head]].address,
            file,
            lines_in,
            depth,
            _ranges(instrs, inside),
        )
        loops.append((loop, head, latches[head], frozenset(body)))
    loops.sort(key=lambda found: (found[0].size, found[0].start))
    return loops


def _reachable(successors: list[list[int]]) -> set[int]:
    seen = {0} if successors else set()
    todo = list(seen)
    while todo:
        for m in successors[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def _natural_loop(predecessors: list[list[int]], head: int, latch: int) -> set[int] | None:
    """The instructions that reach `latch` without passing `head`, with both; None when the function's entry
    is among them (`head` does not dominate `latch`: not a loop)."""
    body = {head, latch}
    todo = [latch] if latch != head else []
    while todo:
        n = todo.pop()
        if n == 0 and head != 0:
            return None
        for m in predecessors[n]:
            if m not in body:
                body.add(m)
                todo.append(m)
    return body


def _ranges(instrs: list[_Instruction], inside: list[int]) -> tuple[tuple[int, int], ...]:
    """The loop's instructions as runs of consecutive ones: (first address, last address) each."""
    runs: list[tuple[int, int]] = []
    for i in inside:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return tuple((instrs[a].address, instrs[b].address) for a, b in runs)


def _loop_source(
    instrs: list[_Instruction], branch: int, inside: list[int]
) -> tuple[str | None, tuple[int, ...]]:
    """Where the loop is written: its backward branch's innermost frame once inlining is undone, the file of
    the function the loop is in and the line of the loop statement. Without line info on the branch, the
    file most of the loop's instructions are in (at the kernel's level) and their lines there."""
    own = instrs[branch].stack
    compare = _deciding(instrs, branch)
    if own and compare and compare[0][0] == own[0][0]:
        # The loop statement is the earlier of the two lines: sm_90's back edge carries it and its compare
        # may carry the body's; Blackwell's back edge carries the body's and its compare the statement's.
        return own[0][0], (min(own[0][1], compare[0][1]),)
    if own:
        return own[0][0], (own[0][1],)
    outer = [instrs[i].stack[-1] for i in inside if instrs[i].stack]
    if not outer:
        return None, ()
    files = [f for f, _ in outer]
    main = max(set(files), key=files.count)
    return main, tuple(sorted({n for f, n in outer if f == main}))


def _deciding(instrs: list[_Instruction], branch: int) -> tuple[Frame, ...]:
    """The inline stack of the compare that decides a conditional back edge: the last instruction before it
    that sets its predicate (`ISETP.GE.AND P0, ...` for `@P0 BRA`, `UISETP... UP0` for `BRA.U !UP0, ...`);
    () where the branch has no predicate or its compare is not near."""
    goes_by = condition(instrs[branch].text)
    if goes_by is None:
        return ()
    start = max(branch - estimate.REACH, 0)
    texts = [ins.text for ins in instrs[start:branch]]
    found = estimate.writer(texts, len(texts), goes_by[1])
    return () if found is None else instrs[start + found].stack


def _roles(instrs: list[_Instruction], successors: list[list[int]]) -> list[Role | None]:
    """The warpgroup role each instruction runs in: the last setmaxnreg on every path from the entry to it,
    over the control-flow graph (a producer's code may sit after a consumer's in the listing), None where
    no setmaxnreg comes before it or paths disagree."""
    state: list[Role | str] = [_UNSEEN] * len(instrs)
    if instrs:
        state[0] = _NONE
    work = [0] if instrs else []
    while work:
        n = work.pop()
        found = _SETMAXREG.search(instrs[n].text)
        out = _role(found) if found else state[n]
        for m in successors[n]:
            joined = out if state[m] == _UNSEEN or state[m] == out else _MIXED
            if joined != state[m]:
                state[m] = joined
                work.append(m)
    return [s if isinstance(s, Role) else None for s in state]
