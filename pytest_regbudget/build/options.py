"""How a kernel is compiled: `CompileOptions` (defines, include directories, compiler and ptxas options, line
info), turned into flags in one place (`flags`), with the variant its defines name and the identity that keys
the cache and the baseline's options_hash.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Literal

from msgspec import Struct
from msgspec.structs import fields, replace

from ..core.arch import compute_arch
from ..core.facts import Deferred

DEFAULT_PTXAS_TIMEOUT = 300.0
# The two compilers a CUDA source is built with: NVRTC (the kernel alone) or nvcc (the translation unit).
Backend = Literal["nvrtc", "nvcc"]
Body = Deferred[tuple[str, bytes]]  # a build's PTX and cubin, read from a cache entry when first needed


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
            if f.name in self._PATHS:
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
