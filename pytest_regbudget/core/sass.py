"""SASS facts from the measured cubin: local-memory instructions, loops, source lines.

ptxas's spill figures are static byte counts; what matters is where the instructions sit. This module owns
a pure parser of `nvdisasm -c -g` text (disasm.py runs nvdisasm) that tells spill/refill instructions
(nvdisasm marks them `(*"SpillRefill"*)`) from accesses to local arrays and finds loops as backward
branches, and the reading of one SASS instruction line, which binary.py shares for cuobjdump's listings.
"""

from __future__ import annotations

import re
from pathlib import Path

from msgspec import Struct

from .errors import SassError


class Loop(Struct, frozen=True):
    start: int  # address of the branch target (the loop head)
    end: int  # address of the backward branch
    file: str | None
    # Source lines of the loop's instructions, sorted: for an inlined helper's instruction, the line of its
    # call in the kernel (`nvdisasm -gi`), so that a loop is named by its own lines, not the helper's.
    lines: tuple[int, ...]
    depth: int = 1  # 1 for an outermost loop, 2 for a loop in it, and so on

    def where(self) -> str:
        return _where(self.file, self.lines)


class LocalAccess(Struct, frozen=True):
    address: int
    opcode: str  # "STL" or "LDL"
    spill: bool  # a spill or refill, not an access to a local array
    file: str | None
    line: int | None
    loop: Loop | None  # the innermost loop holding it

    def where(self) -> str:
        return _where(self.file, (self.line,) if self.line else ())


class SassReport(Struct, frozen=True):
    function: str
    instructions: int
    local: tuple[LocalAccess, ...]
    loops: tuple[Loop, ...]

    @property
    def local_instructions(self) -> int:
        return len(self.local)

    @property
    def spill_instructions(self) -> int:
        return sum(1 for a in self.local if a.spill)

    @property
    def spill_instructions_in_loops(self) -> int:
        return sum(1 for a in self.local if a.spill and a.loop is not None)


def _where(file: str | None, lines: tuple[int, ...]) -> str:
    name = Path(file).name if file else "?"
    if not lines:
        return name
    if len(lines) == 1 or lines[0] == lines[-1]:
        return f"{name}:{lines[0]}"
    return f"{name}:{lines[0]}-{lines[-1]}"


_SECTION = re.compile(r"^\s*\.section\s+\.text\.(\S+?),")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;(.*)$")
_LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
# `nvdisasm -gi` (and -g on newer nvdisasm): `line 2 inlined at "k.cu", line 8`, possibly a chain; the last
# call site is the line in the kernel's own body.
_INLINED_AT = re.compile(r'inlined at "([^"]+)", line (\d+)')
# A loop around USETMAXREG is setmaxnreg's allocation retry, not a loop of the user's.
_SETMAXREG = re.compile(r"\bUSETMAXREG\b")
_BRANCH = re.compile(r"\b(?:BRA|BRX|JMP)\b[^`]*`\((\.L_x_\d+)\)")
_LOCAL = re.compile(r"\b(?:STL|LDL)(?:\.\w+)*\b")


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


def parse_sass(text: str, function: str) -> SassReport:
    """The facts of `function` in `nvdisasm -c -g` output. Raises SassError if it is not there."""
    sections: dict[str, list[str]] = {}
    body: list[str] | None = None
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section:
            body = sections.setdefault(section.group(1), [])
        elif body is not None:
            body.append(line)
    if function not in sections:
        raise SassError(f"nvdisasm output has no function {function!r} (it has: {', '.join(sections)})")
    lines = sections[function]

    # (address, text, spill mark, file, line) per instruction; labels resolve to the next instruction. The
    # kernel-level location of each (the call site of an inlined helper's line) is kept apart, for loops.
    instrs: list[tuple[int, str, bool, str | None, int | None]] = []
    kernel_lines: list[tuple[str | None, int | None]] = []
    current_outer: tuple[str | None, int | None] = (None, None)
    labels: dict[str, int] = {}
    pending: list[str] = []
    file: str | None = None
    src_line: int | None = None
    for line in lines:
        loc = _LINE.search(line)
        if loc:
            file, src_line = loc.group(1), int(loc.group(2))
            calls = _INLINED_AT.findall(line)
            current_outer = (calls[-1][0], int(calls[-1][1])) if calls else (file, src_line)
            continue
        label = _LABEL.match(line)
        if label:
            pending.append(label.group(1))
            continue
        ins = instruction(line)
        if ins:
            address, text_, rest = ins
            labels.update(dict.fromkeys(pending, address))
            pending = []
            instrs.append((address, text_, "SpillRefill" in rest, file, src_line))
            kernel_lines.append(current_outer)

    spans = []
    for address, text_, _, _, _ in instrs:
        branch = _BRANCH.search(text_)
        # A branch to an earlier instruction closes a loop (a branch to itself after EXIT is not one).
        if branch and labels.get(branch.group(1), address) < address:
            start = labels[branch.group(1)]
            inside = [n for n, i in enumerate(instrs) if start <= i[0] <= address]
            if any(_SETMAXREG.search(instrs[n][1]) for n in inside):
                continue  # setmaxnreg's register-allocation retry
            spans.append((start, address, inside))
    loops = []
    for start, end, inside in spans:
        files = [kernel_lines[n][0] for n in inside if kernel_lines[n][0]]
        main_file = max(set(files), key=files.count) if files else None
        lines_in = tuple(sorted({ln for f, ln in (kernel_lines[n] for n in inside) if ln and f == main_file}))
        depth = sum(1 for s, e, _ in spans if s <= start and end <= e)
        loops.append(Loop(start, end, main_file, lines_in, depth))
    loops.sort(key=lambda lp: lp.end - lp.start)  # innermost (shortest) first

    marked = any(i[2] for i in instrs)
    local = []
    for address, text_, spill_mark, file_, line_ in instrs:
        op = local_opcode(text_)
        if op is None:
            continue
        # Older nvdisasm does not mark spills; then a stack-pointer-relative access is taken for one.
        spill = spill_mark if marked else bool(re.search(r"\[R1(?:\+0x[0-9a-f]+)?\]", text_))
        loop = next((lp for lp in loops if lp.start <= address <= lp.end), None)
        local.append(LocalAccess(address, op.partition(".")[0], spill, file_, line_, loop))
    return SassReport(function=function, instructions=len(instrs), local=tuple(local), loops=tuple(loops))
