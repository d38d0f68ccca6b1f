"""A manifest table's PyTorch extension keys: `build_ninja` (globs of the build.ninja files torch's
BuildExtension or `cpp_extension.load(build_directory=...)` wrote) and `torch_extension` (a setup.py the
plugin runs, stopped where torch has written them), with its `extensions` and `setup_env`.

Owns checking those keys and turning them into the table's database: for each CUDA file under the rootdir,
the nvcc words its edge holds (project/ninja.py reads them; tools/torch_build.py runs setup.py). Such a table
is built by nvcc, the run's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core.dirs import usable_cache_dir
from ..core.errors import ManifestError
from ..tools import torch_build
from ..tools.toolkit import find_tool
from ..util.files import one_globstar
from . import ninja
from .compile_commands import CompileEntry

SOURCES = ("build_ninja", "torch_extension")
KEYS = (*SOURCES, "extensions", "setup_env")

Error = Callable[[str], ManifestError]
Contained = Callable[[str, Path, Error], str]


def compiler(raw: Mapping[str, Any], error: Callable[[str, str], ManifestError]) -> str:
    """The table's compiler: nvcc (torch's commands are nvcc's), whether given or not."""
    given = raw.get("compiler", "nvcc")
    if given != "nvcc":
        key = "build_ninja" if "build_ninja" in raw else "torch_extension"
        raise error("compiler", f"{given!r}: a PyTorch extension's {key} holds nvcc commands: drop compiler")
    return "nvcc"


def database(
    raw: Mapping[str, Any],
    rootdir: Path,
    label: str,
    error: Callable[[str, str], ManifestError],
    contained: Contained,
    *,
    cache: bool = True,
) -> dict[Path, tuple[CompileEntry, ...]]:
    """The table's CUDA files and each one's nvcc words, from `build_ninja` or `torch_extension`.
    `contained` is the manifest's rule for its paths (kernel_tables.contained); `cache`: whether setup.py's
    capture may be read from and kept in the compile cache (not under --regbudget-no-cache)."""
    key = "build_ninja" if "build_ninja" in raw else "torch_extension"
    for other in ("extensions", "setup_env"):
        if other in raw and key != "torch_extension":
            raise error(other, "goes with torch_extension (it chooses how setup.py runs)")
    found: dict[Path, list[CompileEntry]] = {}
    if key == "build_ninja":
        for path in _ninja_files(raw[key], rootdir, lambda m: error(key, m), contained):
            _merge(found, ninja.load(path, rootdir))
    else:
        setup_py = _setup_py(raw[key], rootdir, lambda m: error(key, m), contained)
        extensions = _names(raw.get("extensions"), lambda m: error("extensions", m))
        env = _env(raw.get("setup_env"), lambda m: error("setup_env", m))
        nvcc = find_tool("nvcc", None, "cuda_nvcc")
        cache_dir = usable_cache_dir()[0] if cache else None
        captured = torch_build.capture(
            setup_py, extensions, env, cache_dir, None if nvcc is None else nvcc.parent.parent, label
        )
        for file in captured.files:
            where = f"the build.ninja of {file.name} (from {raw[key]})"
            _merge(found, ninja.load_text(file.text, where, Path(file.directory), rootdir))
    if not found:
        raise error(key, f"{raw[key]!r} builds no CUDA file (.cu) under the rootdir {rootdir}")
    for path, entries in found.items():
        if len(entries) > 1:
            raise error(
                key,
                f"{raw[key]!r} builds {path.relative_to(rootdir).as_posix()} {len(entries)} times with "
                "different flags (two extensions share it?): name one extension in a table of its own "
                "(extensions = [...]), or one build.ninja",
            )
    return {p: tuple(e) for p, e in found.items()}


def _merge(found: dict[Path, list[CompileEntry]], more: Mapping[Path, list[CompileEntry]]) -> None:
    for path, entries in more.items():
        same = found.setdefault(path, [])
        same.extend(e for e in entries if all(e.options != s.options for s in same))


def _ninja_files(value: object, rootdir: Path, error: Error, contained: Contained) -> list[Path]:
    globs = [value] if isinstance(value, str) else value
    if not isinstance(globs, list) or not globs or not all(isinstance(g, str) and g.strip() for g in globs):
        raise error(f'{value!r}: expected a glob of build.ninja files, e.g. "build/temp.*/build.ninja"')
    out: list[Path] = []
    for pattern in globs:
        matched = sorted(p for p in rootdir.glob(contained(pattern, rootdir, error)) if p.is_file())
        if not matched:
            raise error(
                f"{pattern!r} matches no file under the rootdir {rootdir}: {ninja.how_to_write()}"
                if any(c in pattern for c in "*?[")
                else f"{rootdir / one_globstar(pattern)} does not exist: {ninja.how_to_write()}"
            )
        out.extend(p for p in matched if p not in out)
    return out


def _setup_py(value: object, rootdir: Path, error: Error, contained: Contained) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise error(f'{value!r}: expected the path of the extension\'s setup.py, e.g. "setup.py"')
    path = rootdir / contained(value, rootdir, error)
    if not path.is_file():
        raise error(f"{path} is not a file: give the path of the extension's setup.py, under the rootdir")
    return path


def _names(value: object, error: Error) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise error(f'{value!r}: expected a list of ext_modules names, e.g. ["causal_conv1d_cuda"]')
    return list(value)


def _env(value: object, error: Error) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise error(f'{value!r}: expected a table of variables, e.g. {{CAUSAL_CONV1D_FORCE_BUILD = "TRUE"}}')
    bad = [k for k, v in value.items() if not isinstance(v, (str, int, bool))]
    if bad:
        raise error(f'{bad[0]!r}: a variable\'s value is a string (or a number), e.g. {bad[0]} = "TRUE"')
    return {k: (("1" if v else "0") if isinstance(v, bool) else str(v)) for k, v in value.items()}
