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


_LISTED_PTX = re.compile(r"^PTX file\s+\d+:\s*(\S.*?)\s*$")
_PTX_ARCH = re.compile(r"\.(sm_\d+[af]?)\.ptx$")
_ARCH = re.compile(r"sm_(\d+)([af]?)")


def parse_ptx_list(text: str) -> dict[str, list[str]]:
    """The PTX file names of `cuobjdump --list-ptx` (`PTX file    1: bw.1.sm_100a.ptx`) by the arch their
    name ends with: the names `--extract-ptx` takes. {} for a file without PTX (cuobjdump then only says so
    on stderr)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if (m := _LISTED_PTX.match(line)) and (arch := _PTX_ARCH.search(m.group(1))):
            found.setdefault(arch.group(1), []).append(m.group(1))
    return found


def ptx_arch_for(arch: str, held: Iterable[str]) -> str | None:
    """Of the PTX archs a binary holds, the one a kernel's SASS for `arch` was most likely built from: the
    same arch, else the same arch number with another suffix (compute_100f for sm_100a), else the newest
    family PTX of its major below it (compute_100f for sm_103a). None where no PTX fits: tcgen05.alloc, the
    reason to read it, exists only in `a` and `f` PTX, which no other arch's SASS comes from."""
    mine = _ARCH.fullmatch(arch)
    if mine is None:
        return None
    number = int(mine.group(1))
    fits: list[tuple[int, int, str]] = []  # (how close, arch number, name): the largest wins
    for name in held:
        m = _ARCH.fullmatch(name)
        other = -1 if m is None else int(m.group(1))
        if name == arch:
            fits.append((2, other, name))
        elif other == number:
            fits.append((1, other, name))
        elif m is not None and m.group(2) == "f" and other // 10 == number // 10 and other < number:
            fits.append((0, other, name))
    return max(fits)[2] if fits else None
