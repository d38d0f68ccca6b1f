"""Paths that read alike on every machine: a file under the project's root is written relative to it, one
inside an installed package as `{package}/rest` (the package found again by name on the next machine), and
any other as the absolute path it is. Also where an installed file sits inside its install directory (a
`sys.path` entry, or any `site-packages` / `dist-packages` directory), which is its import path.

Knows nothing of CUDA or of this package: the baseline's keys and recorded build settings, and readers of
files written on other machines (a torch `build.ninja`), call it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from .patterns import lazy

# The directory names that installers put packages in, on every platform and distribution: recognised in a
# path written on another machine, where that directory is not on this interpreter's sys.path.
_INSTALL_DIR_NAMES = frozenset({"site-packages", "dist-packages"})
# `{torch}/include`, `{nvidia.cuda_runtime}/include`: a package's directory, then a path inside it.
_PACKAGE_REF = lazy(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}(?:/(.*))?\Z", re.S)


class PackageNotFound(LookupError):
    """`{package}` names a package this interpreter cannot find; the message says how to install it."""


class UnsetVariable(LookupError):
    """`$VAR` names an environment variable that is not set; the message says how to set it."""


# `$VAR` and `${VAR}`, as a POSIX shell reads them.
_VARIABLE = lazy(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")


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


def under_root(
    path: str | os.PathLike[str], rootdir: str | os.PathLike[str], *, real_first: bool = True
) -> str | None:
    """`path` relative to `rootdir` in `/` form (`.` for the root itself), compared with links resolved and
    as given (in that order unless not `real_first`); None outside it."""
    resolve = (os.path.realpath, os.path.abspath) if real_first else (os.path.abspath, os.path.realpath)
    for how in resolve:  # the second only where the first is outside: most paths pay for one
        form, root = Path(how(path)), Path(how(rootdir))
        if _within(form, root):
            return form.relative_to(root).as_posix() or "."
    return None


def source_path(path: str | os.PathLike[str], rootdir: str | os.PathLike[str]) -> str:
    """A source file as the baseline keys it, the same on every machine: relative to `rootdir` under it,
    its import path inside an install directory (`liger_kernel/ops/rms_norm.py`), else the absolute path.
    Never holds `..`."""
    inside = under_root(path, rootdir)
    if inside is None:
        inside = import_path(path, install_search(rootdir))
    return inside if inside is not None else Path(os.path.abspath(path)).as_posix()


def distribution_of(path: str | os.PathLike[str], search: Iterable[str] | None = None) -> str | None:
    """The installed distribution that holds `path`, with its version, as its metadata names them
    (`"liger_kernel 0.8.5"`); None outside an install directory, or where no distribution there owns the
    file (a folder put on PYTHONPATH by hand)."""
    for form in _forms(path):
        base = install_dir(form, search)
        if base is not None and base != form and _within(form, base):
            return _owner(str(base), form.relative_to(base).as_posix())
    return None


@functools.lru_cache(maxsize=1024)
def _owner(base: str, inside: str) -> str | None:
    top = inside.split("/", 1)[0]
    claims = [dist for tops, dist in _distributions(base) if top in tops]
    if len(claims) > 1:  # a namespace package (`nvidia`) that several distributions share: the file decides
        claims = [d for d in claims if any(str(f).replace(os.sep, "/") == inside for f in d.files or ())]
    if not claims:
        return None
    # `pip install --target --upgrade` leaves the old version's metadata beside the new: the newest is it.
    newest = max(claims, key=_installed_at)
    return f"{newest.metadata['Name']} {newest.version}"


def _installed_at(dist: importlib.metadata.Distribution) -> float:
    """When `dist` was installed: the time of its METADATA file (0 where it cannot be read)."""
    for f in dist.files or ():
        if f.name == "METADATA" and f.parent.name.endswith(".dist-info"):
            try:
                return os.stat(str(dist.locate_file(f))).st_mtime
            except OSError:
                break
    return 0.0


@functools.lru_cache(maxsize=64)
def _distributions(base: str) -> list[tuple[frozenset[str], importlib.metadata.Distribution]]:
    """Each distribution installed in `base`, with the top-level names it installs (its top_level.txt,
    else the first part of each file its RECORD lists)."""
    out = []
    for dist in importlib.metadata.distributions(path=[base]):
        listed = (dist.read_text("top_level.txt") or "").split()
        tops = listed or [str(f).replace(os.sep, "/").split("/", 1)[0] for f in dist.files or ()]
        out.append((frozenset(t.removesuffix(".py") for t in tops), dist))
    return out


def portable_path(path: str | os.PathLike[str], rootdir: str | os.PathLike[str]) -> str:
    """`path` as a baseline records it: relative to `rootdir` when under it (`.` for the root itself), as
    `{package}/rest` when inside an installed package (`{torch}/include`), else the absolute path as it is.
    A relative `path` is taken relative to `rootdir`. Never holds `..`."""
    # Remembered: every build's cache key and options_hash ask for each of its include dirs.
    return _portable(os.fspath(path), os.fspath(rootdir), tuple(sys.path))


@functools.lru_cache(maxsize=4096)
def _portable(path: str, rootdir: str, search: tuple[str, ...]) -> str:
    root = Path(os.path.abspath(rootdir))
    given = Path(path)
    absolute = Path(os.path.abspath(given if given.is_absolute() else root / given))
    # As written first: a recorded setting reads as the user gave it, a link inside the project included.
    relative = under_root(absolute, root, real_first=False)
    if relative is not None:
        return relative
    inside = import_path(absolute, _install_search(root, search))
    if inside is not None:
        package, _, rest = inside.partition("/")
        if package.isidentifier():
            return f"{{{package}}}/{rest}" if rest else f"{{{package}}}"
    return absolute.as_posix()


def install_search(rootdir: str | os.PathLike[str]) -> list[str]:
    """The `sys.path` entries that are install directories for a project at `rootdir`: all but those that
    hold the root (the checkout's parent on PYTHONPATH), where a sibling folder is no package another
    machine would find by name."""
    return _install_search(rootdir, tuple(sys.path))


def _install_search(rootdir: str | os.PathLike[str], search: Iterable[str]) -> list[str]:
    roots = _forms(rootdir)
    return [e for e in search if e and not any(_within(r, b) for r in roots for b in _forms(e))]


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


def expand_path(text: str, base_dir: str | os.PathLike[str]) -> Path:
    """A path as a user writes one: `$VAR` and `${VAR}` from the environment, then `{package}/rest`
    (`resolve_portable`), a relative path from `base_dir`. Raises `UnsetVariable` naming a variable that
    is not set, and `PackageNotFound`, rather than a path that names nothing."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        found = os.environ.get(name)
        if found is None:
            raise UnsetVariable(
                f"{text!r} names the environment variable {name}, which is not set; set it before the run "
                f"(export {name}=/path/to/dir), or write the path itself ({{torch}}/include names the "
                "directory of an installed package)"
            )
        return found

    return resolve_portable(_VARIABLE.sub(value, text), base_dir)


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
