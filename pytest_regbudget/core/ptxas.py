"""Pure parsers for what ptxas and NVRTC print: `ptxas -v` resource lines, PTX entry directives
and `ptxas --version`, turned into one `KernelResources` per kernel.

No subprocess and no other pytest_regbudget module but `errors`, `metrics` (the record it fills), `ptx`
(the PTX's tokens and its bodies' readers) and `elf` (its record of a function called): text in, frozen
values out, so the parser can be tested against recorded outputs of every toolkit without a toolkit
(tests/data/ptxas).

What `ptxas -v` prints, as recorded from CUDA 11.8 to 13.0::

    ptxas info    : 4 bytes gmem, 256 bytes cmem[3]               <- module-wide, not per kernel
    ptxas info    : Compiling entry function 'spill_heavy' for 'sm_90'
    ptxas info    : Function properties for spill_heavy
        520 bytes stack frame, 992 bytes spill stores, 992 bytes spill loads
    ptxas info    : Used 32 registers, used 0 barriers, 520 bytes cumulative stack size
    ptxas info    : Compile time = 50.345 ms                      <- 12.9 (not 12.4)
    ptxas info    : Function properties for _Z6helperPKfi         <- a __device__ function, not a kernel
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

A `__noinline__` function's spills are its block's, not its callers': a whole-program build prints the copy of
it that each kernel calls after that kernel's lines (two kernels, two blocks of one name, each with its own
figures), and a relocatable one (-c) each function once, before or between the entries. `parse_functions`
keeps them, with the entry each follows; `with_callees` counts those a kernel calls (as its cubin's ELF says,
core/elf.py) into its spill figures.

The fields of the "Used" line vary by version, arch and mode: "used N barriers" appears in 12.9 and
13.0 (always, even 0) but not up to 12.4; "N bytes cumulative stack size" from 12.4 on, only when
there is a stack and not with -c; "N bytes smem" only when non-zero; "N bytes cmem[N]" only for
sm_75/sm_80, never for sm_90 and newer. A missing count means zero (cumulative stack: None).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from ..util.patterns import lazy
from .elf import Called
from .errors import ParseError
from .metrics import Callee, KernelResources
from .ptx import COMMENTS, ENTRY, INT, ptx_int


class PtxDirectives(Struct, frozen=True):
    """The performance-tuning directives between a PTX `.entry` header and its body."""

    # (x, y, z): PTX may omit trailing dimensions (NVRTC 13.0 writes ".maxntid 256" for sm_100+,
    # ".maxntid 256, 1, 1" for older archs); they mean 1, so the same bounds compare equal.
    maxntid: tuple[int, ...] | None = None
    reqntid: tuple[int, ...] | None = None
    minnctapersm: int | None = None
    maxnreg: int | None = None
    reqnctapercluster: tuple[int, ...] | None = None  # __cluster_dims__(x, y, z); missing dimensions are 1

    @property
    def max_threads(self) -> int | None:
        # PTX forbids .reqntid together with .maxntid, so at most one of them is set.
        dims = self.reqntid if self.reqntid is not None else self.maxntid
        if dims is None:
            return None
        product = 1
        for d in dims:
            product *= d
        return product

    def resource_fields(self) -> dict[str, Any]:
        """The `KernelResources` fields these directives give: the one mapping of one to the other, for the
        report read with its PTX (`read`) and for a report and PTX read apart (`combine`)."""
        return {
            "max_threads": self.max_threads,
            "maxntid": self.maxntid,
            "reqntid": self.reqntid,
            "min_blocks_per_sm": self.minnctapersm,
            "max_regs": self.maxnreg,
            "cluster_dims": None if self.reqnctapercluster is None else three_dims(self.reqnctapercluster),
        }


def three_dims(dims: tuple[int, ...]) -> tuple[int, int, int]:
    """(x, y, z) of dimensions that may leave trailing ones out, as PTX and the ELF may."""
    x, y, z = (*dims, 1, 1, 1)[:3]
    return x, y, z


# The "ptxas info    :" prefix (its padding varies) is optional so that a log whose prefixes were
# stripped, e.g. by a tool that re-prints ptxas's messages, reads the same. Triton's bundled ptxas names
# itself "ptxas-blackwell".
_PREFIX = r"^\s*(?:ptxas(?:-[\w.]+)?\s+info\s*:\s*)?"
_COMPILING_ENTRY = lazy(_PREFIX + r"Compiling entry function\s+'([^']+)'\s+for\s+'([^']+)'")
_PROPERTIES = lazy(_PREFIX + r"Function properties for\s+(\S+)\s*$")
_FRAME = lazy(r"^\s*(\d+) bytes stack frame,\s*(\d+) bytes spill stores,\s*(\d+) bytes spill loads\s*$")
_USED = lazy(_PREFIX + r"(Used\s+(\d+)\s+registers?\b(.*))$")
# ptxas's errors come as "ptxas error   : ..." / "ptxas fatal   : ..." or, for a PTX syntax error,
# "ptxas kernels.ptx, line 12; error   : ...".
_ERROR = lazy(r"^\s*ptxas\b[^:]*?\b(?:error|fatal)\s*:", re.IGNORECASE)

_FIELD_BARRIERS = lazy(r"^used\s+(\d+)\s+barriers?$")
_FIELD_SMEM = lazy(r"^(\d+)\s+bytes\s+smem$")
_FIELD_CMEM = lazy(r"^(\d+)\s+bytes\s+cmem\[(\d+)\]$")
_FIELD_CUMULATIVE_STACK = lazy(r"^(\d+)\s+bytes\s+cumulative\s+stack\s+size$")
# A field naming one of these but matching none of the patterns above is an error rather than
# skipped: reading it as 0 would pass a budget the kernel breaks. Wholly unknown fields are skipped
# so a newer ptxas that adds one still parses.
_KNOWN_WORDS = lazy(r"\b(?:barriers?|smem|cmem|stack|registers?|lmem|spill)\b")


class _Entry(Struct):
    """One kernel's lines of a report while it is read."""

    name: str
    arch: str
    line: str
    lineno: int
    used: tuple[str, int, int, int, tuple[tuple[int, int], ...], int | None] | None = None


def _parse_used_fields(
    line: str, lineno: int, rest: str
) -> tuple[int, int, tuple[tuple[int, int], ...], int | None]:
    """Return (barriers, smem, cmem banks, cumulative stack) from the fields after "registers"."""
    barriers = 0
    smem = 0
    banks: list[tuple[int, int]] = []
    cumulative: int | None = None
    for raw in rest.split(","):
        field = " ".join(raw.split())
        if not field:
            continue
        if m := _FIELD_BARRIERS.match(field):
            barriers = int(m.group(1))
        elif m := _FIELD_SMEM.match(field):
            smem = int(m.group(1))
        elif m := _FIELD_CMEM.match(field):
            banks.append((int(m.group(2)), int(m.group(1))))
        elif m := _FIELD_CUMULATIVE_STACK.match(field):
            cumulative = int(m.group(1))
        elif _KNOWN_WORDS.search(field):
            raise ParseError(f"unrecognised field {field!r} in ptxas's resource line", line, lineno)
    return barriers, smem, tuple(banks), cumulative


def parse_ptxas_output(text: str) -> dict[str, KernelResources]:
    """Parse `ptxas -v` output of one ptxas run (one arch) into resources per entry function.

    Keys are entry names exactly as ptxas prints them (mangled unless `extern "C"`), in ptxas's
    order. Non-entry functions' "Function properties" are not kernels and are left out, so the spill
    figures are each kernel's own: `with_callees` adds its callees' (`parse_functions`), given its cubin's
    call tree. PTX directives are not in ptxas's output: merge them with `combine` (or read both with `read`).
    """
    return _parse(text, None)


def read(ptxas_output: str, ptx: str) -> dict[str, KernelResources]:
    """`combine(parse_ptxas_output(ptxas_output), parse_ptx_directives(ptx))`, with each kernel's resources
    made once (every kernel of a warm run is read this way)."""
    return _parse(ptxas_output, parse_ptx_directives(ptx))


class FunctionProperties(Struct, frozen=True):
    """A "Function properties" block of a function that is not an entry: one ptxas compiled on its own (a
    `__noinline__` `__device__` function, a math library's slow path)."""

    name: str  # as ptxas prints it ("_Z5heavyPKfiii")
    stack: int  # bytes of its own frame (0 for a whole-program build's copy: its kernel's frame holds it)
    spill_stores: int  # bytes
    spill_loads: int  # bytes
    # The entry whose lines it follows: a whole-program build's copy of the function for that kernel. None
    # before any entry; a relocatable build's function may follow an entry it has nothing to do with.
    after: str | None

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores or self.spill_loads)


def parse_functions(text: str) -> tuple[FunctionProperties, ...]:
    """The "Function properties" of every function of one ptxas run that is not an entry, in ptxas's order."""
    return _scan(text)[2]


def with_callees(
    resources: KernelResources, functions: Sequence[FunctionProperties], called: Sequence[Called] | None
) -> KernelResources:
    """`resources` (the kernel's own, as `read` gives them) with the spills of the functions it calls counted
    in: each function it reaches (`called`, the ELF's call tree) once, with the figures of the kernel's own
    copy (the block of that name that follows the kernel's lines) where it is one, else of the function's
    one block. Where the ELF could not be read (`called` None), the blocks that follow the kernel's: in a
    whole-program build, its copies of its callees. Only callees that spill are kept (`spilling_callees`).
    The stack frame stays the kernel's as ptxas printed it: a whole-program build's frame holds its copies'
    already (they print 0), and it is what the driver reports as the kernel's local memory."""
    kernel = resources.name
    own = {f.name: f for f in functions if f.after == kernel}
    anywhere: dict[str, FunctionProperties] = {}
    for f in functions:
        anywhere.setdefault(f.name, f)
    if called is None:
        reached = list(own.values())
    else:
        reached = [
            found
            for c in called
            if c.defined and (found := (own.get(c.name) if c.copy else None) or anywhere.get(c.name))
        ]
    spilling = tuple(Callee(f.name, f.spill_stores, f.spill_loads) for f in reached if f.spills)
    if not spilling:
        return resources
    return replace(
        resources,
        spill_stores=resources.spill_stores + sum(c.spill_stores for c in spilling),
        spill_loads=resources.spill_loads + sum(c.spill_loads for c in spilling),
        spilling_callees=spilling,
    )


_Scan = tuple[dict[str, "_Entry"], dict[str, tuple[int, int, int, str]], tuple[FunctionProperties, ...]]


def _scan(text: str) -> _Scan:
    """The entries of one ptxas run, the "Function properties" of each by name, and the blocks of the
    functions that are not entries, in order."""
    entries: dict[str, _Entry] = {}
    # ptxas prints "Function properties" for entries and device functions alike, and the device
    # functions' blocks may come before, between or after the entries (-c puts them first), so
    # they are collected by name and matched to entries at the end.
    properties: dict[str, tuple[int, int, int, str]] = {}
    blocks: list[tuple[str, int, int, int, str | None]] = []
    current: _Entry | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        lineno = i + 1
        i += 1
        # Each pattern needs its literal words: looking for them first skips most lines for a few
        # substring searches instead of four regular expressions.
        low = line.lower()
        if ("error" in low or "fatal" in low) and _ERROR.match(line):
            raise ParseError("ptxas reported an error, so there are no resources to read", line, lineno)
        if "Compiling entry function" in line and (m := _COMPILING_ENTRY.match(line)):
            name, arch = m.group(1), m.group(2)
            if name in entries:
                raise ParseError(
                    f"entry {name!r} is compiled twice; pass the output of one ptxas run per arch",
                    line,
                    lineno,
                )
            current = entries[name] = _Entry(name, arch, line, lineno)
            continue
        if "Function properties for" in line and (m := _PROPERTIES.match(line)):
            # The numbers are on the next non-blank line.
            while i < len(lines) and not lines[i].strip():
                i += 1
            frame = _FRAME.match(lines[i]) if i < len(lines) else None
            if frame is None:
                raise ParseError(
                    f"'Function properties for {m.group(1)}' is not followed by its stack frame and "
                    "spill sizes",
                    line,
                    lineno,
                )
            stack, stores, loads = int(frame.group(1)), int(frame.group(2)), int(frame.group(3))
            properties[m.group(1)] = (stack, stores, loads, lines[i].strip())
            blocks.append((m.group(1), stack, stores, loads, None if current is None else current.name))
            i += 1
            continue
        if "Used" in line and (m := _USED.match(line)):
            if current is None:
                # Not inside an entry's block: nothing we report can own it.
                continue
            if current.used is not None:
                raise ParseError(
                    f"a second resource line for entry {current.name!r}; the output is ambiguous",
                    line,
                    lineno,
                )
            barriers, smem, banks, cumulative = _parse_used_fields(line, lineno, m.group(3))
            current.used = (m.group(1).strip(), int(m.group(2)), barriers, smem, banks, cumulative)
    functions = tuple(FunctionProperties(*block) for block in blocks if block[0] not in entries)
    return entries, properties, functions


def _parse(text: str, directives: Mapping[str, PtxDirectives] | None) -> dict[str, KernelResources]:
    """parse_ptxas_output, and with `directives` (the PTX's), combine."""
    entries, properties, functions = _scan(text)
    for entry in entries.values():
        if entry.used is None:
            raise ParseError(
                f"entry {entry.name!r} has no 'Used N registers' line; is the ptxas output truncated?",
                entry.line,
                entry.lineno,
            )
        if entry.name not in properties:
            raise ParseError(
                f"entry {entry.name!r} has no 'Function properties' (stack frame and spills); "
                "is the ptxas output truncated?",
                entry.line,
                entry.lineno,
            )
    if directives is not None:
        _same_module(entries, directives)
    # A device function that keeps a frame (one not inlined) may be any kernel's callee, whose LDL/STL its
    # caller's SASS holds: where one does, no kernel of the run is known to have no local instructions.
    callee_frames = any(f.stack or f.spills for f in functions)
    result: dict[str, KernelResources] = {}
    for entry in entries.values():
        assert entry.used is not None  # checked above
        used_line, registers, barriers, smem, banks, cumulative = entry.used
        stack, spill_stores, spill_loads, properties_line = properties[entry.name]
        d = PtxDirectives() if directives is None else directives[entry.name]
        # Local memory is the stack frame: a kernel without one, its callees' and spills has no LDL/STL.
        local = stack or spill_stores or spill_loads or cumulative or callee_frames
        result[entry.name] = KernelResources(
            name=entry.name,
            arch=entry.arch,
            registers=registers,
            spill_stores=spill_stores,
            spill_loads=spill_loads,
            stack=stack,
            smem=smem,
            const_mem=sum(size for _, size in banks),
            const_banks=banks,
            barriers=barriers,
            ptxas_line=used_line,
            cumulative_stack=cumulative,
            properties_line=properties_line,
            local_instructions=None if local else 0,
            **d.resource_fields(),
        )
    return result


_DIMS_DIRECTIVE = lazy(
    r"\.(maxntid|reqntid|reqnctapercluster)\s+" + INT + r"(?:\s*,\s*" + INT + r")?(?:\s*,\s*" + INT + r")?"
)
_SCALAR_DIRECTIVE = lazy(r"\.(minnctapersm|maxnreg)\s+" + INT)


def _entry_headers(ptx: str) -> list[tuple[str, str]]:
    """(name, header) per .entry; the header runs from the name to the body's "{" (or ";")."""
    code = COMMENTS.sub("", ptx)
    headers: list[tuple[str, str]] = []
    for m in ENTRY.finditer(code):
        end = len(code)
        for stop in ("{", ";"):
            pos = code.find(stop, m.end())
            if pos != -1:
                end = min(end, pos)
        headers.append((m.group(1), code[m.end() : end]))
    return headers


# "ptxas warning : ..." and the info lines that are warnings in all but name ("Potential Performance Loss").
_MESSAGE = lazy(r"^\s*ptxas(?:-[\w.]+)?\s+(warning|info)\s*:\s*(.*?)\s*$")
_FOR_ENTRY = lazy(r"\bfor entry '?([\w$.]+)'?")
MESSAGE_CODE = lazy(r"\((C\d{4})\)")


def message_key(text: str) -> str:
    """What a ptxas message is kept as in the baseline: its code ("C7508"), else its text."""
    found = MESSAGE_CODE.search(text)
    return found.group(1) if found else text


def parse_ptxas_messages(log: str) -> list[tuple[str | None, str]]:
    """(entry, message) for each ptxas warning and "Potential Performance Loss" line of one run. The entry
    is the one the message names ("for entry k"), else the one being compiled when it was printed; None for
    a module-level line (C7508 names no function, and ptxas prints it before any entry)."""
    out: list[tuple[str | None, str]] = []
    current: str | None = None
    for line in log.splitlines():
        compiling = _COMPILING_ENTRY.match(line)
        if compiling:
            current = compiling.group(1)
            continue
        m = _MESSAGE.match(line)
        if m is None or (m.group(1) == "info" and "Potential Performance Loss" not in m.group(2)):
            continue
        named = _FOR_ENTRY.search(m.group(2))
        out.append((named.group(1) if named else current, m.group(2)))
    return out


def parse_ptx_entries(ptx: str) -> list[str]:
    """Names of the `.entry` functions in PTX, in order: the kernels a module really contains."""
    return [name for name, _ in _entry_headers(ptx)]


def parse_ptx_directives(ptx: str) -> dict[str, PtxDirectives]:
    """The .maxntid/.reqntid/.minnctapersm/.maxnreg/.reqnctapercluster of every `.entry` (all None when
    absent).

    These come from `__launch_bounds__`, `__maxnreg__` and `__cluster_dims__`; ptxas applies them but does
    not print them, so they are read from the PTX that was fed to ptxas.
    """
    result: dict[str, PtxDirectives] = {}
    for name, header in _entry_headers(ptx):
        # Directives follow the parameter list; parameter names cannot hold a ".", so searching the
        # whole header cannot mistake a parameter for one.
        values: dict[str, tuple[int, ...] | int] = {}
        for m in _DIMS_DIRECTIVE.finditer(header):
            dims = [ptx_int(g) for g in m.groups()[1:] if g is not None]
            values[m.group(1)] = (*dims, *[1] * (3 - len(dims)))
        for m in _SCALAR_DIRECTIVE.finditer(header):
            values[m.group(1)] = ptx_int(m.group(2))
        maxntid = values.get("maxntid")
        reqntid = values.get("reqntid")
        minnctapersm = values.get("minnctapersm")
        maxnreg = values.get("maxnreg")
        cluster = values.get("reqnctapercluster")
        result[name] = PtxDirectives(
            maxntid=maxntid if isinstance(maxntid, tuple) else None,
            reqntid=reqntid if isinstance(reqntid, tuple) else None,
            minnctapersm=minnctapersm if isinstance(minnctapersm, int) else None,
            maxnreg=maxnreg if isinstance(maxnreg, int) else None,
            reqnctapercluster=cluster if isinstance(cluster, tuple) else None,
        )
    return result


def combine(
    resources: dict[str, KernelResources], directives: dict[str, PtxDirectives]
) -> dict[str, KernelResources]:
    """Attach each kernel's PTX directives to its ptxas resources.

    Both must describe the same module: a kernel ptxas compiled that the PTX lacks means the two
    texts do not belong together, which is an error rather than a kernel without launch bounds.
    """
    _same_module(resources, directives)
    return {name: replace(res, **directives[name].resource_fields()) for name, res in resources.items()}


def _same_module(resources: Mapping[str, object], directives: Mapping[str, PtxDirectives]) -> None:
    missing = [name for name in resources if name not in directives]
    if missing:
        raise ValueError(
            f"ptxas reported {missing} but the PTX has no such .entry (PTX entries: {sorted(directives)}); "
            "the ptxas output and the PTX come from different modules"
        )


_VERSION = lazy(r"\bV(\d+\.\d+\.\d+)\b")
_RELEASE = lazy(r"\brelease\s+(\d+\.\d+)\b")


def parse_ptxas_version(text: str) -> str:
    """The version of `ptxas --version` output: "12.9.86" from "release 12.9, V12.9.86".

    Falls back to the release ("12.9") for a build that prints no V number.
    """
    if m := _VERSION.search(text):
        return m.group(1)
    if m := _RELEASE.search(text):
        return m.group(1)
    first = next((line for line in text.splitlines() if line.strip()), text)
    raise ParseError("no 'release X.Y, VX.Y.Z' in ptxas --version output", first)
