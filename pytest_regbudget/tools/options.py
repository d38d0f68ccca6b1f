"""How a kernel is compiled: `CompileOptions` (defines, include directories, compiler and ptxas options, line
info), turned into flags in one place (`flags`), with the variant its defines name, the build settings a
baseline entry records, and the identity that keys the cache and the baseline's options_hash.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Literal

from msgspec import Struct
from msgspec.structs import fields, replace

from ..core.arch import compute_arch
from ..core.defaults import DEFAULT_CUOBJDUMP_TIMEOUT, DEFAULT_NVCC_TIMEOUT, DEFAULT_PTXAS_TIMEOUT
from ..core.facts import Deferred
from ..util.paths import portable_path

# The two compilers a CUDA source is built with: NVRTC (the kernel alone) or nvcc (the translation unit).
Backend = Literal["nvrtc", "nvcc"]
Body = Deferred[tuple[str, bytes]]  # a build's PTX and cubin, read from a cache entry when first needed


class Timeouts(Struct, frozen=True):
    """How long one compiler run may take before it is killed, with the ini key that raises it."""

    ptxas: float = DEFAULT_PTXAS_TIMEOUT  # ptxas over one PTX module (NVRTC's, Triton's, Numba's)
    nvcc: float = DEFAULT_NVCC_TIMEOUT  # nvcc over one translation unit
    cuobjdump: float = DEFAULT_CUOBJDUMP_TIMEOUT  # cuobjdump, per 100 MB of the file it reads

    INI: ClassVar[dict[str, str]] = {
        "ptxas": "regbudget_ptxas_timeout",
        "nvcc": "regbudget_nvcc_timeout",
        "cuobjdump": "regbudget_cuobjdump_timeout",
    }


class CompileOptions(Struct, frozen=True):
    """What the user controls. `None`/empty means the toolkit's default; flags are made in `flags`."""

    _PATHS: ClassVar[frozenset[str]] = frozenset({"include_dirs", "depends"})  # fields that hold paths

    defines: tuple[tuple[str, str | None], ...] = ()
    include_dirs: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    ptxas_options: tuple[str, ...] = ()
    # Files (or globs, or directories) the build reads that the cache cannot find by itself, such as a
    # header named through a macro: hashed into the cache key; the compilers never see them.
    depends: tuple[str, ...] = ()
    # Defines of the whole build (a manifest table's `defines`), as opposed to `defines`, which choose a
    # variant: recorded with the entry as a build setting, not in its key, so that a build-wide flag that
    # changes no code does not re-key every kernel. A variant's define of the same name wins.
    build_defines: tuple[tuple[str, str | None], ...] = ()

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

        Path fields become lists (as `portable_path` writes them when `relative_to` is given: relative to
        it, `{package}/rest` inside an installed package, for a hash that is the same on every checkout).
        """
        # The build's defines in one list, as the compilers see them (and as 0.1 keyed them): moving a define
        # between the variant and the build settings changes neither the cache key nor the options_hash.
        # Absolute paths in options (a torch build.ninja's words) as a baseline records them (portable_words).
        words = portable_words(self.options, relative_to) if relative_to is not None else self.options
        merged = replace(self, defines=self.all_defines(), build_defines=(), options=words)
        every = fields(self)
        values: list[object] = []
        for f in every:
            value = getattr(merged, f.name)
            if f.name in self._PATHS:
                value = [portable_path(v, relative_to) if relative_to else v for v in value]
            values.append(value)
        # Fields added after the first four (those of 0.1) count only when they are set, so that a new
        # field leaves the options_hash of existing baseline entries alone. Each value keeps its
        # position, so the values left still name exactly one set of options.
        last = len(every) - 1
        while last >= 4 and getattr(merged, every[last].name) == every[last].default:
            values.pop()
            last -= 1
        return tuple(values)

    def all_defines(self) -> tuple[tuple[str, str | None], ...]:
        """Every define of the build: the build-wide ones, then the variant's (a variant's value replacing a
        build-wide one of the same name, in its place)."""
        if not self.build_defines:
            return self.defines
        merged = dict(self.build_defines)
        merged.update(self.defines)
        return tuple(merged.items())

    def variant(self) -> str:
        """The variant's defines, as the baseline keys a kernel's variant: "NACC=8,TILE" ("-" for none),
        sorted, so that the order they are given in does not matter."""
        return _variant(self.defines)

    def keyed_before_settings(self) -> str | None:
        """The variant as versions before build settings keyed it (every define), when that differs from
        `variant()`: the key a baseline written by them holds this kernel under."""
        return _variant(self.all_defines()) if self.build_defines else None

    def settings(self, relative_to: Path | None = None) -> tuple[str, ...]:
        """The build settings a baseline entry records: every flag but the variant's defines, as a reader
        knows them ("-DGGML_CUDA_F16", "-Iggml/src", "--use_fast_math", "-Xptxas=-O3"); include dirs
        relative to `relative_to`, `{torch}/include` inside an installed package, else absolute (never
        `..`), so that they read alike on every checkout and in every venv."""
        variant = {name for name, _ in self.defines}
        dirs = [portable_path(d, relative_to) if relative_to else d for d in self.include_dirs]
        return (
            *(define_flag(k, v) for k, v in self.build_defines if k not in variant),
            *(f"-I{d}" for d in dirs),
            *(portable_words(self.options, relative_to) if relative_to else self.options),
            *(f"-Xptxas={o}" for o in self.ptxas_options),
        )

    def with_line_info(self) -> CompileOptions:
        """The same build with -lineinfo (NVRTC and nvcc both take it), for mapping SASS back to source.
        Every build of a file is made so, whether its SASS is read or not: -lineinfo changes no number
        ptxas reports (tests/integration/test_line_info.py, on every kernel of the repository), and one
        build then serves a file's listing, its plain kernels and its SASS-read ones."""
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
        defines = [define_flag(k, v) for k, v in self.all_defines()]
        dirs = [*self.include_dirs, str(source_dir), *(str(d) for d in toolkit_include_dirs)]
        if backend == "nvrtc":
            includes = [f"--include-path={d}" for d in dirs]
            return [f"--gpu-architecture={compute_arch(arch)}", *defines, *includes, *self.options]
        ptxas = [f"-Xptxas={o}" for o in self.ptxas_options]
        return [f"-arch={arch}", *defines, *(f"-I{d}" for d in dirs), *self.options, *ptxas]


# Flags that may hold a path glued to them ("-I/x"); in "-isystem /x", the second word is a path itself.
_PATH_FLAGS = ("-isystem", "-idirafter", "-iquote", "-include", "-I", "-L")


def portable_words(words: Sequence[str], rootdir: Path) -> tuple[str, ...]:
    """Compiler words as a baseline records them and hashes them: each absolute path in them (a word, a
    flag's glued value, or the value after "=") as `portable_path` writes it (relative under the rootdir,
    `{torch}/include` inside an installed package), so that the flags a build wrote on one checkout and venv
    (a torch build.ninja's) read alike on every other. Relative paths and other words are left as they are."""
    out = []
    for word in words:
        name, eq, value = word.partition("=")
        glued = next((f for f in _PATH_FLAGS if word.startswith(f) and _absolute(word[len(f) :])), None)
        if _absolute(word):
            word = _portable(word, rootdir)
        elif glued is not None:
            word = glued + _portable(word[len(glued) :], rootdir)
        elif eq and _absolute(value):
            word = f"{name}={_portable(value, rootdir)}"
        out.append(word)
    return tuple(out)


def _absolute(text: str) -> bool:
    return Path(text).is_absolute()


def _portable(path: str, rootdir: Path) -> str:
    """`portable_path`, and the interpreter's own header dirs, which torch adds to every extension's flags
    (`sysconfig`'s include; `sys.prefix/include`, a venv's), named as such: they differ by venv and by Python
    install, and are only recorded, never read back."""
    found = portable_path(path, rootdir)
    if not _absolute(found):
        return found
    for name, directory in (*_python_include_dirs(), *_cuda_homes()):
        if found == directory or found.startswith(directory + "/"):
            return name + found[len(directory) :]
    return found


@functools.lru_cache(maxsize=1)
def _python_include_dirs() -> tuple[tuple[str, str], ...]:
    """How each of the interpreter's header dirs is recorded, and where it is here (most specific first)."""
    # sysconfig (1 ms to import) only for a torch extension's flags, which a warm run does not record.
    import sysconfig

    paths = sysconfig.get_paths()
    return (
        ("{python-include}", Path(paths["include"]).as_posix()),
        ("{python-platinclude}", Path(paths["platinclude"]).as_posix()),
        ("{sys.prefix}/include", (Path(sys.prefix) / "include").as_posix()),
    )


@functools.lru_cache(maxsize=1)
def _cuda_homes() -> tuple[tuple[str, str], ...]:
    """Where torch looks for CUDA, whose headers it puts in every extension's flags: $CUDA_HOME, $CUDA_PATH,
    else /usr/local/cuda (torch.utils.cpp_extension._find_cuda_home). Recorded as `{cuda-home}`, so that two
    machines with CUDA in different places record the same settings. A toolkit from the wheels is found
    inside its installed package first (`{nvidia}/...`)."""
    homes = (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")
    found: list[tuple[str, str]] = []
    for home in homes:
        for form in (home, os.path.realpath(home) if home else None):
            if form and ("{cuda-home}", Path(form).as_posix()) not in found:
                found.append(("{cuda-home}", Path(form).as_posix()))
    return tuple(found)


def define_flag(name: str, value: str | None) -> str:
    return f"-D{name}" if value is None else f"-D{name}={value}"


def _variant(defines: Sequence[tuple[str, str | None]]) -> str:
    return ",".join(k if v is None else f"{k}={v}" for k, v in sorted(defines, key=str)) or "-"
