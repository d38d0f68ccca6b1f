"""What a build may read, and whether it is still as it was: the fingerprints that key the compile cache.

- File digests (`StatCache`): SHA-256 remembered by (size, mtime, ctime, inode, device), so that an unchanged
  tree is stat()ed, not read.
- NVRTC has no dependency output: `cache_key` fingerprints every file NVRTC could reach (the source's and the
  include directories' trees, every place an `#include`, `__has_include` or pre-include could be found,
  present or absent), the toolkit and the `depends=` files.
- nvcc lists what it opened (`-MD -MF`): a *dependency record* (`DepBuild`) keeps, for each build seen, the
  files nvcc opened with their digests and the listings of the directories it searched; a lookup re-checks
  them.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import re
import stat
import subprocess
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from msgspec import Struct

from ..core.text import source_bytes
from ..tools import nvcc
from ..tools.options import CompileOptions
from ..tools.toolkit import Toolkit
from ..util.files import atomic_write, json_digest, settled, sha256_hex
from .includes import (
    DIR_OPTIONS,
    PRE_INCLUDE_OPTIONS,
    Directive,
    directives_of,
    option_values,
    scanned,
    text_directives,
)

# The format of the cache's documents (the keys, the stat cache, the entries, the dependency records).
# 2: an entry keeps the PTX and cubin in a body file of its own, read only when needed (0.2).
# 3: the outline keeps setmaxnreg instructions, and entries keep ptxas's messages per kernel.
# 4: a build is keyed by the files it read and the paths it probed, not by whole directories (0.2).
# 5: an nvcc unit places a module-level ptxas message (C7508) on its kernel with ptxas -e, as NVRTC's do.
# 6: the outline keeps tcgen05.alloc instructions (a kernel's tensor memory), their counts resolved.
FORMAT = 6
# A tree this large is probably not a kernel's source directory (a home directory, a virtualenv): say so
# instead of hashing it on every run.
MAX_TREE_FILES = 20_000
# A file written while a compiler ran can carry a timestamp up to one clock tick before our clock read at
# its start: Linux stamps files from a coarse clock, one tick of 1 to 10 ms (HZ 1000 to 100).
CLOCK_SLACK_NS = 10_000_000
_STAT_CACHE_LIMIT = 200_000
# Files of these kinds in a source tree are left out of the tree fingerprint, because a run writes them
# (reports, the baseline) or they are the tests: each run would otherwise miss. They still count where an
# #include names them (NVRTC) or the compiler reports reading them (nvcc).
NOT_FINGERPRINTED = frozenset(
    {
        ".py",
        ".pyc",
        ".pyi",
        ".toml",
        ".json",
        ".md",
        ".rst",
        ".html",
        ".ipynb",
        ".yml",
        ".yaml",
        ".lock",
        ".log",
    }
)


class Uncacheable(Exception):
    """The key cannot cover everything the compiler may read; `where` is the file that says why."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


def shown_path(path: str | Path) -> str:
    """A path as the summary shows it: relative to the working directory when below it."""
    text = os.path.abspath(path)
    cwd = os.getcwd()
    return os.path.relpath(text, cwd) if text.startswith(cwd + os.sep) else text


# -- file digests and trees -----------------------------------------------------------------------------
class StatCache:
    """SHA-256 of files, remembered by (size, mtime_ns, ctime_ns, inode, device): kept in memory and, with
    a cache directory, in one file there, so that a warm run stat()s a tree instead of reading it."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, list[object]] = {}
        self._used: set[str] = set()
        self._loaded = path is None
        self._dirty = False
        self._lock = threading.Lock()
        self._trees: dict[tuple[str, frozenset[str]], tuple[tuple[int, ...], str]] = {}
        self._real: dict[str, str] = {}
        # What the NVRTC keys of one file's units share (cache_key), per (source, text, options, toolkit).
        self.unit_keys: dict[tuple[object, ...], tuple[str, str]] = {}
        # Sources whose builds are keyed by whole directories, not by what they read, and why (shown once).
        self.whole_dirs: dict[str, str] = {}

    def _load(self) -> None:
        self._loaded = True
        if self.path is None:
            return
        # A damaged stat cache only costs reading files again: it maps stats to digests of what was read.
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if doc.get("format") == FORMAT and isinstance(doc.get("files"), dict):
                self._entries = {
                    str(k): v for k, v in doc["files"].items() if isinstance(v, list) and len(v) == 6
                }

    def digest(self, path: str, st: os.stat_result) -> str:
        """The file's SHA-256 (OSError if it cannot be read)."""
        ident: list[object] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    self._load()
        # No lock to read: one dict lookup and one set insertion are atomic, and this runs once per file.
        known = self._entries.get(path)
        self._used.add(path)
        if known is not None and known[:5] == ident:
            return str(known[5])
        with open(path, "rb") as fh:
            digest = sha256_hex(fh.read())
        # Remembered only once the file has been still for longer than a timestamp tick: an edit of the
        # same size within the tick would otherwise keep this digest.
        if settled(st):
            with self._lock:
                self._entries[path] = [*ident, digest]
                self._dirty = True
        return digest

    def realpath(self, path: str) -> str:
        """os.path.realpath, remembered while this object lives (a run): symbolic links are taken to stay
        as they are during a run."""
        known = self._real.get(path)
        if known is None:
            known = self._real[path] = os.path.realpath(path)
        return known

    def tree(self, root: str, skip: frozenset[str], fresh: bool = False) -> str:
        """The digest of the names and contents of every file under `root`, made once while this object
        lives (a run) and the directory itself is unchanged: a run lists and stat()s a tree once, not once
        per kernel. An edit made while the run goes on may so be seen only by the next run; the check
        after a build (`fresh`) makes it anew, so an entry is never stored from a tree that changed."""
        try:
            st = os.stat(root)
            ident: tuple[int, ...] = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        except OSError:
            ident = ()
        known = self._trees.get((root, skip))
        if not fresh and known is not None and known[0] == ident:
            return known[1]
        digest = _tree_digest(root, self, skip)
        self._trees[root, skip] = (ident, digest)
        return digest

    def save(self) -> None:
        with self._lock:
            if not self._dirty or self.path is None:
                return
            self._dirty = False
            if len(self._entries) > _STAT_CACHE_LIMIT:
                self._entries = {k: v for k, v in self._entries.items() if k in self._used}
            text = json.dumps({"format": FORMAT, "files": self._entries})
        with contextlib.suppress(OSError):  # a cache that cannot be written slows the run, no more
            atomic_write(self.path, text)


def file_state(path: str, digests: StatCache) -> str:
    """What a lookup of `path` finds: a digest, "absent", or what stands there instead of a file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:  # ENOTDIR, a symlink loop, no permission to search: nothing readable there
        return f"error {exc.errno}"
    if not stat.S_ISREG(st.st_mode):
        return "directory" if stat.S_ISDIR(st.st_mode) else "not a file"
    try:
        return digests.digest(path, st)
    except OSError:
        # Unreadable now; a chmod changes ctime, so the key changes when it becomes readable.
        return f"unreadable {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"


def _skipped_dir(name: str, path: str, skip: frozenset[str]) -> bool:
    # Hidden directories, bytecode, virtualenvs (site-packages), the cache itself and the toolkit's
    # headers (its version stands for them) hold no kernel headers worth hashing on every run.
    return (
        name.startswith(".")
        or name == "__pycache__"
        or path in skip
        or os.path.exists(os.path.join(path, "pyvenv.cfg"))
    )


def _walk(root: str, skip: frozenset[str], recursive: bool, limit: int) -> list[tuple[str, str]]:
    """(relative, full) paths of the files under `root` that a fingerprint covers, sorted. Symbolic links
    are followed, each directory once. Strings are joined by hand: this loop runs for every file of
    every tree on every compile, and os.path.join was most of its time."""
    found: list[tuple[str, str]] = []
    seen: set[tuple[int, int]] = set()
    pending = [("", root)]
    while pending:
        rel, here = pending.pop()
        try:
            st = os.stat(here)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            entries = list(os.scandir(here))
        except OSError:
            continue  # gone or not searchable: nothing in it can be read by the compiler either
        prefix = f"{rel}{os.sep}" if rel else ""
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if recursive and not _skipped_dir(name, entry.path, skip):
                    pending.append((prefix + name, entry.path))
                continue
            dot = name.rfind(".")
            if dot == 0 or (dot > 0 and name[dot:] in NOT_FINGERPRINTED):
                continue
            found.append((prefix + name, entry.path))
            if len(found) > limit:
                raise Uncacheable(
                    shown_path(root),
                    f"its tree holds more than {limit} files to fingerprint; keep kernel sources (and "
                    "include_dirs) in directories of their own",
                )
    found.sort()
    return found


def walk_tree(
    root: str, skip: frozenset[str], recursive: bool = True, limit: int = MAX_TREE_FILES
) -> list[str]:
    """Relative paths of the files under `root` that a fingerprint covers, sorted (raises Uncacheable past
    `limit` files)."""
    return [rel for rel, _ in _walk(root, skip, recursive, limit)]


def _tree_digest(root: str, digests: StatCache, skip: frozenset[str]) -> str:
    """Names and contents of every file under `root`."""
    if not os.path.isdir(root):
        return "absent"
    lines = [f"{rel}\0{file_state(path, digests)}" for rel, path in _walk(root, skip, True, MAX_TREE_FILES)]
    return sha256_hex("\n".join(lines).encode(errors="surrogateescape"))


def listing_digest(root: str, skip: frozenset[str], recursive: bool) -> str:
    """Names (not contents) of the files under `root`: enough to see a header that appeared."""
    if not os.path.isdir(root):
        return "absent"
    return sha256_hex("\n".join(walk_tree(root, skip, recursive)).encode(errors="surrogateescape"))


def newest_change(paths: Iterable[str]) -> int:
    newest = 0
    for path in paths:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    return newest


def _outermost(roots: Iterable[str]) -> list[str]:
    """The roots that are not inside another (a tree covers its subdirectories)."""
    kept: list[str] = []
    for root in sorted(set(roots), key=len):
        if not any(root == k or root.startswith(k.rstrip(os.sep) + os.sep) for k in kept):
            kept.append(root)
    return sorted(kept)


def inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


# -- what a build may read ------------------------------------------------------------------------------
class _Reach(Struct):
    """What NVRTC could read for one build, found by following #include names through the include path."""

    roots: set[str]  # trees whose every file counts
    lookups: dict[str, str] = {}  # every candidate path -> file_state
    found: dict[str, str] = {}  # real path -> digest of user headers read
    unresolved: list[tuple[str, str]] = []  # (file, directive as written)


def search_path(
    source: Path,
    options: CompileOptions,
    toolkit_dirs: Sequence[str | Path] = (),
    prepend: Sequence[str] = (),
    append: Sequence[str] = (),
) -> list[str]:
    """The directories a header is looked for in, absolute, in the order of the flags `CompileOptions.flags`
    gives both compilers: `include_dirs`, the source's own directory, the toolkit's headers, then the -I
    options (with nvcc, NVCC_PREPEND_FLAGS's -I first and NVCC_APPEND_FLAGS's last)."""
    dirs = [
        *option_values(prepend, DIR_OPTIONS),
        *options.include_dirs,
        str(source.parent),
        *map(str, toolkit_dirs),
        *option_values([*options.options, *append], DIR_OPTIONS),
    ]
    return list(dict.fromkeys(os.path.abspath(d) for d in dirs))


def candidates(name: str, includer_dir: str, search: Sequence[str]) -> list[str]:
    """Every path where an `#include` (or `__has_include`) of `name` may be found, in the order they are
    tried: the includer's directory (for a quoted name), then `search`. Angled names get the includer's
    directory too, and every path is kept, whatever is found before it: probing a superset of the
    compiler's search costs a rebuild at worst, never a stale hit."""
    if os.path.isabs(name):
        return [name]
    return [os.path.join(b, name) for b in dict.fromkeys([includer_dir, *search])]


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
                    with open(first, "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue  # unreadable to NVRTC too; its state is in the lookups
                inner = directives_of(data, sha256_hex(data))
            pending.append((first, os.path.dirname(first), inner, []))
    return reach


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
    return sorted(reach.lookups.items())


def tool_states(paths: Iterable[str | Path], digests: StatCache) -> list[list[str]]:
    """The contents of the programs and libraries a build runs, not their names or version strings: a
    ptxas wrapper rewritten in place is another ptxas. Each digest is remembered by the file's stat (the
    stat cache), so a tool is read once, not once per run."""
    return [[str(p), file_state(str(p), digests)] for p in paths]


def _toolkit_identity(toolkit: Toolkit, digests: StatCache) -> list[object]:
    # A wheel upgrade rewrites the header directories, which changes their modification times.
    dirs = []
    for d in toolkit.include_dirs:
        try:
            dirs.append((str(d), os.stat(d).st_mtime_ns))
        except OSError:
            dirs.append((str(d), 0))
    # NVRTC's front end lives partly in libnvrtc-builtins, beside libnvrtc.
    nvrtc = toolkit.require_nvrtc()
    libraries = [nvrtc, *sorted(nvrtc.parent.glob("libnvrtc-builtins*"))]
    return [
        toolkit.nvrtc_version,
        toolkit.ptxas_version,
        dirs,
        tool_states([toolkit.ptxas, *libraries], digests),
    ]


def host_compiler_identity(digests: StatCache) -> list[object]:
    # nvcc preprocesses with the host compiler, whose built-in macros the dependency list does not show.
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
            state = _tree_digest(match, digests, skip) if os.path.isdir(match) else file_state(match, digests)
            states.append([match, state])
        out.append([pattern, states])
    return out


def skip_dirs(toolkit_dirs: Iterable[Path], cache_dir: Path | None) -> frozenset[str]:
    return _skip_dirs_of(tuple(toolkit_dirs), cache_dir)


@functools.lru_cache(maxsize=16)
def _skip_dirs_of(toolkit_dirs: tuple[Path, ...], cache_dir: Path | None) -> frozenset[str]:
    skip = {os.path.realpath(d) for d in toolkit_dirs}
    if cache_dir is not None:
        skip.add(os.path.realpath(cache_dir))
    return frozenset(skip)


def identity_digest(
    source: Path, text: str, names: Sequence[str], arch: str, options: CompileOptions, digests: StatCache
) -> list[object]:
    return [
        FORMAT,
        digests.realpath(str(source)),  # compilers write the path into diagnostics and line info
        sha256_hex(source_bytes(text)),
        "unit",  # a translation unit's outputs, every kernel of it (before 0.2: one kernel's)
        list(names),
        arch,
        list(options.identity()),
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
) -> str:
    """The key of an NVRTC + ptxas build of `source` with the name expressions `names` (a str is one):
    raises Uncacheable where an #include cannot be followed. Each tree is fingerprinted once per
    `digests` (a run), unless `fresh`; so is what a file's units share (all but names and arch)."""
    names = (names,) if isinstance(names, str) else tuple(names)
    digests = digests or StatCache(None)
    memo = (source, text, options, toolkit, cache_dir)
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
            roots = _outermost(digests.realpath(r) for r in reach.roots)
            trees = [[root, digests.tree(root, skip, fresh)] for root in roots]
        # The JSON of the list the key is the digest of, cut around names and arch: made once per file.
        head = json.dumps([FORMAT, digests.realpath(str(source)), sha256_hex(source_bytes(text)), "unit"])
        tail = json.dumps(
            [
                list(options.identity()),
                "nvrtc",
                _toolkit_identity(toolkit, digests),
                sorted(reach.lookups.items()),
                trees,
                depends_fingerprint(options.depends, digests, skip),
            ],
            sort_keys=True,
        )
        shared = digests.unit_keys[memo] = (head[:-1], tail[1:])
    # The same text as json_digest of [*identity_digest(...), "nvrtc", ...] (json.dumps joins with ", ").
    return sha256_hex(f"{shared[0]}, {json.dumps(list(names))}, {json.dumps(arch)}, {shared[1]}".encode())


# -- nvcc: a dependency record of the files each build opened ---------------------------------------
_DEP_TOKEN = re.compile(r"(?:\\.|[^\s\\])+")


def parse_depfile(text: str, cwd: str) -> list[str]:
    """The prerequisites of a make rule as nvcc -MD writes it (`target : a.cu b.h \\`), absolute."""
    tokens = _DEP_TOKEN.findall(text.replace("\\\n", " ").replace("\\\r\n", " "))
    # The rule's target ends at the first token that ends with the colon.
    start = next((i + 1 for i, t in enumerate(tokens) if t.endswith(":")), len(tokens))
    deps = []
    for token in tokens[start:]:
        name = re.sub(r"\\(.)", r"\1", token).replace("$$", "$")
        deps.append(os.path.join(cwd, name))
    return list(dict.fromkeys(deps))


class DepBuild(Struct, frozen=True):
    """One build in a dependency record: the files nvcc opened, the paths it may have probed for a header
    and found nothing (or something it did not open), and the system directories it read from, as they
    were."""

    files: tuple[tuple[str, str], ...]  # (path, file_state)
    # (directory, recursive, listing_digest): the non-recursive listings of system header directories it
    # read from; the user's whole trees only for a build with a computed include (see nvcc_probes).
    listings: tuple[tuple[str, bool, str], ...]
    probes: tuple[tuple[str, str], ...] = ()  # (path, probe_kind) of every user-side candidate path

    def key(self, record_key: str) -> str:
        return json_digest(
            [
                record_key,
                [list(f) for f in self.files],
                [list(d) for d in self.listings],
                [list(p) for p in self.probes],
            ]
        )

    def still_valid(
        self, digests: StatCache, skip: frozenset[str], listed: dict[tuple[str, bool], str]
    ) -> bool:
        """Every file as it was, every probed path as it was (a header that now shadows one, a
        __has_include that now finds one), and every directory listing (`listed` holds those already
        made)."""
        if not all(file_state(path, digests) == state for path, state in self.files):
            return False
        if not all(probe_kind(path) == kind for path, kind in self.probes):
            return False
        for d, recursive, state in self.listings:
            if (d, recursive) not in listed:
                listed[d, recursive] = listing_digest(d, skip, recursive)
            if listed[d, recursive] != state:
                return False
        return True


def probe_kind(path: str) -> str:
    """What a header search finds at `path`: "file", "absent", or what stands there instead. Only the kind:
    the content of a file nvcc opened is in DepBuild.files, and one it did not open was not read."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"error {exc.errno}"
    return "file" if stat.S_ISREG(st.st_mode) else "directory" if stat.S_ISDIR(st.st_mode) else "other"


class NvccProbes(Struct, frozen=True):
    """What the files of an nvcc build may have looked for, worked out after the build (nvcc_probes)."""

    probes: dict[str, str]  # path -> probe_kind, every user-side candidate of every directive
    unresolved: list[tuple[str, str]]  # (file, directive): computed includes, which no candidate list covers
    system: list[str]  # files of the toolkit or the host compiler's own headers, which are not scanned


def nvcc_probes(
    files: Sequence[str],
    source: Path,
    options: CompileOptions,
    system_dirs: Sequence[str],
    env_flags: tuple[Sequence[str], Sequence[str]] = ((), ()),
) -> NvccProbes:
    """The probes of an nvcc build that opened `files` (its depfile): for every #include, __has_include and
    pre-include of every file it opened outside `system_dirs`, each place in the user's directories where
    that header may be looked for (`candidates`), and what is there now.

    A header added where none of these looks (a new file nobody includes) changes no build; one added where
    a build looked (it shadows the header found later, or a __has_include now finds it) changes exactly the
    builds that looked there. The toolkit's and the host compiler's own headers are not scanned: their
    directories cannot hold the user's headers, and their files are keyed by content like every other."""
    # The user's directories in nvcc's order; `env_flags`: NVCC_PREPEND_FLAGS's and NVCC_APPEND_FLAGS's.
    search = search_path(source, options, (), *env_flags)
    probes: dict[str, str] = {}
    unresolved: list[tuple[str, str]] = []
    system: list[str] = []
    pre: list[Directive] = [
        (name, f"pre-include {name}") for name in option_values(options.options, PRE_INCLUDE_OPTIONS)
    ]
    work: list[tuple[str, list[Directive], list[str]]] = [(str(source), pre, [os.getcwd()])] if pre else []
    for path in files:
        if inside(os.path.realpath(path), system_dirs):
            system.append(path)
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue  # gone since nvcc read it: its state in DepBuild.files says so
        work.append((path, directives_of(data, sha256_hex(data)), []))
    for includer, found, extra in work:
        for name, written in found:
            if name is None:
                unresolved.append((includer, written))
                continue
            for candidate in candidates(name, os.path.dirname(includer), [*extra, *search]):
                if candidate not in probes:
                    probes[candidate] = probe_kind(candidate)
    return NvccProbes(probes, unresolved, system)


@functools.lru_cache(maxsize=4)
def host_system_dirs(compiler: str | None) -> tuple[str, ...]:
    """The host compiler's own header directories (as `g++ -E -v` lists them), real paths; () when it
    cannot say, and then every header nvcc opened is scanned, which is slower, not less safe."""
    if compiler is None:
        return ()
    try:
        out = subprocess.run(
            [compiler, "-xc++", "-E", "-v", os.devnull], capture_output=True, text=True, timeout=60
        ).stderr
    except (OSError, subprocess.SubprocessError):
        return ()
    listed = out.partition("#include <...> search starts here:")[2].partition("End of search list.")[0]
    return tuple(os.path.realpath(line.strip()) for line in listed.splitlines() if line.strip())


def searched_trees(source: Path, options: CompileOptions) -> list[str]:
    """The user's include directories and the source's: whole trees, as `#include "sub/x.h"` may land in
    any subdirectory of them."""
    user = [*options.include_dirs, *option_values(options.options, DIR_OPTIONS), str(source.parent)]
    return _outermost(os.path.realpath(d) for d in user)
