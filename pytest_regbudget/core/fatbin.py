"""A cuobjdump listing split into its ELF blocks: a fatbin's listing prints a `Fatbin elf code:` (or `Fatbin
ptx code:`) header before each, a bare cubin's none. Every reader of cuobjdump.py starts here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from msgspec import Struct

from .errors import ParseError

_FATBIN_ELF = "Fatbin elf code:"
_FATBIN_PTX = "Fatbin ptx code:"
_BLOCK_ARCH = re.compile(r"^arch\s*=\s*(sm_\w+)\s*$")


class Block(Struct):
    arch: str | None
    lines: list[tuple[int, str]]  # (1-based line number, text)


def elf_blocks(lines: Iterable[str]) -> list[Block]:
    """The ELF blocks of a listing; a listing without block headers (a bare cubin) is one ELF."""
    blocks: list[Block] = []
    current: Block | None = None
    preamble: list[tuple[int, str]] = []
    headers = False
    in_header = False
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped in (_FATBIN_ELF, _FATBIN_PTX):
            headers = True
            # PTX has no resources, symbols or SASS: its block is read and dropped.
            current = Block(None, []) if stripped == _FATBIN_ELF else None
            if current is not None:
                blocks.append(current)
            in_header = True
            continue
        if in_header:
            # The block header runs to the first blank line: "arch = sm_90", "code version = ...".
            if not stripped:
                in_header = False
            elif current is not None and (m := _BLOCK_ARCH.match(stripped)):
                current.arch = m.group(1)
            continue
        if current is not None:
            current.lines.append((lineno, line))
        elif not headers:
            preamble.append((lineno, line))
    if not headers and any(text.strip() for _, text in preamble):
        return [Block(None, preamble)]
    return blocks


def elf_block_archs(text: str) -> list[str | None]:
    """The arch of each ELF block of a listing, in order, empty ones included (a bare cubin: [None])."""
    return [block.arch for block in elf_blocks(text.splitlines())]


_LISTED_ELF = re.compile(r"^ELF file\s+(\d+):\s*(\S.*?)\s*$")


def parse_elf_list(text: str) -> list[str]:
    """The ELF file names of `cuobjdump --list-elf` (`ELF file    3: libcublas.so.3.sm_90.cubin`), in
    order: the names `--extract-elf` takes. [] for a file that is not a fatbin container (a bare cubin)."""
    found = [(int(m.group(1)), m.group(2)) for line in text.splitlines() if (m := _LISTED_ELF.match(line))]
    if [n for n, _ in found] != list(range(1, len(found) + 1)):
        raise ParseError(
            f"--list-elf numbers its files {[n for n, _ in found][:5]}..., not 1, 2, 3, ...", "", 0
        )
    return [name for _, name in found]
