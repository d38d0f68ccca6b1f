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
(tests/build/test_binary.py):

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
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from msgspec import Struct

from ..core.arch import get_arch
from ..core.cuobjdump import (
    ElfInfo,
    KernelAttributes,
    ResourceUsage,
    parse_elf_dump,
    parse_resource_usage,
    parse_sass_local_accesses,
    spill_bytes,
    version_tuple,
)
from ..core.errors import BinaryError, ParseError, UnknownArchError
from .toolchain import Toolkit, find_tool

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
        spills = spill_bytes(attrs.spill_offsets, accesses.get(usage.name, {}))
        marked = len(attrs.spill_offsets)
    elif elf.toolkit is not None and version_tuple(elf.toolkit) >= _ANNOTATING_PTXAS:
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
