"""PTX from Python GPU front ends (Numba-CUDA here, Triton in tools/triton.py), built for a named arch on a
machine without a GPU.

Owns driving each front end with an explicit target so that no CUDA driver is touched, keeping the PTX
within what our own ptxas accepts (never by editing the PTX text), and naming the kernel: its `.entry`,
the `.target` ptxas must be run for, and the `def` that defines it. Measuring is `assembler.run_ptxas`'s.

- Triton: tools/triton.py, which uses the helpers here (the PTX header and version checks, `_where`).
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
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct

from ..core.arch import ArchLimits, compute_arch, get_arch
from ..core.errors import CompileError, FrontendError, UnknownArchError
from ..core.ptxas import parse_ptx_entries
from .ptxas import run_ptxas
from .toolkit import Toolkit, discover


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
