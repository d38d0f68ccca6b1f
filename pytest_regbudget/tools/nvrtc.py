"""NVRTC, bound with ctypes and loaded on first use: a CUDA source and its name expressions to PTX for one
arch (`compile_ptx`), with the hints its errors need (host code, an arch the library does not build, name
expressions that did not resolve).
"""

from __future__ import annotations

import ctypes
import functools
import re
from collections.abc import Sequence
from pathlib import Path

from msgspec.structs import replace

from ..core.errors import CompileError, Rejected, ToolchainError
from ..core.text import source_bytes
from .options import CompileOptions
from .outputs import PtxModule
from .toolkit import NVRTC_FIX, Toolkit, nvrtc_archs


class _Nvrtc:
    """The few NVRTC entry points we need, bound with ctypes (no cuda-python dependency)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def check(self, status: int, what: str) -> None:
        if status != 0:
            err = self.lib.nvrtcGetErrorString(status).decode()
            raise CompileError(f"NVRTC {what} failed: {err}")

    def version(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return f"{major.value}.{minor.value}"

    def compile(
        self, source: str, name: str, flags: Sequence[str], name_expressions: Sequence[str]
    ) -> tuple[int, str, str, dict[str, str]]:
        """(status, log, ptx, lowered names); status is NVRTC's, 0 on success."""
        prog = ctypes.c_void_p()
        lib = self.lib
        # A file name or include path may hold bytes that are not UTF-8 (Python keeps them as surrogates):
        # NVRTC must get the bytes back, as the file system has them.
        self.check(
            lib.nvrtcCreateProgram(ctypes.byref(prog), source_bytes(source), _fs_bytes(name), 0, None, None),
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


_UNLOADABLE: dict[Path, ToolchainError] = {}  # a library that failed to load stays failed for the run


@functools.lru_cache(maxsize=8)
def _nvrtc(path: Path) -> _Nvrtc:
    """The library, loaded once; a library that cannot be loaded (damaged, or removed while the run goes on)
    is one ToolchainError, remembered, not a ctypes traceback in every test."""
    if path in _UNLOADABLE:
        raise _UNLOADABLE[path]
    try:
        return _Nvrtc(path)
    except OSError as exc:
        _UNLOADABLE[path] = ToolchainError(f"the NVRTC library {path} cannot be loaded: {exc}. {NVRTC_FIX}")
        raise _UNLOADABLE[path] from None


def compile_ptx(
    source_text: str,
    source_name: str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    name_expressions: Sequence[str] = (),
) -> PtxModule:
    """NVRTC: one translation unit to PTX for `compute_XX`. Raises CompileError with NVRTC's log."""
    library = toolkit.require_nvrtc()
    nvrtc = _nvrtc(library)
    flags = options.flags("nvrtc", arch, Path(source_name).parent, toolkit.include_dirs)
    _check_nvrtc_arch(library, arch, toolkit)
    status, log, ptx, lowered = nvrtc.compile(source_text, source_name, flags, name_expressions)
    if status != 0:
        raise Rejected(
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


def _check_nvrtc_arch(library: Path, arch: str, toolkit: Toolkit) -> None:
    """CompileError with one line where this NVRTC does not build `arch` (its own list says so), before
    NVRTC's own error would: it says why and what builds it. Not Rejected: no verdict on the source, so
    nothing is cached or recorded as a broken build."""
    refusal = replace(toolkit, archs=nvrtc_archs(library)).targets().refusal(arch)
    if refusal is not None:
        raise CompileError(refusal)


def name_expression_errors(log: str) -> list[str]:
    """NVRTC reports a bad name expression against a synthetic file it calls `__nv_name_map`."""
    return [line.split("error:", 1)[1].strip() for line in log.splitlines() if "__nv_name_map" in line]
