"""Resources of the kernels in an already built CUDA binary, read with cuobjdump, on a machine without a GPU.

Owns finding cuobjdump, running it over a cubin, fatbin, object file, shared library or executable, and
pure parsers of what it prints. Three listings, each one block per embedded ELF in the same order
(a bare cubin prints no block header; "Fatbin ptx code" blocks hold PTX, which has no resources yet):

- `cuobjdump --dump-resource-usage FILE`: per function REG, STACK, SHARED, LOCAL, CONSTANT[n]::

      Fatbin elf code:
      ================
      arch = sm_90
      ...
      Resource usage:
       Common:
        GLOBAL:0
       Function bounded:
        REG:42 STACK:128 SHARED:2048 LOCAL:0 CONSTANT[0]:548 TEXTURE:0 SURFACE:0 SAMPLER:0

- `cuobjdump --dump-elf FILE`: the ELF header (arch, ET_EXEC/ET_REL, toolkit), the symbol table, where
  kernels are the FUNC symbols marked ENTRY (STO_CUDA_ENTRY), and per kernel a `.nv.info.NAME` section
  of EIATTR attributes: EIATTR_MAX_THREADS / EIATTR_REQNTID (launch bounds), EIATTR_MAXREG_COUNT (the
  register cap ptxas compiled under) and EIATTR_ANNOTATIONS, where ptxas 12.9 and later list the offset
  of every spill and refill instruction ("SpillRefill : Offset : 0x840").
- `cuobjdump --dump-sass --function K,...`: the instructions at those offsets, for their access widths.

What the binary records and what it does not, as checked against `nvcc -Xptxas -v` of the same build
(tests/unit/test_binary.py):

- REG is ptxas's "Used N registers"; STACK is the per-thread stack the driver allocates (its
  local_size_bytes): ptxas's "N bytes stack frame", plus, in a program nvlink linked from -rdc objects,
  the frames of the kernel's callees.
- SHARED is the size of the kernel's `.nv.shared.NAME` section. From sm_90 on, ptxas puts the 1 KB that
  the driver reserves per block at the start of that section whenever the kernel has one (static or
  dynamic shared memory; an `extern __shared__` array gives one to every kernel of its module), so
  SHARED is ptxas's smem + 1024. `BinaryKernel.shared` takes the reservation (arch.py's
  reserved_smem_per_block) off again: it equals ptxas's smem, and the driver's shared_size_bytes (seen on
  an H200 with driver 580, which reported 1024 for a kernel cuobjdump lists with SHARED:2048).
  Relocatable objects (-rdc) do not hold the reservation yet: nvlink adds it.
- CONSTANT[n] are ptxas's per-kernel cmem[n] (bank 0: parameters and the driver's part).
- Spill byte counts are not recorded as numbers. ptxas 12.9+ marks each spill and refill instruction
  (EIATTR_ANNOTATIONS); the bytes the marked STL and LDL instructions move, the code of non-inlined
  callees in the kernel's section left out, are ptxas's "spill stores" and "spill loads" of the kernel
  (equal for every kernel the tests build, sm_75 to sm_120, ptxas 12.9 and 13.5). Not so for an -rdc
  device function, whose callee-saved register stores ptxas counts but does not mark; kernels have none.
  Before 12.9 (11.8, 12.0 and 12.4 checked) nothing is marked, so a kernel without marks from such a
  ptxas has unknown spills (None), never 0.
- `.minnctapersm` (the 2 in `__launch_bounds__(256, 2)`) is not recorded: ptxas folds it into the register
  cap (EIATTR_MAXREG_COUNT 128 = 65536 / (256 * 2)), so `min_blocks` is always None.
- In a relocatable object (nvcc -dc) REG is the kernel's own and STACK is 0: nvlink settles both.
"""

from __future__ import annotations

import functools
import math
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from msgspec import Struct, field

from ..core.arch import get_arch
from ..core.errors import BinaryError, ParseError, UnknownArchError
from ..core.sass import instruction, local_opcode
from .toolchain import Toolkit, find_tool

__all__ = [
    "CUOBJDUMP_FIX",
    "BinaryKernel",
    "ElfInfo",
    "KernelAttributes",
    "ResourceUsage",
    "combine_listings",
    "find_cuobjdump",
    "parse_elf_dump",
    "parse_resource_usage",
    "parse_sass_local_accesses",
    "read_binary",
]

CUOBJDUMP_FIX = (
    'pip install "nvidia-cuda-cuobjdump" (CUDA 13; "nvidia-cuda-cuobjdump-cu12" for CUDA 12), '
    "or install a CUDA toolkit and put its bin/ (which has cuobjdump) on PATH"
)
# The first ptxas seen to mark spill instructions; 12.4 and older were checked and do not.
_ANNOTATING_PTXAS = (12, 9)


class BinaryKernel(Struct, frozen=True):
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
    relocatable: bool = False  # from an unlinked -rdc object: REG/STACK do not include callees yet
    toolkit: str | None = None  # CUDA version of the ptxas that built it, "12.9"; None if not recorded
    elf: int = 0  # which ELF of the file (cuobjdump's order), to tell same-arch copies apart


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


class ElfInfo(Struct, frozen=True):
    """One ELF of `cuobjdump --dump-elf`: its header facts and its kernels (ENTRY symbols)."""

    index: int
    arch: str  # "sm_90": the fatbin block's arch, else the ELF header's
    relocatable: bool  # ET_REL: an -rdc object that nvlink has not linked yet
    toolkit: str | None  # the ptxas version, from the .note.nv.tkinfo notes or else the ELF header
    entries: tuple[str, ...]
    kernels: Mapping[str, KernelAttributes] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------
# Splitting a listing into its ELF blocks


_FATBIN_ELF = "Fatbin elf code:"
_FATBIN_PTX = "Fatbin ptx code:"
_BLOCK_ARCH = re.compile(r"^arch\s*=\s*(sm_\w+)\s*$")


class _Block(Struct):
    arch: str | None
    lines: list[tuple[int, str]]  # (1-based line number, text)


def _elf_blocks(lines: Iterable[str]) -> list[_Block]:
    """The ELF blocks of a listing; a listing without block headers (a bare cubin) is one ELF."""
    blocks: list[_Block] = []
    current: _Block | None = None
    preamble: list[tuple[int, str]] = []
    headers = False
    in_header = False
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped in (_FATBIN_ELF, _FATBIN_PTX):
            headers = True
            # PTX has no resources, symbols or SASS: its block is read and dropped.
            current = _Block(None, []) if stripped == _FATBIN_ELF else None
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
        return [_Block(None, preamble)]
    return blocks


# ---------------------------------------------------------------------------------------------------
# --dump-resource-usage

_FUNCTION = re.compile(r"^\s*Function\s+(\S.*?):\s*$")
_FIELD = re.compile(r"([A-Z_]+)(?:\[(\d+)\])?:(\d+)")
_REQUIRED = ("REG", "STACK", "SHARED", "LOCAL")


def parse_resource_usage(text: str) -> list[ResourceUsage]:
    """Every function of `cuobjdump --dump-resource-usage` output, ELF by ELF, in cuobjdump's order.

    Works on the output for a cubin, a fatbin, an object file, a shared library or an executable.
    Device functions are listed too (in relocatable objects): tell kernels apart with `parse_elf_dump`.
    """
    result: list[ResourceUsage] = []
    for index, block in enumerate(_elf_blocks(text.splitlines())):
        pending: tuple[str, int, str] | None = None  # (name, lineno, line) awaiting its numbers
        for lineno, line in block.lines:
            if m := _FUNCTION.match(line):
                if pending is not None:
                    raise ParseError(f"function {pending[0]!r} has no resource line", pending[2], pending[1])
                pending = (m.group(1), lineno, line)
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


def _version_tuple(version: str) -> tuple[int, int]:
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


def _read_elf_block(block: _Block) -> _ElfState:
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
    if marks is not None:
        # A non-inlined callee is compiled into its caller's section (a LOCAL FUNC symbol inside it);
        # ptxas reports its spills under its own name, so they are not the kernel's.
        marks = [m for m in marks if not any(start <= m < end for start, end in callees)]
    return KernelAttributes(
        maxntid=maxntid,
        reqntid=reqntid,
        register_limit=limit,
        spill_offsets=None if marks is None else tuple(sorted(marks)),
    )


def parse_elf_dump(text: str | Iterable[str]) -> list[ElfInfo]:
    """The ELFs of `cuobjdump --dump-elf` output (text, or its lines), with their kernels' attributes.

    The hex dumps of section contents are not needed and may be left out of `text` beforehand.
    """
    lines = text.splitlines() if isinstance(text, str) else text
    result: list[ElfInfo] = []
    for index, block in enumerate(_elf_blocks(lines)):
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
        versions = sorted(state.ptxas_versions, key=_version_tuple)
        result.append(
            ElfInfo(
                index=index,
                arch=block.arch or f"sm_{sm}",
                relocatable=elf_type in ("ET_REL", "1"),
                toolkit=versions[0] if versions else header_toolkit,
                entries=tuple(e.name for e in entries),
                kernels=kernels,
            )
        )
    return result


# ---------------------------------------------------------------------------------------------------
# --dump-sass

_SASS_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
_WIDTHS = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


def parse_sass_local_accesses(text: str | Iterable[str]) -> list[dict[str, dict[int, str]]]:
    """Per ELF, per function: offset -> STL/LDL instruction name with modifiers ("LDL.LU.64")."""
    lines = text.splitlines() if isinstance(text, str) else text
    result: list[dict[str, dict[int, str]]] = []
    for block in _elf_blocks(lines):
        functions: dict[str, dict[int, str]] = {}
        current: dict[int, str] | None = None
        for _, line in block.lines:
            if m := _SASS_FUNCTION.match(line):
                current = functions.setdefault(m.group(1), {})
            elif current is not None and (ins := instruction(line)) and (opcode := local_opcode(ins[1])):
                current[ins[0]] = opcode
        result.append(functions)
    return result


def _access_bytes(opcode: str) -> int:
    width = 4
    for modifier in opcode.split(".")[1:]:
        width = _WIDTHS.get(modifier, width)
    return width


def _spill_bytes(offsets: Sequence[int], accesses: Mapping[int, str]) -> tuple[int, int] | None:
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
# Running cuobjdump


def find_cuobjdump(toolkit: Toolkit | None) -> Path | None:
    """The toolkit's own cuobjdump (beside its ptxas), else the wheels' (CUDA 13, then 12), else PATH's."""
    return find_tool("cuobjdump", toolkit, "cuda_cuobjdump")


def _keep_all(line: str) -> bool:
    return True


def _not_hex(line: str) -> bool:
    # Section contents in -elf are rows of "0x........" words: most of the output, none of the facts.
    return not line.startswith("0x")


def _is_sass(line: str) -> bool:
    stripped = line.lstrip()
    return (
        not stripped.startswith("/*")
        or "STL" in line
        or "LDL" in line
        or stripped.startswith(("Fatbin", "arch", "Function"))
    )


def _run(
    cuobjdump: Path,
    args: Sequence[str],
    path: Path,
    timeout: float,
    keep: Callable[[str], bool] = _keep_all,
) -> list[str]:
    """cuobjdump's stdout lines that `keep` accepts; its output goes through a file, as it can be huge."""
    cmd = [str(cuobjdump), *args, str(path)]
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        try:
            proc = subprocess.run(
                cmd, stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise BinaryError(
                f"`{' '.join(cmd)}` did not finish within {timeout:g} s; pass a larger timeout"
            ) from None
        except OSError as exc:
            raise BinaryError(f"cannot run {cuobjdump} on {path}: {exc}") from exc
        out.seek(0)
        if proc.returncode != 0:
            message = proc.stderr.strip() or out.read(2000).strip()
            raise BinaryError(
                f"cuobjdump cannot read {path} as a CUDA binary (exit {proc.returncode}): {message}\n"
                "It takes cubins, fatbins, object files, shared libraries and executables that hold "
                "device code; a cubin from an older CUDA than this cuobjdump knows may be unreadable.",
                proc.stderr,
            )
        return [line.rstrip("\n") for line in out if keep(line)]


def read_binary(path: Path, toolkit: Toolkit | None = None, timeout: float = 120) -> list[BinaryKernel]:
    """Every kernel x arch that `path` holds compiled code for (PTX-only entries have no resources).

    Runs `cuobjdump --dump-resource-usage` and `--dump-elf`, and `--dump-sass` for the kernels that ptxas
    marked spills in. Raises BinaryError without cuobjdump, or if the file is not a CUDA binary.
    """
    path = Path(path)
    cuobjdump = find_cuobjdump(toolkit)
    if cuobjdump is None:
        raise BinaryError(
            f"cannot read the CUDA binary {path}: that needs cuobjdump, and none was found (searched the "
            f"toolkit's bin/, the pip wheels and PATH). Fix: {CUOBJDUMP_FIX}."
        )
    if not path.is_file():
        raise BinaryError(f"cannot read the CUDA binary {path}: no such file")
    # Once per process while the file is as it was: a manifest reads a library for its listing and again for
    # each of its kernels' items.
    st = path.stat()
    return list(_read(path, (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev), cuobjdump, timeout))


@functools.lru_cache(maxsize=32)
def _read(path: Path, stamp: tuple[int, ...], cuobjdump: Path, timeout: float) -> tuple[BinaryKernel, ...]:
    usage_text = "\n".join(_run(cuobjdump, ["--dump-resource-usage"], path, timeout))
    elf_lines = _run(cuobjdump, ["--dump-elf"], path, timeout, _not_hex)
    try:
        usages = parse_resource_usage(usage_text)
        elves = parse_elf_dump(elf_lines)
        accesses: list[dict[str, dict[int, str]]] = []
        # Widths of the marked instructions, only where some kernel has marks: the SASS can be large.
        marked = sorted({u.name for u in usages if u.elf < len(elves) and _marks(elves[u.elf], u.name)})
        if marked:
            with tempfile.TemporaryDirectory(prefix="regbudget-cuobjdump-") as tmp:
                # An options file, because a library's list of kernel names can outgrow a command line.
                options = Path(tmp) / "functions.txt"
                options.write_text(f"--function {','.join(marked)}\n")
                sass = _run(
                    cuobjdump, ["--dump-sass", "--options-file", str(options)], path, timeout, _is_sass
                )
            accesses = parse_sass_local_accesses(sass)
        return tuple(combine_listings(usages, elves, accesses))
    except ParseError as exc:
        raise BinaryError(f"cannot read cuobjdump's listings of {path}: {exc}") from exc


def _marks(elf: ElfInfo, name: str) -> bool:
    attrs = elf.kernels.get(name)
    return attrs is not None and bool(attrs.spill_offsets)


def combine_listings(
    usages: Sequence[ResourceUsage],
    elves: Sequence[ElfInfo],
    accesses: Sequence[Mapping[str, Mapping[int, str]]] = (),
) -> list[BinaryKernel]:
    """The kernels of the three parsed listings of one file (device functions are left out).

    `accesses` (from `parse_sass_local_accesses`) is needed only for kernels with marked spills; without
    it their spill bytes are None.
    """
    # Both listings print the same ELFs in the same order; check that before pairing them up.
    for u in usages:
        if u.elf >= len(elves) or (u.arch is not None and u.arch != elves[u.elf].arch):
            raise ParseError(
                f"the resource listing's ELF {u.elf} ({u.arch}) has no counterpart in the ELF listing"
            )
    return [
        _kernel(u, elves[u.elf], accesses[u.elf] if u.elf < len(accesses) else {})
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
        spills = _spill_bytes(attrs.spill_offsets, accesses.get(usage.name, {}))
        marked = len(attrs.spill_offsets)
    elif elf.toolkit is not None and _version_tuple(elf.toolkit) >= _ANNOTATING_PTXAS:
        spills, marked = (0, 0), 0  # a ptxas that marks spills marked none
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
        relocatable=elf.relocatable,
        toolkit=elf.toolkit,
        elf=elf.index,
    )


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
