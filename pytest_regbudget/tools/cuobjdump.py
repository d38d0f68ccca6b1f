"""Resources of the kernels in an already built CUDA binary, read with cuobjdump, on a machine without a GPU.

Owns finding cuobjdump and running it over a cubin, fatbin, object file, shared library or executable; the
pure parsers of what it prints, and their joining into one kernel's numbers, are core/cuobjdump.py's. Three
listings, each one block per embedded ELF in the same order
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
(tests/tools/test_cuobjdump.py):

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

import contextlib
import functools
import json
import subprocess
import tempfile
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from msgspec import Struct
from msgspec.structs import replace

from ..core import elf, names
from ..core.cuobjdump import BinaryKernel as BinaryKernel  # the parsers' since they join the listings
from ..core.cuobjdump import (
    ElfInfo,
    ResourceUsage,
    elf_block_archs,
    escape_names,
    parse_elf_dump,
    parse_elf_list,
    parse_resource_usage,
    parse_sass_local_accesses,
    parse_sass_roles,
)
from ..core.cuobjdump import combine_listings as combine_listings
from ..core.defaults import DEFAULT_CUOBJDUMP_TIMEOUT
from ..core.errors import BinaryError, BinaryTimeout, CompileError, ParseError, ToolchainError
from ..core.fatbin import parse_ptx_list, ptx_arch_for
from ..core.ptx import ENTRY, TmemAlloc, ptx_tmem
from ..util.files import (
    file_sha256,
    not_a_file,
    read_document,
    read_regular,
    settled,
    sha256_hex,
    write_document,
)
from .options import Timeouts
from .toolkit import Toolkit, find_tool
from .toolkit import ptxas_version as tool_version

CUOBJDUMP_FIX = (
    'pip install "nvidia-cuda-cuobjdump" (CUDA 13; "nvidia-cuda-cuobjdump-cu12" for CUDA 12), '
    "or install a CUDA toolkit and put its bin/ (which has cuobjdump) on PATH"
)
T = TypeVar("T")


def find_cuobjdump(toolkit: Toolkit | None) -> Path | None:
    """The toolkit's own cuobjdump (beside its ptxas), else the wheels' (CUDA 13, then 12), else PATH's."""
    return find_tool("cuobjdump", toolkit, "cuda_cuobjdump")


def describe_cuobjdump(toolkit: Toolkit | None) -> str | None:
    """`cuobjdump 13.5.37 (/path/bin/cuobjdump)`, for the run's header and summary; None without one."""
    found = find_cuobjdump(toolkit)
    if found is None:
        return None
    try:
        # cuobjdump answers --version as ptxas does ("Cuda compilation tools, ..., V13.5.37").
        version = tool_version(found)
    except ToolchainError:
        version = "(version unknown)"
    return f"cuobjdump {version} ({found})"


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
        or "USETMAXREG" in line
        or stripped.startswith(("Fatbin", "arch", "Function"))
    )


def _run(
    cuobjdump: Path,
    args: Sequence[str],
    path: Path,
    timeout: float,
    keep: Callable[[str], bool] = _keep_all,
    cwd: Path | None = None,
) -> list[str]:
    """cuobjdump's stdout lines that `keep` accepts; its output goes through a file, as it can be huge."""
    cmd = [str(cuobjdump), *args, str(path.absolute())]
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        try:
            proc = subprocess.run(
                cmd, stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout, check=False, cwd=cwd
            )
        except subprocess.TimeoutExpired:
            raise BinaryTimeout(
                f"`{' '.join(cmd)}` did not finish within {timeout:g} s ({_TIMEOUT_KEY} seconds per 100 MB "
                f"of the file read). Fix: raise ini {_TIMEOUT_KEY} (now "
                f"{timeout / max(1.0, path.stat().st_size / _PER_BYTES):g})"
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


# Seconds one cuobjdump run may take, per 100 MB of the file it reads: a pass over a whole library scales
# with its size; the runs over one extracted cubin are small. ini regbudget_cuobjdump_timeout raises it.
_TIMEOUT_KEY = Timeouts.INI["cuobjdump"]
_PER_BYTES = 100 * 1024 * 1024


def read_binary(
    path: Path,
    toolkit: Toolkit | None = None,
    timeout: float = DEFAULT_CUOBJDUMP_TIMEOUT,
    *,
    archs: Collection[str] | None = None,
    cache_dir: Path | None = None,
    jobs: int = 1,
) -> list[BinaryKernel]:
    """Every kernel x arch (of `archs`, default all) that `path` holds compiled code for (PTX-only
    entries have no resources).

    One `cuobjdump --dump-resource-usage` pass over the file gives every number but spills and launch
    bounds; the ELFs of the archs asked for are then extracted and read one by one (`--dump-elf`, and
    `--dump-sass` for the kernels that ptxas marked spills in), `jobs` at a time. With a `cache_dir`, a
    file's facts are kept per arch under its content digest, and each cubin's under its own, so an
    unchanged library (or a rebuilt one whose cubins did not change) costs no cuobjdump run.
    Raises BinaryError without cuobjdump, or if the file is not a CUDA binary.
    """
    path = Path(path)
    file = _File.of(path, require_cuobjdump(path, toolkit), timeout)
    wanted = sorted(archs) if archs is not None else file.archs()
    return [k for arch in wanted for k in _held(file, arch, cache_dir, jobs).kernels]


def require_cuobjdump(path: Path, toolkit: Toolkit | None) -> Path:
    """find_cuobjdump's, else BinaryError saying where it looked and the fix."""
    cuobjdump = find_cuobjdump(toolkit)
    if cuobjdump is None:
        raise BinaryError(
            f"cannot read the CUDA binary {path}: that needs cuobjdump, and none was found (searched the "
            f"toolkit's bin/, the pip wheels and PATH). Fix: {CUOBJDUMP_FIX}."
        )
    return cuobjdump


def held_archs(path: Path, toolkit: Toolkit | None) -> list[str]:
    """The archs `path` holds machine code for, from the whole-file pass alone (no ELF is read)."""
    return _File.of(Path(path), require_cuobjdump(path, toolkit), DEFAULT_CUOBJDUMP_TIMEOUT).archs()


class Held(Struct, frozen=True):
    """A binary's kernels for one arch, with the lookups every item of a library makes (thousands of
    items look themselves up in the same list): by entry, and by the normalized readable name."""

    kernels: tuple[BinaryKernel, ...]
    by_entry: dict[str, BinaryKernel]
    by_name: dict[str, str]  # normalized readable name -> entry, for the names no two entries share
    shown: dict[str, str]  # entry -> the name reports show (names.display_names)
    empty: int  # ELFs of this arch that hold no kernel (host-only or device-function-only units)
    by_shown: dict[str, str] = {}  # the name reports show -> entry: a manifest's items are named so
    signatures: dict[str, str] = {}  # entry -> names.signature: one item per kernel across archs


def read_arch(
    path: Path,
    cuobjdump: Path,
    arch: str,
    *,
    timeout: float = DEFAULT_CUOBJDUMP_TIMEOUT,
    cache_dir: Path | None = None,
    jobs: int = 1,
) -> Held:
    """read_binary of one arch with `cuobjdump` (find_cuobjdump's), with its lookups: the same object while
    the file is unchanged."""
    return _held(_File.of(path, cuobjdump, timeout), arch, cache_dir, jobs)


@functools.lru_cache(maxsize=64)
def _held(file: _File, arch: str, cache_dir: Path | None, jobs: int) -> Held:
    facts = _arch_kernels(file, arch, cache_dir, jobs)
    by_entry = {k.entry: k for k in facts.kernels}
    by_shown = {name: entry for entry, name in facts.shown.items()}
    # The manifest names the kernels of all archs at once (plugin/collect.py): with the names made before.
    names.learn_readable(facts.readable)
    return Held(facts.kernels, by_entry, facts.by_name, facts.shown, facts.empty, by_shown, facts.signatures)


def _named(file: _File, arch: str, facts: _ArchFacts) -> _ArchFacts:
    """`facts` with each kernel's copy tag and the names it is looked up and shown by: made once, when the
    file is read, and kept with its facts (thousands of names: a warm run of a library names nothing)."""
    kernels = tuple(copy_tags(facts.kernels))
    entries = [k.entry for k in kernels]
    readable = {e: names.readable(e) for e in dict.fromkeys(entries)}
    by_name: dict[str, list[str]] = {}
    for e, name in readable.items():
        by_name.setdefault(names.normalize(name), []).append(e)
    try:
        shown = names.display_names(entries)
    except CompileError as exc:
        raise BinaryError(f"{file.path} [{arch}]: {exc}") from None
    unique = {name: found[0] for name, found in by_name.items() if len(found) == 1}
    signatures = {e: names.signature(e) for e in dict.fromkeys(entries)}
    return replace(
        facts, kernels=kernels, by_name=unique, shown=shown, signatures=signatures, readable=readable
    )


class _Listing(Struct, frozen=True):
    """The whole-file pass: every function's resources, and each ELF's arch and file name."""

    usages: tuple[ResourceUsage, ...]
    archs: tuple[str | None, ...]  # per ELF, in cuobjdump's order
    names: tuple[str, ...]  # per ELF, --list-elf's names; () for a bare cubin (the file is its one ELF)


class _File(Struct, frozen=True):
    path: Path
    stamp: tuple[int, ...]  # size, mtime, ctime, inode, device: the file as it was when read
    cuobjdump: Path
    timeout: float
    is_settled: bool  # still for longer than a timestamp tick: its digest may be remembered by its stat

    @classmethod
    def of(cls, path: Path, cuobjdump: Path, timeout: float) -> _File:
        try:
            st = path.stat()
        except OSError:
            raise BinaryError(f"cannot read the CUDA binary {path}: no such file") from None
        special = not_a_file(path)
        if special:  # cuobjdump would wait on a FIFO until its timeout, and read a device without end
            raise BinaryError(f"cannot read the CUDA binary {path}: it is {special}")
        stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        return cls(path, stamp, cuobjdump, timeout, settled(st))

    def whole_file_timeout(self) -> float:
        return self.timeout * max(1.0, self.stamp[0] / _PER_BYTES)

    def listing(self) -> _Listing:
        return _listing(self)

    def archs(self) -> list[str]:
        return sorted({a for a in self.listing().archs if a})

    def run(
        self, args: Sequence[str], target: Path, timeout: float, keep: Callable[[str], bool] = _keep_all
    ) -> list[str]:
        return _run(self.cuobjdump, args, target, timeout, keep)


@functools.lru_cache(maxsize=32)
def _listing(file: _File) -> _Listing:
    """Once per process while the file is as it was: a manifest reads a library for its listing and again
    for each of its kernels' items."""
    timeout = file.whole_file_timeout()
    text = "\n".join(file.run(["--dump-resource-usage"], file.path, timeout))
    try:
        usages = parse_resource_usage(text)
        archs = elf_block_archs(text)
        names = parse_elf_list("\n".join(file.run(["--list-elf"], file.path, timeout)))
    except ParseError as exc:
        raise BinaryError(f"cannot read cuobjdump's listings of {file.path}: {exc}") from exc
    if archs == [None]:
        # A bare cubin (cuobjdump lists it as one ELF file, but prints no fatbin header and extracts none) is
        # its own one ELF; its ELF header names its arch (a small file, read twice).
        names = []
        elves = parse_elf_dump(file.run(["--dump-elf"], file.path, timeout, _not_hex))
        archs = [e.arch for e in elves] or [None]
        usages = [replace(u, arch=archs[0]) for u in usages]
    if names and len(names) != len(archs):
        raise BinaryError(
            f"cannot read {file.path}: cuobjdump lists {len(names)} ELF files but prints resources for "
            f"{len(archs)}; read the extracted cubins instead (cuobjdump -xelf all)"
        )
    return _Listing(tuple(usages), tuple(archs), tuple(names))


class _CubinFacts(Struct, frozen=True):
    """What one cubin's ELF and SASS say, kept under the cubin's digest."""

    elf: ElfInfo
    accesses: dict[str, dict[int, str]]
    # The setmaxnreg targets in the SASS of each kernel with EIATTR_REG_RECONFIG.
    roles: dict[str, tuple[tuple[str, int], ...]] = {}


class _ArchFacts(Struct, frozen=True):
    """A file's kernels for one arch, kept under the file's digest, with the names `Held` looks them up by."""

    kernels: tuple[BinaryKernel, ...]  # copies of a kernel that several ELFs hold tagged (copy_tags)
    empty: int  # ELFs of this arch without a kernel
    by_name: dict[str, str] = {}  # as Held's
    shown: dict[str, str] = {}  # as Held's
    signatures: dict[str, str] = {}  # as Held's
    readable: dict[str, str] = {}  # entry -> names.readable, taken by names.learn_readable when read back


# The cache documents' own version: a change of BinaryKernel or of what is read changes it.
# 2: a linked kernel without a stack frame has spills 0 whatever its ptxas; 3: setmaxnreg roles from the SASS;
# 4: cluster dims and tcgen05 use from the kernel's attributes; 5: local_instructions; 6: a name with a
# space or a line break read whole, escaped (names.escaped_symbol).
_CACHE_FORMAT = 6
# A file's facts: 6, kept with their copy tags and names (a cubin's facts are as they were); 7: as 6; 8: with
# a tcgen05 kernel's TMEM columns from the file's PTX; 9: with each entry's stable signature (a warm run of
# libcublas's 8,436 kernels spent 0.1 s making them); 10: with each entry's readable name (0.15 s of that run
# went to the manifest's names of the kernels of both archs).
_FILE_FORMAT = 10


def _kept(doc: str | None, kind: type[T], make: Callable[[], T], form: int = _CACHE_FORMAT) -> T:
    """The payload of the cache document `doc` (of format `form`), else `make()`, stored there. A missing
    or damaged document reads as absent, and one that cannot be written only costs a read next time."""
    if doc is not None:
        try:
            return read_document(doc, kind, form)
        except (OSError, ValueError):
            pass
    made = make()
    if doc is not None:
        with contextlib.suppress(OSError):
            # Every document of this module lies in the cache directory's binaries/ (`_arch_kernels`).
            write_document(doc, made, form, root=Path(doc).parent.parent)
    return made


@functools.lru_cache(maxsize=64)
def _arch_kernels(file: _File, arch: str, cache_dir: Path | None, jobs: int) -> _ArchFacts:
    folder = None if cache_dir is None else cache_dir / "binaries"
    doc = None
    if folder is not None:
        digest = _remembered_digest(file.path, file.stamp, file.is_settled, folder)
        # cuobjdump by its contents, not its path or times: a wheel reinstalled (in a fresh venv) is the same.
        tool = _File.of(file.cuobjdump, file.cuobjdump, file.timeout)
        tool_digest = _remembered_digest(tool.path, tool.stamp, tool.is_settled, folder)
        key = sha256_hex(f"{_FILE_FORMAT}|{digest}|{arch}|{tool_digest}".encode())
        doc = str(folder / f"file-{key}.json")
    made = functools.partial(_named, file, arch)
    return _kept(doc, _ArchFacts, lambda: made(_read_arch(file, arch, folder, jobs)), _FILE_FORMAT)


@functools.lru_cache(maxsize=64)
def _remembered_digest(path: Path, stamp: tuple[int, ...], is_settled: bool, folder: Path) -> str:
    """A file's content digest, remembered by path, size, times and inode (in the process, and in the cache
    directory once it is settled): a warm run hashes nothing."""
    if not is_settled:
        return file_sha256(path)
    key = sha256_hex(json.dumps([str(path.resolve()), *stamp]).encode())
    return _kept(str(folder / f"stamp-{key}.json"), str, lambda: file_sha256(path))


def _read_arch(file: _File, arch: str, folder: Path | None, jobs: int) -> _ArchFacts:
    listing = file.listing()
    mine = [i for i, a in enumerate(listing.archs) if a == arch or (a is None and len(listing.archs) == 1)]
    usages = [u for u in listing.usages if u.elf in mine]
    with tempfile.TemporaryDirectory(prefix="regbudget-cuobjdump-") as tmp:
        cubins = _extract(file, listing, mine, Path(tmp))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            found = list(pool.map(lambda item: _cubin_facts(file, item[1], folder), cubins.items()))
    facts = dict(zip(cubins, found, strict=True))
    # The fatbin's arch for each ELF (sm_90a where its header says 90a), the file's own for a bare cubin.
    elves = {i: replace(f.elf, index=i, arch=listing.archs[i] or f.elf.arch) for i, f in facts.items()}
    try:
        kernels = combine_listings(usages, elves, {i: f.accesses for i, f in facts.items()})
    except ParseError as exc:
        raise BinaryError(f"cannot read cuobjdump's listings of {file.path}: {exc}") from exc
    kernels = [replace(k, setmaxnreg=facts[k.elf].roles.get(k.name, ())) for k in kernels]
    if any(k.tcgen05 for k in kernels):
        kernels = _with_tmem(file, arch, kernels)
    held = {k.elf for k in kernels}
    return _ArchFacts(tuple(kernels), sum(1 for i in mine if i not in held))


def _with_tmem(file: _File, arch: str, kernels: Sequence[BinaryKernel]) -> list[BinaryKernel]:
    """`kernels`, each tcgen05 kernel with the TMEM columns its PTX allocates, where the file holds PTX for
    `arch` (ptx_arch_for): the ELF records only that a kernel uses tensor memory. Only a file with such a
    kernel pays the PTX's extraction, and it is kept with the file's facts: a warm run reads none."""
    listed = parse_ptx_list("\n".join(file.run(["--list-ptx"], file.path, file.whole_file_timeout())))
    source = ptx_arch_for(arch, listed)
    if source is None:
        return list(kernels)
    with tempfile.TemporaryDirectory(prefix="regbudget-cuobjdump-") as tmp:
        # An options file, as for ELFs: a library's list of names outgrows a command line.
        options = Path(tmp) / "extract.txt"
        options.write_text(f"--extract-ptx {','.join(listed[source])}\n", encoding="utf-8")
        _run(
            file.cuobjdump,
            ["--options-file", str(options)],
            file.path,
            file.whole_file_timeout(),
            cwd=Path(tmp),
        )
        texts = [(Path(tmp) / name).read_text(encoding="utf-8", errors="replace") for name in listed[source]]
    entries: set[str] = set()
    tmem: dict[str, TmemAlloc] = {}
    for text in texts:
        entries.update(m.group(1) for m in ENTRY.finditer(text))
        tmem.update(ptx_tmem(text))
    return [
        replace(k, ptx=source, tmem=tmem.get(k.name)) if k.tcgen05 and k.name in entries else k
        for k in kernels
    ]


def copy_tags(kernels: Sequence[BinaryKernel]) -> list[BinaryKernel]:
    """`kernels` (of one arch), each copy of a kernel that several ELFs hold tagged by what stays stable from
    build to build. A copy is a name (its stable signature: a `static` kernel's mangled name differs per
    file) that several ELFs hold. Its tag is its cubin's anchor, the first kernel name (in sort order) that
    no other ELF of the arch holds, read as `base_name.hash` (`trsv_ln_exec.b8058f`: the hash of the
    anchor's mangled name tells apart two instantiations of one template). A copy whose cubin holds no name
    of its own (one translation unit linked twice) is told apart by its place among the copies: `#2`."""
    ident = {k.name: names.signature(k.name) for k in kernels}
    where: dict[str, set[int]] = {}
    for k in kernels:
        where.setdefault(ident[k.name], set()).add(k.elf)
    if all(len(elves) == 1 for elves in where.values()):
        return list(kernels)
    anchors: dict[int, str] = {}
    for k in sorted(kernels, key=lambda k: k.name):
        if len(where[ident[k.name]]) == 1:
            anchors.setdefault(k.elf, k.name)
    out = []
    for k in kernels:
        elves = sorted(where[ident[k.name]])
        if len(elves) == 1:
            out.append(k)
            continue
        anchor = anchors.get(k.elf)
        if anchor is not None and [anchors.get(e) for e in elves].count(anchor) == 1:
            tag = f"{names.base_name(anchor)}.{sha256_hex(anchor.encode())[:6]}"
        else:
            tag = f"#{elves.index(k.elf) + 1}"
        out.append(replace(k, copy=tag))
    return out


def _extract(file: _File, listing: _Listing, elves: Sequence[int], tmp: Path) -> dict[int, Path]:
    """The ELFs `elves` of the file as cubins of their own: the file itself when it is a bare cubin."""
    if not listing.names:
        return dict.fromkeys(elves, file.path)
    wanted = [listing.names[i] for i in elves]
    if not wanted:
        return {}
    # An options file: a library's list of names outgrows a command line. A name is a "partial file name",
    # and libcublas.so.3.sm_90.cubin is part of libcublas.so.3.sm_90a.cubin: extracting more is harmless.
    options = tmp / "extract.txt"
    options.write_text(f"--extract-elf {','.join(wanted)}\n", encoding="utf-8")
    out = tmp / "elves"
    out.mkdir()
    _run(file.cuobjdump, ["--options-file", str(options)], file.path, file.whole_file_timeout(), cwd=out)
    cubins = {i: out / name for i, name in zip(elves, wanted, strict=True)}
    missing = [p.name for p in cubins.values() if not p.is_file()]
    if missing:
        raise BinaryError(f"cuobjdump --extract-elf did not write {missing[:3]} from {file.path}")
    return cubins


def _cubin_facts(file: _File, cubin: Path, folder: Path | None) -> _CubinFacts:
    doc = None if folder is None else str(folder / f"cubin-{_CACHE_FORMAT}-{file_sha256(cubin)}.json")
    return _kept(doc, _CubinFacts, lambda: _read_cubin(file, cubin))


def _read_cubin(file: _File, cubin: Path) -> _CubinFacts:
    # A cubin's own size sets its timeout: the one of a whole library when the file is its one ELF.
    timeout = file.timeout * max(1.0, cubin.stat().st_size / _PER_BYTES)
    lines = file.run(["--dump-elf"], cubin, timeout, _not_hex)
    elves = parse_elf_dump(lines)
    escaped: set[str] = set()
    if len(elves) == 1 and elves[0].unread_symbols:
        # A symbol whose name holds a space or a line break (a hand-made binary): its names are read from
        # the ELF itself and escaped in the listing, which is then read again.
        text, escaped = escape_names("\n".join(lines), elf.symbol_names(read_regular(cubin)))
        elves = parse_elf_dump(text) if escaped else elves
    if len(elves) != 1:
        raise BinaryError(f"cannot read {file.path}: an extracted ELF reads as {len(elves)} ELFs")
    info = elves[0]
    # Widths of the marked instructions, and the targets of the kernels that reconfigure registers (their
    # ELF says so, not with which targets), only for those kernels: the SASS can be large. Not for a name
    # that was escaped: cuobjdump takes a comma-separated list of names, as they are.
    marked = sorted(name for name in info.kernels if _marks(info, name))
    reconfigured = sorted(name for name, attrs in info.kernels.items() if attrs.reg_reconfig)
    wanted = sorted({*marked, *reconfigured} - escaped)
    accesses: dict[str, dict[int, str]] = {}
    roles: dict[str, tuple[tuple[str, int], ...]] = {}
    if wanted:
        with tempfile.TemporaryDirectory(prefix="regbudget-cuobjdump-") as tmp:
            options = Path(tmp) / "functions.txt"
            options.write_text(f"--function {','.join(wanted)}\n", encoding="utf-8")
            sass = file.run(["--dump-sass", "--options-file", str(options)], cubin, timeout, _is_sass)
        per_elf = parse_sass_local_accesses(sass)
        accesses = {name: dict(offsets) for name, offsets in (per_elf[0] if per_elf else {}).items()}
        per_elf_roles = parse_sass_roles(sass)
        roles = dict(per_elf_roles[0]) if per_elf_roles else {}
    return _CubinFacts(info, accesses, roles)


def _marks(info: ElfInfo, name: str) -> bool:
    attrs = info.kernels.get(name)
    return attrs is not None and bool(attrs.spill_offsets)
