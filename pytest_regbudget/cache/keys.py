"""The key of a build: what the compiler reads, and everything else its outputs depend on.

NVRTC has no dependency output: `cache_key` fingerprints every file NVRTC could reach (the source's and
the include directories' trees, every place an `#include`, `__has_include` or pre-include could be found,
present or absent), the toolkit and the `depends=` files. An nvcc build's record is keyed by the same
identity (`identity_digest`), the contents of the tools it runs (`tool_states`) and its host compiler;
`include_lookups` keys a failed build by every path its #includes may be found at.

A key holds no times and no place: paths under the rootdir or a toolkit root as `<rootdir>/...`,
`<nvidia>/...` (`StatCache.keyed`), the source by the name the compiler is given (`given_names`), the
toolkit by its versions, its tools' digests and its wheels' RECORD digests (`headers_identity`). So a cache
restored into a fresh venv, at another checkout path, hits.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from ..core.errors import CompileError
from ..core.text import source_bytes
from ..tools.compiler import given_names
from ..tools.options import CompileOptions
from ..tools.toolkit import Toolkit, nvidia_roots
from ..util.files import not_regular, read_regular, sha256_hex
from .fingerprint import (
    FORMAT,
    StatCache,
    Uncacheable,
    file_state,
    inside,
    outermost,
    shown_path,
    tree_digest,
)
from .includes import (
    PRE_INCLUDE_OPTIONS,
    Directive,
    candidates,
    directives_of,
    option_values,
    scanned,
    search_path,
    text_directives,
)


# -- what a build may read ------------------------------------------------------------------------------
class _Reach(Struct):
    """What NVRTC could read for one build, found by following #include names through the include path."""

    roots: set[str]  # trees whose every file counts
    lookups: dict[str, str] = {}  # every candidate path -> file_state
    found: dict[str, str] = {}  # real path -> digest of user headers read
    unresolved: list[tuple[str, str]] = []  # (file, directive as written)


def _reach(
    source: Path, text: str, options: CompileOptions, toolkit_dirs: Sequence[Path], digests: StatCache
) -> _Reach:
    """What NVRTC may read for one build: every candidate path of every directive with its state
    (`lookups`), the headers it reads (`found`: the first candidate that exists, in the compiler's order, and
    the headers those include in turn), and the directives no candidate list covers (`unresolved`)."""
    here = os.path.abspath(source.parent)
    real = digests.realpath
    toolkit = [real(str(d)) for d in toolkit_dirs]
    search = search_path(source, options, toolkit_dirs)
    reach = _Reach(roots={d for d in search if not inside(real(d), toolkit)})
    # (file that includes, its directory, its directives, extra candidates for a pre-include)
    pending: list[tuple[str, str, list[Directive], list[str]]] = [
        (str(source), here, text_directives(text), [])
    ]
    pre: list[Directive] = [
        (name, f"pre-include {name}") for name in option_values(options.options, PRE_INCLUDE_OPTIONS)
    ]
    if pre:
        # A pre-include is looked up like a quoted #include of the source, and in the working directory.
        pending.append((str(source), here, pre, [os.getcwd()]))
    visited: set[str] = set()
    while pending:
        includer, includer_dir, found_directives, extra = pending.pop()
        for name, written in found_directives:
            if name is None:
                reach.unresolved.append((includer, written))
                continue
            escapes = os.path.isabs(name) or ".." in Path(name).parts
            for candidate in candidates(name, includer_dir, [*extra, *search]):
                if candidate in reach.lookups:
                    continue
                if inside(real(candidate), toolkit):
                    reach.lookups[candidate] = "toolkit" if os.path.isfile(candidate) else "absent"
                else:
                    reach.lookups[candidate] = file_state(candidate, digests)
            # The file the compiler reads: the first that exists in its order, where an angled name skips
            # the includer's directory.
            order = [*extra, *search] if "<" in written else [includer_dir, *extra, *search]
            _no_special(includer, written, candidates(name, order[0], order))
            first = next((c for c in candidates(name, order[0], order) if os.path.isfile(c)), None)
            if first is None or reach.lookups.get(first) == "toolkit" or written.startswith("__has"):
                continue  # not found, the toolkit's, or only tested for (__has_include reads nothing)
            found = real(first)
            if escapes:
                reach.roots.add(os.path.dirname(found))
            if found in visited:
                continue
            visited.add(found)
            reach.found[found] = reach.lookups[first]
            inner = scanned.get(reach.lookups[first])
            if inner is None:
                try:
                    data = read_regular(first)
                except OSError:
                    continue  # unreadable to NVRTC too; its state is in the lookups
                inner = directives_of(data, sha256_hex(data))
            pending.append((first, os.path.dirname(first), inner, []))
    return reach


def _no_special(includer: str, written: str, found: Sequence[str]) -> None:
    """CompileError where the first of `found` that exists and is no directory is not a regular file: the
    compiler opens it (NVRTC in this process), and a FIFO would block the build for ever."""
    for path in found:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode):
            return
        if not stat.S_ISDIR(mode):
            raise CompileError(
                f"{shown_path(includer)}: {written} finds {shown_path(path)}, {not_regular(mode)}: the "
                "compiler would wait on it for ever. Fix: make it a file, or remove it"
            )


def check_headers(
    source: Path, text: str, options: CompileOptions, system_dirs: Sequence[Path], digests: StatCache
) -> None:
    """CompileError for an #include of `source` (or of a header it reaches) that finds a FIFO, a device or
    a socket: checked before every build, as a key is made only where the cache is on."""
    _reach(source, text, options, system_dirs, digests)


def include_lookups(
    source: Path, text: str, options: CompileOptions, system_dirs: Sequence[Path], digests: StatCache
) -> list[tuple[str, str]]:
    """Every path where an #include of `source` (and of the user headers it reaches) may be found, with its
    state now ("absent", a digest, "toolkit" for one in `system_dirs`): what a build that failed could have
    read, so that a header that appears, changes or goes rebuilds it. Raises Uncacheable for an #include
    through a macro, which no such list covers."""
    reach = _reach(source, text, options, system_dirs, digests)
    if reach.unresolved:
        where, written = reach.unresolved[0]
        raise Uncacheable(shown_path(where), f"{written} goes through a macro")
    return sorted((digests.keyed(path), state) for path, state in reach.lookups.items())


def tool_states(paths: Iterable[str | Path], digests: StatCache) -> list[list[str]]:
    """The contents of the programs and libraries a build runs, not their names or version strings: a
    ptxas wrapper rewritten in place is another ptxas. Each digest is remembered by the file's stat (the
    stat cache), so a tool is read once, not once per run. Named relative to their root (`keyed`): the
    same wheel in another venv is the same tool."""
    return [[digests.keyed(p), file_state(str(p), digests)] for p in paths]


def toolkit_bases(toolkit_dirs: Iterable[Path], digests: StatCache) -> None:
    """Let `digests` key paths in the toolkit relative to its root: each `nvidia` package dir of the wheels
    (`<nvidia>`, `<nvidia.1>`, ...), else the toolkit's home (`<cuda>`, the parent of its include dir)."""
    roots = _nvidia_roots()
    for i, root in enumerate(roots):
        digests.add_base("<nvidia>" if i == 0 else f"<nvidia.{i}>", root)
    for d in toolkit_dirs:
        if not inside(os.path.realpath(d), [os.path.realpath(r) for r in roots]):
            digests.add_base("<cuda>", Path(d).parent)
            break


@functools.lru_cache(maxsize=1)
def _nvidia_roots() -> tuple[str, ...]:
    return tuple(str(r) for r in nvidia_roots())


def headers_identity(include_dirs: Iterable[Path], digests: StatCache) -> list[object]:
    """The contents of the toolkit's header dirs, which a key names only as "toolkit": for a wheel's, the
    digests of the RECORD files of the site dir's nvidia wheels (a RECORD lists the SHA-256 of every file
    the wheel installed, so the same wheels anywhere give the same list, and a reinstall of other bytes
    another); for a toolkit outside a site dir (an installed CUDA), its version.json, which lists each
    component's version (its headers change with an install, as its ptxas and NVRTC, keyed by digest, do).
    Each file's digest is remembered by its stat, so a warm run stat()s these files and reads none."""
    out: list[object] = []
    sites: set[str] = set()
    for d in include_dirs:
        root = next((r for r in _nvidia_roots() if inside(os.path.abspath(d), [r])), None)
        if root is not None:
            sites.add(os.path.dirname(root))
        else:
            out.append([digests.keyed(d), file_state(str(Path(d).parent / "version.json"), digests)])
    for site in sorted(sites):
        records = sorted(glob.glob(os.path.join(glob.escape(site), "nvidia_*.dist-info", "RECORD")))
        out.append([[os.path.basename(os.path.dirname(r)), file_state(r, digests)] for r in records])
    return out


def _toolkit_identity(toolkit: Toolkit, digests: StatCache) -> list[object]:
    # Its own home too, not only its headers' (a CUDA home may take its headers from the wheels): else its
    # ptxas would be keyed by its path or by `<cuda>/bin/ptxas` depending on whether an nvcc build of the
    # same home happened to be keyed first in this run.
    toolkit_bases([*toolkit.include_dirs, toolkit.ptxas.parent.parent / "include"], digests)
    # NVRTC's front end lives partly in libnvrtc-builtins, beside libnvrtc.
    nvrtc = toolkit.require_nvrtc()
    libraries = [nvrtc, *sorted(nvrtc.parent.glob("libnvrtc-builtins*"))]
    return [
        toolkit.nvrtc_version,
        toolkit.ptxas_version,
        [digests.keyed(d) for d in toolkit.include_dirs],
        headers_identity(toolkit.include_dirs, digests),
        tool_states([toolkit.ptxas, *libraries], digests),
    ]


def host_compiler_identity(digests: StatCache) -> list[object]:
    # nvcc preprocesses with the host compiler, whose built-in macros the dependency list does not show.
    from ..tools import nvcc  # asked only of an nvcc build's key

    path = nvcc.host_compiler()
    if path is None:
        return []
    return [path, *tool_states([os.path.realpath(path)], digests)]


def depends_fingerprint(patterns: Sequence[str], digests: StatCache, skip: frozenset[str]) -> list[object]:
    """Contents of the files the user named with depends= (globs expanded; a directory: its tree)."""
    out: list[object] = []
    for pattern in patterns:
        magic = any(c in pattern for c in "*?[")
        matches = sorted(glob.glob(pattern, recursive=True)) if magic else [pattern]
        states = []
        for match in matches:
            state = tree_digest(match, digests, skip) if os.path.isdir(match) else file_state(match, digests)
            states.append([digests.keyed(match), state])
        # A pattern is kept as written below its base: a glob is not a path `keyed` can resolve.
        out.append([_keyed_pattern(pattern, digests), states])
    return out


def _keyed_pattern(pattern: str, digests: StatCache) -> str:
    cut = min((i for i, c in enumerate(pattern) if c in "*?["), default=len(pattern))
    head, _, _ = pattern[:cut].rpartition(os.sep)
    if not head:
        return pattern
    return digests.keyed(head) + "/" + pattern[len(head) + 1 :].replace(os.sep, "/")


def skip_dirs(toolkit_dirs: Iterable[Path], cache_dir: Path | None) -> frozenset[str]:
    return _skip_dirs_of(tuple(toolkit_dirs), cache_dir)


@functools.lru_cache(maxsize=16)
def _skip_dirs_of(toolkit_dirs: tuple[Path, ...], cache_dir: Path | None) -> frozenset[str]:
    skip = {os.path.realpath(d) for d in toolkit_dirs}
    if cache_dir is not None:
        skip.add(os.path.realpath(cache_dir))
    return frozenset(skip)


def given_identity(
    source: Path, options: CompileOptions, base: Path | None, digests: StatCache
) -> tuple[str, list[object]]:
    """The source's name and the options' identity as the compiler is given them (`given_names`): compilers
    write the name into diagnostics and line info, so a key holds it, relative to the rootdir where the
    compiler got it so; an absolute one as its real path. The depends= files are keyed by `keyed`."""
    name, given = given_names(source, options, base)
    shown = name if not os.path.isabs(name) else digests.realpath(name)
    depends = tuple(_keyed_pattern(d, digests) for d in given.depends)
    return shown, list(replace(given, depends=depends).identity())


def identity_digest(
    source: Path,
    text: str,
    names: Sequence[str],
    arch: str,
    options: CompileOptions,
    digests: StatCache,
    base: Path | None = None,
) -> list[object]:
    shown, identity = given_identity(source, options, base, digests)
    return [
        FORMAT,
        shown,
        sha256_hex(source_bytes(text)),
        "unit",  # a translation unit's outputs, every kernel of it (before 0.2: one kernel's)
        list(names),
        arch,
        identity,
    ]


def cache_key(
    source: Path,
    text: str,
    names: Sequence[str] | str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    digests: StatCache | None = None,
    cache_dir: Path | None = None,
    *,
    fresh: bool = False,
    base: Path | None = None,
) -> str:
    """The key of an NVRTC + ptxas build of `source` with the name expressions `names` (a str is one):
    raises Uncacheable where an #include cannot be followed. Each tree is fingerprinted once per
    `digests` (a run), unless `fresh`; so is what a file's units share (all but names and arch). `base`:
    the rootdir that NVRTC is given names relative to (`given_names`), None for absolute names."""
    names = (names,) if isinstance(names, str) else tuple(names)
    digests = digests or StatCache(None)
    memo = (source, text, options, toolkit, cache_dir, base)
    shared = None if fresh else digests.unit_keys.get(memo)
    if shared is None:
        reach = _reach(source, text, options, toolkit.include_dirs, digests)
        if reach.unresolved and not options.depends:
            where, written = reach.unresolved[0]
            raise Uncacheable(
                shown_path(where),
                f"{written} goes through a macro, which the cache cannot follow; name the files it can "
                "reach with depends=",
            )
        skip = skip_dirs(toolkit.include_dirs, cache_dir)
        trees = []
        if reach.unresolved:
            # A computed include may read any file: the trees it can reach are keyed whole, with the
            # depends= files. Every other build is keyed by what it read and probed (`reach.lookups`).
            where, written = reach.unresolved[0]
            digests.whole_dirs[shown_path(where)] = f"{written} goes through a macro"
            roots = outermost(digests.realpath(r) for r in reach.roots)
            trees = [[digests.keyed(root), digests.tree(root, skip, fresh)] for root in roots]
        # The JSON of the list the key is the digest of, cut around names and arch: made once per file.
        shown, identity = given_identity(source, options, base, digests)
        head = json.dumps([FORMAT, shown, sha256_hex(source_bytes(text)), "unit"])
        toolkit_state = _toolkit_identity(toolkit, digests)  # first: it makes the toolkit's bases known
        tail = json.dumps(
            [
                identity,
                "nvrtc",
                toolkit_state,
                sorted((digests.keyed(p), state) for p, state in reach.lookups.items()),
                trees,
                depends_fingerprint(options.depends, digests, skip),
            ],
            sort_keys=True,
        )
        shared = digests.unit_keys[memo] = (head[:-1], tail[1:])
    # The same text as json_digest of [*identity_digest(...), "nvrtc", ...] (json.dumps joins with ", ").
    return sha256_hex(f"{shared[0]}, {json.dumps(list(names))}, {json.dumps(arch)}, {shared[1]}".encode())
