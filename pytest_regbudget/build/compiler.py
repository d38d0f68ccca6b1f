"""Source -> PTX (NVRTC, through ctypes) -> cubin and `ptxas -v` report, for one arch.

Compilation is a pure function of (source text and its includes, CompileOptions, Toolkit, arch): nothing
here reads pytest state, so a cache and a process pool can sit on top of `compile_kernel` later.
NVRTC is loaded on first use only.
"""

from __future__ import annotations

import functools
import operator
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple

from ..core import names, ptxas
from ..core.arch import compute_arch, get_arch
from ..core.errors import CompileError, KernelNotFoundError, ToolchainError, Unbuildable
from ..core.facts import Deferred, KernelFacts, Provenance
from ..core.ptxas import KernelResources, parse_ptx_entries, parse_ptxas_messages, ptx_outline, ptx_setmaxnreg
from .toolchain import (
    VERSION_TIMEOUT,
    Toolkit,
    ToolMemo,
    find_tool,
    nvidia_roots,
    run_tool,
    start_failure,
    tool_candidates,
)

DEFAULT_PTXAS_TIMEOUT = 300.0
# The two compilers a CUDA source is built with: NVRTC (the kernel alone) or nvcc (the translation unit).
Backend = Literal["nvrtc", "nvcc"]
Body = Deferred[tuple[str, bytes]]  # a build's PTX and cubin, read from a cache entry when first needed


def hash_once(obj: Any) -> int:
    """A frozen dataclass's hash, made from its fields once per object: a unit and its options are dict
    keys that every kernel of a run looks up several times, and the generated __hash__ hashes every field
    each time. Kept in the object (this process's string hashes: nothing here is pickled)."""
    known: int | None = obj.__dict__.get("_hash")
    if known is None:
        cls = type(obj)
        getter = _HASHED_FIELDS.get(cls)
        if getter is None:
            names = [f.name for f in fields(cls) if f.compare]
            getter = _HASHED_FIELDS[cls] = operator.attrgetter(*names, names[0])  # always a tuple
        known = hash(getter(obj))
        object.__setattr__(obj, "_hash", known)
    return known


_HASHED_FIELDS: dict[type, Callable[[Any], tuple[object, ...]]] = {}


@dataclass(frozen=True)
class CompileOptions:
    """What the user controls. `None`/empty means the toolkit's default; flags are made in `flags`."""

    __hash__ = hash_once

    defines: tuple[tuple[str, str | None], ...] = ()
    include_dirs: tuple[str, ...] = field(default=(), metadata={"paths": True})
    options: tuple[str, ...] = ()
    ptxas_options: tuple[str, ...] = ()
    # Files (or globs, or directories) the build reads that the cache cannot find by itself, such as a
    # header named through a macro: hashed into the cache key; the compilers never see them.
    depends: tuple[str, ...] = field(default=(), metadata={"paths": True})

    @classmethod
    def make(
        cls,
        defines: Mapping[str, object] | Sequence[str] | None = None,
        include_dirs: Sequence[str | Path] = (),
        options: Sequence[str] = (),
        ptxas_options: Sequence[str] = (),
        depends: Sequence[str | Path] = (),
    ) -> CompileOptions:
        if isinstance(defines, str):
            defines = [defines]
        pairs: list[tuple[str, str | None]] = []
        if isinstance(defines, Mapping):
            pairs = [(str(k), None if v is None else str(v)) for k, v in defines.items()]
        elif defines:
            for item in defines:
                name, eq, value = str(item).partition("=")
                pairs.append((name, value if eq else None))
        return cls(
            defines=tuple(pairs),
            include_dirs=tuple(str(d) for d in include_dirs),
            options=tuple(options),
            ptxas_options=tuple(ptxas_options),
            depends=tuple(str(d) for d in depends),
        )

    def identity(self, relative_to: Path | None = None) -> tuple[object, ...]:
        """Every field's value, in declaration order: the one list that both the cache key and the
        baseline's options_hash are made from, so a new field cannot be left out of either.

        Path fields become lists (relative to `relative_to` when given, for a hash that is the same on
        every checkout).
        """
        every = fields(self)
        values: list[object] = []
        for f in every:
            value = getattr(self, f.name)
            if f.metadata.get("paths"):
                value = [os.path.relpath(v, relative_to) if relative_to else v for v in value]
            values.append(value)
        # Fields added after the first four (those of 0.1) count only when they are set, so that a new
        # field leaves the options_hash of existing baseline entries alone. Each value keeps its
        # position, so the values left still name exactly one set of options.
        last = len(every) - 1
        while last >= 4 and getattr(self, every[last].name) == every[last].default:
            values.pop()
            last -= 1
        return tuple(values)

    def variant(self) -> str:
        """The defines, as the baseline keys a kernel's variant: "NACC=8,TILE" ("-" for none), sorted, so
        that the order they are given in does not matter."""
        return ",".join(k if v is None else f"{k}={v}" for k, v in sorted(self.defines, key=str)) or "-"

    def with_line_info(self) -> CompileOptions:
        """The same build with -lineinfo (NVRTC and nvcc both take it), for mapping SASS back to source;
        code generation is unchanged."""
        if "-lineinfo" in self.options or "--generate-line-info" in self.options:
            return self
        return replace(self, options=(*self.options, "-lineinfo"))

    def flags(
        self, backend: Backend, arch: str, source_dir: Path, toolkit_include_dirs: Sequence[Path] = ()
    ) -> list[str]:
        """The flags these options make: for NVRTC, PTX for compute_XX (ptxas_options go to ptxas, which
        runs apart); for nvcc, a cubin for sm_XX with ptxas_options passed through.

        Headers are searched in the user's dirs first, then in the source's own dir (nvcc's rule for
        "x.h"), then in `toolkit_include_dirs`: the toolkit's headers, which bare NVRTC does not know about
        but every nvcc user expects (nvcc adds them itself).
        """
        defines = [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in self.defines]
        dirs = [*self.include_dirs, str(source_dir), *(str(d) for d in toolkit_include_dirs)]
        if backend == "nvrtc":
            includes = [f"--include-path={d}" for d in dirs]
            return [f"--gpu-architecture={compute_arch(arch)}", *defines, *includes, *self.options]
        ptxas = [f"-Xptxas={o}" for o in self.ptxas_options]
        return [f"-arch={arch}", *defines, *(f"-I{d}" for d in dirs), *self.options, *ptxas]


# A named tuple rather than a frozen dataclass: every run defines it at import (docs/speed.md, "Records").
class PtxModule(NamedTuple):
    """What NVRTC made of a source: the PTX, its log, and the entry each name expression lowered to."""

    ptx: str
    log: str
    lowered_names: Mapping[str, str]  # name expression -> mangled entry name


class _MachineCode:
    """`ptx` and `cubin` of a build's `body`, read when first asked for."""

    body: Body

    @property
    def ptx(self) -> str:
        return self.body.get()[0]

    @property
    def cubin(self) -> bytes:
        return self.body.get()[1]


@dataclass(frozen=True)
class CompiledKernel(_MachineCode):
    """A compile's result: the kernel's facts, and what only a compile has (its options, NVRTC log, PTX)."""

    facts: KernelFacts
    options: CompileOptions
    nvrtc_log: str
    body: Body = field(repr=False, compare=False)

    @property
    def kernel(self) -> str:
        return self.facts.kernel

    @property
    def entry(self) -> str:
        return self.facts.entry

    @property
    def arch(self) -> str:
        return self.facts.arch

    @property
    def source(self) -> Path:
        return self.facts.source

    @property
    def resources(self) -> KernelResources:
        return self.facts.resources

    @property
    def provenance(self) -> Provenance:
        return self.facts.provenance

    @property
    def ptxas_log(self) -> str:
        return self.facts.ptxas_log

    @property
    def cubin(self) -> bytes:
        return self.facts.cubin

    @property
    def line(self) -> int | None:
        return self.facts.line


class _Nvrtc:
    """The few NVRTC entry points we need, bound with ctypes (no cuda-python dependency)."""

    def __init__(self, path: Path) -> None:
        import ctypes  # loaded with NVRTC only: a warm run loads neither

        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def check(self, status: int, what: str) -> None:
        if status != 0:
            err = self.lib.nvrtcGetErrorString(status).decode()
            raise CompileError(f"NVRTC {what} failed: {err}")

    def version(self) -> str:
        import ctypes

        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return f"{major.value}.{minor.value}"

    def supported_archs(self) -> list[int]:
        import ctypes

        count = ctypes.c_int()
        if not hasattr(self.lib, "nvrtcGetNumSupportedArchs"):
            return []
        self.check(self.lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
        archs = (ctypes.c_int * count.value)()
        self.check(self.lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
        return list(archs)

    def compile(
        self, source: str, name: str, flags: Sequence[str], name_expressions: Sequence[str]
    ) -> tuple[int, str, str, dict[str, str]]:
        import ctypes

        """(status, log, ptx, lowered names); status is NVRTC's, 0 on success."""
        prog = ctypes.c_void_p()
        lib = self.lib
        # A file name or include path may hold bytes that are not UTF-8 (Python keeps them as surrogates):
        # NVRTC must get the bytes back, as the file system has them.
        self.check(
            lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), _fs_bytes(name), 0, None, None),
            "nvrtcCreateProgram",
        )
        try:
            for expr in name_expressions:
                self.check(lib.nvrtcAddNameExpression(prog, expr.encode()), "nvrtcAddNameExpression")
            c_flags = (ctypes.c_char_p * len(flags))(*(_fs_bytes(f) for f in flags))
            status = lib.nvrtcCompileProgram(prog, len(flags), c_flags)
            size = ctypes.c_size_t()
            self.check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
            buf = ctypes.create_string_buffer(size.value)
            self.check(lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = buf.value.decode(errors="replace")
            if status != 0:
                return status, log, "", {}
            self.check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
            buf = ctypes.create_string_buffer(size.value)
            self.check(lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
            lowered: dict[str, str] = {}
            for expr in name_expressions:
                out = ctypes.c_char_p()
                self.check(
                    lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out)), "nvrtcGetLoweredName"
                )
                lowered[expr] = (out.value or b"").decode()
            return 0, log, buf.value.decode(errors="replace"), lowered
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _fs_bytes(text: str) -> bytes:
    return text.encode(errors="surrogateescape")


@functools.lru_cache(maxsize=8)
def _nvrtc(path: Path) -> _Nvrtc:
    return _Nvrtc(path)


def compile_ptx(
    source_text: str,
    source_name: str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    name_expressions: Sequence[str] = (),
) -> PtxModule:
    """NVRTC: one translation unit to PTX for `compute_XX`. Raises CompileError with NVRTC's log."""
    nvrtc = _nvrtc(toolkit.nvrtc)
    flags = options.flags("nvrtc", arch, Path(source_name).parent, toolkit.include_dirs)
    _check_nvrtc_arch(nvrtc, arch, toolkit)
    status, log, ptx, lowered = nvrtc.compile(source_text, source_name, flags, name_expressions)
    if status != 0:
        raise CompileError(
            f"NVRTC {toolkit.nvrtc_version} could not compile {source_name} for {arch}:\n{log.strip()}"
            + host_code_hint(source_text),
            log,
        )
    return PtxModule(ptx=ptx, log=log, lowered_names=lowered)


_HOST_CODE = re.compile(
    r"^\s*#\s*include\s*<(?:cstdio|stdio\.h|cstdlib|stdlib\.h|iostream|vector|string|cuda_runtime\.h|cuda\.h)>"
    r"|\bint\s+main\s*\(|<<<|\bcuda(?:Malloc|Memcpy|Free|DeviceSynchronize|LaunchKernel)\b",
    re.MULTILINE,
)


def host_code_hint(source_text: str) -> str:
    """NVRTC compiles device code only; say so when the file plainly holds host code."""
    if not _HOST_CODE.search(source_text):
        return ""
    return (
        "\nThis file has host code (main(), host API calls, <<<...>>> launches or host headers), which NVRTC "
        'cannot compile. Use compiler="nvcc" (nvcc and a host C++ compiler build the whole translation '
        "unit), or guard the host code with #ifndef __CUDACC_RTC__."
    )


def _check_nvrtc_arch(nvrtc: _Nvrtc, arch: str, toolkit: Toolkit) -> None:
    supported = nvrtc.supported_archs()
    cc = get_arch(arch).major * 10 + get_arch(arch).minor
    if supported and cc not in supported:
        names = ", ".join(f"sm_{a}" for a in supported)
        raise CompileError(
            f"NVRTC {toolkit.nvrtc_version} ({toolkit.origin}) cannot build {arch} (it supports {names}); "
            "use a newer CUDA toolkit or drop the arch from --regbudget-arch"
        )


def run_ptxas(
    ptx: str,
    arch: str,
    ptxas_options: Sequence[str],
    toolkit: Toolkit,
    timeout: float = DEFAULT_PTXAS_TIMEOUT,
    label: str = "",
) -> tuple[str, bytes]:
    """`ptxas -v -arch=sm_XX`: (its report, the cubin). Raises CompileError with ptxas's output."""
    with tempfile.TemporaryDirectory(prefix="regbudget-") as tmp:
        ptx_path, cubin_path = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        ptx_path.write_text(ptx, encoding="utf-8")
        cmd = [
            str(toolkit.ptxas),
            "-v",
            f"-arch={arch}",
            *ptxas_options,
            str(ptx_path),
            "-o",
            str(cubin_path),
        ]
        returncode, output = _run(cmd, timeout, f"ptxas {toolkit.ptxas_version} on {label or arch}")
        if returncode != 0:
            hint = ""
            if re.search(r"not defined for option 'gpu-name'|Unsupported .target|is not a supported", output):
                hint = f"\nptxas {toolkit.ptxas_version} cannot build {arch}: use a newer CUDA toolkit."
            raise CompileError(
                f"ptxas {toolkit.ptxas_version} failed on {label or 'the kernel'} for {arch} "
                f"(exit {returncode}):\n{output.strip()}{hint}",
                output,
            )
        cubin = cubin_path.read_bytes() if cubin_path.is_file() else b""
        if not cubin:
            raise CompileError(
                f"ptxas {toolkit.ptxas_version} ({toolkit.ptxas}) exited 0 but wrote no cubin for "
                f"{label or 'the kernel'} for {arch}; this ptxas is broken. Fix: reinstall the toolkit, or "
                f"point --regbudget-cuda-home at another one. Its output:\n{output.strip() or '(none)'}",
                output,
            )
        return output, cubin


def _run(cmd: Sequence[str], timeout: float, what: str) -> tuple[int, str]:
    """(exit code, stdout + stderr) of a compiler run that must finish within `timeout` seconds; on a
    timeout the compiler and every process it started are killed."""
    try:
        return run_tool(cmd, timeout)
    except subprocess.TimeoutExpired:
        raise CompileError(
            f"{what} did not finish within {timeout:g} s (killed with its child processes); raise "
            "regbudget_ptxas_timeout or simplify the kernel"
        ) from None
    except OSError as exc:
        raise CompileError(f"{what}: cannot run {cmd[0]}: {start_failure(exc, cmd[0])}") from None


def _name_expression_errors(log: str) -> list[str]:
    """NVRTC reports a bad name expression against a synthetic file it calls `__nv_name_map`."""
    return [line.split("error:", 1)[1].strip() for line in log.splitlines() if "__nv_name_map" in line]


@dataclass(frozen=True)
class BuildOutputs(_MachineCode):
    """What NVRTC and ptxas produced for one kernel and arch: all a cache needs to keep. `outline` is the
    PTX the report is read with (`ptxas.ptx_outline`); the whole PTX and the cubin are in `body`."""

    entry: str
    outline: str
    nvrtc_log: str
    ptxas_log: str
    body: Body = field(repr=False, compare=False)
    messages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # as UnitOutputs'

    @classmethod
    def of(cls, entry: str, ptx: str, nvrtc_log: str, ptxas_log: str, cubin: bytes) -> BuildOutputs:
        outline = ptx_outline(ptx)
        messages = attribute_messages(outline, ptxas_log, None)
        return cls(entry, outline, nvrtc_log, ptxas_log, Deferred.of((ptx, cubin)), messages)


@dataclass(frozen=True)
class UnitOutputs(_MachineCode):
    """What one compile of a translation unit for one arch produced: the PTX, ptxas's report and the cubin
    of every kernel in it, and (NVRTC) the entry each name expression it was compiled with lowered to. The
    cache keeps one per (source, options, toolkit, arch[, name expressions]); kernels are picked from it.
    As in BuildOutputs, the report is read with `outline`, and `body` is read when first needed."""

    outline: str
    nvrtc_log: str
    ptxas_log: str
    body: Body = field(repr=False, compare=False)
    lowered: Mapping[str, str] = field(default_factory=dict)  # name expression -> mangled entry
    # ptxas's warnings and performance-loss notes per entry (attribute_messages), module-level ones placed.
    messages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        ptx: str,
        nvrtc_log: str,
        ptxas_log: str,
        cubin: bytes,
        lowered: Mapping[str, str] | None = None,
        one_entry: Callable[[str], str] | None = None,
    ) -> UnitOutputs:
        """A build's outputs, all in hand; `one_entry` places module-level messages (attribute_messages)."""
        outline = ptx_outline(ptx)
        placed = attribute_messages(outline, ptxas_log, one_entry)
        body = Deferred.of((ptx, cubin))
        return cls(outline, nvrtc_log, ptxas_log, body, dict(lowered or {}), dict(placed))

    @functools.cached_property
    def entries(self) -> list[str]:
        return parse_ptx_entries(self.outline)

    def entry(self, kernel: str) -> str | None:
        """The entry `kernel` names: its name expression's, else the one `names.match` finds."""
        lowered = self.lowered.get(kernel)
        if lowered is not None:
            return lowered if lowered in self.entries else None
        return names.match(kernel, self.entries)

    def pick(self, kernel: str, source: Path, arch: str, nvcc: Nvcc | None = None) -> BuildOutputs:
        """`kernel`'s outputs; KernelNotFoundError, listing the unit's kernels, when it has no such one."""
        entry = self.entry(kernel)
        if entry is None:
            raise _not_found(kernel, source, arch, self.outline, self.ptxas_log if nvcc else "", nvcc=nvcc)
        return BuildOutputs(entry, self.outline, self.nvrtc_log, self.ptxas_log, self.body, self.messages)


def read_source(source: Path) -> str:
    """A CUDA source as text: UTF-8, with a leading byte order mark dropped (nvcc skips it, NVRTC rejects
    it). Other encodings are refused with the place of the first bad byte: decoding them leniently would
    compile bytes other than the file's, and the cache key would not be the file's either."""
    try:
        # A run reads each source several times (the cache key, the build, the kernel's line): the text
        # is remembered by the file's stat, unless it changed too recently for its stat to tell (file
        # systems stamp whole ticks; the cache's digests follow the same rule). A stat, not an open: most
        # reads find it remembered.
        st = os.stat(source)
        known = _SOURCES.get((str(source), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        if known is not None:
            return known
        with open(source, "rb") as fh:
            st = os.fstat(fh.fileno())  # the stat of what is read
            stamp = (str(source), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            data = fh.read()
    except OSError as exc:
        raise CompileError(f"cannot read CUDA source {source}: {exc.strerror}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        raise CompileError(
            f"{source}:{line}: byte 0x{data[exc.start]:02X} (byte offset {exc.start}, column "
            f"{exc.start - line_start + 1}) is not UTF-8; pytest-regbudget reads CUDA sources as UTF-8. "
            f"Fix: save the file as UTF-8, e.g. iconv -f latin1 -t utf-8 {source} > {source}.utf8 && "
            f"mv {source}.utf8 {source}"
        ) from None
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS:
        if len(_SOURCES) >= 512:
            _SOURCES.clear()
        _SOURCES[stamp] = text
    return text


_SOURCES: dict[tuple[str, int, int, int, int], str] = {}
_RACY_NS = 2_000_000_000  # as the cache's StatCache: a younger file may change again within its tick


def build(
    source: Path,
    source_text: str,
    kernel: str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT,
) -> BuildOutputs:
    """Run NVRTC and ptxas: the expensive, cacheable half of compile_kernel."""
    name = str(source)
    label = f"{kernel} [{arch}]"
    try:
        module = compile_ptx(source_text, name, arch, options, toolkit, name_expressions=[kernel])
    except CompileError as exc:
        reasons = _name_expression_errors(exc.log)
        if not reasons:
            raise
        # Was it the kernel name or the code? Compile once more without the name to tell them apart. The
        # name may still be one of the plain compile's kernels, by entry or readable name
        # ("(anonymous namespace)::k", "_Z1kPf"), which no name expression can be.
        module = compile_ptx(source_text, name, arch, options, toolkit)
        found = names.match(kernel, parse_ptx_entries(module.ptx))
        if found is None:
            raise _not_found(kernel, source, arch, module.ptx, exc.log, reasons[0]) from None
        module = module._replace(lowered_names={kernel: found})
    entry = module.lowered_names.get(kernel, kernel)
    if entry not in parse_ptx_entries(module.ptx):
        raise _not_found(kernel, source, arch, module.ptx, "")
    ptxas_out, cubin = run_ptxas(module.ptx, arch, options.ptxas_options, toolkit, ptxas_timeout, label)
    return BuildOutputs.of(entry, module.ptx, module.log, ptxas_out, cubin)


def build_unit(
    source: Path,
    source_text: str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    name_expressions: Sequence[str] = (),
    ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT,
    label: str = "",
) -> UnitOutputs:
    """NVRTC, with `name_expressions`, then ptxas over the whole module: every extern "C" and non-template
    kernel of the file, and the template instances the names (or the file itself) instantiate."""
    module = compile_ptx(source_text, str(source), arch, options, toolkit, name_expressions=name_expressions)
    label = label or f"{source.name} [{arch}]"
    ptxas_out, cubin = run_ptxas(module.ptx, arch, options.ptxas_options, toolkit, ptxas_timeout, label)

    def one_entry(entry: str) -> str:
        # ptxas -e compiles that entry alone: a module-level message it prints again is that entry's.
        log, _ = run_ptxas(
            module.ptx, arch, (*options.ptxas_options, "-e", entry), toolkit, ptxas_timeout, label
        )
        return log

    return UnitOutputs.of(module.ptx, module.log, ptxas_out, cubin, module.lowered_names, one_entry)


def attribute_messages(
    outline: str, ptxas_log: str, one_entry: Callable[[str], str] | None
) -> dict[str, tuple[str, ...]]:
    """ptxas's warnings and "Potential Performance Loss" notes of a module, per entry. A module-level one
    (C7508, "'setmaxnreg' ignored", names no function) is the only entry's where the module has one; with
    several, `one_entry(entry)` (ptxas -e) tells which of the entries that use setmaxnreg it is; without it
    (nvcc's build) it goes to each entry that uses setmaxnreg, the only ones it can be about."""
    entries = parse_ptx_entries(outline)
    out: dict[str, list[str]] = {e: [] for e in entries}
    roles = ptx_setmaxnreg(outline)
    for entry, text in parse_ptxas_messages(ptxas_log):
        if entry in out:
            out[entry].append(text)
            continue
        if len(entries) == 1:
            out[entries[0]].append(text)
            continue
        candidates = [e for e in entries if roles.get(e)] or entries
        for e in candidates:
            if one_entry is None or text in one_entry(e):
                out[e].append(text)
    return {e: tuple(texts) for e, texts in out.items() if texts}


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
            reasons = _name_expression_errors(exc.log)
            if not reasons:
                raise
            if not last:
                continue
            plain = unit(())
            found = names.match(kernel, plain.entries)
            if found is None:
                raise _not_found(kernel, source, arch, plain.outline, exc.log, reasons[0]) from None
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
        resources=kernels[outputs.entry],
        provenance=provenance,
        line=kernel_line(source_text, kernel),
        ptxas_options=options.ptxas_options,
        ptxas_log=ptxas_out,
        code=Deferred(lambda: outputs.cubin),
        messages=outputs.messages.get(outputs.entry, ()),
        setmaxnreg=ptx_setmaxnreg(outputs.outline).get(outputs.entry, ()),
    )
    return CompiledKernel(facts=facts, options=options, nvrtc_log=outputs.nvrtc_log, body=outputs.body)


def compile_kernel(
    source: Path,
    kernel: str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT,
    source_text: str | None = None,
) -> CompiledKernel:
    """Compile one kernel of `source` for `arch` and read ptxas's report of it (no cache)."""
    text = read_source(source) if source_text is None else source_text
    outputs = build(source, text, kernel, arch, options, toolkit, ptxas_timeout)
    return interpret(outputs, source, text, kernel, arch, options, nvrtc_provenance(toolkit))


def nvrtc_provenance(toolkit: Toolkit) -> Provenance:
    return Provenance(
        "nvrtc", frontend=toolkit.nvrtc_version, ptxas=toolkit.ptxas_version, origin=toolkit.origin
    )


# A named tuple rather than a frozen dataclass: every run defines it at import (docs/speed.md, "Records").
class Nvcc(NamedTuple):
    """An nvcc, with the toolkit it belongs to (its ptxas does the measuring)."""

    path: Path
    version: str
    origin: str
    # Headers of CUDA 13 wheels installed beside other site dirs than nvcc's own (whose nvcc.profile covers
    # them): CCCL, the profiler API, a library's (nvidia-cublas)
    include_dirs: tuple[Path, ...] = ()

    def provenance(self) -> Provenance:
        # The report and the baseline record the versions that built the kernel: nvcc's own.
        return Provenance(
            "nvcc",
            frontend=f"nvcc {self.version}",
            ptxas=self.version,
            origin=f"{self.origin} (nvcc {self.version})",
        )

    def identity(self) -> list[object]:
        """What a cache key needs to know of this nvcc (its ptxas is the one beside it)."""
        return ["nvcc", self.version, str(self.path), *map(str, self.include_dirs)]


def find_nvcc(
    toolkit: Toolkit | None,
    memo: ToolMemo | None = None,
    *,
    pinned: Path | None = None,
    only_toolkit: str | None = None,
) -> Nvcc:
    """The found toolkit's nvcc, else the CUDA 13 wheel's (nvidia-cuda-nvcc), else PATH's. Its version is
    remembered in `memo` while its file is unchanged (a warm run starts no `nvcc --version`).

    `pinned` (--regbudget-nvcc) is used as it is, or is an error. With `only_toolkit` (a --regbudget-toolkit
    name) only the nvcc beside that toolkit's ptxas counts: each toolkit of a comparison builds with its own,
    and where it has none (the CUDA 12 wheels carry ptxas alone) the kernel is Unbuildable there."""
    if pinned is not None:
        if not pinned.is_file():
            raise ToolchainError(f"--regbudget-nvcc={pinned}: no such file. Fix: give the path of an nvcc")
        return _nvcc_at(pinned, "--regbudget-nvcc", memo)
    if only_toolkit is not None and toolkit is not None:
        own = toolkit.ptxas.parent / f"nvcc{'.exe' if os.name == 'nt' else ''}"
        if not own.is_file():
            raise Unbuildable(
                f'compiler="nvcc" is not built with toolkit {only_toolkit} ({toolkit.origin}): it has no '
                f"nvcc beside its ptxas ({toolkit.ptxas.parent}; the CUDA 12 nvcc wheel holds only ptxas). "
                "Compare nvcc builds with cu13 or a system toolkit, or pin one with --regbudget-nvcc"
            )
        return _nvcc_at(own, toolkit.origin, memo)
    path = find_tool("nvcc", toolkit, "cuda_nvcc")
    if path is not None:
        if toolkit is not None and path.parent == toolkit.ptxas.parent:
            origin = toolkit.origin
        elif any(root in path.parents for root in nvidia_roots()):
            origin = "pip wheels (nvidia-cuda-nvcc)"
        else:
            origin = "PATH"
        return _nvcc_at(path, origin, memo)
    searched = ", ".join(map(str, tool_candidates("nvcc", toolkit, "cuda_nvcc"))) + ", PATH"
    raise CompileError(
        f'compiler="nvcc" needs nvcc; none found (searched {searched}). Fix: pip install '
        '"pytest-regbudget[nvcc]" (the CUDA 13 wheels: nvcc, its runtime headers and CCCL), or put a CUDA '
        "toolkit on PATH."
    )


def _nvcc_at(path: Path, origin: str, memo: ToolMemo | None) -> Nvcc:
    """The nvcc at `path`; its version remembered in `memo` while its file is unchanged."""
    version = (memo or ToolMemo(None)).version(path, lambda: _nvcc_version(path))
    return Nvcc(path, version, origin, wheel_include_dirs(path, nvidia_roots()))


def _nvcc_version(path: Path) -> str:
    try:
        _, out = run_tool([str(path), "--version"], VERSION_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise CompileError(f"`{path} --version` did not finish within {VERSION_TIMEOUT:g} s") from None
    except OSError as exc:
        raise CompileError(f"cannot run {path}: {start_failure(exc, path)}") from None
    match = re.search(r"V(\d+\.\d+\.\d+)", out)
    return match.group(1) if match else "?"


def wheel_include_dirs(nvcc: Path, roots: Sequence[Path]) -> tuple[Path, ...]:
    """The CUDA 13 wheels' header dirs (nvidia/cu13/include and its cccl/) that a wheel nvcc does not search
    by itself: those under other `nvidia` package dirs than its own (a --user install beside a venv's, say).
    Its own tree is searched through its nvcc.profile; any other nvcc has its toolkit's headers."""
    home = nvcc.parent.parent
    if not (home.name == "cu13" and home.parent in roots):
        return ()
    dirs = [r / "cu13" / "include" / sub for r in roots if r != home.parent for sub in ("", "cccl")]
    return tuple(d for d in dirs if d.is_dir())


# Headers that the nvcc extra's wheels carry, and the wheel each comes from.
_WHEEL_HEADERS = {
    "nv/target": "nvidia-cuda-cccl",
    "cub/": "nvidia-cuda-cccl",
    "thrust/": "nvidia-cuda-cccl",
    "cuda/std/": "nvidia-cuda-cccl",
    "cuda_profiler_api.h": "nvidia-cuda-profiler-api",
}
_MISSING_HEADER = re.compile(r'fatal error: ([\w./+-]+): No such file|cannot open source file "([^"]+)"')


def missing_header_hint(log: str) -> str:
    """What to install or add to include_dirs when nvcc could not find a header, or to say when it did not
    take the file for CUDA."""
    if "Don't know what to do with" in log:
        return (
            "\nnvcc takes a file for CUDA by its extension (.cu); for a header (.cuh) or another name, add "
            'options=["-x", "cu"] to compile it as CUDA'
        )
    found = _MISSING_HEADER.search(log)
    if found is None:
        return ""
    header = found.group(1) or found.group(2)
    wheel = next((w for prefix, w in _WHEEL_HEADERS.items() if header.startswith(prefix)), None)
    if wheel is not None:
        return (
            f'\n{header} comes with the {wheel} wheel: pip install "pytest-regbudget[nvcc]" '
            f'(or pip install "{wheel}>=13.0,<14")'
        )
    return (
        f"\n{header} is not on nvcc's include path. A library's headers come with its wheel (for cuBLAS: "
        "pip install nvidia-cublas) or its install: add their directory to include_dirs"
    )


def _host_compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++") or shutil.which("clang++") or shutil.which("cl")


def build_nvcc_unit(
    source: Path,
    arch: str,
    options: CompileOptions,
    nvcc: Nvcc,
    ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT,
    depfile: Path | None = None,
    label: str = "",
) -> UnitOutputs:
    """`nvcc -cubin -arch=sm_XX -Xptxas -v` over a whole translation unit, host code and all: one cubin,
    and one ptxas report, with every kernel the file instantiates. `label` names it in errors.

    nvcc needs a host C++ compiler even for -cubin (it splits host from device code). `options` are nvcc's
    own flags here. The PTX is kept (-keep) for the launch-bounds directives. With `depfile`, nvcc also
    writes there (-MD -MF) every file it opened, for the cache.
    """
    if _host_compiler() is None:
        raise CompileError(
            f'compiler="nvcc" needs a host C++ compiler for {source} (nvcc splits host from device code); '
            "none of g++, c++, clang++ is on PATH. Fix: install one (apt-get install g++)."
        )
    label = label or f"{source.name} [{arch}]"
    with tempfile.TemporaryDirectory(prefix="regbudget-nvcc-") as tmp:
        cubin_path = Path(tmp) / "kernel.cubin"
        cmd = [
            str(nvcc.path),
            "-cubin",
            "-Xptxas",
            "-v",
            "-keep",
            f"-keep-dir={tmp}",
            *options.flags("nvcc", arch, source.parent, nvcc.include_dirs),
            *(["-MD", "-MF", str(depfile)] if depfile is not None else []),
            str(source),
            "-o",
            str(cubin_path),
        ]
        returncode, log = _run(cmd, ptxas_timeout, f"nvcc {nvcc.version} on {label}")
        if returncode != 0:
            raise CompileError(
                f"nvcc {nvcc.version} could not compile {source} for {arch}:\n{log.strip()}"
                + missing_header_hint(log),
                log,
            )
        ptx = "\n".join(p.read_text() for p in sorted(Path(tmp).glob("*.ptx")))
        cubin = cubin_path.read_bytes()
    return UnitOutputs.of(ptx, "", log, cubin)


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
_GLOBAL = re.compile(r"__global__[^;{}]*")
_CALLED = re.compile(r"\b((?!\d)\w+)\s*\(")


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


_ERROR_AT = re.compile(r"^(.*)\((\d+)\): (?:catastrophic )?error", re.MULTILINE)


def error_location(log: str) -> tuple[str, int] | None:
    """(file, line) of NVRTC's first error, e.g. from "kernels/poly.cu(12): error: ..."."""
    match = _ERROR_AT.search(log)
    return None if match is None else (match.group(1), int(match.group(2)))


def _not_found(
    kernel: str, source: Path, arch: str, ptx: str, log: str, reason: str = "", nvcc: Nvcc | None = None
) -> KernelNotFoundError:
    listing = names.candidates(kernel, parse_ptx_entries(ptx))
    why = f" (NVRTC: {reason})" if reason else ""
    if nvcc is None:
        how = (
            'Name an extern "C" kernel by its name, a C++ kernel by its name expression '
            "(e.g. 'gemm<128, 64>'); templates must be named with their template arguments."
        )
    else:
        how = (
            f"nvcc {nvcc.version} built the kernels that the file instantiates: name one as listed, "
            "template arguments included (e.g. 'gemm<128, 64>'; whitespace and 256u/256 do not matter), an "
            "overload with its parameter list ('k(float*)'), or by its mangled name."
        )
    return KernelNotFoundError(
        f"kernel {kernel!r} not found in {source} [{arch}]{why}; the module contains: {listing}. {how}",
        log,
    )
