"""How each SASS instruction moves control: the branch forms of every arch ptxas writes (sm_90's guarded
`@P0 BRA`, Blackwell's predicate operand `BRA.U !UP0, ...`, both at once, jump tables, guarded `EXIT` and
`RET`, `CALL.REL`), read one instruction at a time. core/sass.py builds the control-flow graph from them, and
core/estimate.py weighs a branch's ways by what its condition goes by.
"""

from __future__ import annotations

import re

from msgspec import Struct

from . import estimate

# A control instruction: its guard (`@!P0`), opcode and modifiers, and its operands. ptxas writes a
# condition either as the guard (`@P0 BRA`, sm_90's loops) or as a predicate operand (`BRA.U !UP0, ...`,
# Blackwell's), or both (`@!P0 BRA P1, ...`).
_CONTROL = re.compile(
    r"^(?P<guard>@(?P<gneg>!?)(?P<gpred>U?P(?:[0-7]|T))\s+)?"
    r"(?P<op>BRA|BRX|BRXU|JMP|JMX|JMXU|CALL|RET|EXIT|KILL|BPT)(?P<mods>(?:\.\w+)*)(?![\w.])\s*(?P<rest>.*)$"
)
_PREDICATE_OPERAND = re.compile(r"^(?P<neg>!?)(?P<pred>U?P(?:[0-7]|T))\s*,")
_TARGETS = re.compile(r"`\(([^)]*)\)")
_LABEL_NAME = re.compile(r"\.L_x_\d+|\$[\w$]+")


class Control(Struct, frozen=True):
    """Where one instruction may go next: its labels and whether it may fall through. `read` is False for a
    control instruction whose form the parser does not know (taken to go everywhere it names and on)."""

    targets: tuple[str, ...] = ()
    falls_through: bool = True
    read: bool = True


def control(instruction: str) -> Control:
    """How an instruction (as `instruction` gives it) moves control: `@P0 BRA `(.L_x_1)`` and
    ``BRA.U !UP0, `(.L_x_1)`` may branch or fall through, `BRA `(.L_x_1)`` and `EXIT` end the path, a
    guarded `EXIT` or `RET` may go on, a `CALL.REL` goes to its label and comes back, `BRX`/`JMX` go to each
    label of their table. A guard or predicate operand `PT` always holds and `!PT` never does."""
    found = _CONTROL.match(instruction)
    if found is None:
        return Control()
    op, mods, rest = found.group("op"), found.group("mods"), found.group("rest")
    guard = None if found.group("guard") is None else (found.group("gneg"), found.group("gpred"))
    if guard == ("!", "PT") or guard == ("!", "UPT"):
        return Control()  # never runs
    conditional = guard is not None and guard[1] not in ("PT", "UPT")
    operand = _PREDICATE_OPERAND.match(rest)
    if operand is not None:
        if operand.group("pred") in ("PT", "UPT"):
            if operand.group("neg"):
                return Control()  # a condition that never holds: the branch is never taken
        else:
            conditional = True
    targets = tuple(t for listed in _TARGETS.findall(rest) for t in _LABEL_NAME.findall(listed))
    if op in ("EXIT", "RET", "KILL") or (op == "BPT" and ".TRAP" in mods):
        return Control(falls_through=conditional)
    if op == "BPT":
        return Control()
    if op == "CALL":
        return Control(targets)  # a call comes back (CALL.ABS to an extern: no label here)
    if op in ("BRA", "JMP"):
        # BRA.DIV goes to its label when the warp has diverged: a condition of its own.
        conditional = conditional or ".DIV" in mods
        return Control(targets, falls_through=conditional, read=bool(targets))
    # BRX, JMX: an indirect jump to one of its table's labels; without a table it could go anywhere.
    return Control(targets, falls_through=conditional or not targets, read=bool(targets))


def condition(instruction: str) -> estimate.Condition | None:
    """What a conditional branch goes by, (negated, predicate): its predicate operand (`BRA.U !UP0, ...`),
    else its guard (`@P0 BRA`); None for any other instruction, and for a condition on PT."""
    found = _CONTROL.match(instruction)
    if found is None or found.group("op") not in ("BRA", "JMP", "BRX", "JMX"):
        return None
    operand = _PREDICATE_OPERAND.match(found.group("rest"))
    if operand is not None:
        goes_by = (bool(operand.group("neg")), operand.group("pred"))
    elif found.group("guard") is not None:
        goes_by = (bool(found.group("gneg")), found.group("gpred"))
    else:
        return None
    return None if goes_by[1].endswith("PT") else goes_by


def successors(move: Control, n: int, size: int, labels: dict[str, int], index: dict[int, int]) -> list[int]:
    """Where instruction `n` (of `size`) may go next, by its `control`."""
    out = [index[labels[t]] for t in move.targets if t in labels and labels[t] in index]
    if move.falls_through and n + 1 < size:
        out.append(n + 1)
    return list(dict.fromkeys(out))
