"""nvcc: finding it (with the toolkit it belongs to and the wheels' headers it needs), and a whole translation
unit built with `nvcc -cubin -Xptxas -v` for one arch (`build_nvcc_unit`), with hints for a missing header.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..core.defaults import DEFAULT_NVCC_TIMEOUT
from ..core.errors import CompileError, Rejected, ToolchainError, Unbuildable
from ..util.patterns import lazy
from .compiler import given_names
from .options import CompileOptions, Timeouts
from .outputs import UnitOutputs
from .ptxas import run_compiler
from .running import ToolMemo, run_tool, start_failure
from .toolkit import VERSION_TIMEOUT, Nvcc, Toolkit, find_tool, nvidia_roots, tool_candidates


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
    """The nvcc at `path`; its version and the archs it builds remembered in `memo` while its file is
    unchanged."""
    memo = memo or ToolMemo(None)
    version = memo.version(path, lambda: _nvcc_version(path))
    archs = memo.names("gpu-code", path, lambda: _nvcc_gpu_code(path))
    return Nvcc(path, version, origin, wheel_include_dirs(path, nvidia_roots()), tuple(archs))


def _nvcc_gpu_code(path: Path) -> list[str]:
    """The real archs `nvcc --list-gpu-code` prints (sm_75 ... sm_121); [] where it cannot say (an nvcc
    before 11.0 has no such option): its builds then say themselves what it refuses."""
    try:
        code, out = run_tool([str(path), "--list-gpu-code"], VERSION_TIMEOUT)
    except (subprocess.TimeoutExpired, OSError):
        return []
    names = re.findall(r"^(sm_\d+)\s*$", out, re.MULTILINE)
    return names if code == 0 else []


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
# Headers of NVIDIA's libraries and of MPI, and where they come from; any other header is the project's own.
_LIBRARY_HEADERS = {
    "cublas": "the nvidia-cublas wheel (pip install nvidia-cublas)",
    "cufft": "the nvidia-cufft wheel (pip install nvidia-cufft)",
    "curand": "the nvidia-curand wheel (pip install nvidia-curand)",
    "cusparse": "the nvidia-cusparse wheel (pip install nvidia-cusparse)",
    "cusolver": "the nvidia-cusolver wheel (pip install nvidia-cusolver)",
    "nccl": "the nvidia-nccl-cu13 wheel (pip install nvidia-nccl-cu13)",
    "cudnn": "the nvidia-cudnn-cu13 wheel (pip install nvidia-cudnn-cu13)",
    "mpi": "an MPI install (apt-get install libopenmpi-dev)",
}
_MISSING_HEADER = lazy(r'fatal error: ([\w./+-]+): No such file|cannot open source file "([^"]+)"')


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
    name = Path(header).name
    library = next((w for prefix, w in _LIBRARY_HEADERS.items() if name.startswith(prefix)), None)
    if library is not None:
        return (
            f"\n{header} is not on nvcc's include path: it comes with {library}; add the directory that "
            "holds it to include_dirs"
        )
    return (
        f"\n{header} is not on nvcc's include path: add the directory that holds it to include_dirs (in a "
        "table of its own for one file), or leave the file out with exclude"
    )


# The environment variables nvcc documents as changing a build (flags before and after the command line's,
# the host compiler), and those the host compiler's preprocessor reads for include directories.
ENVIRONMENT = (
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN",
    "CPATH",
    "CPLUS_INCLUDE_PATH",
    "C_INCLUDE_PATH",
)


def environment() -> list[list[str]]:
    """The variables of ENVIRONMENT that are set, with their values: part of an nvcc build's cache key."""
    return [[name, os.environ[name]] for name in ENVIRONMENT if name in os.environ]


def env_flags() -> tuple[list[str], list[str]]:
    """The flags NVCC_PREPEND_FLAGS and NVCC_APPEND_FLAGS put before and after every nvcc command's own
    (their -I directories are searched for headers too)."""
    split: list[list[str]] = []
    for name in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"):
        try:
            split.append(shlex.split(os.environ.get(name, "")))
        except ValueError:  # unbalanced quotes: nvcc fails on them itself
            split.append([])
    return split[0], split[1]


def host_compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++") or shutil.which("clang++") or shutil.which("cl")


def build_nvcc_unit(
    source: Path,
    arch: str,
    options: CompileOptions,
    nvcc: Nvcc,
    timeout: float = DEFAULT_NVCC_TIMEOUT,
    depfile: Path | None = None,
    label: str = "",
    base: Path | None = None,
) -> UnitOutputs:
    """`nvcc -cubin -arch=sm_XX -Xptxas -v` over a whole translation unit, host code and all: one cubin,
    and one ptxas report, with every kernel the file instantiates. `label` names it in errors.

    nvcc needs a host C++ compiler even for -cubin (it splits host from device code). `options` are nvcc's
    own flags here. The PTX is kept (-keep) for the launch-bounds directives. With `depfile`, nvcc also
    writes there (-MD -MF) every file it opened, for the cache. `base`: the rootdir, when it is the working
    directory, to name the source and include dirs relative to it (`given_names`): the PTX, line info,
    messages and dependency list then name no checkout path.
    """
    if host_compiler() is None:
        raise CompileError(
            f'compiler="nvcc" needs a host C++ compiler for {source} (nvcc splits host from device code); '
            "none of g++, c++, clang++ is on PATH. Fix: install one (apt-get install g++)."
        )
    label = label or f"{source.name} [{arch}]"
    refusal = nvcc.targets().refusal(arch)
    if refusal is not None:
        # Not Rejected: no verdict on the source, so nothing is cached or recorded as a broken build.
        raise CompileError(f"{label}: {refusal}")
    name, options = given_names(source, options, base)
    with tempfile.TemporaryDirectory(prefix="regbudget-nvcc-") as tmp:
        cubin_path = Path(tmp) / "kernel.cubin"
        cmd = [
            str(nvcc.path),
            "-cubin",
            "-Xptxas",
            "-v",
            "-keep",
            f"-keep-dir={tmp}",
            *options.flags("nvcc", arch, Path(name).parent, nvcc.include_dirs),
            *(["-MD", "-MF", str(depfile)] if depfile is not None else []),
            name,
            "-o",
            str(cubin_path),
        ]
        returncode, log = run_compiler(cmd, timeout, f"nvcc {nvcc.version} on {label}", Timeouts.INI["nvcc"])
        if returncode != 0:
            raise Rejected(
                f"nvcc {nvcc.version} could not compile {name} for {arch}:\n{log.strip()}"
                + missing_header_hint(log),
                log,
            )
        ptx = "\n".join(p.read_text() for p in sorted(Path(tmp).glob("*.ptx")))
        cubin = cubin_path.read_bytes()

    ptxas = nvcc.path.parent / "ptxas"

    def one_entry(entry: str) -> str:
        # As for NVRTC's modules: nvcc's own ptxas over the kept PTX with -e compiles that entry alone, and a
        # module-level message (C7508 names no function) it prints again is that entry's.
        with tempfile.TemporaryDirectory(prefix="regbudget-nvcc-") as tmp:
            ptx_path = Path(tmp) / "unit.ptx"
            ptx_path.write_text(ptx, encoding="utf-8")
            cmd = [
                str(ptxas),
                f"-arch={arch}",
                *options.ptxas_options,
                "-e",
                entry,
                str(ptx_path),
                "-o",
                str(Path(tmp) / "entry.cubin"),
            ]
            return run_compiler(cmd, timeout, f"ptxas {nvcc.version} -e on {label}", Timeouts.INI["nvcc"])[1]

    # Without a ptxas beside nvcc (a wrapper elsewhere), the message goes to each kernel it can be about.
    return UnitOutputs.of(ptx, "", log, cubin, one_entry=one_entry if ptxas.is_file() else None)
