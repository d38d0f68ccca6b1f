"""What a cubin's ELF says about the calls a kernel makes: its call graph (`.nv.callgraph`).

ptxas reports C7510 ("wgmma ... serialized due to the presence of Extern calls") without naming the call;
the call graph does, for every compiler: NVRTC's and nvcc's cubins and each ELF of a built library. Read
with pyelftools (a maintained, pure-Python ELF reader) rather than a parser of our own. Pure: bytes in.
"""

from __future__ import annotations

import io
import struct


def callees(cubin: bytes, kernel: str) -> tuple[str, ...]:
    """The functions `kernel` calls, directly or through the functions it calls, in call-graph order; the
    extern ones (`__assertfail`, `vprintf`) are the undefined symbols among them. () for a cubin that cannot
    be read or a kernel that calls nothing."""
    # Imported here: pyelftools costs 35-55 ms to import (its DWARF readers come with ELFFile), and only a
    # kernel with a C7510/C7517 note is read.
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        elf = ELFFile(io.BytesIO(cubin))
        symtab = elf.get_section_by_name(".symtab")
        graph = elf.get_section_by_name(".nv.callgraph")
        if not isinstance(symtab, SymbolTableSection) or graph is None:
            return ()
        names = [symbol.name for symbol in symtab.iter_symbols()]
        data = graph.data()
    except (ELFError, OSError, ValueError, struct.error):
        return ()
    # Pairs of symbol indexes (caller, callee); negative callers mark the section's own records.
    words = struct.unpack(f"<{len(data) // 4}i", data[: len(data) // 4 * 4])
    edges: dict[int, list[int]] = {}
    for caller, callee in zip(words[::2], words[1::2], strict=False):
        if caller > 0 and callee > 0 and caller < len(names) and callee < len(names):
            edges.setdefault(caller, []).append(callee)
    if kernel not in names:
        return ()
    found: list[int] = []
    todo = [names.index(kernel)]
    while todo:
        for callee in edges.get(todo.pop(), []):
            if callee not in found:
                found.append(callee)
                todo.append(callee)
    return tuple(names[i] for i in found)
