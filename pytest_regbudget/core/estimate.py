"""How often each SASS instruction runs, estimated without a GPU, and what share of a thread's executed
instructions are local loads and stores (`LDL`/`STL`: spills, local arrays, saves around calls).

ptxas counts spill bytes and the SASS shows where the instructions sit; neither says how often they run. A
static profile does, well enough to tell 1 % from 60 % (docs/diagnostics.md, "How much local traffic"). The
weights, each stated where it is chosen:

- straight-line code runs once per thread;
- a loop runs its trip count per entry: the count its latch shows (a counter set to a constant before the
  loop, stepped by a constant in it, compared with a constant), else `DEFAULT_TRIPS`. Nested loops multiply;
- the two ways of a forward branch share its count evenly, but for an outcome that looks untaken, which gets
  `UNLIKELY`: the path of an integer equal to a constant (`flag == 12345`), a float that is NaN or infinite,
  and a path that only leaves (`if (i >= n) return`: a way that reaches `EXIT` within a few instructions) or
  traps (`BPT.TRAP`, a call to `__assertfail` or `vprintf`);
- a jump table's targets share its count evenly; a `CALL.REL` runs its callee once per call.

Pure: it reads the parser's control-flow graph (core/sass.py) and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .sass_report import DEFAULT_TRIPS

UNLIKELY = 1 / 1024  # the share of an outcome that looks untaken
_SHORT_EXIT = 8  # a way that reaches EXIT within this many instructions only leaves

_COMPARE = re.compile(
    r"^(?:@!?U?P\w+\s+)?U?(?P<kind>I|F|D|H)SETP\.(?P<cmp>[A-Z]+)(?P<mods>(?:\.\w+)*)\s+"
    r"(?P<dest>U?P[0-7])\s*,\s*U?PT\s*,\s*(?P<a>[^,]+?)\s*,\s*(?P<b>[^,]+?)\s*,"
)
_STEP = re.compile(
    r"^(?:IADD3|VIADD|UIADD3)\s+(?P<dst>U?R\d+)\s*,\s*(?P<src>U?R\d+)\s*,\s*(?P<imm>-?0x[0-9a-f]+|-?\d+)\b"
)
_INIT = (
    re.compile(r"^(?:MOV|UMOV)\s+(?P<dst>U?R\d+)\s*,\s*(?P<imm>0x[0-9a-f]+|\d+|U?RZ)\s*$"),
    re.compile(r"^IMAD\.MOV\.U32\s+(?P<dst>R\d+)\s*,\s*RZ\s*,\s*RZ\s*,\s*(?P<imm>0x[0-9a-f]+|\d+|RZ)\s*$"),
    re.compile(r"^(?:CS2R)\s+(?P<dst>R\d+)\s*,\s*(?P<imm>SRZ)\s*$"),
    # ptxas zeroes a register with the half-precision pipe too: `HFMA2.MMA R4, -RZ, RZ, 0, 0` is 0 + 0.
    re.compile(r"^HFMA2(?:\.MMA)?\s+(?P<dst>R\d+)\s*,\s*-?RZ\s*,\s*RZ\s*,\s*0\s*,\s*(?P<imm>0)\s*$"),
)
_RELOAD = re.compile(r"^LDL(?:\.\w+)*\s+(?P<dst>R\d+)\s*,\s*(?P<slot>\[R1(?:\+0x[0-9a-f]+)?\])")
_ZERO_STORE = re.compile(r"^STL(?:\.\w+)*\s+(?P<slot>\[R1(?:\+0x[0-9a-f]+)?\])\s*,\s*RZ\b")
_TRAP = re.compile(r"\bBPT\.TRAP\b|\bCALL\.ABS\b.*\((?:__assertfail|vprintf)\)")
_STORE = re.compile(r"^(?:@!?U?P\w+\s+)?(?:STG|ST|STS|RED|ATOM|ATOMG|STL)\b")
_INFINITY = re.compile(r"\+?INF\b|0x7f800000|0xff800000")
# An instruction's first operand, what it writes (`ISETP.GE.AND P0, PT, R2, R3, PT` writes P0).
_FIRST_OPERAND = re.compile(r"^(?:@!?U?P\w+\s+)?[A-Z][\w.]*\s+([^\s,]+)\s*,")
REACH = 64  # how far back the instruction that wrote a register is looked for, in instructions
Condition = tuple[bool, str]  # what a conditional branch goes by: (negated, predicate register)


def written(text: str) -> str | None:
    """The register an instruction writes: its first operand."""
    found = _FIRST_OPERAND.match(text)
    return None if found is None else found.group(1)


def writer(texts: Sequence[str], n: int, register: str, reach: int = REACH) -> int | None:
    """The last instruction before `n`, within `reach`, that writes `register`."""
    return next((k for k in range(n - 1, max(n - reach, -1), -1) if written(texts[k]) == register), None)


def trips_of(
    texts: Sequence[str], head: int, latch: int, body: frozenset[int], stated: int | None
) -> tuple[int, bool]:
    """A loop's trips per entry and whether the code fixes them: the latch's compare of a counter with a
    constant, the counter set to a constant before the loop and stepped by a constant in it. `stated`: the
    count a `loop_trips` budget gives (it wins over an assumed count, not over one the code shows)."""
    shown = _counted(texts, head, latch, body)
    if shown is not None:
        return shown, True
    return (stated, True) if stated is not None else (DEFAULT_TRIPS, False)


def _counted(texts: Sequence[str], head: int, latch: int, body: frozenset[int]) -> int | None:
    compare = None
    for n in range(latch - 1, max(head - 1, latch - 64), -1):
        found = _COMPARE.match(texts[n])
        if found is not None and found.group("kind") == "I":
            compare = found
            break
    if compare is None:
        return None
    counter, bound = compare.group("a"), _immediate(compare.group("b"))
    if bound is None or not counter.startswith(("R", "UR")):
        return None
    step = None
    for n in sorted(body):
        found = _STEP.match(texts[n])
        if found is not None and found.group("dst") == counter and found.group("src") == counter:
            step = _immediate(found.group("imm"))
    if not step or step <= 0:
        return None
    start = None
    for n in range(head - 1, max(-1, head - 64), -1):
        for pattern in _INIT:
            found = pattern.match(texts[n])
            if found is not None and found.group("dst") == counter:
                start = _immediate(found.group("imm"))
                break
        if start is not None or written(texts[n]) == counter:
            break
    if start is None:
        start = _spilled_start(texts, head, body, counter)
    if start is None or bound <= start:
        return None
    return max(1, -(-(bound - start) // step))


def _spilled_start(texts: Sequence[str], head: int, body: frozenset[int], counter: str) -> int | None:
    """The start of a counter that lives in local memory (a spilled loop counter): reloaded in the loop from
    `[R1+off]`, where a zero was stored before the loop."""
    slot = None
    for n in sorted(body):
        found = _RELOAD.match(texts[n])
        if found is not None and found.group("dst") == counter:
            slot = found.group("slot")
            break
    if slot is None:
        return None
    for n in range(head - 1, max(-1, head - 64), -1):
        found = _ZERO_STORE.match(texts[n])
        if found is not None and found.group("slot") == slot:
            return 0
    return None


def _immediate(text: str) -> int | None:
    text = text.strip()
    if text in ("RZ", "URZ", "SRZ"):
        return 0
    try:
        return int(text, 0)
    except ValueError:
        return None


def frequencies(
    texts: Sequence[str],
    successors: Sequence[Sequence[int]],
    calls: Mapping[int, int],
    loops: Sequence[tuple[int, int, frozenset[int], int]],
    conditions: Sequence[Condition | None],
) -> list[float]:
    """How often each instruction runs per thread. `calls`: a CALL.REL's index -> its callee's first index;
    `loops`: (head, latch, body, trips) of each natural loop; `conditions`: what each conditional branch
    goes by (core/sass.py `condition`).

    The walk leaves out each loop's back edges, so what is left is acyclic and taken in order of its edges.
    An edge into a loop from outside it carries its count times the loop's trips, and an edge out of a loop
    its count divided by them: a loop's body runs trips times per entry, and the code after it once. A call
    carries its count to its callee whole, wherever the callee's code sits."""
    size = len(texts)
    # Every edge into a loop's head from its own body goes back (its latch's among them).
    back = {(n, head) for head, _, body, _ in loops for n in body if head in successors[n]}
    inside: list[set[int]] = [set() for _ in range(size)]
    for k, (_, _, body, _) in enumerate(loops):
        for n in body:
            inside[n].add(k)
    trips = [t for _, _, _, t in loops]
    edges = [[m for m in successors[n] if (n, m) not in back] for n in range(size)]
    runs = [0.0] * size
    if size:
        runs[0] = 1.0
        for k in inside[0]:
            runs[0] *= trips[k]
    pending = [0] * size
    for out in edges:
        for m in out:
            pending[m] += 1
    for n in _topological(edges, pending):
        out = edges[n]
        if not out:
            continue
        callee = calls.get(n)
        shares = (
            dict.fromkeys(out, 1.0) if callee is not None else _shares(texts, n, out, edges, conditions[n])
        )
        for m, share in shares.items():
            factor = 1.0
            if m != callee:  # a call's count goes to its callee whole
                for k in inside[m] - inside[n]:
                    factor *= trips[k]
                for k in inside[n] - inside[m]:
                    factor /= trips[k]
            runs[m] += runs[n] * share * factor
    return runs


def _topological(edges: Sequence[Sequence[int]], pending: list[int]) -> list[int]:
    """The instructions in an order where each comes after every edge into it; an instruction left on a
    cycle that no loop explains (irreducible flow) is taken in address order."""
    ready = [n for n in range(len(edges)) if pending[n] == 0]
    order: list[int] = []
    seen = set()
    while len(order) < len(edges):
        if not ready:
            n = next(i for i in range(len(edges)) if i not in seen)
            ready.append(n)
        n = ready.pop()
        if n in seen:
            continue
        seen.add(n)
        order.append(n)
        for m in edges[n]:
            pending[m] -= 1
            if pending[m] <= 0 and m not in seen:
                ready.append(m)
    return order


def _shares(
    texts: Sequence[str],
    n: int,
    out: Sequence[int],
    edges: Sequence[Sequence[int]],
    condition: Condition | None,
) -> dict[int, float]:
    """How a branch's count divides among its ways (see the module's weights)."""
    if len(out) == 1:
        return {out[0]: 1.0}
    # The compare's evidence first: a way that leaves may be the common one (`y[i] = s;` then EXIT).
    equal = _equal_way(texts, n, out, condition)
    unlikely = {equal} if equal is not None else {m for m in out if _only_leaves(texts, edges, m)}
    if 0 < len(unlikely) < len(out):
        rest = (1.0 - UNLIKELY * len(unlikely)) / (len(out) - len(unlikely))
        return {m: UNLIKELY if m in unlikely else rest for m in out}
    return dict.fromkeys(out, 1.0 / len(out))


def _only_leaves(texts: Sequence[str], edges: Sequence[Sequence[int]], start: int) -> bool:
    """Whether the way from `start` traps, or exits within a few instructions without a choice or a store
    (`if (i >= n) return`; a way that writes its result first is the kernel's own end)."""
    n = start
    for _ in range(_SHORT_EXIT):
        if _TRAP.search(texts[n]):
            return True
        if texts[n].split(None, 1)[0] == "EXIT":
            return True
        if _STORE.match(texts[n]):
            return False
        if len(edges[n]) != 1:
            return False
        n = edges[n][0]
    return False


def _equal_way(texts: Sequence[str], n: int, out: Sequence[int], condition: Condition | None) -> int | None:
    """The way a branch takes when an integer equals a constant or a float is NaN or infinite: looks
    untaken. Read from the compare that wrote the branch's predicate."""
    if condition is None or len(out) != 2:
        return None
    negated, predicate = condition
    back = writer(texts, n, predicate, reach=16)
    compare = None if back is None else _COMPARE.match(texts[back])
    if compare is None:
        return None
    kind, cmp, b = compare.group("kind"), compare.group("cmp"), compare.group("b")
    rare_when_true: bool | None = None
    if kind == "I" and cmp in ("EQ", "NE") and _immediate(b) not in (None, 0):
        rare_when_true = cmp == "EQ"
    elif kind == "F" and (cmp in ("NAN", "NUM") or _INFINITY.search(b)):
        rare_when_true = cmp in ("NAN", "EQ", "GE", "GT") and cmp != "NUM"
    if rare_when_true is None:
        return None
    taken, fallthrough = out[0], out[-1]
    return taken if rare_when_true != negated else fallthrough
