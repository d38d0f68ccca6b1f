"""Find NVRTC and ptxas as one matched CUDA toolkit, and the headers nvcc would put on the include path.

Owns the search order (explicit home, pip wheels, CUDA_HOME/CUDA_PATH, PATH, or the toolkit
--regbudget-toolkit names), the versions of what was found, the records of what was found (`Toolkit`, and
`Nvcc`, an nvcc with its toolkit), and the error that lists everything searched. Versions come from file
names and package metadata; the archs NVRTC builds come from NVRTC (`nvrtcGetSupportedArchs`), and those
its ptxas assembles from `ptxas --help`, asked once when a toolkit is discovered afresh and remembered with
it (`ToolMemo`), so that `pytest --help` loads no NVRTC and a warm run neither loads it nor starts a
process. What a compiler builds is targets.py's; how a
tool is run, running.py's.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

from ..core.errors import ToolchainError, Unbuildable
from ..core.facts import Provenance, release_of
from .running import ToolMemo, run_tool, start_failure
from .targets import NVCC_OPTION, TOOLKIT_OPTION, Targets, assembled_by, gpu_names, with_variants

PIP_FIX = (
    'pip install "nvidia-cuda-nvcc-cu12" "nvidia-cuda-nvrtc-cu12" "nvidia-cuda-runtime-cu12" '
    '"nvidia-cuda-cccl-cu12"   (or reinstall pytest-regbudget, which depends on them)'
)
_EXE = ".exe" if sys.platform == "win32" else ""


class Toolkit(Struct, frozen=True):
    origin: str  # where it was found, for the report header: "pip wheels (nvidia-cuda-nvcc-cu12 12.9.86)"
    ptxas: Path
    # The NVRTC shared library; None for a toolkit named for its nvcc alone (--regbudget-toolkit=system on a
    # CUDA install without NVRTC): it builds compiler="nvcc" kernels, and NVRTC kernels are skipped under it.
    nvrtc: Path | None
    nvrtc_version: str  # "12.9" or "12.9.86"; only major.minor is guaranteed; "" without NVRTC
    ptxas_version: str  # "12.9.86"
    include_dirs: tuple[Path, ...] = ()  # the toolkit's own headers, as nvcc adds them
    nvdisasm: Path | None = None
    # The real archs its NVRTC builds ("sm_75", ..., "sm_121"), as nvrtcGetSupportedArchs lists them; () where
    # it was not asked (no NVRTC: its nvcc's list counts) or could not say (a library that does not load).
    archs: tuple[str, ...] = ()
    # What its ptxas takes for --gpu-name (`ptxas --help`): real archs and their a/f variants; () where it
    # could not say. NVRTC's PTX of an arch this ptxas lacks cannot be assembled.
    ptxas_archs: tuple[str, ...] = ()

    @property
    def release(self) -> str:
        """major.minor of the toolkit, e.g. "12.9"."""
        return ".".join(self.ptxas_version.split(".")[:2])

    def targets(self, name: str | None = None) -> Targets:
        """What its NVRTC builds, named as a message names it: `NVRTC 12.9.86 (pip wheels (...))`, or with
        the --regbudget-toolkit `name` it was asked for by, `toolkit cu13 (CUDA 13.5: NVRTC 13.5.37, ...)`."""
        tool = f"NVRTC {self.nvrtc_version}" if self.nvrtc is not None else f"ptxas {self.ptxas_version}"
        who = (
            f"{tool} ({self.origin})"
            if name is None
            else f"toolkit {name} (CUDA {self.release}: {tool}, from {self.origin})"
        )
        return assembled_by(
            Targets(who, self.release, with_variants(self.archs), TOOLKIT_OPTION),
            f"ptxas {self.ptxas_version} ({self.ptxas})",
            self.ptxas_archs,
        )

    def describe(self) -> str:
        if self.nvrtc is None:
            return f"{self.origin}: no NVRTC (nvcc kernels only), ptxas {self.ptxas_version}"
        return f"{self.origin}: NVRTC {self.nvrtc_version}, ptxas {self.ptxas_version}"

    def require_nvrtc(self) -> Path:
        """The NVRTC library; Unbuildable (the item is skipped, with why) for a toolkit without one."""
        if self.nvrtc is None:
            raise Unbuildable(
                f'toolkit {self.origin} has no NVRTC: it builds only compiler="nvcc" kernels, with its '
                f'nvcc. Fix: build this kernel with compiler="nvcc", or compare NVRTC kernels with a '
                "toolkit that has NVRTC (cu12, cu13)"
            )
        return self.nvrtc


@functools.lru_cache(maxsize=8)
def nvrtc_archs(library: Path) -> tuple[str, ...]:
    """The real archs the NVRTC library builds (nvrtcGetSupportedArchs), e.g. ("sm_75", ..., "sm_121"); ()
    where it cannot say: an NVRTC before 11.2, or a library that does not load (check_nvrtc and the first
    compile say why). Loads the library: discovery asks this once per toolkit, and the answer is
    remembered with the toolkit."""
    # NVRTC's binding for this one question, imported here: only discovery afresh asks.
    import ctypes

    try:
        lib = ctypes.CDLL(str(library))
    except OSError:
        return ()
    if not hasattr(lib, "nvrtcGetNumSupportedArchs"):
        return ()
    count = ctypes.c_int()
    if lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)) != 0:
        return ()
    numbers = (ctypes.c_int * count.value)()
    if lib.nvrtcGetSupportedArchs(numbers) != 0:
        return ()
    return tuple(f"sm_{n}" for n in numbers)


class _Search:
    """The trail of places looked at, so the final error can list them."""

    def __init__(self) -> None:
        self.tried: list[str] = []

    def note(self, where: str, why: str) -> None:
        self.tried.append(f"{where}: {why}")


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


# `ptxas --version` answers at once; a tool that does not answer within this is broken, not busy.
VERSION_TIMEOUT = 60.0


@functools.lru_cache(maxsize=32)
def ptxas_version(ptxas: Path, timeout: float | None = None) -> str:
    """Ask ptxas itself; cached because discovery may run once per test process."""
    limit = VERSION_TIMEOUT if timeout is None else timeout
    try:
        _, out = run_tool([str(ptxas), "--version"], limit)
    except subprocess.TimeoutExpired:
        raise ToolchainError(
            f"{ptxas} --version did not answer within {limit:g} s (killed); this ptxas is broken or hangs. "
            "Fix: reinstall the toolkit, or point --regbudget-cuda-home / REGBUDGET_CUDA_HOME at another one"
        ) from None
    except OSError as exc:
        raise ToolchainError(f"cannot run {ptxas}: {start_failure(exc, ptxas)}") from None
    match = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    if not match:
        raise ToolchainError(f"cannot read the version of {ptxas}: `ptxas --version` printed {out!r}")
    return match.group(1)


@functools.lru_cache(maxsize=32)
def ptxas_archs(ptxas: Path) -> tuple[str, ...]:
    """What ptxas takes for --gpu-name, from `ptxas --help`; () where it cannot say (its build then does)."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        return gpu_names(run_tool([str(ptxas), "--help"], VERSION_TIMEOUT)[1])
    return ()


def _nvrtc_libs(directory: Path) -> Iterator[Path]:
    # The unversioned libnvrtc.so is a dev symlink that runtime-only installs lack; prefer the SONAME file.
    if sys.platform == "win32":
        yield from sorted(directory.glob("nvrtc64_*.dll"))
        return
    yield from sorted(p for p in directory.glob("libnvrtc.so.*") if "alt" not in p.name)
    yield from (p for p in [directory / "libnvrtc.so"] if p.exists())


def _nvrtc_version_near(lib: Path) -> str | None:
    """NVRTC's version without loading it: the builtins library beside it carries major.minor."""
    names = [lib.resolve().name, *(p.name for p in lib.parent.glob("libnvrtc-builtins.so.*"))]
    for name in names:
        match = re.search(r"\.so\.(\d+\.\d+(?:\.\d+)?)$", name)
        if match:
            return match.group(1)
    return None


def _toolkit_from_dirs(
    origin: str,
    bin_dirs: Iterable[Path],
    lib_dirs: Iterable[Path],
    include_dirs: Iterable[Path],
    search: _Search,
    nvrtc_version: str | None = None,
    nvcc_only: bool = False,
) -> Toolkit | None:
    """The toolkit of these directories. With `nvcc_only`, one without NVRTC is taken where nvcc is beside
    its ptxas (a toolkit named for its nvcc kernels)."""
    bin_dirs, lib_dirs = list(bin_dirs), list(lib_dirs)
    ptxas = next((d / f"ptxas{_EXE}" for d in bin_dirs if (d / f"ptxas{_EXE}").is_file()), None)
    nvrtc = next((lib for d in lib_dirs if d.is_dir() for lib in _nvrtc_libs(d)), None)
    nvdisasm = next((d / f"nvdisasm{_EXE}" for d in bin_dirs if (d / f"nvdisasm{_EXE}").is_file()), None)
    nvcc_alone = nvcc_only and ptxas is not None and (ptxas.parent / f"nvcc{_EXE}").is_file()
    if ptxas is None or (nvrtc is None and not nvcc_alone):
        missing = " and ".join(
            what for what, found in (("ptxas", ptxas), ("libnvrtc", nvrtc)) if found is None
        )
        where = ", ".join(str(d) for d in [*bin_dirs, *lib_dirs]) or "(nothing)"
        search.note(origin, f"no {missing} in {where}")
        return None
    ptxas_ver = ptxas_version(ptxas)
    if nvrtc is None:
        search.note(origin, f"no libnvrtc in {', '.join(map(str, lib_dirs))}: nvcc kernels only")
        nvrtc_ver = ""
    else:
        nvrtc_ver = nvrtc_version or _nvrtc_version_near(nvrtc) or ptxas_ver
        if _major_minor(nvrtc_ver) != _major_minor(ptxas_ver):
            # ptxas rejects PTX from a newer NVRTC, and an older NVRTC hides the compiler change under test.
            raise ToolchainError(
                f"{origin}: NVRTC {nvrtc_ver} ({nvrtc}) and ptxas {ptxas_ver} ({ptxas}) come from different "
                "CUDA toolkits; install matching versions, e.g. "
                f'pip install "nvidia-cuda-nvcc-cu12=={ptxas_ver}" "nvidia-cuda-nvrtc-cu12=={ptxas_ver}"'
            )
    return Toolkit(
        origin=origin,
        ptxas=ptxas,
        nvrtc=nvrtc,
        nvrtc_version=nvrtc_ver,
        ptxas_version=ptxas_ver,
        include_dirs=tuple(d for d in include_dirs if d.is_dir()),
        nvdisasm=nvdisasm,
        archs=() if nvrtc is None else nvrtc_archs(nvrtc),
        ptxas_archs=ptxas_archs(ptxas),
    )


def _home_include_dirs(home: Path) -> list[Path]:
    # CUDA 13 moved CCCL (cub, thrust, libcu++, <nv/target>) to include/cccl.
    incs = [home / "include", *sorted(home.glob("targets/*/include"))]
    return [*incs, *(i / "cccl" for i in incs)]


def toolkit_from_home(
    home: Path, origin: str, search: _Search | None = None, *, nvcc_only: bool = False
) -> Toolkit | None:
    """A CUDA install tree (/usr/local/cuda) or a wheel root (site-packages/nvidia/cu13); with `nvcc_only`,
    also one with nvcc and ptxas but no NVRTC."""
    search = search or _Search()
    if not home.is_dir():
        search.note(origin, f"{home} is not a directory")
        return None
    lib_dirs = [home / "lib64", home / "lib", *sorted(home.glob("targets/*/lib"))]
    return _toolkit_from_dirs(
        origin,
        [home / "bin"],
        lib_dirs,
        _home_include_dirs(home),
        search,
        nvrtc_version=None,
        nvcc_only=nvcc_only,
    )


def nvidia_roots() -> list[Path]:
    """Every directory of the `nvidia` namespace package (wheels may be spread over several site dirs)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class _Wheels(Struct, frozen=True):
    """One CUDA release's pip wheels: their distribution names, and where their parts lie under each
    directory of the `nvidia` namespace package."""

    release: str
    nvcc: str  # the distribution that carries ptxas
    nvrtc: str
    bin_dirs: tuple[str, ...]
    lib_dirs: tuple[str, ...]
    include_dirs: tuple[str, ...]


# CUDA 12 wheels first: they are what pytest-regbudget depends on, so they are what the user chose.
_WHEELS = (
    _Wheels(
        "CUDA 12",
        nvcc="nvidia-cuda-nvcc-cu12",
        nvrtc="nvidia-cuda-nvrtc-cu12",
        bin_dirs=("cuda_nvcc/bin", "cuda_nvdisasm/bin"),
        lib_dirs=("cuda_nvrtc/lib",),
        include_dirs=("cuda_runtime/include", "cuda_cccl/include"),
    ),
    # CUDA 13 wheels share one tree, nvidia/cu13.
    _Wheels(
        "CUDA 13",
        nvcc="nvidia-cuda-nvcc",
        nvrtc="nvidia-cuda-nvrtc",
        bin_dirs=("cu13/bin",),
        lib_dirs=("cu13/lib",),
        include_dirs=("cu13/include", "cu13/include/cccl"),
    ),
)


def _from_wheels(search: _Search, only: Sequence[_Wheels] = _WHEELS) -> Toolkit | None:
    roots = nvidia_roots()
    if not roots:
        search.note("pip wheels", "no `nvidia` package in this Python environment")
        return None
    for wheels in only:
        version = _dist_version(wheels.nvcc)
        if not version:
            search.note(f"pip wheels ({wheels.release})", f"{wheels.nvcc} is not installed")
            continue
        found = _toolkit_from_dirs(
            f"pip wheels ({wheels.nvcc} {version})",
            [r / d for d in wheels.bin_dirs for r in roots],
            [r / d for d in wheels.lib_dirs for r in roots],
            [r / d for d in wheels.include_dirs for r in roots],
            search,
            nvrtc_version=_dist_version(wheels.nvrtc),
        )
        if found:
            return found
    return None


def tool_candidates(name: str, toolkit: Toolkit | None, wheel: str) -> list[Path]:
    """Where a companion tool (nvcc, nvdisasm, cuobjdump) may be, in order: beside the toolkit's ptxas, in
    the CUDA 13 wheels (nvidia/cu13/bin), in the CUDA 12 wheel `nvidia/<wheel>/bin`."""
    exe = f"{name}{_EXE}"
    found = [toolkit.ptxas.parent / exe] if toolkit is not None else []
    for root in nvidia_roots():
        found += [root / "cu13" / "bin" / exe, root / wheel / "bin" / exe]
    return found


def find_tool(name: str, toolkit: Toolkit | None, wheel: str) -> Path | None:
    """The first of tool_candidates that exists, else `name` on PATH."""
    existing = next((p for p in tool_candidates(name, toolkit, wheel) if p.is_file()), None)
    on_path = shutil.which(name)
    return existing or (Path(on_path) if on_path else None)


# --regbudget-toolkit's names: the CUDA 12 wheels, the CUDA 13 wheels, the system's toolkit (CUDA_HOME,
# CUDA_PATH, PATH); anything else is a path to a toolkit's home.
TOOLKIT_NAMES = ("cu12", "cu13", "system")
_NAMED_FIX = {
    "cu12": 'pip install "nvidia-cuda-nvrtc-cu12==12.9.*" "nvidia-cuda-nvcc-cu12==12.9.*"',
    "cu13": 'pip install "pytest-regbudget[cu13]" (CUDA 13 wheels: nvidia-cuda-nvrtc, nvidia-cuda-nvcc)',
    "system": "set CUDA_HOME to a CUDA toolkit (the directory holding bin/ptxas), or put its ptxas on PATH",
}


def _discover_named(name: str, env: Mapping[str, str]) -> Toolkit:
    """The toolkit --regbudget-toolkit names; ToolchainError saying what is missing and how to get it."""
    search = _Search()
    if name in ("cu12", "cu13"):
        found = _from_wheels(search, [_WHEELS[0 if name == "cu12" else 1]])
    elif name == "system":
        # A named toolkit is asked for by name: one that has nvcc but no NVRTC still builds nvcc kernels.
        found = _from_system(env, search, nvcc_only=True)
    else:
        found = toolkit_from_home(Path(name), name, search, nvcc_only=True)
    if found is not None:
        return found
    tried = "\n".join(f"  - {t}" for t in search.tried)
    fix = _NAMED_FIX.get(name, "point it at a CUDA toolkit's home (the directory of bin/ptxas and lib64)")
    raise ToolchainError(
        f"toolkit {name!r} has neither NVRTC and ptxas nor nvcc and ptxas:\n{tried}\nFix: {fix}"
    )


def _from_system(env: Mapping[str, str], search: _Search, *, nvcc_only: bool = False) -> Toolkit | None:
    """CUDA_HOME, CUDA_PATH, then the toolkit of the ptxas on PATH."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(var)
        if value:
            found = toolkit_from_home(Path(value), f"{var}={value}", search, nvcc_only=nvcc_only)
            if found:
                return found
        else:
            search.note(var, "not set")
    ptxas_on_path = shutil.which("ptxas", path=env.get("PATH", ""))
    if ptxas_on_path:
        # /usr/bin/ptxas may be a link into the toolkit: try the directory it is in, then its target's.
        homes = dict.fromkeys(
            [Path(ptxas_on_path).parent.parent, Path(ptxas_on_path).resolve().parent.parent]
        )
        for home in homes:
            found = toolkit_from_home(home, f"PATH ({ptxas_on_path})", search, nvcc_only=nvcc_only)
            if found:
                return found
    else:
        search.note("PATH", "no ptxas on PATH")
    return None


def _discover(cuda_home: str | None, env: Mapping[str, str]) -> Toolkit:
    search = _Search()
    explicit = [("--regbudget-cuda-home", cuda_home), ("REGBUDGET_CUDA_HOME", env.get("REGBUDGET_CUDA_HOME"))]
    for origin, value in explicit:
        if value:
            # An explicit choice that does not work is an error, not a reason to quietly use another toolkit.
            found = toolkit_from_home(Path(value), f"{origin}={value}", search)
            if found is None:
                raise ToolchainError(_not_found_message(search))
            return found
    found = _from_wheels(search) or _from_system(env, search)
    if found:
        return found
    raise ToolchainError(_not_found_message(search))


def _not_found_message(search: _Search) -> str:
    lines = "\n".join(f"  - {t}" for t in search.tried)
    return (
        "pytest-regbudget found no CUDA toolkit with both NVRTC and ptxas. Searched, in order:\n"
        f"{lines}\nFix: {PIP_FIX}\n"
        "or point --regbudget-cuda-home / REGBUDGET_CUDA_HOME at a CUDA toolkit "
        "(the directory holding bin/ptxas)."
    )


def discover(
    cuda_home: str | None = None,
    env: Mapping[str, str] | None = None,
    memo: ToolMemo | None = None,
    named: str | None = None,
) -> Toolkit:
    """The matched toolkit for this run (or the one --regbudget-toolkit `named`, see TOOLKIT_NAMES);
    cached per (explicit home, name, relevant environment), and in `memo` (kept in the compile cache) while
    nothing discovery looked at has changed, so that a warm run starts no `ptxas --version`."""
    env = os.environ if env is None else env
    keys = ("REGBUDGET_CUDA_HOME", "CUDA_HOME", "CUDA_PATH", "PATH")
    env_items = tuple((k, env.get(k, "")) for k in keys)
    if memo is None:
        return _discover_cached(cuda_home, env_items, named)
    key = json.dumps(["toolkit", cuda_home, env_items, sys.prefix] + ([named] if named else []))
    known = memo.get(key)
    if known is not None:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            remembered = _toolkit_from_json(known)
            if _where_discovery_looks(remembered, cuda_home, dict(env_items), named):
                return remembered
    found = _discover_cached(cuda_home, env_items, named)
    memo.put(key, _toolkit_to_json(found), _discovery_inputs(found, cuda_home, dict(env_items)))
    return found


def _toolkit_to_json(tk: Toolkit) -> dict[str, object]:
    doc: dict[str, object] = msgspec.to_builtins(tk, enc_hook=str)
    return doc


def _toolkit_from_json(doc: Mapping[str, Any]) -> Toolkit:
    # Every field is required here, so that a record of an older version is discovered again.
    missing = set(Toolkit.__struct_fields__) - set(doc)
    if missing:
        raise KeyError(sorted(missing))
    return msgspec.convert(doc, Toolkit, dec_hook=lambda kind, obj: Path(obj) if kind is Path else obj)


def _where_discovery_looks(
    tk: Toolkit, cuda_home: str | None, env: Mapping[str, str], named: str | None
) -> bool:
    """Whether every tool, library and header folder `tk` names is one discovery could have found: of its
    name (ptxas, nvdisasm, libnvrtc), below a home it searches (the homes named, the `nvidia` wheels, the
    toolkit of the ptxas on PATH). The memo lives in the compile cache, and whoever can write there must not
    make a run start a program or load a library of theirs: a record that names one is discovered again."""
    homes = [cuda_home, named, *(env.get(k) for k in ("REGBUDGET_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"))]
    roots = [Path(h) for h in homes if h] + nvidia_roots()
    on_path = shutil.which(f"ptxas{_EXE}", path=env.get("PATH", ""))
    if on_path:
        roots += [Path(on_path).parent.parent, Path(on_path).resolve().parent.parent]
    real_roots = [Path(os.path.realpath(r)) for r in roots]

    def found_there(path: Path) -> bool:
        real = Path(os.path.realpath(path))
        return any(real == r or r in real.parents for r in real_roots)

    named_right = (
        tk.ptxas.name == f"ptxas{_EXE}"
        and (tk.nvdisasm is None or tk.nvdisasm.name == f"nvdisasm{_EXE}")
        and (tk.nvrtc is None or tk.nvrtc in _nvrtc_libs(tk.nvrtc.parent))
    )
    places = [tk.ptxas, *(p for p in (tk.nvrtc, tk.nvdisasm) if p is not None), *tk.include_dirs]
    return named_right and all(found_there(p) for p in places)


def _discovery_inputs(tk: Toolkit, cuda_home: str | None, env: Mapping[str, str]) -> list[Path]:
    """What discovery's answer depends on: the tools found, and every directory whose entries decide what
    is found (site-packages and the `nvidia` wheels in it, the homes named, PATH). A directory's stat
    changes when an entry is added or removed there: a wheel installed, upgraded or removed."""
    files = [tk.ptxas, *(f for f in (tk.nvrtc, tk.nvdisasm) if f is not None)]
    site = [Path(p) for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    dirs = [f.parent for f in files] + [*nvidia_roots(), *site]
    for root in nvidia_roots():
        dirs += [root / sub for wheels in _WHEELS for sub in {d.split("/")[0] for d in wheels.bin_dirs}]
    homes = [cuda_home, env.get("REGBUDGET_CUDA_HOME"), env.get("CUDA_HOME"), env.get("CUDA_PATH")]
    for home in filter(None, homes):
        dirs += [Path(home), *(Path(home) / sub for sub in ("bin", "lib", "lib64", "include", "targets"))]
    dirs += [Path(d) for d in env.get("PATH", "").split(os.pathsep) if d]
    return list(dict.fromkeys([*files, *dirs]))


@functools.lru_cache(maxsize=8)
def _discover_cached(
    cuda_home: str | None, env_items: tuple[tuple[str, str], ...], named: str | None = None
) -> Toolkit:
    env = {k: v for k, v in env_items if v}
    return _discover(cuda_home, env) if named is None else _discover_named(named, env)


class Nvcc(Struct, frozen=True):
    """An nvcc, with the toolkit it belongs to (its ptxas does the measuring)."""

    path: Path
    version: str
    origin: str
    # Headers of CUDA 13 wheels installed beside other site dirs than nvcc's own (whose nvcc.profile covers
    # them): CCCL, the profiler API, a library's (nvidia-cublas)
    include_dirs: tuple[Path, ...] = ()
    # The real archs it builds, as `nvcc --list-gpu-code` lists them; () where it could not say.
    archs: tuple[str, ...] = ()

    def describe(self) -> str:
        """`nvcc 13.5.37 (/path/bin/nvcc, from PATH)`: the header's, the summary's and the JSON's words."""
        return f"nvcc {self.version} ({self.path}, from {self.origin})"

    def targets(self) -> Targets:
        """What it builds, named as describe() names it."""
        return Targets(self.describe(), release_of(self.version), with_variants(self.archs), NVCC_OPTION)

    def provenance(self) -> Provenance:
        # The report and the baseline record the versions that built the kernel: nvcc's own.
        return Provenance(
            "nvcc",
            frontend=f"nvcc {self.version}",
            ptxas=self.version,
            origin=f"{self.origin} (nvcc {self.version})",
        )

    def identity(self, keyed: Callable[[Path], str] = str) -> list[object]:
        """What a cache key needs to know of this nvcc besides its tools' contents (its ptxas is the one
        beside it): its version and the wheels' header dirs it is given, named by `keyed` (the cache names
        them relative to their root, so that the same wheels in another venv are the same nvcc)."""
        return ["nvcc", self.version, *map(keyed, self.include_dirs)]

    def tools(self) -> list[Path]:
        """The files whose contents make an nvcc build: the driver, its profile (include and library paths)
        and the programs it runs for device code (a missing one is keyed as missing)."""
        bin_dir = self.path.parent
        return [
            self.path,
            bin_dir / "nvcc.profile",
            bin_dir / "cudafe++",
            bin_dir / "ptxas",
            bin_dir.parent / "nvvm" / "bin" / "cicc",
        ]


def not_a_library(path: Path) -> str:
    """Why `path` cannot be a shared library ("" when it may be one): read, not loaded, so that a damaged
    install is found at start-up without loading anything. ELF on Linux; elsewhere only that it exists."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if sys.platform.startswith("linux") and head != b"\x7fELF":
        return f"is not a shared library (it starts {head!r}, not an ELF header)"
    return ""


NVRTC_FIX = (
    "Fix: reinstall the NVRTC wheel (pip install --force-reinstall nvidia-cuda-nvrtc-cu12), or point "
    "--regbudget-cuda-home at a complete toolkit"
)


def check_nvrtc(library: Path) -> None:
    """ToolchainError when the NVRTC library is damaged (empty, truncated, not a library): once, at start-up.
    The file is read, not loaded: a fully cached run loads no NVRTC, and this is one read of 4 bytes."""
    damaged = not_a_library(library)
    if damaged:
        raise ToolchainError(f"the NVRTC library {library} {damaged}. {NVRTC_FIX}")
