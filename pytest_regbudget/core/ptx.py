"""Readers of a PTX module's text beyond what ptxas prints: its entries and their bodies, the tensor memory
each kernel allocates (`tcgen05.alloc`), its warpgroups' `setmaxnreg` roles, and the outline of a module that
a cache keeps instead of the whole PTX. Pure, as ptxas.py (which reads the entries' directives with these
tokens): text in, frozen values out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from msgspec import Struct

from ..util.patterns import lazy

# The tokens ptxas.py reads the entries' directives with too.
# PTX identifiers: a letter followed by [A-Za-z0-9_$], or _ $ % followed by at least one of those.
_IDENT = r"(?:[A-Za-z][\w$]*|[_$%][\w$]+)"
# The literal first, so that a search jumps from one ".entry" to the next (a leading look-behind made it try
# every position of a large PTX); the look-behind then checks the character before it.
ENTRY = lazy(r"\.entry(?<![\w$.]\.entry)\s+(" + _IDENT + r")")
COMMENTS = lazy(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
INT = r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)"


def ptx_int(token: str) -> int:
    # PTX integers follow C: 0x.. hex, a leading 0 octal.
    if token[:2] in ("0x", "0X"):
        return int(token, 16)
    if len(token) > 1 and token[0] == "0":
        return int(token, 8)
    return int(token)


def ptx_outline(ptx: str) -> str:
    """The part of a PTX module that the PTX parsers read: each `.entry` with its parameters and
    directives, and of its body only its `setmaxnreg` instructions and its `tcgen05.alloc` instructions
    (their column counts resolved to constants where the PTX sets them from one, with the calls to and the
    `.func`s that allocate too). parse_ptx_entries and parse_ptx_directives (ptxas.py), ptx_setmaxnreg and
    ptx_tmem read it as they read the whole module; a cache keeps it beside the report, so that a hit reads
    kilobytes, not the whole PTX."""
    code = COMMENTS.sub("", ptx)
    allocating = _allocating_functions(code) if _ALLOC_WORD in code else {}
    out = []
    for name, header, body in _entries(code):
        roles = "".join(f"{m.group(0)};\n" for m in _SETMAXNREG.finditer(body))
        tmem = _tmem_outline(body, allocating) if _ALLOC_WORD in body or allocating else ""
        out.append(f".entry {name}{header}{{\n{roles}{tmem}}}\n")
    for name, body in allocating.items():
        out.append(f".func {name}()\n{{\n{_tmem_outline(body, allocating)}}}\n")
    return "".join(out)


# -- tensor memory: tcgen05.alloc ------------------------------------------------------------------------
# `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], ncols;` (PTX ISA 8.6+, "Tensor Memory
# Allocation and Management Instructions"): ncols is an immediate or a .b32 register. The ISA requires it
# to be a power of 2 from 32 to 512; ::2 allocates ncols in each CTA of the pair, so per block it is ncols
# too.
_ALLOC_WORD = "tcgen05.alloc"
_TCGEN05_ALLOC = lazy(r"tcgen05\.alloc((?:\.[\w:]+)*)\s+(\[[^\]]*\])\s*,\s*([^;\s]+)\s*;")
_IMMEDIATE = lazy(INT + r"[uU]?")
_REGISTER = lazy(r"%[\w$]+")
# A call's target: `call.uni (retval0), _Z5allocv, (param0);`, `call _Z5allocv, ();`; a register target is
# an indirect call.
_CALL = lazy(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?(%?[A-Za-z_$][\w$]*)")
_FUNC = lazy(r"\.func(?<![\w$.]\.func)\s+(?:\([^)]*\)\s*)?(" + _IDENT + r")")
# A statement's destination: the first operand after the opcode (and its predicate guard), or a { } list.
_STATEMENT = lazy(r"^(?:@!?%[\w$]+\s+)?([a-z][\w.:]*)\s+(\{[^}]*\}|[^,\s]+)\s*(?:,\s*(.*))?$", re.DOTALL)
_MOVE = lazy(r"mov\.[bsu](?:16|32|64)")


class TmemAlloc(Struct, frozen=True):
    """The tensor memory (TMEM) one block of a kernel allocates: its `tcgen05.alloc` instructions (inlined
    ones included) and the columns they ask for in all."""

    allocs: int  # tcgen05.alloc instructions in the kernel's body, and calls into functions that run one
    columns: int | None  # their column counts summed; None where one cannot be read
    unread: str = ""  # why a count cannot be read: the operand, or the function that allocates


def _statements(body: str) -> list[str]:
    """The body's statements, without labels and braces: what a destination is looked for in."""
    out = []
    for raw in body.split(";"):
        text = _LEAD.sub("", raw, count=1).strip()
        if text:
            out.append(text)
    return out


# What may stand before a statement: whitespace, the braces of a block, labels ("$L__BB0_2:").
_LEAD = lazy(r"^(?:\s|[{}]|[\w$]+:)*")


def _constant(register: str, statements: list[str], depth: int = 0) -> int | None:
    """The constant `register` holds where the body sets it once, from an immediate or from another such
    register (`mov.b32 %r4, 512;`); None where it is set several times, computed or never set here."""
    sources = []
    for text in statements:
        m = _STATEMENT.match(text)
        if m is None:
            continue
        targets = _REGISTER.findall(m.group(2)) if m.group(2).startswith("{") else [m.group(2)]
        if register in targets:
            sources.append((m.group(1), (m.group(3) or "").strip()))
    if len(sources) != 1 or depth > 8:
        return None
    opcode, operand = sources[0]
    if not _MOVE.fullmatch(opcode):
        return None
    if (imm := _IMMEDIATE.fullmatch(operand)) is not None:
        return ptx_int(imm.group(1))
    return _constant(operand, statements, depth + 1) if _REGISTER.fullmatch(operand) else None


def _calls(body: str) -> list[str]:
    return [m.group(1) for m in _CALL.finditer(body)] if "call" in body else []


def _functions(code: str) -> dict[str, str]:
    """Each `.func` definition's body (declarations, which have none, left out)."""
    out = {}
    for m in _FUNC.finditer(code):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace == -1 or (semi != -1 and semi < brace):
            continue
        out[m.group(1)] = _body(code, brace)
    return out


def _allocating_functions(code: str) -> dict[str, str]:
    """The `.func`s that run a tcgen05.alloc, themselves or through a function they call, with their
    bodies."""
    bodies = _functions(code)
    found = {name for name, body in bodies.items() if _ALLOC_WORD in body}
    grew = True
    while grew:
        more = {name for name, body in bodies.items() if name not in found and set(_calls(body)) & found}
        found |= more
        grew = bool(more)
    return {name: bodies[name] for name in bodies if name in found}


def _tmem_of(body: str, allocating: Mapping[str, str]) -> TmemAlloc | None:
    """A body's TmemAlloc; None where it allocates no tensor memory."""
    statements = _statements(body) if _ALLOC_WORD in body else []
    columns: int | None = 0
    allocs, unread = 0, ""
    for m in _TCGEN05_ALLOC.finditer(body):
        allocs += 1
        operand = m.group(3)
        imm = _IMMEDIATE.fullmatch(operand)
        value = ptx_int(imm.group(1)) if imm else None
        if value is None and _REGISTER.fullmatch(operand):
            value = _constant(operand, statements)
        if value is None:
            unread = unread or (
                f"tcgen05.alloc takes its column count from {operand}, which the PTX does not set from one "
                "constant"
            )
        columns = None if value is None or columns is None else columns + value
    for callee in _calls(body):
        indirect = callee.startswith("%")
        if callee in allocating or (indirect and allocating):
            allocs += 1
            columns = None
            # A call may run its function's allocations any number of times: no count is summed through one.
            named = next(iter(allocating)) if indirect else callee
            unread = unread or f"it calls {named}, which runs tcgen05.alloc, and a call's count is not summed"
    if allocs == 0:
        return None
    return TmemAlloc(allocs=allocs, columns=columns, unread="" if columns is not None else unread)


def _tmem_outline(body: str, allocating: Mapping[str, str]) -> str:
    """A body's tcgen05.alloc instructions, each count resolved where the PTX sets it from one constant,
    and its calls into allocating functions: what `_tmem_of` reads the same from as from the body."""
    statements = _statements(body) if _ALLOC_WORD in body else []
    lines = []
    for m in _TCGEN05_ALLOC.finditer(body):
        operand = m.group(3)
        if _REGISTER.fullmatch(operand) and (value := _constant(operand, statements)) is not None:
            operand = str(value)
        lines.append(f"tcgen05.alloc{m.group(1)} {m.group(2)}, {operand};\n")
    for callee in _calls(body):
        if callee in allocating or (callee.startswith("%") and allocating):
            lines.append(f"call.uni {callee}, ();\n")
    return "".join(lines)


@functools.lru_cache(maxsize=64)
def ptx_tmem(ptx: str) -> Mapping[str, TmemAlloc]:
    """The tensor memory each entry that runs tcgen05.alloc allocates per block (entries without one are
    left out). Reads a whole module or its outline alike. Remembered, so read-only, as ptx_setmaxnreg."""
    code = COMMENTS.sub("", ptx)
    if _ALLOC_WORD not in code:
        return {}
    allocating = _allocating_functions(code)
    out = {}
    for name, _, body in _entries(code):
        found = _tmem_of(body, allocating)
        if found is not None:
            out[name] = found
    return out


# `setmaxnreg.inc.sync.aligned.u32 232`: a warpgroup's register count raised (inc) or lowered (dec).
_SETMAXNREG = lazy(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)")


def _entries(code: str) -> list[tuple[str, str, str]]:
    """(name, header, body) per .entry of comment-free PTX; the body runs to its matching "}". One walk
    from entry to entry: a module of thousands of kernels is read once, not once per kernel."""
    out = []
    for m in ENTRY.finditer(code):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        ends = [p for p in (brace, semi) if p != -1]
        header = code[m.end() : min(ends) if ends else len(code)]
        if brace == -1 or (semi != -1 and semi < brace):  # a declaration without a body
            out.append((m.group(1), header, ""))
            continue
        out.append((m.group(1), header, _body(code, brace)))
    return out


def _body(code: str, brace: int) -> str:
    """What lies between the "{" at `brace` and its matching "}"."""
    depth, end = 0, len(code)
    for b in _BRACE.finditer(code, brace):
        depth += 1 if b.group(0) == "{" else -1
        if depth == 0:
            end = b.start()
            break
    return code[brace + 1 : end]


_BRACE = lazy(r"[{}]")


@functools.lru_cache(maxsize=64)
def ptx_setmaxnreg(ptx: str) -> Mapping[str, tuple[tuple[str, int], ...]]:
    """Each entry's `setmaxnreg` targets, by direction ("inc", 232), in the order of the PTX, duplicates
    dropped (a target set on several paths is one role). Reads a whole module or its outline. Remembered,
    so read-only: every kernel of a unit asks, with the unit's one outline."""
    out = {}
    for name, _, body in _entries(COMMENTS.sub("", ptx)):
        found = [(m.group(1), int(m.group(2))) for m in _SETMAXNREG.finditer(body)]
        out[name] = tuple(dict.fromkeys(found))
    return out
