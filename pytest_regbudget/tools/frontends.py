"""PTX from Python GPU front ends (Triton, Numba-CUDA), built for a named arch on a machine without a GPU.

Owns driving each front end with an explicit target so that no CUDA driver is touched, keeping the PTX
within what our own ptxas accepts (never by editing the PTX text), and naming the kernel: its `.entry`,
the `.target` ptxas must be run for, and the `def` that defines it. Measuring is `assembler.run_ptxas`'s.

- Triton: `triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32), options=...)`. The explicit
  target is what keeps Triton away from the driver. Triton picks the PTX ISA from the ptxas it bundles
  (PTX 9.4 from its ptxas 13.4 for sm_90 and newer), so the `ptx_version` option, which Triton's LLVM
  backend and lowering passes honour, is set to the newest version both that ptxas and ours accept.
  Triton always builds the arch-specific target from sm_90 on (`sm_90a` for "sm_90"), and such PTX
  may hold wgmma/setmaxnreg, so `.target` is reported, not rewritten: ptxas must run for `ptx_target`.
- Numba: numba-cuda lowers the function to NVVM IR; the IR is compiled here by the libNVVM of the
  toolkit our ptxas belongs to, loaded by path. numba-cuda's own NVVM is whatever cuda-pathfinder loads
  first (the CUDA 13 wheel's, when installed, whose PTX is too new for a CUDA 12 ptxas), and it is a
  process-wide choice that this module must not make for the user's code.

Both front ends are imported on first use only: `pytest --help` and collection must not need them.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import importlib.metadata
import inspect
import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from ..core.arch import ArchLimits, compute_arch, get_arch
from ..core.errors import CompileError, FrontendError, UnknownArchError
from ..core.ptxas import parse_ptx_entries
from .ptxas import run_ptxas
from .toolkit import Toolkit, discover, ptxas_version


class FrontendPtx(Struct, frozen=True):
    """One kernel's PTX from a Python front end, with what a report needs to name it."""

    ptx: str
    entry: str  # the .entry name in the PTX (what ptxas reports)
    name: str  # human name: the Python function's __name__
    source: Path | None  # the Python file defining the function
    line: int | None  # 1-based line of the `def` in that file
    frontend: str  # "triton 3.9.0" / "numba-cuda 0.30.4 (libNVVM 12.9)"
    threads: int | None  # block size the kernel is built for (Triton: num_warps * 32), else None
    dynamic_smem: int  # dynamic shared memory the launch needs (Triton metadata "shared"), else 0
    # The PTX's .target: the arch ptxas must be run for. It can differ from the arch asked for: Triton
    # builds "sm_90a" for "sm_90", and ptxas refuses sm_90a PTX with -arch=sm_90.
    ptx_target: str
    # The front end's own spill count when it has one without a GPU. Triton's `n_spills` is the
    # driver's local-memory size / 4, read when the cubin is loaded, and Numba's comes from the driver
    # too, so both are None on a machine without one.
    tool_spills: int | None = None
    # Where the front end assembled the PTX itself (Triton, `native`): its own cubin, the log of its own
    # ptxas -v run, and that ptxas's version. Measured as shipped: no ptxas of ours runs.
    cubin: bytes | None = None
    ptxas_log: str = ""
    ptxas_version: str = ""
    ptxas_origin: str = ""


_VERSION_LINE = re.compile(r"^\s*\.version\s+(\d+)\.(\d+)", re.MULTILINE)
_TARGET_LINE = re.compile(r"^\s*\.target\s+(\w+)", re.MULTILINE)
_CURRENT_VERSION = re.compile(r"current version is '(\d+)\.(\d+)'")
_NVVM_RELEASE = re.compile(r"Cuda compilation tools, release (\d+\.\d+)")
_DEF_LINE = re.compile(r"\s*(?:async\s+)?def\s")


def ptx_header(ptx: str) -> tuple[tuple[int, int], str]:
    """((major, minor) of `.version`, `.target`) of a PTX module; FrontendError when either is missing."""
    version = _VERSION_LINE.search(ptx)
    target = _TARGET_LINE.search(ptx)
    if version is None or target is None:
        raise FrontendError("the front end's output has no PTX .version/.target line: it is not PTX")
    return (int(version[1]), int(version[2])), target[1]


@functools.lru_cache(maxsize=32)
def max_ptx_version(toolkit: Toolkit, arch: str) -> tuple[int, int]:
    """The newest PTX ISA version `toolkit`'s ptxas accepts (8.8 for ptxas 12.9), as ptxas says it.

    ptxas names its limit when it refuses a `.version`, so one refused probe answers exactly, for any
    ptxas, with no table of releases to keep up to date.
    """
    probe = f".version 99.9\n.target {arch}\n.address_size 64\n"
    try:
        run_ptxas(probe, arch, (), toolkit, label="a PTX version probe")
    except CompileError as exc:
        match = _CURRENT_VERSION.search(exc.log)
        if match is not None:
            return int(match[1]), int(match[2])
        raise FrontendError(
            f"cannot tell which PTX versions ptxas {toolkit.ptxas_version} accepts for {arch}:\n{exc}",
            exc.log,
        ) from exc
    raise FrontendError(f"ptxas {toolkit.ptxas_version} ({toolkit.ptxas}) accepted PTX .version 99.9")


def _fmt(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _require(module: str, pip_name: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise FrontendError(f"cannot import {module} ({exc}); install it: pip install {pip_name}") from exc


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def _limits(arch: str) -> ArchLimits:
    try:
        return get_arch(arch)
    except UnknownArchError as exc:
        raise FrontendError(str(exc)) from exc


def _where(fn: Any) -> tuple[Path | None, int | None]:
    """The file and the `def` line of a Python function (decorators come before the `def`)."""
    try:
        path = inspect.getsourcefile(fn)
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None, None
    line = next((start + i for i, text in enumerate(lines) if _DEF_LINE.match(text)), start)
    return (Path(path) if path else None), line


def _single_entry(ptx: str, label: str, expected: str | None = None) -> str:
    entries = parse_ptx_entries(ptx)
    if expected is None and len(entries) == 1:
        return entries[0]
    if expected is not None and expected in entries:
        return expected
    listing = ", ".join(entries) or "none"
    raise FrontendError(f"cannot find the kernel of {label} in its PTX (.entry functions: {listing})")


def _check_version(ptx: str, toolkit: Toolkit, label: str, how: str) -> str:
    """The PTX's .target, after checking that our ptxas takes its .version."""
    version, target = ptx_header(ptx)
    limit = max_ptx_version(toolkit, _limits(target).base_name)
    if version > limit:
        raise FrontendError(
            f"{label}: {how} wrote PTX .version {_fmt(version)}, but ptxas {toolkit.ptxas_version} "
            f"({toolkit.origin}) accepts PTX up to {_fmt(limit)}. Lowering .version by hand is unsafe "
            "(the code may use newer instructions); use a newer CUDA toolkit for pytest-regbudget."
        )
    return target


# --------------------------------------------------------------------------------------------- Triton


def _triton_function(fn: object) -> Any:
    """The JITFunction behind `fn`, unwrapping @triton.autotune/@triton.heuristics layers (`.fn`)."""
    runtime = _require("triton.runtime.jit", "triton")
    current: Any = fn
    for _ in range(8):
        if isinstance(current, runtime.JITFunction):
            return current
        current = getattr(current, "fn", None)
    raise FrontendError(
        f"{getattr(fn, '__name__', fn)!r} is not a Triton kernel: decorate it with @triton.jit "
        "(triton_ptx compiles JITFunctions)"
    )


def _triton_signature(
    jit_fn: Any, signature: Mapping[str, str], constexprs: Mapping[str, object]
) -> tuple[dict[str, str], dict[str, object]]:
    """Check names and types here: Triton's own errors for these are a bare KeyError or an
    AttributeError on None, far from the cause."""
    name = jit_fn.__name__
    params = {p.name: p for p in jit_fn.params}
    listing = ", ".join(params)
    unknown = [k for k in [*signature, *constexprs] if k not in params]
    if unknown:
        raise FrontendError(
            f"{name} has no parameter {', '.join(map(repr, unknown))} (its parameters: {listing})"
        )
    sig: dict[str, str] = {}
    consts: dict[str, object] = dict(constexprs)
    missing: list[str] = []
    for pname, param in params.items():
        if pname in consts:
            sig[pname] = "constexpr"
        elif param.is_constexpr:
            default = getattr(param, "default", inspect.Parameter.empty)
            if default is inspect.Parameter.empty:
                missing.append(f"{pname}=<value> in constexprs")
            else:
                consts[pname] = default
                sig[pname] = "constexpr"
        elif pname in signature:
            sig[pname] = signature[pname]
        else:
            missing.append(f"{pname!r} in signature")
    if missing:
        raise FrontendError(
            f"{name} needs {', '.join(missing)} (its parameters: {listing}); "
            "signature types are Triton's: '*fp32' (pointer), 'i32', 'fp16', ...; tl.constexpr "
            "parameters take their value from constexprs"
        )
    _check_triton_types(name, sig)
    return sig, consts


def _check_triton_types(name: str, sig: Mapping[str, str]) -> None:
    language = _require("triton.language", "triton")
    str_to_ty = getattr(language, "str_to_ty", None)
    if str_to_ty is None:  # Triton's own parser of these strings; without it Triton reports them itself
        return
    for pname, ty in sig.items():
        if not isinstance(ty, str) or ty == "constexpr":
            continue
        try:
            str_to_ty(ty, None)
        except (KeyError, IndexError, ValueError) as exc:
            raise FrontendError(
                f"{name}: signature type {ty!r} of {pname!r} is not a Triton type ({exc!r}); use e.g. "
                "'*fp32', '*fp16', '*i8' for pointers and 'i32', 'i64', 'fp32' for scalars"
            ) from exc


def _triton_own_ptx_version(cc: int) -> tuple[int, int] | None:
    """The PTX version Triton would pick for `cc` (from the ptxas it bundles for that arch).

    Triton runs that ptxas too (its cubin stage), so the PTX must suit both. These are Triton 3.x
    internals; None when they move, and then only our ptxas's limit is applied.
    """
    try:
        nvidia = importlib.import_module("triton.backends.nvidia.compiler")
        version = int(nvidia.ptx_get_version(nvidia.get_ptxas(cc).version))
    except Exception:  # any failure just means "unknown"
        return None
    return version // 10, version % 10


def triton_ptx(
    fn: object,
    arch: str,
    *,
    signature: Mapping[str, str],
    constexprs: Mapping[str, object] | None = None,
    num_warps: int = 4,
    num_stages: int = 3,
    toolkit: Toolkit | None = None,
    native: bool = False,
) -> FrontendPtx:
    """PTX of a `@triton.jit` kernel for `arch`, within the PTX versions `toolkit`'s ptxas accepts.

    `signature` maps each runtime parameter to a Triton type ("*fp32", "i32"); `constexprs` gives the
    tl.constexpr parameters' values (a parameter's default is used when it has one). Run ptxas for
    the result's `ptx_target`, which is "sm_90a" when `arch` is "sm_90".

    `native`: build as Triton itself does, with its own PTX version, its bundled ptxas and its options
    (`--regAllocOptLevel=2`); the result carries Triton's cubin and its ptxas's log (through Triton's
    public knobs: `dump_ptxas_log`, `always_compile` so that its cache cannot skip the ptxas run), and
    `toolkit` is not used.
    """
    triton = _require("triton", "triton")
    compiler = _require("triton.compiler", "triton")
    backends = _require("triton.backends.compiler", "triton")
    jit_fn = _triton_function(fn)
    limits = _limits(arch)
    cc = limits.major * 10 + limits.minor
    sig, consts = _triton_signature(jit_fn, signature, constexprs or {})
    version = f"triton {getattr(triton, '__version__', _dist_version('triton'))}"
    label = f"{jit_fn.__name__} [{arch}]"
    options: dict[str, object] = {"num_warps": num_warps, "num_stages": num_stages}
    if not native:
        toolkit = toolkit if toolkit is not None else discover()
        ptx_version = max_ptx_version(toolkit, limits.base_name)
        own = _triton_own_ptx_version(cc)
        if own is not None:
            ptx_version = min(ptx_version, own)
        options["ptx_version"] = ptx_version[0] * 10 + ptx_version[1]
    source_of = compiler.ASTSource(fn=jit_fn, signature=sig, constexprs=consts)
    printed = io.StringIO()
    try:
        if native:
            knobs = _require("triton.knobs", "triton")
            with knobs.nvidia.scope(), knobs.compilation.scope(), contextlib.redirect_stdout(printed):
                knobs.nvidia.dump_ptxas_log = True
                knobs.compilation.always_compile = True
                compiled = triton.compile(
                    source_of, target=backends.GPUTarget("cuda", cc, 32), options=options
                )
        else:
            compiled = triton.compile(source_of, target=backends.GPUTarget("cuda", cc, 32), options=options)
    except Exception as exc:  # CompilationError, PTXASError, or a plain error from Triton's passes
        raise FrontendError(f"{version} could not compile {label}:\n{exc}", str(exc)) from exc
    ptx = compiled.asm["ptx"]
    metadata = compiled.metadata
    if native:
        target = _ptx_target(ptx)
    else:
        assert toolkit is not None  # found above
        target = _check_version(ptx, toolkit, label, f"{version} (asked for PTX {_fmt(ptx_version)})")
    source, line = _where(jit_fn.fn)
    made = FrontendPtx(
        ptx=ptx,
        entry=_single_entry(ptx, label, metadata.name),
        name=jit_fn.__name__,
        source=source,
        line=line,
        frontend=version,
        # Warp specialization may change num_warps during compilation; metadata holds the final one.
        threads=int(metadata.num_warps) * int(getattr(metadata, "warp_size", 32)),
        dynamic_smem=int(metadata.shared or 0),
        ptx_target=target,
    )
    if not native:
        return made
    knobs = _require("triton.knobs", "triton")
    # Triton's own rule for which of its two bundled ptxas it runs (backends/nvidia/compiler.py).
    tool = Path((knobs.nvidia.ptxas_blackwell if cc >= 90 else knobs.nvidia.ptxas).path)
    return replace(
        made,
        cubin=bytes(compiled.asm["cubin"]),
        ptxas_log=printed.getvalue(),
        ptxas_version=ptxas_version(tool),
        ptxas_origin=f"{version} (its {tool.name})",
    )


class TritonJob(Struct, frozen=True):
    """One Triton compile: the @triton.jit function and what it is compiled with."""

    fn: object
    signature: Mapping[str, str]
    constexprs: Mapping[str, object] | None = None
    num_warps: int = 4
    num_stages: int = 3

    def ptx(self, arch: str, toolkit: Toolkit | None = None, *, native: bool = False) -> FrontendPtx:
        """triton_ptx of this job."""
        return triton_ptx(
            self.fn,
            arch,
            signature=self.signature,
            constexprs=self.constexprs,
            num_warps=self.num_warps,
            num_stages=self.num_stages,
            toolkit=toolkit,
            native=native,
        )

    def key(self, arch: str) -> str | None:
        """The key Triton's own cache gives this compile (triton.compile computes it the same way): Triton's
        code, the function's source with every @jit function it calls and the globals it reads
        (JITFunction.cache_key), the signature and constexprs, the backend with its ptxas version, the options
        and the environment variables that change code generation. None where this Triton cannot say: then the
        build is not cached."""
        try:
            triton_compiler = _require("triton.compiler.compiler", "triton")
            runtime_cache = _require("triton.runtime.cache", "triton")
            backends = _require("triton.backends.compiler", "triton")
            jit_fn = _triton_function(self.fn)
            limits = _limits(arch)
            sig, consts = _triton_signature(jit_fn, self.signature, self.constexprs or {})
            src = triton_compiler.ASTSource(fn=jit_fn, signature=sig, constexprs=consts)
            backend = triton_compiler.make_backend(
                backends.GPUTarget("cuda", limits.major * 10 + limits.minor, 32)
            )
            options = backend.parse_options(
                dict({"num_warps": self.num_warps, "num_stages": self.num_stages}, **src.parse_options())
            )
            env = triton_compiler.get_cache_invalidating_env_vars()
            return str(runtime_cache.get_cache_key(src, backend, options, env_vars=env))
        except Exception:  # an older or newer Triton without these: build every time, as before
            return None


def _ptx_target(ptx: str) -> str:
    found = _TARGET_LINE.search(ptx)
    return found.group(1) if found else ""


# ---------------------------------------------------------------------------------------------- Numba


class _Nvvm:
    """The few libNVVM entry points needed to compile numba's IR, bound with ctypes like NVRTC."""

    def __init__(self, path: Path) -> None:
        self.path = path
        lib = self.lib = ctypes.CDLL(str(path))
        lib.nvvmGetErrorString.restype = ctypes.c_char_p
        module_args: list[Any] = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
        lib.nvvmAddModuleToProgram.argtypes = module_args
        lib.nvvmLazyAddModuleToProgram.argtypes = module_args
        options_args: list[Any] = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.nvvmVerifyProgram.argtypes = options_args
        lib.nvvmCompileProgram.argtypes = options_args
        for size_fn in ("nvvmGetProgramLogSize", "nvvmGetCompiledResultSize"):
            getattr(lib, size_fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        for get_fn in ("nvvmGetProgramLog", "nvvmGetCompiledResult"):
            getattr(lib, get_fn).argtypes = [ctypes.c_void_p, ctypes.c_char_p]

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise FrontendError(
                f"libNVVM ({self.path}) {what} failed: {self.lib.nvvmGetErrorString(status).decode()}"
            )

    def _text(self, prog: ctypes.c_void_p, size_fn: str, get_fn: str) -> str:
        size = ctypes.c_size_t()
        self.check(getattr(self.lib, size_fn)(prog, ctypes.byref(size)), size_fn)
        buf = ctypes.create_string_buffer(size.value)
        self.check(getattr(self.lib, get_fn)(prog, buf), get_fn)
        return buf.value.decode(errors="replace")

    def compile(
        self, modules: Sequence[bytes], lazy: Sequence[bytes], flags: Sequence[str]
    ) -> tuple[int, str, str]:
        """(status, log, ptx): NVVM's status is 0 on success. `lazy` modules (libdevice) are linked only
        for the functions the others call, and are not verified, as numba does."""
        lib = self.lib
        prog = ctypes.c_void_p()
        self.check(lib.nvvmCreateProgram(ctypes.byref(prog)), "nvvmCreateProgram")
        try:
            for i, module in enumerate(modules):
                self.check(
                    lib.nvvmAddModuleToProgram(prog, module, len(module), f"m{i}".encode()), "add module"
                )
            c_flags = (ctypes.c_char_p * len(flags))(*(f.encode() for f in flags))
            status = lib.nvvmVerifyProgram(prog, len(flags), c_flags)
            if status == 0:
                for module in lazy:
                    self.check(
                        lib.nvvmLazyAddModuleToProgram(prog, module, len(module), b"libdevice"),
                        "add libdevice",
                    )
                status = lib.nvvmCompileProgram(prog, len(flags), c_flags)
            log = self._text(prog, "nvvmGetProgramLogSize", "nvvmGetProgramLog")
            if status != 0:
                return status, log, ""
            return 0, log, self._text(prog, "nvvmGetCompiledResultSize", "nvvmGetCompiledResult")
        finally:
            lib.nvvmDestroyProgram(ctypes.byref(prog))


@functools.lru_cache(maxsize=4)
def _nvvm(path: Path) -> _Nvvm:
    return _Nvvm(path)


def toolkit_nvvm(toolkit: Toolkit) -> tuple[Path, Path]:
    """(libNVVM, libdevice) of the CUDA installation `toolkit`'s ptxas is in; FrontendError if none.

    Layouts: CUDA home and the CUDA 12 wheel (bin/ptxas, nvvm/lib64, nvvm/libdevice); the CUDA 13
    wheels (cu13/bin/ptxas, cu13/lib/libnvvm.so.4, cu13/nvvm/libdevice); Windows (nvvm/bin).
    """
    homes = dict.fromkeys([toolkit.ptxas.parent.parent, toolkit.ptxas.resolve().parent.parent])
    tried: list[str] = []
    for home in homes:
        libdevice = home / "nvvm" / "libdevice" / "libdevice.10.bc"
        for sub in ("nvvm/lib64", "nvvm/lib", "lib", "nvvm/bin/x64", "nvvm/bin"):
            libs = sorted((home / sub).glob("libnvvm.so*")) + sorted((home / sub).glob("nvvm64*.dll"))
            tried.append(str(home / sub))
            if libs and libdevice.is_file():
                return libs[0], libdevice
    raise FrontendError(
        f"no libNVVM next to ptxas {toolkit.ptxas_version} ({toolkit.ptxas}); looked in: {', '.join(tried)}. "
        "Numba kernels are compiled by the libNVVM of ptxas's own toolkit: install the toolkit's "
        'nvvm component (pip install "nvidia-cuda-nvcc-cu12" brings nvvm/ with ptxas)'
    )


def _numba_internals() -> tuple[Any, Any, Any]:
    """numba-cuda's kernel compiler (IR, before NVVM), its IR fix-ups for NVVM, and its compiler lock.

    Not public API (written against numba-cuda 0.30): `compile_ptx` would also run NVVM, and only
    numba-cuda's own one.
    """
    _require("numba.cuda", "numba-cuda")
    compiler = _require("numba.cuda.compiler", "numba-cuda")
    nvvm = _require("numba.cuda.cudadrv.nvvm", "numba-cuda")
    compile_fn = getattr(compiler, "_compile_pyfunc_with_fixup", None)
    replace_fn = getattr(nvvm, "llvm_replace", None)
    if compile_fn is None or replace_fn is None:
        raise FrontendError(
            f"numba-cuda {_dist_version('numba-cuda')} lacks numba.cuda.compiler._compile_pyfunc_with_fixup "
            "or numba.cuda.cudadrv.nvvm.llvm_replace, which pytest-regbudget uses to get a kernel's NVVM "
            'IR; install the version it was written for: pip install "numba-cuda==0.30.*"'
        )
    try:
        lock: Any = importlib.import_module("numba.cuda.core.compiler_lock").global_compiler_lock
    except (ImportError, AttributeError):
        lock = contextlib.nullcontext()
    return compile_fn, replace_fn, lock


def numba_ptx(fn: object, signature: object, arch: str, *, toolkit: Toolkit | None = None) -> FrontendPtx:
    """PTX of a Numba CUDA kernel (a plain function or a `@cuda.jit` dispatcher) for `arch`.

    `signature` is Numba's, e.g. "void(float32[:], float32[:])". numba-cuda lowers the function to
    NVVM IR; `toolkit`'s libNVVM (the same CUDA release as its ptxas) compiles it to PTX.
    """
    py_func: Any = getattr(fn, "py_func", fn)
    name = getattr(py_func, "__name__", repr(fn))
    if not inspect.isfunction(py_func):
        raise FrontendError(
            f"{name} is not a Python function or a @cuda.jit kernel; numba_ptx compiles those"
        )
    if signature is None or (isinstance(signature, str) and not signature.strip()):
        raise FrontendError(
            f"numba_ptx needs the signature of {name}, e.g. 'void(float32[:], float32[:])': without a GPU "
            "there are no launch arguments to infer it from"
        )
    limits = _limits(arch)
    label = f"{name} [{arch}]"
    compile_fn, replace_fn, lock = _numba_internals()
    toolkit = toolkit if toolkit is not None else discover()
    nvvm_path, libdevice = toolkit_nvvm(toolkit)
    version = f"numba-cuda {_dist_version('numba-cuda')}"
    try:
        with lock:
            # cc matters before NVVM too: numba lowers some operations per compute capability.
            library, _ = compile_fn(
                py_func, signature, device=False, abi="numba", cc=(limits.major, limits.minor)
            )
            modules = [replace_fn(ir).encode() for ir in library.llvm_strs]
    except Exception as exc:  # TypingError, a bad signature string, or CudaSupportError (below)
        raise _numba_error(version, label, signature, exc) from exc
    # opt=3 is numba's default (NUMBA_OPT != 0) and what `compile_ptx` passes.
    flags = [f"-arch={compute_arch(arch)}", "-opt=3"]
    status, log, ptx = _nvvm(nvvm_path).compile(modules, [libdevice.read_bytes()], flags)
    if status != 0:
        raise FrontendError(f"libNVVM ({nvvm_path}) rejected numba's IR for {label}:\n{log.strip()}", log)
    release = _NVVM_RELEASE.search(ptx)
    if release is None or release[1] != toolkit.release:
        found = release[1] if release else "an unknown release"
        raise FrontendError(
            f"libNVVM at {nvvm_path} is from CUDA {found}, ptxas from CUDA {toolkit.release}: "
            "they must come from one toolkit"
        )
    target = _check_version(ptx, toolkit, label, f"libNVVM {release[1]}")
    source, line = _where(py_func)
    return FrontendPtx(
        ptx=ptx,
        entry=_single_entry(ptx, label),
        name=name,
        source=source,
        line=line,
        frontend=f"{version} (libNVVM {release[1]})",
        threads=None,
        dynamic_smem=0,
        ptx_target=target,
    )


def _numba_error(version: str, label: str, signature: object, exc: Exception) -> FrontendError:
    if type(exc).__name__ == "CudaSupportError":
        # numba-cuda compiles a called @cuda.jit/@njit function for the current device's compute
        # capability (Dispatcher.compile_device asks the driver), even when a cc is given.
        return FrontendError(
            f"{version} needs a GPU to compile {label}: the kernel calls another jitted function, and "
            "numba-cuda compiles those for the current device, which it asks the CUDA driver for. "
            f"Measure this kernel on a machine with a GPU, or inline the helper into the kernel.\n{exc}",
            str(exc),
        )
    return FrontendError(
        f"{version} could not compile {label} with signature {signature!r}:\n{exc}", str(exc)
    )
