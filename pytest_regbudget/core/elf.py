"""What a cubin's ELF says about the calls a kernel makes: the functions it reaches (`call_tree`), from its
call graph (`.nv.callgraph`) and from the functions compiled into its own code section.

ptxas reports C7510 ("wgmma ... serialized due to the presence of Extern calls") without naming the call, and
reports a `__noinline__` function's spills under the function rather than under the kernels that call it; the
ELF says which functions a kernel calls, for every compiler: NVRTC's and nvcc's cubins and each ELF of a built
library. Read with pyelftools (a maintained, pure-Python ELF reader) rather than a parser of our own. Pure:
bytes in.

What ptxas writes, as read from ptxas 12.9 and 13.5 (sm_90):

- A whole-program build (the default of NVRTC and nvcc) compiles a copy of each function a kernel calls into
  the kernel's own `.text.<kernel>` section, as a local symbol `$<kernel>$<function>`: two kernels that call
  one function hold a copy each, with figures of its own (ptxas prints each copy's after its kernel's). The
  call graph has no edge to those copies, only to externs (`vprintf`), and from the kernel even where a copy
  makes the call.
- A relocatable build (`-rdc=true`, ptxas `-c`) compiles each function once, in a section of its own, and
  the call graph has an edge from each caller.
- `.nv.callgraph` is a list of (int32, int32) records in parts, each opened by a (0, -N) marker: -1 the
  calls (caller, callee); -2 the functions whose address is taken (function, prototype); -3 the calls through
  a pointer (caller, prototype); -4 what those may call (caller, callee). Only -1 and -4 hold symbol indexes
  on both sides: a prototype is a number of its own, not a symbol.
"""

from __future__ import annotations

import io
import struct

from msgspec import Struct

# The parts of .nv.callgraph whose records are (caller symbol, callee symbol).
_CALL_PARTS = (-1, -4)


class Called(Struct, frozen=True):
    """A function a kernel reaches."""

    name: str  # as ptxas names it in its report: the function's, not its copy's "$kernel$" symbol
    copy: bool  # compiled into the kernel's own section (a whole-program build): its figures are the kernel's
    defined: bool  # its code is in the cubin; False for an extern (`vprintf`, `__assertfail`)


def call_tree(cubin: bytes, kernel: str) -> tuple[Called, ...] | None:
    """The functions `kernel` calls, directly or through the functions it calls, each once (a recursive
    function, or one reached along two paths, too), in the order they are reached. None for a cubin that
    cannot be read or that has no function `kernel`."""
    # Imported here: pyelftools costs 35-55 ms to import (its DWARF readers come with ELFFile), and only a
    # kernel with a C7510/C7517 note, or whose callees spill, is read.
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        elf = ELFFile(io.BytesIO(cubin))
        symtab = elf.get_section_by_name(".symtab")
        if not isinstance(symtab, SymbolTableSection):
            return None
        # (name, section index or None where undefined, whether a function) of each symbol, by index.
        symbols = [
            (
                s.name,
                s["st_shndx"] if isinstance(s["st_shndx"], int) else None,
                s["st_info"]["type"] == "STT_FUNC",
            )
            for s in symtab.iter_symbols()
        ]
        graph = elf.get_section_by_name(".nv.callgraph")
        data = b"" if graph is None else graph.data()
    except (ELFError, OSError, ValueError, struct.error):
        return None
    start = next((i for i, (name, _, func) in enumerate(symbols) if func and name == kernel), None)
    if start is None:
        return None
    edges = _edges(data, len(symbols))
    # A function's neighbours in its section: a kernel's copies (and a copy's kernel, which is seen already).
    by_section: dict[int, list[int]] = {}
    for i, (_, section, func) in enumerate(symbols):
        if func and section is not None:
            by_section.setdefault(section, []).append(i)
    seen = {start}
    found: list[int] = []
    todo = [start]
    while todo:
        at = todo.pop(0)
        section = symbols[at][1]
        for callee in [*edges.get(at, ()), *(by_section.get(section, ()) if section is not None else ())]:
            if callee not in seen:
                seen.add(callee)
                found.append(callee)
                todo.append(callee)
    home = symbols[start][1]
    prefix = f"${kernel}$"
    out = []
    for i in found:
        name, section, _ = symbols[i]
        copy = section is not None and section == home
        out.append(Called(name.removeprefix(prefix) if copy else name, copy, section is not None))
    return tuple(out)


def symbol_names(cubin: bytes) -> list[str]:
    """The name of every symbol of the cubin, as its string table holds it (decoded as cuobjdump's output
    is read: UTF-8, a byte that is not shown as U+FFFD); [] for a cubin that cannot be read. cuobjdump prints
    a name as it is, so a name with a space or a line break in it is read here, whole."""
    from elftools.common.exceptions import ELFError
    from elftools.common.utils import parse_cstring_from_stream
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        symtab = ELFFile(io.BytesIO(cubin)).get_section_by_name(".symtab")
        if not isinstance(symtab, SymbolTableSection):
            return []
        # Each name's own bytes from the string table, decoded here: pyelftools' own decoding of names has
        # changed between releases (Latin-1, then UTF-8), and cuobjdump's output is read as UTF-8.
        strings = symtab.stringtable
        return [
            (parse_cstring_from_stream(strings.stream, strings["sh_offset"] + s["st_name"]) or b"").decode(
                "utf-8", "replace"
            )
            for s in symtab.iter_symbols()
        ]
    except (ELFError, OSError, ValueError, struct.error):
        return []


def _edges(data: bytes, symbols: int) -> dict[int, list[int]]:
    """caller -> callees from the records of .nv.callgraph's call parts (see the module's docstring)."""
    words = struct.unpack(f"<{len(data) // 4}i", data[: len(data) // 4 * 4])
    edges: dict[int, list[int]] = {}
    part = 0
    for caller, callee in zip(words[::2], words[1::2], strict=False):
        if caller == 0 and callee < 0:
            part = callee
        elif part in _CALL_PARTS and 0 < caller < symbols and 0 < callee < symbols:
            edges.setdefault(caller, []).append(callee)
    return edges


def callees(cubin: bytes, kernel: str) -> tuple[str, ...]:
    """The names of the functions `kernel` reaches (`call_tree`); the extern ones (`__assertfail`, `vprintf`)
    are those without code in the cubin. () for a cubin that cannot be read or a kernel that calls nothing."""
    return tuple(c.name for c in call_tree(cubin, kernel) or ())
