"""Source -> PTX (NVRTC, through ctypes) -> cubin and `ptxas -v` report, for one arch.

Compilation is a pure function of (source text and its includes, CompileOptions, Toolkit, arch): nothing
here reads pytest state, so a cache and a process pool can sit on top of `compile_kernel` later.
NVRTC is loaded on first use only.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from msgspec.structs import replace

from ..core import elf, names, ptxas
from ..core.defaults import DEFAULT_PTXAS_TIMEOUT
from ..core.errors import CompileError
from ..core.facts import Deferred, KernelFacts, Provenance
from ..core.metrics import KernelResources
from ..core.ptx import ptx_setmaxnreg, ptx_tmem
from ..util.files import open_regular, settled
from ..util.paths import under_root
from ..util.patterns import lazy
from .options import CompileOptions
from .outputs import BuildOutputs, CompiledKernel, UnitOutputs, not_found
from .ptxas import run_ptxas
from .toolkit import (
    Toolkit,
)


def read_source(source: Path) -> str:
    """A CUDA source's bytes as a str that gives them back: UTF-8, with any other byte kept as a lone
    surrogate (`surrogateescape`), and a leading byte order mark dropped (nvcc skips it, NVRTC rejects it).
    nvcc and NVRTC read bytes, not text: a Latin-1 `©` in a comment compiles, so it is no reason to refuse
    the file. Whoever hands the text to a compiler or a hash encodes it back with
    `core.text.source_bytes`, so the key is the file's bytes and NVRTC gets exactly them; whoever prints it
    uses `core.text.readable`."""
    try:
        # A run reads each source several times (the cache key, the build, the kernel's line): the text
        # is remembered by the file's stat, unless it changed too recently for its stat to tell (file
        # systems stamp whole ticks; the cache's digests follow the same rule). A stat, not an open: most
        # reads find it remembered.
        st = os.stat(source)
        known = _SOURCES.get((str(source), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        if known is not None:
            return known
        # A regular file only: a FIFO would block the run, a device such as /dev/zero never ends.
        with open_regular(source) as fh:
            st = os.fstat(fh.fileno())  # the stat of what is read
            stamp = (str(source), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            data = fh.read()
    except OSError as exc:
        raise CompileError(f"cannot read CUDA source {source}: {exc.strerror or exc}") from exc
    text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8", "surrogateescape")
    if settled(st):
        if len(_SOURCES) >= 512:
            _SOURCES.clear()
        _SOURCES[stamp] = text
    return text


_SOURCES: dict[tuple[str, int, int, int, int], str] = {}


def inside_root(path: str | Path, root: Path) -> str | None:
    """`path` relative to `root` ("/" between parts) where it lies below it, as given or as resolved
    (symbolic links); None elsewhere."""
    return under_root(path, root, real_first=False)


def given_names(source: Path, options: CompileOptions, base: Path | None) -> tuple[str, CompileOptions]:
    """The source's name and the options as a compiler is given them: with `base` (the rootdir, which is
    then the compiler's working directory), relative to it where they lie inside it, so that the outputs
    (PTX `.file`, line info, messages) name no checkout path and a cache entry serves a checkout at any
    path. A source or include dir outside it stays as given."""
    if base is None:
        return str(source), options
    name = inside_root(source, base)
    if name is None:
        return str(source), options
    dirs = tuple(inside_root(d, base) or d for d in options.include_dirs)
    return name, replace(options, include_dirs=dirs)


def build_unit(
    source: Path,
    source_text: str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    name_expressions: Sequence[str] = (),
    ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT,
    label: str = "",
    base: Path | None = None,
) -> UnitOutputs:
    """NVRTC, with `name_expressions`, then ptxas over the whole module: every extern "C" and non-template
    kernel of the file, and the template instances the names (or the file itself) instantiate. `base`: the
    rootdir, when it is the working directory (NVRTC resolves relative names there), to name files
    relative to it (`given_names`)."""
    # NVRTC's binding (ctypes and the library) is loaded by a build, never by a run whose builds all hit.
    from .nvrtc import compile_ptx

    name, options = given_names(source, options, base)
    module = compile_ptx(source_text, name, arch, options, toolkit, name_expressions=name_expressions)
    label = label or f"{source.name} [{arch}]"
    ptxas_out, cubin = run_ptxas(module.ptx, arch, options.ptxas_options, toolkit, ptxas_timeout, label)

    def one_entry(entry: str) -> str:
        # ptxas -e compiles that entry alone: a module-level message it prints again is that entry's.
        log, _ = run_ptxas(
            module.ptx, arch, (*options.ptxas_options, "-e", entry), toolkit, ptxas_timeout, label
        )
        return log

    return UnitOutputs.of(module.ptx, module.log, ptxas_out, cubin, module.lowered_names, one_entry)


def nvrtc_name_sets(kernel: str, group: Sequence[str] | None = None) -> list[tuple[str, ...]]:
    """The name-expression sets of the NVRTC units to look for `kernel` in, cheapest first: `group` (the
    template names a run compiles the file with at once), when it holds `kernel` or `kernel` is no template
    instance; the plain compile (no names: every extern "C" and non-template kernel); `kernel` alone."""
    sets: list[tuple[str, ...]] = []
    template = "<" in kernel
    if group is not None and (kernel in group or not template):
        sets.append(tuple(group))
    if not template:
        sets.append(())
    sets.append((kernel,))
    return list(dict.fromkeys(sets))


def pick_nvrtc(
    kernel: str,
    source: Path,
    arch: str,
    unit: Callable[[tuple[str, ...]], UnitOutputs],
    group: Sequence[str] | None = None,
) -> BuildOutputs:
    """`kernel` from the first NVRTC unit (`unit(name_expressions)`, built or shared) that holds it.

    A name-expression error of a group (a sibling's bad name) moves on to the next set. For `kernel`'s own,
    the plain compile tells a bad name from bad code, and may still hold the kernel by entry or readable
    name ("(anonymous namespace)::k", "_Z1kPf"), which no name expression can be.
    """
    sets = nvrtc_name_sets(kernel, group)
    for i, name_set in enumerate(sets):
        last = i == len(sets) - 1
        try:
            outputs = unit(name_set)
        except CompileError as exc:
            from .nvrtc import name_expression_errors

            reasons = name_expression_errors(exc.log)
            if not reasons:
                raise
            if not last:
                continue
            plain = unit(())
            found = names.match(kernel, plain.entries)
            if found is None:
                raise not_found(kernel, source, arch, plain.outline, exc.log, reasons[0]) from None
            return BuildOutputs(
                found, plain.outline, plain.nvrtc_log, plain.ptxas_log, plain.body, plain.messages
            )
        if last or outputs.entry(kernel) is not None:
            return outputs.pick(kernel, source, arch)
    raise AssertionError("unreachable: the last set returns or raises")


@functools.lru_cache(maxsize=32)
def read_report(ptxas_log: str, ptx: str) -> dict[str, KernelResources]:
    # `ptx` may be the whole module or its outline (ptx_outline): the parsers read the same from both.
    """Every kernel's resources in one ptxas report, with its PTX directives. Remembered: the kernels of
    one unit share one report (the strings are the unit's own, so a lookup hashes them once)."""
    return ptxas.read(ptxas_log, ptx)


@functools.lru_cache(maxsize=32)
def read_functions(ptxas_log: str) -> tuple[ptxas.FunctionProperties, ...]:
    """The report's functions that are not entries, remembered as `read_report`'s kernels are."""
    return ptxas.parse_functions(ptxas_log)


def with_callees(resources: KernelResources, ptxas_log: str, cubin: Callable[[], bytes]) -> KernelResources:
    """The kernel's resources with its callees' spills counted in (`ptxas.with_callees`). The cubin's call
    graph is read only where a function of the report spills: in most modules none does, and a warm run then
    loads neither the cubin nor the ELF reader."""
    functions = read_functions(ptxas_log)
    if not any(f.spills for f in functions):
        return resources
    return ptxas.with_callees(resources, functions, elf.call_tree(cubin(), resources.name))


def interpret(
    outputs: BuildOutputs,
    source: Path,
    source_text: str,
    kernel: str,
    arch: str,
    options: CompileOptions,
    provenance: Provenance,
) -> CompiledKernel:
    """Read ptxas's report and the PTX directives of a build: cheap, so a cache keeps only the outputs.

    The facts' options_hash is left empty: it is the baseline's digest, which the caller makes.
    """
    label = f"{kernel} [{arch}]"
    ptxas_out = outputs.ptxas_log
    try:
        kernels = read_report(ptxas_out, outputs.outline)
    except ValueError as exc:  # ParseError, or a report that does not match the PTX
        raise CompileError(
            f"cannot read the report of ptxas {provenance.ptxas} for {label}: {exc}\n"
            "Please report this with the ptxas output below.\n" + ptxas_out.strip(),
            ptxas_out,
        ) from exc
    if outputs.entry not in kernels:
        raise CompileError(
            f"ptxas printed no report for {label} ({outputs.entry}):\n{ptxas_out.strip()}", ptxas_out
        )
    facts = KernelFacts(
        kernel=names.shown(kernel, outputs.entry),
        entry=outputs.entry,
        arch=arch,
        source=source,
        resources=with_callees(kernels[outputs.entry], ptxas_out, lambda: outputs.cubin),
        provenance=provenance,
        line=kernel_line(source_text, kernel),
        ptxas_options=options.ptxas_options,
        ptxas_log=ptxas_out,
        code=Deferred(lambda: outputs.cubin),
        messages=outputs.messages.get(outputs.entry, ()),
        setmaxnreg=ptx_setmaxnreg(outputs.outline).get(outputs.entry, ()),
        tmem=ptx_tmem(outputs.outline).get(outputs.entry),
    )
    return CompiledKernel(facts=facts, options=options, nvrtc_log=outputs.nvrtc_log, body=outputs.body)


def nvrtc_provenance(toolkit: Toolkit) -> Provenance:
    return Provenance(
        "nvrtc", frontend=toolkit.nvrtc_version, ptxas=toolkit.ptxas_version, origin=toolkit.origin
    )


def kernel_line(source_text: str, kernel: str) -> int | None:
    """The line of the `__global__` that declares `kernel`, for annotations: by its base name
    ("ns::gemm<128, 64>" and "_Z4gemmILi128ELi64EEvPf" -> gemm)."""
    base = names.base_name(kernel)
    if not base.isidentifier():
        return None
    return _global_lines(source_text).get(base)


def place_launch_bounds(source_text: str, kernel: str, threads: int, blocks: int | None = None) -> str:
    """`source_text` with `kernel` declared `__launch_bounds__(threads[, blocks])`, in place of any bounds it
    had: the source edit `regbudget explain --bounds` compiles. Written into the source, not into the PTX:
    NVVM optimizes with the bounds too, so directives added to the PTX afterwards give other registers.
    ValueError when no `__global__` declaration of the kernel's base name is found (a macro-made kernel)."""
    base = names.base_name(kernel)
    for match in _GLOBAL.finditer(source_text):
        decl = match.group(0)
        found = re.search(rf"(?<![\w$]){re.escape(base)}\s*\(", decl)
        if found is None or decl[: found.start()].rstrip().endswith("__launch_bounds__"):
            continue
        head = re.sub(r"__launch_bounds__\s*\([^()]*\)\s*", "", decl[: found.start()])
        bounds = f"__launch_bounds__({threads}{f', {blocks}' if blocks else ''}) "
        before, after = source_text[: match.start()], source_text[match.end() :]
        return before + head + bounds + decl[found.start() :] + after
    raise ValueError(f"no __global__ declaration of {base} to put __launch_bounds__ on")


# A __global__ declaration: its return type and attributes (no ; { or }), its name and its parameter list.
_GLOBAL = lazy(r"__global__[^;{}]*")
_CALLED = lazy(r"\b((?!\d)\w+)\s*\(")


@functools.lru_cache(maxsize=64)
def _global_lines(source_text: str) -> dict[str, int]:
    """Each name that a `__global__` declaration puts before a "(" -> the line of the first such
    declaration. Made once per source text, not one pattern per kernel."""
    lines: dict[str, int] = {}
    for match in _GLOBAL.finditer(source_text):
        line = source_text.count("\n", 0, match.start()) + 1
        for name in _CALLED.findall(match.group(0)):
            lines.setdefault(name, line)
    return lines


_ERROR_AT = lazy(r"^(.*)\((\d+)\): (?:catastrophic )?error", re.MULTILINE)


def error_location(log: str) -> tuple[str, int] | None:
    """(file, line) of NVRTC's first error, e.g. from "kernels/poly.cu(12): error: ..."."""
    match = _ERROR_AT.search(log)
    return None if match is None else (match.group(1), int(match.group(2)))
