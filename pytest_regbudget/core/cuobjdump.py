"""Readers of cuobjdump's listings, on their text alone: the resource usage (`-res-usage`), the ELF's
sections and attributes (`-elf`), and the local-memory accesses of the SASS (`-sass`), and what they say of
one kernel together (`combine_listings`, `BinaryKernel`). tools/cuobjdump.py runs cuobjdump; its docstring
says what a binary records and what it does not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from msgspec import Struct, field

from . import names
from .arch import get_arch
from .errors import ParseError, UnknownArchError
from .fatbin import Block, elf_blocks
from .fatbin import elf_block_archs as elf_block_archs
from .fatbin import parse_elf_list as parse_elf_list
from .metrics import KernelResources
from .ptx import TmemAlloc
from .ptxas import three_dims
from .sass import instruction, local_opcode, setmaxnreg_of


class ResourceUsage(Struct, frozen=True):
    """One "Function NAME:" entry of `cuobjdump --dump-resource-usage`: a kernel or a device function."""

    name: str
    elf: int  # index of its ELF among the file's ELF blocks, in cuobjdump's order
    arch: str | None  # the block's "arch = sm_90"; None for a bare cubin, whose listing has no header
    registers: int
    stack: int
    shared: int
    local: int
    const_banks: tuple[tuple[int, int], ...]
    line: str  # cuobjdump's own line, stripped, to quote in messages

    @property
    def const(self) -> int:
        return sum(size for _, size in self.const_banks)


class KernelAttributes(Struct, frozen=True):
    """What a kernel's `.nv.info.NAME` section and the symbol table say about it."""

    maxntid: tuple[int, ...] | None = None
    reqntid: tuple[int, ...] | None = None
    register_limit: int | None = None
    # Offsets (in the kernel's .text section) of the instructions ptxas marked SpillRefill, callees'
    # code excluded; None when the section has no EIATTR_ANNOTATIONS at all.
    spill_offsets: tuple[int, ...] | None = None
    # EIATTR_REG_RECONFIG: the kernel moves registers between warpgroups (setmaxnreg kept); its SASS says how.
    reg_reconfig: bool = False
    cluster_dims: tuple[int, ...] | None = None  # EIATTR_CTA_PER_CLUSTER: the compiled __cluster_dims__
    # EIATTR_TCGEN05_1CTA_USED / _2CTA_USED: the kernel runs tcgen05 (tensor memory); no column count.
    tcgen05: bool = False


class ElfInfo(Struct, frozen=True):
    """One ELF of `cuobjdump --dump-elf`: its header facts and its kernels (ENTRY symbols)."""

    index: int
    arch: str  # "sm_90": the fatbin block's arch, else the ELF header's
    relocatable: bool  # ET_REL: an -rdc object that nvlink has not linked yet
    toolkit: str | None  # the ptxas version, from the .note.nv.tkinfo notes or else the ELF header
    entries: tuple[str, ...]
    kernels: Mapping[str, KernelAttributes] = field(default_factory=dict)
    # Lines of the symbol table that read as no symbol: a name with a space or a line break in it, which
    # cuobjdump prints as it is (tools/cuobjdump.py then reads the names from the ELF, and escapes them).
    unread_symbols: int = 0


# ---------------------------------------------------------------------------------------------------
# --dump-resource-usage

# DOTALL: a name with a line break in it is joined up from its lines first (parse_resource_usage).
_FUNCTION = re.compile(r"^\s*Function\s+(\S.*?):\s*$", re.DOTALL)
_FUNCTION_START = re.compile(r"^\s*Function\s+\S")


def escape_names(text: str, raw: Iterable[str]) -> tuple[str, set[str]]:
    """A listing's `text` with each of the `raw` symbol names that `names.escaped_symbol` changes put as it
    makes them, longest first (so that a name that holds another is put whole); and the names put. The text
    is as cuobjdump's output is read: \\r\\n and \\r are \\n in it."""
    put = set()
    for name in sorted({n for n in raw if names.escaped_symbol(n) != n}, key=len, reverse=True):
        shown = names.escaped_symbol(name)
        text = text.replace(re.sub(r"\r\n?", "\n", name), shown)
        put.add(shown)
    return text, put


_FIELD = re.compile(r"([A-Z_]+)(?:\[(\d+)\])?:(\d+)")
_REQUIRED = ("REG", "STACK", "SHARED", "LOCAL")


def parse_resource_usage(text: str) -> list[ResourceUsage]:
    """Every function of `cuobjdump --dump-resource-usage` output, ELF by ELF, in cuobjdump's order.

    Works on the output for a cubin, a fatbin, an object file, a shared library or an executable.
    Device functions are listed too (in relocatable objects): tell kernels apart with `parse_elf_dump`.
    """
    result: list[ResourceUsage] = []
    for index, block in enumerate(elf_blocks(text.splitlines())):
        pending: tuple[str, int, str] | None = None  # (name, lineno, line) awaiting its numbers
        split: str | None = None  # a name cut by a line break, up to the line that ends it with ":"
        for lineno, line in block.lines:
            if split is not None:
                split += "\n" + line
                if not line.rstrip().endswith(":"):
                    continue
                line, split = split, None
            if m := _FUNCTION.match(line):
                if pending is not None:
                    raise ParseError(f"function {pending[0]!r} has no resource line", pending[2], pending[1])
                pending = (names.escaped_symbol(m.group(1)), lineno, line)
                continue
            if pending is None and _FUNCTION_START.match(line):
                split = line
                continue
            if pending is None or not line.strip():
                continue
            name = pending[0]
            pending = None
            fields: dict[str, int] = {}
            banks: list[tuple[int, int]] = []
            for key, bank, value in _FIELD.findall(line):
                if key == "CONSTANT" and bank:
                    banks.append((int(bank), int(value)))
                else:
                    fields[key] = int(value)
            missing = [k for k in _REQUIRED if k not in fields]
            if missing:
                raise ParseError(f"the resource line of {name!r} has no {', '.join(missing)}", line, lineno)
            result.append(
                ResourceUsage(
                    name=name,
                    elf=index,
                    arch=block.arch,
                    registers=fields["REG"],
                    stack=fields["STACK"],
                    shared=fields["SHARED"],
                    local=fields["LOCAL"],
                    const_banks=tuple(banks),
                    line=line.strip(),
                )
            )
        if pending is not None:
            raise ParseError(
                f"function {pending[0]!r} has no resource line; is the output truncated?",
                pending[2],
                pending[1],
            )
    return result


# ---------------------------------------------------------------------------------------------------
# --dump-elf

# cuobjdump prints the header in two styles, by the ELF's ABI version:
#   "64-bit ELF: type=ET_EXEC, ABI=8, sm=90, toolkit=13.5, flags=0x6005a04"   (ptxas 13.x)
#   "64bit elf: type=2, abi=7, sm=90, toolkit=129, flags = 0x5a055a"           (ptxas 11.x, 12.x)
_ELF_HEADER = re.compile(
    r"^\d+-?bit\s+elf:\s*type=(\w+),\s*abi=\d+,\s*sm=(\w+),\s*toolkit=([\d.]+)", re.IGNORECASE
)
_TOOL_NAME = re.compile(r"^\s*Tool Name:\s*(\S+)")
_TOOL_VERSION = re.compile(r"^\s*Tool Version:.*?release (\d+\.\d+)")
_ATTRIBUTE = re.compile(r"^\s*Attribute:\s*(\S+)")
_VALUE = re.compile(r"^\s*Value:\s*(.*)$")
_SPILL_MARK = re.compile(r"SpillRefill\s*:\s*Offset\s*:\s*(0x[0-9a-fA-F]+|\d+)")
_HEX = re.compile(r"0x[0-9a-fA-F]+|\d+")
_DEFAULT_REGISTER_LIMIT = 0xFF  # EIATTR_MAXREG_COUNT of a kernel without any cap


def _toolkit_version(raw: str) -> str:
    # "13.5" as is; "129" is major*10 + minor.
    if "." in raw:
        return raw
    number = int(raw)
    return f"{number // 10}.{number % 10}"


def version_tuple(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor.split(".")[0] or 0)


class _Symbol(Struct):
    name: str
    value: int
    size: int
    kind: str  # FUNC, OBJECT, SECTION, ...
    other: tuple[str, ...]  # ENTRY, RESERVED_SHARED, ...
    section: int


class _ElfState(Struct):
    header: tuple[str, str, str] | None = None  # (type, sm, toolkit)
    ptxas_versions: list[str] = field(default_factory=list)
    symbols: list[_Symbol] = field(default_factory=list)
    # .nv.info.NAME -> [(attribute, value text)]
    info: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    unread: int = 0  # symbol table lines that read as no symbol


def _parse_symbol(line: str) -> _Symbol | None:
    # Num Value Size Type Bind Vis Other... Ndx Name
    parts = line.split()
    if len(parts) < 9 or not all(_HEX.fullmatch(p) for p in (parts[0], parts[1], parts[2], parts[-2])):
        return None
    return _Symbol(
        name=parts[-1],
        value=int(parts[1], 0),
        size=int(parts[2], 0),
        kind=parts[3],
        other=tuple(parts[6:-2]),
        section=int(parts[-2], 0),
    )


def _read_elf_block(block: Block) -> _ElfState:
    state = _ElfState()
    section: str | None = None
    tool: str | None = None
    attribute: list[str] | None = None  # [name, value] being collected
    for _, line in block.lines:
        if m := _ELF_HEADER.match(line):
            state.header = (m.group(1), m.group(2), _toolkit_version(m.group(3)))
            continue
        if line.startswith("."):
            # A new section: ".nv.info.bounded", ".section .symtab", ".section .rela.text.x\tRELA".
            words = line.split()
            section = words[1] if words[0] == ".section" and len(words) > 1 else words[0]
            attribute = None
            continue
        if section is None:
            continue
        if section == ".symtab":
            symbol = _parse_symbol(line)
            if symbol is not None:
                state.symbols.append(symbol)
            elif line.strip() and not line.lstrip().startswith("Num"):
                state.unread += 1
        elif section == ".note.nv.tkinfo":
            if m := _TOOL_NAME.match(line):
                tool = m.group(1)
            elif (m := _TOOL_VERSION.match(line)) and tool == "ptxas":
                state.ptxas_versions.append(m.group(1))
        elif section.startswith(".nv.info."):
            attrs = state.info.setdefault(section.removeprefix(".nv.info."), [])
            if m := _ATTRIBUTE.match(line):
                attribute = [m.group(1), ""]
                attrs.append((attribute[0], ""))
            elif attribute is not None and (m := _VALUE.match(line)):
                attribute[1] = m.group(1)
                attrs[-1] = (attribute[0], attribute[1])
            elif attribute is not None and line.startswith("\t\t"):
                # Multi-line values (annotations, parameter info) continue on doubly indented lines.
                attribute[1] += "\n" + line.strip()
                attrs[-1] = (attribute[0], attribute[1])
    return state


def _dims(value: str) -> tuple[int, ...] | None:
    numbers = tuple(int(x, 0) for x in _HEX.findall(value))
    return numbers or None


def _kernel_attributes(
    attrs: Sequence[tuple[str, str]], callees: Sequence[tuple[int, int]]
) -> KernelAttributes:
    maxntid = reqntid = None
    limit: int | None = None
    marks: list[int] | None = None
    reconfig = tcgen05 = False
    cluster: tuple[int, ...] | None = None
    for name, value in attrs:
        if name == "EIATTR_MAX_THREADS":
            maxntid = _dims(value)
        elif name == "EIATTR_REQNTID":
            reqntid = _dims(value)
        elif name == "EIATTR_MAXREG_COUNT":
            numbers = _dims(value)
            if numbers and numbers[0] != _DEFAULT_REGISTER_LIMIT:
                limit = numbers[0]
        elif name == "EIATTR_ANNOTATIONS":
            marks = (marks or []) + [int(x, 0) for x in _SPILL_MARK.findall(value)]
        elif name == "EIATTR_REG_RECONFIG":
            reconfig = True
        elif name == "EIATTR_CTA_PER_CLUSTER":
            cluster = _dims(value)
        elif name.startswith("EIATTR_TCGEN05_"):
            tcgen05 = True
    if marks is not None:
        # A non-inlined callee is compiled into its caller's section (a LOCAL FUNC symbol inside it);
        # ptxas reports its spills under its own name, so they are not the kernel's.
        marks = [m for m in marks if not any(start <= m < end for start, end in callees)]
    return KernelAttributes(
        maxntid=maxntid,
        reqntid=reqntid,
        register_limit=limit,
        spill_offsets=None if marks is None else tuple(sorted(marks)),
        reg_reconfig=reconfig,
        cluster_dims=cluster,
        tcgen05=tcgen05,
    )


def parse_elf_dump(text: str | Iterable[str]) -> list[ElfInfo]:
    """The ELFs of `cuobjdump --dump-elf` output (text, or its lines), with their kernels' attributes.

    The hex dumps of section contents are not needed and may be left out of `text` beforehand.
    """
    lines = text.splitlines() if isinstance(text, str) else text
    result: list[ElfInfo] = []
    for index, block in enumerate(elf_blocks(lines)):
        state = _read_elf_block(block)
        if state.header is None:
            raise ParseError(f"ELF {index} of the listing has no ELF header line")
        elf_type, sm, header_toolkit = state.header
        entries = [s for s in state.symbols if s.kind == "FUNC" and "ENTRY" in s.other]
        kernels: dict[str, KernelAttributes] = {}
        for entry in entries:
            callees = [
                (s.value, s.value + s.size)
                for s in state.symbols
                if s.kind == "FUNC" and s.section == entry.section and s.name != entry.name
            ]
            kernels[entry.name] = _kernel_attributes(state.info.get(entry.name, []), callees)
        # The ptxas notes are exact; the header's toolkit is whoever wrote the ELF last (nvlink, for
        # a linked -rdc program). The oldest ptxas decides what the ELF can be trusted to record.
        versions = sorted(state.ptxas_versions, key=version_tuple)
        result.append(
            ElfInfo(
                index=index,
                arch=block.arch or f"sm_{sm}",
                relocatable=elf_type in ("ET_REL", "1"),
                toolkit=versions[0] if versions else header_toolkit,
                entries=tuple(e.name for e in entries),
                kernels=kernels,
                unread_symbols=state.unread,
            )
        )
    return result


# ---------------------------------------------------------------------------------------------------
# --dump-sass

_SASS_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
_WIDTHS = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


def _sass_functions(text: str | Iterable[str]) -> list[dict[str, list[tuple[int, str]]]]:
    """Per ELF, per function of a `--dump-sass` listing: its (address, instruction) pairs, in order."""
    lines = text.splitlines() if isinstance(text, str) else text
    result: list[dict[str, list[tuple[int, str]]]] = []
    for block in elf_blocks(lines):
        functions: dict[str, list[tuple[int, str]]] = {}
        current: list[tuple[int, str]] | None = None
        for _, line in block.lines:
            if m := _SASS_FUNCTION.match(line):
                current = functions.setdefault(m.group(1), [])
            elif current is not None and (ins := instruction(line)):
                current.append((ins[0], ins[1]))
        result.append(functions)
    return result


def parse_sass_local_accesses(text: str | Iterable[str]) -> list[dict[str, dict[int, str]]]:
    """Per ELF, per function: offset -> STL/LDL instruction name with modifiers ("LDL.LU.64")."""
    return [
        {
            name: {address: op for address, ins in code if (op := local_opcode(ins))}
            for name, code in functions.items()
        }
        for functions in _sass_functions(text)
    ]


def parse_sass_roles(text: str | Iterable[str]) -> list[dict[str, tuple[tuple[str, int], ...]]]:
    """Per ELF, per function: the setmaxnreg targets its SASS keeps, in order (`USETMAXREG.TRY_ALLOC
    ... 0xe8` is ("inc", 232), `DEALLOC 0x28` is ("dec", 40)); functions without any left out."""
    result = []
    for functions in _sass_functions(text):
        roles = {
            name: tuple(r for _, ins in code if (r := setmaxnreg_of(ins))) for name, code in functions.items()
        }
        result.append({name: found for name, found in roles.items() if found})
    return result


def _access_bytes(opcode: str) -> int:
    width = 4
    for modifier in opcode.split(".")[1:]:
        width = _WIDTHS.get(modifier, width)
    return width


def spill_bytes(offsets: Sequence[int], accesses: Mapping[int, str]) -> tuple[int, int] | None:
    """(stores, loads) in bytes; None if a marked instruction is not an STL or LDL we can size."""
    stores = loads = 0
    for offset in offsets:
        opcode = accesses.get(offset)
        if opcode is None:
            return None
        if opcode.startswith("STL"):
            stores += _access_bytes(opcode)
        else:
            loads += _access_bytes(opcode)
    return stores, loads


# ---------------------------------------------------------------------------------------------------
# One kernel's numbers from the three listings

# The first ptxas seen to mark spill instructions; 12.4 and older were checked and do not.
_ANNOTATING_PTXAS = (12, 9)


class BinaryKernel(Struct, frozen=True, gc=False):  # gc=False: as BaselineEntry (numbers only, thousands)
    """One kernel (entry function) for one arch, as one ELF of a binary records it."""

    name: str  # mangled name, as in the binary
    arch: str  # "sm_90"
    registers: int
    stack: int  # STACK: per-thread stack bytes (ptxas's "stack frame"; callees' too once -rdc is linked)
    shared: int  # static shared memory in bytes, as ptxas's smem (without the sm_90+ reservation)
    local: int  # LOCAL bytes (the .nv.local section; local arrays live in the stack frame instead)
    const: int  # sum of the kernel's CONSTANT[n] banks
    max_threads: int | None  # x*y*z of EIATTR_MAX_THREADS (.maxntid) or EIATTR_REQNTID; None if neither
    min_blocks: int | None  # .minnctapersm: not recorded in the ELF (folded into the register cap)
    spill_stores: int | None  # bytes; None: the binary does not say (ptxas older than 12.9)
    spill_loads: int | None
    # Extras the binary records, for messages and for telling the cases above apart.
    spill_instructions: int | None = None  # instructions ptxas marked as spill/refill in this kernel
    reserved_shared: int | None = 0  # bytes of the driver's reservation inside SHARED; None: unknown arch
    const_banks: tuple[tuple[int, int], ...] = ()  # ((bank, bytes), ...) as cuobjdump prints them
    maxntid: tuple[int, ...] | None = None
    reqntid: tuple[int, ...] | None = None
    register_limit: int | None = None  # EIATTR_MAXREG_COUNT when below the 255 default
    # Its warpgroups' register targets as its SASS keeps them (("inc", 232), ("dec", 40)); () for none.
    setmaxnreg: tuple[tuple[str, int], ...] = ()
    cluster_dims: tuple[int, ...] | None = None  # EIATTR_CTA_PER_CLUSTER (__cluster_dims__)
    tcgen05: bool = False  # EIATTR_TCGEN05_*: it uses tensor memory (how many columns, the ELF does not say)
    # For a tcgen05 kernel whose PTX the binary also holds: that PTX's arch, and the TMEM its tcgen05.alloc
    # instructions take (None: none in its PTX). ptx None: no PTX of the kernel to read the count from.
    ptx: str | None = None
    tmem: TmemAlloc | None = None
    relocatable: bool = False  # from an unlinked -rdc object: REG/STACK do not include callees yet
    toolkit: str | None = None  # CUDA version of the ptxas that built it, "12.9"; None if not recorded
    elf: int = 0  # which ELF of the file (cuobjdump's order), to tell same-arch copies apart
    # Where the name is in several ELFs of this arch (a library's translation units each instantiate it):
    # this copy's tag (`copy_tags`), so that each copy is a kernel of its own; None for a name held once.
    copy: str | None = None
    # LDL/STL instructions in its SASS where that was read (its spills are marked), 0 where it has no local
    # memory (a linked kernel without STACK or LOCAL), else None.
    local_instructions: int | None = None

    @property
    def entry(self) -> str:
        """The name the plugin knows the kernel by: the mangled name, with a copy's tag."""
        return self.name if self.copy is None else f"{self.name}{names.COPY_MARK}{self.copy}"

    def resources(self) -> KernelResources:
        """Its numbers as the verdict reads a compiled kernel's; spills it does not record are unknown."""
        known = self.spill_stores is not None
        return KernelResources(
            name=self.name,
            arch=self.arch,
            registers=self.registers,
            spill_stores=self.spill_stores or 0,
            spill_loads=self.spill_loads or 0,
            stack=self.stack,
            smem=self.shared,
            const_mem=self.const,
            const_banks=self.const_banks,
            barriers=0,
            # cuobjdump's own fields, each constant bank apart (bank 2 holds a kernel's literals).
            ptxas_line=(
                f"cuobjdump: REG:{self.registers} STACK:{self.stack} SHARED:{self.shared} LOCAL:{self.local}"
                + "".join(f" CONSTANT[{bank}]:{size}" for bank, size in self.const_banks)
                + ("" if known else " (spills not recorded in the binary)")
            ),
            max_threads=self.max_threads,
            min_blocks_per_sm=self.min_blocks,
            spills_known=known,
            cluster_dims=None if self.cluster_dims is None else three_dims(self.cluster_dims),
            local_instructions=self.local_instructions,
        )


def combine_listings(
    usages: Sequence[ResourceUsage],
    elves: Sequence[ElfInfo] | Mapping[int, ElfInfo],
    accesses: Sequence[Mapping[str, Mapping[int, str]]] | Mapping[int, Mapping[str, Mapping[int, str]]] = (),
) -> list[BinaryKernel]:
    """The kernels of the three parsed listings of one file (device functions are left out): the ELF
    listing and SASS accesses in cuobjdump's order, or by ELF index (the extracted cubins of some ELFs).

    `accesses` (from `parse_sass_local_accesses`) is needed only for kernels with marked spills; without
    it their spill bytes are None.
    """
    by_elf = dict(elves) if isinstance(elves, Mapping) else dict(enumerate(elves))
    seen = dict(accesses) if isinstance(accesses, Mapping) else dict(enumerate(accesses))
    # Both listings print the same ELFs in the same order; check that before pairing them up.
    for u in usages:
        if u.elf not in by_elf or (u.arch is not None and u.arch != by_elf[u.elf].arch):
            raise ParseError(
                f"the resource listing's ELF {u.elf} ({u.arch}) has no counterpart in the ELF listing"
            )
    elves = by_elf
    return [
        _kernel(u, elves[u.elf], seen.get(u.elf, {}))
        for u in usages
        # --dump-resource-usage lists the device functions of relocatable objects too. A linked ELF whose
        # symbol table this parser could not read (cuobjdump 13.0 prints it in another layout, seen on an
        # H200 machine) lists kernels only, so its listing is taken as it is.
        if u.name in elves[u.elf].entries or (not elves[u.elf].entries and not elves[u.elf].relocatable)
    ]


def _kernel(usage: ResourceUsage, elf: ElfInfo, accesses: Mapping[str, Mapping[int, str]]) -> BinaryKernel:
    attrs = elf.kernels.get(usage.name, KernelAttributes())
    reserved = _reserved_shared(usage, elf)
    spills: tuple[int, int] | None
    marked: int | None
    if attrs.spill_offsets is not None:
        spills = spill_bytes(attrs.spill_offsets, accesses.get(usage.name, {}))
        marked = len(attrs.spill_offsets)
    elif elf.toolkit is not None and version_tuple(elf.toolkit) >= _ANNOTATING_PTXAS:
        spills, marked = (0, 0), 0  # a ptxas that marks spills marked none
    elif usage.stack == 0 and not elf.relocatable:
        # Spills live in the stack frame: a linked kernel without one spilled nothing, whichever ptxas built
        # it (a relocatable object's STACK is 0 until nvlink settles it).
        spills, marked = (0, 0), None
    else:
        spills, marked = None, None
    # PTX forbids .reqntid together with .maxntid, so at most one of them is set.
    dims = attrs.reqntid if attrs.reqntid is not None else attrs.maxntid
    return BinaryKernel(
        name=usage.name,
        arch=elf.arch,
        registers=usage.registers,
        stack=usage.stack,
        shared=usage.shared - (reserved or 0),
        local=usage.local,
        const=usage.const,
        max_threads=None if dims is None else math.prod(dims),
        min_blocks=None,
        spill_stores=None if spills is None else spills[0],
        spill_loads=None if spills is None else spills[1],
        spill_instructions=marked,
        reserved_shared=reserved,
        const_banks=usage.const_banks,
        maxntid=attrs.maxntid,
        reqntid=attrs.reqntid,
        register_limit=attrs.register_limit,
        cluster_dims=attrs.cluster_dims,
        tcgen05=attrs.tcgen05,
        relocatable=elf.relocatable,
        toolkit=elf.toolkit,
        elf=elf.index,
        local_instructions=_local_instructions(usage, elf, accesses),
    )


def _local_instructions(
    usage: ResourceUsage, elf: ElfInfo, accesses: Mapping[str, Mapping[int, str]]
) -> int | None:
    """Its LDL/STL count: from its SASS where that was read, 0 where a linked kernel has no local memory (the
    driver allocates STACK for the whole call tree), else unknown."""
    if usage.name in accesses:
        return len(accesses[usage.name])
    return 0 if usage.stack == 0 and usage.local == 0 and not elf.relocatable else None


def _reserved_shared(usage: ResourceUsage, elf: ElfInfo) -> int | None:
    """Bytes of the driver's per-block reservation that SHARED includes (see the module docstring)."""
    if elf.relocatable or usage.shared == 0:
        return 0
    try:
        limits = get_arch(elf.arch)
    except UnknownArchError:
        return None  # an arch arch.py does not know: its reservation is not known either
    if limits.major < 9 or usage.shared < limits.reserved_smem_per_block:
        return 0
    return limits.reserved_smem_per_block
