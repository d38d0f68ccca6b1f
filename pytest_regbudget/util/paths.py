"""Paths that read alike on every machine: a file under the project's root is written relative to it, one
inside an installed package as `{package}/rest` (the package found again by name on the next machine), and
any other as the absolute path it is. Also where an installed file sits inside its install directory (a
`sys.path` entry, or any `site-packages` / `dist-packages` directory), which is its import path.

Knows nothing of CUDA or of this package: the baseline's keys and recorded build settings, and readers of
files written on other machines (a torch `build.ninja`), call it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

# The directory names that installers put packages in, on every platform and distribution: recognised in a
# path written on another machine, where that directory is not on this interpreter's sys.path.
_INSTALL_DIR_NAMES = frozenset({"site-packages", "dist-packages"})
# `{torch}/include`, `{nvidia.cuda_runtime}/include`: a package's directory, then a path inside it.
_PACKAGE_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}(?:/(.*))?\Z", re.S)


class PackageNotFound(LookupError):
    """`{package}` names a package this interpreter cannot find; the message says how to install it."""


def install_dir(path: str | os.PathLike[str], search: Iterable[str] | None = None) -> Path | None:
    """The install directory `path` sits inside, or None: the deepest of the `sys.path` entries (or of
    `search`) that holds it, and the nearest `site-packages` or `dist-packages` directory above it (which
    holds even where that directory is not on this interpreter's path: a file written on another machine).
    The path is compared as given and with its links resolved, so a venv's `lib64` link still matches."""
    found: Path | None = None
    for form in _forms(path):
        for base in _install_dirs(form, sys.path if search is None else search):
            if found is None or len(base.parts) > len(found.parts):
                found = base
        if found is not None:
            return found
    return None


def import_path(path: str | os.PathLike[str], search: Iterable[str] | None = None) -> str | None:
    """`path` inside its install directory, in `/` form (`liger_kernel/ops/rms_norm.py`): the name it is
    imported by on every machine, wherever the package is installed. None outside every install directory."""
    for form in _forms(path):
        base = install_dir(form, search)
        if base is not None and base != form and _within(form, base):
            return form.relative_to(base).as_posix()
    return None


def portable_path(path: str | os.PathLike[str], rootdir: str | os.PathLike[str]) -> str:
    """`path` as a baseline records it: relative to `rootdir` when under it (`.` for the root itself), as
    `{package}/rest` when inside an installed package (`{torch}/include`), else the absolute path as it is.
    A relative `path` is taken relative to `rootdir`. Never holds `..`."""
    root = Path(os.path.abspath(rootdir))
    given = Path(path)
    absolute = Path(os.path.abspath(given if given.is_absolute() else root / given))
    for form, base in ((absolute, root), (Path(os.path.realpath(absolute)), Path(os.path.realpath(root)))):
        if _within(form, base):
            return form.relative_to(base).as_posix() or "."
    inside = import_path(absolute, install_search(root))
    if inside is not None:
        package, _, rest = inside.partition("/")
        if package.isidentifier():
            return f"{{{package}}}/{rest}" if rest else f"{{{package}}}"
    return absolute.as_posix()


def install_search(rootdir: str | os.PathLike[str]) -> list[str]:
    """The `sys.path` entries that are install directories for a project at `rootdir`: all but those that
    hold the root (the checkout's parent on PYTHONPATH), where a sibling folder is no package another
    machine would find by name."""
    roots = _forms(rootdir)
    return [e for e in sys.path if e and not any(_within(r, b) for r in roots for b in _forms(e))]


def resolve_portable(text: str, rootdir: str | os.PathLike[str]) -> Path:
    """The path on this machine that `text` (as `portable_path` writes it, or as a user writes one) names:
    `{package}/rest` inside the directory of that package as this interpreter finds it, a relative path
    under `rootdir`, an absolute one as it is. Raises `PackageNotFound` for a package that is not found."""
    match = _PACKAGE_REF.match(text)
    if match is None:
        given = Path(text)
        return given if given.is_absolute() else Path(rootdir) / given
    name, rest = match.group(1), match.group(2) or ""
    candidates = package_dirs(name)
    rest_path = PurePosixPath(rest)
    for directory in candidates:
        # A namespace package (`nvidia`) spans several directories: the one that holds the rest is meant.
        if (directory / rest_path).exists():
            return directory / rest_path
    return candidates[0] / rest_path


def package_dirs(name: str) -> list[Path]:
    """The directories of the package `name` (one, or several for a namespace package), found without
    importing it where Python allows (a dotted name imports its parents). Raises `PackageNotFound`."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:  # a parent that fails to import, or a bad name
        raise PackageNotFound(_not_found(name, f"looking it up failed: {exc}")) from exc
    if spec is None:
        raise PackageNotFound(_not_found(name, "no such package on this interpreter's path"))
    locations = list(spec.submodule_search_locations or ())
    if not locations:
        raise PackageNotFound(
            _not_found(name, f"it is a module ({spec.origin}), not a package with a directory"),
        )
    return [Path(location) for location in locations]


def _not_found(name: str, why: str) -> str:
    return (
        f"{{{name}}} names the directory of the package {name!r}, but {why} ({sys.executable}); install it "
        f"into this environment (pip install ...) or write the directory's path instead"
    )


def _forms(path: str | os.PathLike[str]) -> list[Path]:
    absolute = Path(os.path.abspath(path))
    real = Path(os.path.realpath(absolute))
    return [absolute] if real == absolute else [absolute, real]


def _install_dirs(path: Path, search: Iterable[str]) -> Iterable[Path]:
    for entry in search:
        if not entry:  # '' is the current directory, which is the project's, not an install
            continue
        for base in _forms(entry):
            if _within(path, base) and path != base:
                yield base
    for parent in path.parents:
        if parent.name in _INSTALL_DIR_NAMES:
            yield parent
            break


def _within(path: Path, base: Path) -> bool:
    return path == base or base in path.parents
