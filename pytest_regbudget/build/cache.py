"""A content-addressed cache of compiler outputs, the run's translation units, and a pool that builds them
ahead of the tests.

A build, and so an entry, is a translation unit for one arch (`Unit`): every kernel of a file is picked from
one build per (source, options, toolkit, arch), plus, for NVRTC, the name expressions of the template
instances compiled with it (`compiler.pick_nvrtc`). Within a run each unit is built once and shared
(`Prefetcher`); across processes a lock per key in the cache directory makes the second process wait for the
first one's entry.

An entry may be used only when everything the compiler could have read is as it was, including files it
looked for and did not find (a header added later can shadow another, or turn a failed `__has_include`
into a successful one). How that is established depends on the compiler:

- **nvcc** lists what it opened (`-MD -MF`). As in ccache's "direct mode", a *manifest* keyed by the source,
  arch, options and toolkit keeps, for each build seen, the files nvcc opened with their SHA-256
  and the file names in every directory it searched; a lookup re-hashes them, and the entry they name is
  used only when all still match.
- **NVRTC** has no dependency output, so the key is made beforehand from a conservative fingerprint of every
  file NVRTC could reach: the contents of every file in the source's directory tree, in each include
  directory's tree and in every directory an `#include` reaches through `..` or an absolute path, plus,
  for every `#include`, `__has_include` and pre-include, each place the name could be found (present or
  absent). The toolkit's own headers are covered by its version. An `#include` whose operand is not a
  literal ("x.h" or <x.h>, e.g. a macro) cannot be followed: such a kernel is not cached, and the summary
  says so, unless `depends=` names the files it reaches.

Both keys hold every field of CompileOptions (`CompileOptions.identity`, which the baseline's options_hash
uses too) and the contents of the `depends=` files. An entry is stored only if its inputs did not change
while the compiler ran. File digests are remembered by (size, mtime, ctime, inode, device) in a small stat
cache on disk, so that an unchanged tree is listed and stat()ed, not read.

Entries are JSON files written atomically and carry a checksum: a corrupt or unreadable entry is rebuilt,
never trusted. The checksum detects damage, not tampering: whoever can write the cache directory can make
it report anything. Only successful builds are cached.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import json
import os
import re
import stat
import tempfile
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..core import names
from ..core.baseline import atomic_write
from ..core.errors import CompileError
from ..core.facts import Deferred, Provenance
from . import compiler
from .compiler import BuildOutputs, CompiledKernel, CompileOptions, Nvcc, UnitOutputs
from .toolchain import Toolkit

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from .frontends import FrontendPtx

# 2: an entry keeps the PTX and cubin in a body file of its own, read only when needed (0.2).
# 3: the outline keeps setmaxnreg instructions, and entries keep ptxas's messages per kernel.
FORMAT = 3
# A tree this large is probably not a kernel's source directory (a home directory, a virtualenv): say so
# instead of hashing it on every run.
MAX_TREE_FILES = 20_000
# A file changed less than this long ago may change again within the same timestamp tick (some file
# systems count whole seconds): its digest is not remembered by its stat.
_RACY_NS = 2_000_000_000
# A file written while a compiler ran can carry a timestamp up to one clock tick before our clock read at
# its start: Linux stamps files from a coarse clock, one tick of 1 to 10 ms (HZ 1000 to 100).
_CLOCK_SLACK_NS = 10_000_000
_MANIFEST_BUILDS = 8  # dependency sets kept per manifest, newest first
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


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json_digest(parts: object) -> str:
    return _digest(json.dumps(parts, sort_keys=True).encode())


class Uncacheable(Exception):
    """The key cannot cover everything the compiler may read; `where` is the file that says why."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


def _shown(path: str | Path) -> str:
    """A path as the summary shows it: relative to the working directory when below it."""
    text = os.path.abspath(path)
    cwd = os.getcwd()
    return os.path.relpath(text, cwd) if text.startswith(cwd + os.sep) else text


# -- include directives ---------------------------------------------------------------------------------
# Read as the preprocessor does, not by a pattern over lines: line splices first, then comments become one
# space (so `#include /* c */ "x.h"` and a directive split with `\` read as written), skipping string and
# character literals, whose contents are not comments.
_SPLICE = re.compile(r"\\\r?\n")
# The lookahead first: every alternative starts with one of these characters, and the engine then skips
# the other positions at once instead of trying each alternative (and the look-behind) at every character.
_LEXEME = re.compile(
    r"(?=[uULR\"'/])"
    r'(?:(?<![\w])(?:u8|u|U|L)?R"(?P<delim>[^()\\\s"]{0,16})\((?s:.*?)\)(?P=delim)"'
    r'|"(?:\\.|[^"\\\n])*"'
    r"|'(?:\\.|[^'\\\n])*'"
    r"|//[^\n]*"
    r"|/\*(?s:.*?)\*/)"
)
_DIRECTIVE = re.compile(
    r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*(?:include_next|include|import|embed)\b[ \t\f\v]*(.*)$", re.MULTILINE
)
_HAS_INCLUDE = re.compile(r"\b__has_(?:include_next|include|embed)\b\s*(\(\s*(?:\"[^\"\n]*\"|<[^>\n]*>))?")
_DIRECTIVE_WORDS = ("include", "import", "embed")  # in every directive _DIRECTIVE and _HAS_INCLUDE find
_OPERAND = re.compile(r'"([^"\n]*)"|<([^>\n]*)>')

# (name, as written): name None where the operand is not a literal the cache can follow.
Directive = tuple[str | None, str]
_scanned: dict[str, list[Directive]] = {}  # content digest -> its directives, for this process


def _strip_comments(text: str) -> str:
    def keep(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("/"):
            return " "
        # A raw string may span lines that look like directives; other literals stay, as an #include's
        # operand is one.
        return '""' if match.group("delim") is not None else token

    return _LEXEME.sub(keep, _SPLICE.sub("", text))


def directives(text: str) -> list[Directive]:
    """Every #include-like directive and __has_include of a source, in any #if branch (a superset of what
    is read costs a rebuild at worst, never a stale hit)."""
    spliced = _SPLICE.sub("", text)
    if not any(word in spliced for word in _DIRECTIVE_WORDS):
        return []  # none can be there: comments only remove text (and a file without any is common)
    code = _strip_comments(text)
    found: list[Directive] = []
    for match in _DIRECTIVE.finditer(code):
        rest = match.group(1).strip()
        operand = _OPERAND.match(rest)
        name = None if operand is None else (operand.group(1) or operand.group(2) or "")
        found.append((name, f"#include {rest}"))
    for match in _HAS_INCLUDE.finditer(code):
        written = match.group(0).strip()
        operand = None if match.group(1) is None else _OPERAND.search(match.group(1))
        name = None if operand is None else (operand.group(1) or operand.group(2) or "")
        found.append((name, written))
    return found


@functools.lru_cache(maxsize=256)
def _text_directives(text: str) -> list[Directive]:
    """directives() of a source's text, remembered: a run keys each of its files' units on it."""
    return directives(text)


def _directives_of(data: bytes, digest: str) -> list[Directive]:
    known = _scanned.get(digest)
    if known is None:
        # latin-1 maps every byte: the scan never fails on an encoding, and ASCII syntax reads the same.
        known = _scanned[digest] = directives(data.decode("latin-1"))
    return known


def _option_values(options: Sequence[str], names: Sequence[str]) -> list[str]:
    """The values of options such as -I: `-I dir`, `-Idir`, `-I=dir`, `--include-path=dir`."""
    values: list[str] = []
    i = 0
    while i < len(options):
        opt = options[i]
        for name in names:
            if opt == name and i + 1 < len(options):
                values.append(options[i + 1])
                i += 1
                break
            if opt.startswith(f"{name}="):
                values.append(opt[len(name) + 1 :])
                break
            if len(name) == 2 and opt.startswith(name) and len(opt) > 2:
                values.append(opt[2:])
                break
        i += 1
    return values


_DIR_OPTIONS = ("-I", "--include-path", "-isystem", "--system-include", "-idirafter")
_PRE_INCLUDE_OPTIONS = ("-include", "--pre-include")


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
            digest = _digest(fh.read())
        # Remembered only once the file has been still for longer than a timestamp tick: an edit of the
        # same size within the tick would otherwise keep this digest.
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS:
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


def _file_state(path: str, digests: StatCache) -> str:
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
                    _shown(root),
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
    lines = [f"{rel}\0{_file_state(path, digests)}" for rel, path in _walk(root, skip, True, MAX_TREE_FILES)]
    return _digest("\n".join(lines).encode(errors="surrogateescape"))


def _listing_digest(root: str, skip: frozenset[str], recursive: bool) -> str:
    """Names (not contents) of the files under `root`: enough to see a header that appeared."""
    if not os.path.isdir(root):
        return "absent"
    return _digest("\n".join(walk_tree(root, skip, recursive)).encode(errors="surrogateescape"))


def _newest_change(paths: Iterable[str]) -> int:
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


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


# -- what a build may read ------------------------------------------------------------------------------
class _Reach:
    """What NVRTC could read for one build, found by following #include names through the include path."""

    __slots__ = ("found", "lookups", "roots", "unresolved")

    def __init__(self, roots: set[str]) -> None:
        self.lookups: dict[str, str] = {}  # every candidate path -> _file_state
        self.roots = roots  # trees whose every file counts
        self.found: dict[str, str] = {}  # real path -> digest of user headers read
        self.unresolved: list[tuple[str, str]] = []  # (file, directive as written)


def _reach(
    source: Path, text: str, options: CompileOptions, toolkit_dirs: Sequence[Path], digests: StatCache
) -> _Reach:
    here = os.path.abspath(source.parent)
    real = digests.realpath
    toolkit = [real(str(d)) for d in toolkit_dirs]
    search = [
        os.path.abspath(d) for d in [*options.include_dirs, *_option_values(options.options, _DIR_OPTIONS)]
    ]
    search.append(here)
    reach = _Reach(roots={here, *search})
    # (file that includes, its directory, its directives, extra candidates for a pre-include)
    pending: list[tuple[str, str, list[Directive], list[str]]] = [
        (str(source), here, _text_directives(text), [])
    ]
    pre: list[Directive] = [
        (name, f"pre-include {name}") for name in _option_values(options.options, _PRE_INCLUDE_OPTIONS)
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
            if os.path.isabs(name):
                candidates = [name]
            else:
                # Quoted and angled names alike, and the includer's directory first: a superset of the
                # places NVRTC looks costs a rebuild at worst.
                bases = [includer_dir, *extra, *search, *toolkit]
                candidates = [os.path.join(b, name) for b in bases]
            escapes = os.path.isabs(name) or ".." in Path(name).parts
            for candidate in candidates:
                in_toolkit = _inside(real(candidate), toolkit)
                if in_toolkit:
                    reach.lookups[candidate] = "toolkit" if os.path.isfile(candidate) else "absent"
                    continue
                state = reach.lookups.get(candidate) or _file_state(candidate, digests)
                reach.lookups[candidate] = state
                if not os.path.isfile(candidate):
                    continue
                found = real(candidate)
                if escapes:
                    reach.roots.add(os.path.dirname(found))
                if found in visited:
                    continue
                visited.add(found)
                reach.found[found] = state
                inner = _scanned.get(state)
                if inner is None:
                    try:
                        with open(candidate, "rb") as fh:
                            data = fh.read()
                    except OSError:
                        continue  # unreadable to NVRTC too; its state is in the lookups
                    inner = _directives_of(data, _digest(data))
                pending.append((candidate, os.path.dirname(candidate), inner, []))
    reach.roots = {r for r in reach.roots if not _inside(real(r), toolkit)}
    return reach


def included_files(
    source: Path, text: str, include_dirs: Sequence[str], toolkit_dirs: Sequence[Path]
) -> list[tuple[str, str]]:
    """(real path, sha256) of every user header reachable from `source` through literal #include names,
    in a stable order. Headers in the toolkit's own directories are left out (the toolkit is part of the
    key), and so are names found nowhere (NVRTC's built-in headers)."""
    reach = _reach(
        source, text, CompileOptions(include_dirs=tuple(include_dirs)), toolkit_dirs, StatCache(None)
    )
    return sorted(reach.found.items())


def _toolkit_identity(toolkit: Toolkit) -> list[object]:
    # A wheel upgrade rewrites the header directories, which changes their modification times.
    dirs = []
    for d in toolkit.include_dirs:
        try:
            dirs.append((str(d), os.stat(d).st_mtime_ns))
        except OSError:
            dirs.append((str(d), 0))
    return [toolkit.nvrtc_version, toolkit.ptxas_version, str(toolkit.ptxas), str(toolkit.nvrtc), dirs]


def _host_compiler_identity() -> list[object]:
    # nvcc preprocesses with the host compiler, whose built-in macros the dependency list does not show.
    path = compiler._host_compiler()
    if path is None:
        return []
    real = os.path.realpath(path)
    st = os.stat(real)
    return [path, real, st.st_size, st.st_mtime_ns]


def _depends_fingerprint(patterns: Sequence[str], digests: StatCache, skip: frozenset[str]) -> list[object]:
    """Contents of the files the user named with depends= (globs expanded; a directory: its tree)."""
    out: list[object] = []
    for pattern in patterns:
        magic = any(c in pattern for c in "*?[")
        matches = sorted(glob.glob(pattern, recursive=True)) if magic else [pattern]
        states = []
        for match in matches:
            state = (
                _tree_digest(match, digests, skip) if os.path.isdir(match) else _file_state(match, digests)
            )
            states.append([match, state])
        out.append([pattern, states])
    return out


def _skip_dirs(toolkit_dirs: Iterable[Path], cache_dir: Path | None) -> frozenset[str]:
    return _skip_dirs_of(tuple(toolkit_dirs), cache_dir)


@functools.lru_cache(maxsize=16)
def _skip_dirs_of(toolkit_dirs: tuple[Path, ...], cache_dir: Path | None) -> frozenset[str]:
    skip = {os.path.realpath(d) for d in toolkit_dirs}
    if cache_dir is not None:
        skip.add(os.path.realpath(cache_dir))
    return frozenset(skip)


def _identity(
    source: Path, text: str, names: Sequence[str], arch: str, options: CompileOptions, digests: StatCache
) -> list[object]:
    return [
        FORMAT,
        digests.realpath(str(source)),  # compilers write the path into diagnostics and line info
        _digest(text.encode()),
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
                _shown(where),
                f"{written} goes through a macro, which the cache cannot follow; name the files it can "
                "reach with depends=",
            )
        skip = _skip_dirs(toolkit.include_dirs, cache_dir)
        roots = _outermost(digests.realpath(r) for r in reach.roots)
        trees = [[root, digests.tree(root, skip, fresh)] for root in roots]
        # The JSON of the list the key is the digest of, cut around names and arch: made once per file.
        head = json.dumps([FORMAT, digests.realpath(str(source)), _digest(text.encode()), "unit"])
        tail = json.dumps(
            [
                list(options.identity()),
                "nvrtc",
                _toolkit_identity(toolkit),
                sorted(reach.lookups.items()),
                trees,
                _depends_fingerprint(options.depends, digests, skip),
            ],
            sort_keys=True,
        )
        shared = digests.unit_keys[memo] = (head[:-1], tail[1:])
    # The same text as _json_digest of [*_identity(...), "nvrtc", ...] (json.dumps joins with ", ").
    return _digest(f"{shared[0]}, {json.dumps(list(names))}, {json.dumps(arch)}, {shared[1]}".encode())


# -- nvcc: a manifest of the files each build opened ----------------------------------------------------
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


# A named tuple rather than a frozen dataclass: every run defines it at import (docs/speed.md, "Records").
class _Build(NamedTuple):
    """One build in a manifest: the files nvcc opened and the directories it searched, as they were."""

    files: tuple[tuple[str, str], ...]  # (path, _file_state)
    listings: tuple[tuple[str, bool, str], ...]  # (directory, recursive, _listing_digest)

    def key(self, manifest_key: str) -> str:
        return _json_digest([manifest_key, [list(f) for f in self.files], [list(d) for d in self.listings]])

    def still_valid(
        self, digests: StatCache, skip: frozenset[str], listed: dict[tuple[str, bool], str]
    ) -> bool:
        """Every file as it was, and every directory listing (`listed` holds those already made)."""
        if not all(_file_state(path, digests) == state for path, state in self.files):
            return False
        for d, recursive, state in self.listings:
            if (d, recursive) not in listed:
                listed[d, recursive] = _listing_digest(d, skip, recursive)
            if listed[d, recursive] != state:
                return False
        return True


def _searched_trees(source: Path, options: CompileOptions) -> list[str]:
    """The user's include directories and the source's: whole trees, as `#include "sub/x.h"` may land in
    any subdirectory of them."""
    user = [*options.include_dirs, *_option_values(options.options, _DIR_OPTIONS), str(source.parent)]
    return _outermost(os.path.realpath(d) for d in user)


# -- the cache ------------------------------------------------------------------------------------------
@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    corrupt: int = 0
    not_cached: int = 0  # compiles whose inputs the key could not cover
    reasons: dict[str, str] = field(default_factory=dict)  # file -> why its kernels are not cached
    disabled: str = ""  # why the cache is off altogether

    def __str__(self) -> str:
        if self.disabled:
            return self.disabled
        text = f"{self.hits} hits, {self.misses} misses"
        if self.corrupt:
            text += f", {self.corrupt} corrupt entries rebuilt"
        if self.not_cached:
            where, why = min(self.reasons.items())
            more = f"; and {len(self.reasons) - 1} more file(s)" if len(self.reasons) > 1 else ""
            text += f", {self.not_cached} not cached ({where}: {why}{more})"
        return text

    def merged(self, other: CacheStats) -> CacheStats:
        return CacheStats(
            self.hits + other.hits,
            self.misses + other.misses,
            self.corrupt + other.corrupt,
            self.not_cached + other.not_cached,
            {**other.reasons, **self.reasons},
            self.disabled or other.disabled,
        )

    def to_payload(self) -> dict[str, object]:
        """For an xdist worker's report to the controller (JSON-able)."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "corrupt": self.corrupt,
            "not_cached": self.not_cached,
            "reasons": dict(self.reasons),
            "disabled": self.disabled,
        }

    def add_payload(self, payload: object) -> None:
        """Add a worker's `to_payload()` (workers and controller run the same version)."""
        if not isinstance(payload, dict):
            return
        self.hits += int(payload.get("hits", 0))
        self.misses += int(payload.get("misses", 0))
        self.corrupt += int(payload.get("corrupt", 0))
        self.not_cached += int(payload.get("not_cached", 0))
        self.reasons.update({str(k): str(v) for k, v in dict(payload.get("reasons", {})).items()})
        self.disabled = self.disabled or str(payload.get("disabled", ""))


def _unusable(directory: Path) -> str:
    """Why `directory` cannot hold the cache ("" if it can, or can be created)."""
    for path in [directory, *directory.parents]:
        if path.exists():
            if path.is_dir():
                return ""
            return (
                f"{path} is not a directory: caching off (remove it, or point REGBUDGET_CACHE_DIR at a "
                "directory)"
            )
    return ""


class CompileCache:
    """Builds of translation units (NVRTC + ptxas, or nvcc) with a disk cache in front (directory None: no
    cache, every build runs). A unit that another process is building is waited for, through a lock per
    key in the cache directory, so that the second process finds the first one's entry."""

    def __init__(self, directory: Path | None) -> None:
        self.stats = CacheStats()
        self._lock = threading.Lock()
        if directory is not None:
            self.stats.disabled = _unusable(directory)
            if self.stats.disabled:
                directory = None
        self.directory = directory
        self.digests = StatCache(None if directory is None else directory / f"v{FORMAT}" / "stat-cache")
        self._keys: dict[tuple[Unit, str, Toolkit], str] = {}  # NVRTC keys made this run

    def _path(self, key: str, kind: str = "", suffix: str = ".json") -> str:
        assert self.directory is not None
        # A string, from one join: every kernel of a warm run reads one, and a Path costs more than the read.
        return os.path.join(self.directory, f"v{FORMAT}", kind, key[:2], f"{key}{suffix}")

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self.stats, what, getattr(self.stats, what) + 1)

    def _not_cached(self, exc: Uncacheable) -> None:
        with self._lock:
            self.stats.not_cached += 1
            self.stats.reasons.setdefault(exc.where, exc.reason)

    def compile(
        self,
        source: Path,
        kernel: str,
        arch: str,
        options: CompileOptions,
        toolkit: Toolkit,
        ptxas_timeout: float = compiler.DEFAULT_PTXAS_TIMEOUT,
        *,
        source_text: str | None = None,
        nvcc: Nvcc | None = None,
    ) -> CompiledKernel:
        """One kernel: its translation unit built by NVRTC + ptxas (or, with `nvcc`, by nvcc), or found in
        the cache, and the kernel picked from it. `source_text` compiles a code string; `source` then only
        names it."""
        text = compiler.read_source(source) if source_text is None else source_text
        label = f"{kernel} [{arch}]"

        def build(unit: Unit) -> UnitOutputs:
            return self.unit(unit, toolkit, ptxas_timeout, source_text=text, label=label)

        outputs = pick(kernel, Unit(source, arch, options, nvcc), build)
        return compiler.interpret(outputs, source, text, kernel, arch, options, _provenance(toolkit, nvcc))

    def unit(
        self,
        unit: Unit,
        toolkit: Toolkit,
        ptxas_timeout: float = compiler.DEFAULT_PTXAS_TIMEOUT,
        *,
        source_text: str | None = None,
        label: str = "",
    ) -> UnitOutputs:
        """The outputs of one translation unit, every kernel of it: from the cache, or built (and stored).
        `label` names the build in a compiler's errors (the kernel that asked for it)."""
        text = compiler.read_source(unit.source) if source_text is None else source_text
        label = label or f"{unit.source.name} [{unit.arch}]"

        def build(depfile: Path | None = None) -> UnitOutputs:
            if unit.nvcc is not None:
                return compiler.build_nvcc_unit(
                    unit.source, unit.arch, unit.options, unit.nvcc, ptxas_timeout, depfile, label
                )
            return compiler.build_unit(
                unit.source, text, unit.arch, unit.options, toolkit, unit.names, ptxas_timeout, label
            )

        if self.directory is None:
            return build()
        try:
            if unit.nvcc is not None:
                return self._unit_nvcc(unit, text, unit.nvcc, build, ptxas_timeout)
            return self._unit_nvrtc(unit, text, toolkit, build, ptxas_timeout)
        except Uncacheable as exc:  # raised before any build: this is the only one
            self._not_cached(exc)
            return build()
        finally:
            self.digests.save()

    def stored(self, unit: Unit, toolkit: Toolkit) -> bool:
        """Whether the cache holds an entry (NVRTC) or a manifest (nvcc) for `unit` as its inputs are now:
        then its lookup will most likely hit, and is left to the test that needs it rather than to a compile
        thread (a warm run then uses no thread, whose lookups would only contend for the GIL)."""
        if self.directory is None:
            return False
        try:
            text = compiler.read_source(unit.source)
            if unit.nvcc is not None:
                return os.path.exists(self._path(self._manifest_key(unit, text, unit.nvcc), "manifests"))
            return os.path.exists(self._path(self._nvrtc_key(unit, text, toolkit)))
        except (CompileError, Uncacheable, OSError):
            return False

    def _nvrtc_key(self, unit: Unit, text: str, toolkit: Toolkit, fresh: bool = False) -> str:
        """cache_key of an NVRTC unit, made once per run (as its trees are) unless `fresh`."""
        memo = (unit, text, toolkit)
        if not fresh and memo in self._keys:
            return self._keys[memo]
        key = cache_key(
            unit.source, text, unit.names, unit.arch, unit.options, toolkit, self.digests, self.directory,
            fresh=fresh,
        )  # fmt: skip
        self._keys[memo] = key
        return key

    def _manifest_key(self, unit: Unit, text: str, nvcc: Nvcc) -> str:
        """The key of an nvcc unit's manifest."""
        return _json_digest(
            [
                *_identity(unit.source, text, unit.names, unit.arch, unit.options, self.digests),
                "nvcc",
                nvcc.identity(),
                str(nvcc.path),
                _host_compiler_identity(),
                _depends_fingerprint(unit.options.depends, self.digests, _skip_dirs([], self.directory)),
            ]
        )

    @contextlib.contextmanager
    def _locked(self, key: str, timeout: float) -> Iterator[None]:
        """Hold `key`'s lock, shared by every process that uses this cache directory, for at most `timeout`
        seconds of waiting (as long as a build may take). A lock that cannot be had (a read-only cache, a
        holder that takes longer) only means that this process builds the unit too."""
        import filelock  # only a miss needs it

        assert self.directory is not None
        path = self.directory / "locks" / f"unit-{key}.lock"
        lock: filelock.BaseFileLock | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = filelock.FileLock(str(path), timeout=timeout)
            lock.acquire()
        except (filelock.Timeout, OSError):
            lock = None
        try:
            yield
        finally:
            if lock is not None:
                lock.release()

    def _hit(
        self, key: str, unit: Unit, rebuild: Callable[[], UnitOutputs], *, quiet: bool = False
    ) -> UnitOutputs | None:
        """The entry of `key`, if it is there and sound (a damaged one is counted, unless `quiet`). Its body
        (PTX and cubin) is read when first needed; `rebuild` makes it again if it turns out damaged then."""
        loaded = self._load(key, rebuild, quiet=quiet)
        if loaded is None:
            return None
        cached, demangled = loaded
        if not _sound(cached, unit):
            if not quiet:
                self._count("corrupt")
            return None
        names.learn(demangled)
        self._count("hits")
        return cached

    def _unit_nvrtc(
        self,
        unit: Unit,
        text: str,
        toolkit: Toolkit,
        build: Callable[[], UnitOutputs],
        timeout: float,
    ) -> UnitOutputs:
        def key(fresh: bool = False) -> str:
            return self._nvrtc_key(unit, text, toolkit, fresh)

        before = key()  # Uncacheable before anything is counted
        found = self._hit(before, unit, build)
        if found is not None:
            return found
        with self._locked(before, timeout):
            # Another process may have built it while this one waited.
            found = self._hit(before, unit, build, quiet=True)
            if found is not None:
                return found
            self._count("misses")
            outputs = build()
            # A file edited while NVRTC ran may have been read in either state: then store nothing.
            with contextlib.suppress(Uncacheable):
                if key(fresh=True) == before and _sound(outputs, unit):
                    self._store(before, outputs)
        return outputs

    def _unit_nvcc(
        self,
        unit: Unit,
        text: str,
        nvcc: Nvcc,
        build: Callable[[Path | None], UnitOutputs],
        timeout: float,
    ) -> UnitOutputs:
        skip = _skip_dirs([], self.directory)
        manifest_key = self._manifest_key(unit, text, nvcc)
        # The user's include directories and the source's, listed before the build: Uncacheable (a tree
        # too large) is raised before anything is counted, and a change while nvcc runs shows.
        trees = _searched_trees(unit.source, unit.options)
        listed = [(d, True, _listing_digest(d, skip, True)) for d in trees]

        def rebuild() -> UnitOutputs:
            return build(None)

        found, builds = self._manifest_hit(manifest_key, unit, listed, skip, rebuild)
        if found is not None:
            return found
        with self._locked(manifest_key, timeout):
            # Another process may have built it while this one waited.
            found, builds = self._manifest_hit(manifest_key, unit, listed, skip, rebuild, quiet=True)
            if found is not None:
                return found
            self._count("misses")
            started = time.time_ns()
            with tempfile.TemporaryDirectory(prefix="regbudget-deps-") as tmp:
                depfile = Path(tmp) / "deps.d"
                outputs = build(depfile)
                try:
                    deps = depfile.read_text(encoding="utf-8", errors="surrogateescape")
                except OSError:
                    deps = ""
            files = parse_depfile(deps, os.getcwd())
            if not files:
                self._not_cached(
                    Uncacheable(_shown(unit.source), f"nvcc {nvcc.version} wrote no dependency list (-MD)")
                )
                return outputs
            opened_in = sorted({os.path.realpath(os.path.dirname(f)) for f in files})
            dirs = [d for d in opened_in if not _inside(d, trees)]
            # A file or directory that changed while nvcc ran may have been read in either state: store
            # nothing.
            if _newest_change([*files, *dirs]) >= started - _CLOCK_SLACK_NS or not _sound(outputs, unit):
                return outputs
            try:
                after = [(d, True, _listing_digest(d, skip, True)) for d in trees]
                listed += [(d, False, _listing_digest(d, skip, False)) for d in dirs]
            except Uncacheable:
                return outputs
            if after != listed[: len(after)]:
                return outputs
            seen = _Build(
                files=tuple((f, _file_state(f, self.digests)) for f in files), listings=tuple(listed)
            )
            self._store(seen.key(manifest_key), outputs)
            self._store_manifest(manifest_key, [seen, *(b for b in builds if b != seen)][:_MANIFEST_BUILDS])
        return outputs

    def _manifest_hit(
        self,
        manifest_key: str,
        unit: Unit,
        listed: list[tuple[str, bool, str]],
        skip: frozenset[str],
        rebuild: Callable[[], UnitOutputs],
        *,
        quiet: bool = False,
    ) -> tuple[UnitOutputs | None, list[_Build]]:
        """The entry of the first build in the manifest whose files and directories are all as they were,
        and the manifest's builds."""
        builds = self._load_manifest(manifest_key, quiet=quiet)
        known = {(d, recursive): state for d, recursive, state in listed}
        for seen in builds:
            if seen.still_valid(self.digests, skip, known):
                return self._hit(seen.key(manifest_key), unit, rebuild, quiet=quiet), builds
        return None, builds

    def _read(self, path: str, *, quiet: bool = False) -> object | None:
        """The payload of a checksummed document; None if absent (corrupt ones are counted, unless
        `quiet`)."""
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            fast = _FAST_DOC.match(text)
            if fast is not None and text.endswith("}"):
                # The layout _write makes: the checksum is of the payload's text as it stands in the file,
                # so it is hashed as read rather than parsed and serialized again.
                body = text[fast.end() : -1]
                if fast.group(1) != _digest(body.encode()):
                    raise ValueError("checksum mismatch")
                payload: object = json.loads(body)
                return payload
            doc = json.loads(text)
            payload = doc["payload"]
            if doc.get("format") != FORMAT or doc.get("sha256") != _digest(json.dumps(payload).encode()):
                raise ValueError("checksum mismatch")
            return payload
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            if not quiet:
                self._count("corrupt")
            return None

    def recall(self, kind: str, key: str) -> object | None:
        """What `keep` stored under `key` (None: nothing, or a damaged document, which is not counted among
        the damaged entries: it is only a memo, such as a baseline's reading)."""
        return None if self.directory is None else self._read(self._path(key, kind), quiet=True)

    def keep(self, kind: str, key: str, payload: object) -> None:
        """Store a JSON payload under `key`, checksummed and atomically, as an entry is (TypeError: not
        JSON)."""
        if self.directory is not None:
            self._write(self._path(key, kind), payload)

    def _write(self, path: str, payload: object) -> None:
        body = json.dumps(payload)
        # json.dumps of {"format", "sha256", "payload"}, written by hand so that the payload's text is the
        # one its checksum is of (_FAST_DOC reads it back).
        text = f'{{"format": {FORMAT}, "sha256": "{_digest(body.encode())}", "payload": {body}}}'
        # A read-only or full cache directory slows the run down; it must not fail it.
        with contextlib.suppress(OSError):
            atomic_write(Path(path), text)

    def _load(
        self, key: str, rebuild: Callable[[], UnitOutputs], *, quiet: bool = False
    ) -> tuple[UnitOutputs, dict[str, str]] | None:
        """An entry's outputs, with its body to be read when first needed, and its kernels' demangled
        names."""
        payload = self._read(self._path(key), quiet=quiet)
        if payload is None:
            return None
        try:
            if not isinstance(payload, dict):
                raise TypeError(f"expected a dict, found {type(payload).__name__}")
            lowered, demangled, body = payload["lowered"], payload["names"], payload["body"]
            if not isinstance(lowered, dict) or not isinstance(demangled, dict) or not isinstance(body, dict):
                raise TypeError("lowered, demangled names or body: expected a dict")
            digest, ptx_bytes = str(body["sha256"]), int(body["ptx_bytes"])
            outline, ptxas_log = str(payload["outline"]), str(payload["ptxas_log"])
            outputs = UnitOutputs(
                outline=outline,
                nvrtc_log=str(payload["nvrtc_log"]),
                ptxas_log=ptxas_log,
                body=Deferred(lambda: self._body(key, digest, ptx_bytes, outline, ptxas_log, rebuild)),
                lowered={str(k): str(v) for k, v in lowered.items()},
                messages=_messages(payload["messages"]),
            )
            return outputs, {str(k): str(v) for k, v in demangled.items()}
        except (ValueError, KeyError, TypeError):
            if not quiet:
                self._count("corrupt")
            return None

    def _body(
        self,
        key: str,
        digest: str,
        ptx_bytes: int,
        outline: str,
        ptxas_log: str,
        rebuild: Callable[[], UnitOutputs],
    ) -> tuple[str, bytes]:
        """An entry's PTX and cubin, from its body file. A body that is missing or damaged (its checksum is
        in the entry) is counted and made again by `rebuild`, which must report what the entry says."""
        try:
            with open(self._path(key, suffix=".body"), "rb") as fh:
                data = fh.read()
            if _digest(data) != digest or ptx_bytes > len(data):
                raise ValueError("checksum mismatch")
            return data[:ptx_bytes].decode(), data[ptx_bytes:]
        except (OSError, ValueError):
            self._count("corrupt")
        fresh = rebuild()
        self._count("misses")
        # The logs may differ in a temporary file's name; the numbers read from them may not.
        if _report(fresh.ptxas_log, fresh.outline) != _report(ptxas_log, outline):
            raise CompileError(
                f"the compile cache entry {self._path(key)} lost its PTX and cubin, and building them again "
                "gave a different ptxas report; run again (the entry is replaced), or with "
                "--regbudget-no-cache",
                fresh.ptxas_log,
            )
        self._store(key, fresh)
        return fresh.ptx, fresh.cubin

    def _store(self, key: str, outputs: UnitOutputs) -> None:
        ptx = outputs.ptx.encode()
        data = ptx + outputs.cubin
        payload = {
            "outline": outputs.outline,
            "nvrtc_log": outputs.nvrtc_log,
            "ptxas_log": outputs.ptxas_log,
            "lowered": dict(outputs.lowered),
            # As the demangler prints them now: a run that finds every build here demangles nothing.
            "names": {e: names.demangle(e) for e in outputs.entries if e.startswith("_Z")},
            "body": {"sha256": _digest(data), "ptx_bytes": len(ptx)},
            "messages": {entry: list(texts) for entry, texts in outputs.messages.items()},
        }
        # The body first: an entry is only ever found with the body it names (or a damaged one, made again).
        with contextlib.suppress(OSError):
            atomic_write(Path(self._path(key, suffix=".body")), data)
            self._write(self._path(key), payload)

    def frontend(self, key: str | None, make: Callable[[], FrontendPtx]) -> FrontendPtx:
        """A Python front end's build (Triton's PTX, cubin and ptxas log), from the cache by `key` (the
        front end's own cache key: frontends.triton_key), or made and stored. No key: made every time."""
        if self.directory is None or key is None:
            return make()
        from .frontends import frontend_from_record, frontend_record

        path = self._path(_json_digest(["frontend", FORMAT, key]), "frontend")
        payload = self._read(path)
        if payload is not None:
            try:
                if not isinstance(payload, dict):
                    raise TypeError(f"expected a dict, found {type(payload).__name__}")
                found = frontend_from_record(payload)
            except (KeyError, TypeError, ValueError):
                self._count("corrupt")
            else:
                self._count("hits")
                return found
        self._count("misses")
        made = make()
        self._write(path, frontend_record(made))
        return made

    def _load_manifest(self, key: str, *, quiet: bool = False) -> list[_Build]:
        payload = self._read(self._path(key, "manifests"), quiet=quiet)
        if payload is None:
            return []
        try:
            if not isinstance(payload, list):
                raise TypeError(f"expected a list, found {type(payload).__name__}")
            return [
                _Build(
                    files=tuple((str(p), str(s)) for p, s in b["files"]),
                    listings=tuple((str(d), bool(r), str(s)) for d, r, s in b["listings"]),
                )
                for b in payload
            ]
        except (ValueError, KeyError, TypeError):
            if not quiet:
                self._count("corrupt")
            return []

    def _store_manifest(self, key: str, builds: Sequence[_Build]) -> None:
        payload = [
            {"files": [list(f) for f in b.files], "listings": [list(d) for d in b.listings]} for b in builds
        ]
        self._write(self._path(key, "manifests"), payload)


# The start of an entry as _write makes it, up to its payload.
_FAST_DOC = re.compile(rf'\{{"format": {FORMAT}, "sha256": "([0-9a-f]{{64}})", "payload": ')


def _messages(value: object) -> dict[str, tuple[str, ...]]:
    """An entry's "messages" table; TypeError when it is not {entry: [text, ...]}."""
    if not isinstance(value, dict) or not all(isinstance(v, list) for v in value.values()):
        raise TypeError("messages: expected a table of lists")
    return {str(k): tuple(str(t) for t in v) for k, v in value.items()}


def _report(ptxas_log: str, outline: str) -> object:
    try:
        return compiler.read_report(ptxas_log, outline)
    except ValueError as exc:
        return exc


def _sound(outputs: UnitOutputs, unit: Unit) -> bool:
    """Whether a unit's outputs can be read: ptxas reported every kernel of the PTX, and each name
    expression lowered to one of them (else an entry is damaged, or a build was)."""
    try:
        report = compiler.read_report(outputs.ptxas_log, outputs.outline)
    except ValueError:
        return False
    entries = outputs.entries
    return (
        all(e in report for e in entries)
        and set(outputs.lowered) == set(unit.names)
        and all(e in entries for e in outputs.lowered.values())
    )


def _provenance(toolkit: Toolkit, nvcc: Nvcc | None) -> Provenance:
    # An nvcc build is measured by nvcc's own toolkit, which is what its report must name.
    return nvcc.provenance() if nvcc is not None else compiler.nvrtc_provenance(toolkit)


# -- translation units, and their sharing within a run ----------------------------------------------------
Spec = tuple[Path, str, str, CompileOptions, Nvcc | None]  # (source, kernel, arch, options, nvcc or NVRTC)


@dataclass(frozen=True)
class Unit:
    """One translation unit to build for one arch: what a build, a cache entry and the run's sharing are
    keyed on. `names`: the NVRTC name expressions it is compiled with (none for nvcc, which builds every
    kernel the file instantiates, and for NVRTC's plain compile: every extern "C" and non-template kernel)."""

    source: Path
    arch: str
    options: CompileOptions
    nvcc: Nvcc | None = None
    names: tuple[str, ...] = ()
    __hash__ = compiler.hash_once

    @classmethod
    def of(cls, spec: Spec) -> Unit:
        source, _, arch, options, nvcc = spec
        return cls(source, arch, options, nvcc)

    def first(self, kernel: str, group: Sequence[str] | None) -> Unit:
        """The unit `pick` looks for `kernel` in first."""
        if self.nvcc is not None:
            return self
        return replace(self, names=compiler.nvrtc_name_sets(kernel, group)[0])


def pick(
    kernel: str, base: Unit, build: Callable[[Unit], UnitOutputs], group: Sequence[str] | None = None
) -> BuildOutputs:
    """`kernel`'s outputs, from the units of `base`'s file that `build` gives: nvcc's one, or the NVRTC
    units that may hold it (`compiler.pick_nvrtc`), `group` being the template names planned together."""
    if base.nvcc is not None:
        return build(base).pick(kernel, base.source, base.arch, base.nvcc)

    def unit(names: tuple[str, ...]) -> UnitOutputs:
        return build(replace(base, names=names))

    return compiler.pick_nvrtc(kernel, base.source, base.arch, unit, group)


_RECENT_UNITS = 16  # units kept after their last planned kernel, for kernels no plan named


class Prefetcher:
    """The run's translation units: each built (or found in the cache) once in this process and shared by
    all its kernels; with more than one job, built ahead of the tests on a thread pool (NVRTC releases the
    GIL; ptxas and nvcc are processes). The NVRTC kernels planned for one file and arch that need name
    expressions (template instances) are compiled together, with all their names.

    A unit is kept while a planned kernel still wants it, and a while after (`_RECENT_UNITS`), so that
    memory does not grow with the number of files in a run."""

    def __init__(self, cache: CompileCache, toolkit: Toolkit, jobs: int, ptxas_timeout: float) -> None:
        self.cache = cache
        self.toolkit = toolkit
        self.ptxas_timeout = ptxas_timeout
        self._lock = threading.Lock()
        self._units: dict[Unit, Future[UnitOutputs]] = {}
        self._kernels: dict[Unit, list[str]] = {}  # file (a unit without names) -> its planned kernels
        self._groups: dict[Unit, tuple[str, ...]] = {}  # NVRTC file -> the template names planned for it
        self._planned: Counter[Spec] = Counter()  # planned requests not made yet
        self._wanted: Counter[Unit] = Counter()  # ... per unit they look in first
        self._recent: OrderedDict[Unit, None] = OrderedDict()
        # Units prefetched for a listing: held (wanted) until the run's plan (`submit`) wants them for their
        # kernels, so that a manifest's units read at collection are still here when its items run.
        self._listings: set[Unit] = set()
        self._jobs = jobs
        self._pool: ThreadPoolExecutor | None = None  # started for the first build to make ahead

    def submit(self, specs: Iterable[Spec]) -> None:
        """Plan the kernels the run will ask for (and, with a pool, start building their units, in order)."""
        specs = list(specs)
        with self._lock:
            files: list[Unit] = []
            for spec in specs:
                base = Unit.of(spec)
                if base not in self._kernels:
                    files.append(base)
                self._kernels.setdefault(base, []).append(spec[1])
            for base in files:
                if base.nvcc is None:
                    self._groups[base] = self._group(base)
            first = []
            for spec in specs:
                base = Unit.of(spec)
                unit = self._first(base, spec[1], self._groups.get(base))
                self._planned[spec] += 1
                self._wanted[unit] += 1
                first.append(unit)
            self._release_listings()
        if self._jobs <= 1:
            return
        for unit in _worker_order(list(dict.fromkeys(first))):
            if self.cache.stored(unit, self.toolkit):
                continue
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self._jobs, thread_name_prefix="regbudget")
            self._pool.submit(self._prefetch, unit)

    def _group(self, base: Unit) -> tuple[str, ...]:
        """The template names of a file's planned kernels, but those its plain compile already holds."""
        held = self._plain(base)
        wanted = (k for k in self._kernels[base] if "<" in k)
        return tuple(sorted({k for k in wanted if held is None or held.entry(k) is None}))

    def _plain(self, base: Unit) -> UnitOutputs | None:
        """A file's plain NVRTC compile, when this process has built it already (a manifest's listing)."""
        future = self._units.get(base) if base.nvcc is None else None
        if future is None or not future.done() or future.exception() is not None:
            return None
        return future.result()

    def _first(self, base: Unit, kernel: str, group: Sequence[str] | None) -> Unit:
        """The unit `kernel` is looked for in first: the plain compile, when it is built and holds the kernel
        (a template instance the file makes itself), else `Unit.first`'s."""
        held = self._plain(base)
        return base if held is not None and held.entry(kernel) is not None else base.first(kernel, group)

    def get(self, spec: Spec) -> CompiledKernel:
        """`spec`'s kernel, from its unit (built now, or by another thread, or found in the cache)."""
        source, kernel, arch, options, nvcc = spec
        base = Unit.of(spec)
        text = compiler.read_source(source)
        with self._lock:
            group = self._groups.get(base)
            planned = self._planned[spec] > 0
            first = self._first(base, kernel, group)
            held = self._plain(base)
        try:
            if held is not None and held.entry(kernel) is not None:  # the plain compile, built already
                outputs = held.pick(kernel, source, arch)
            else:
                outputs = pick(kernel, base, lambda unit: self._outputs(unit, kernel), group)
        finally:
            if planned:
                self._release(spec, first)
        return compiler.interpret(
            outputs, source, text, kernel, arch, options, _provenance(self.toolkit, nvcc)
        )

    def entries(self, unit: Unit) -> list[str]:
        """The entries of every kernel in `unit` (shared with the builds of its kernels)."""
        return list(self._outputs(unit, None).entries)

    def _release_listings(self) -> None:
        """Let go of the listings' holds (the plan holds what its kernels want). Under the lock."""
        for unit in self._listings:
            self._unwant(unit)
        self._listings.clear()

    def prefetch_units(self, units: Iterable[Unit]) -> None:
        """Start building whole units ahead of whoever waits for them (a manifest's file listings, which
        collection would otherwise build one after another); each stays wanted until `entries` reads it."""
        units = [u for u in dict.fromkeys(units) if u not in self._listings]
        with self._lock:
            for unit in units:
                self._listings.add(unit)
                self._wanted[unit] += 1
        if self._jobs <= 1:
            return
        for unit in units:
            if self.cache.stored(unit, self.toolkit):
                continue
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self._jobs, thread_name_prefix="regbudget")
            self._pool.submit(self._prefetch, unit)

    def _outputs(self, unit: Unit, kernel: str | None) -> UnitOutputs:
        """The unit's outputs: built here, or by the thread already at it."""
        from concurrent.futures import TimeoutError as FutureTimeout  # not the builtin before Python 3.11

        future = self._future(unit, kernel)
        # Wait in short slices: a plain result() would hold off Ctrl-C until the build ends.
        while True:
            try:
                return future.result(timeout=0.1)
            except FutureTimeout:
                continue

    def _prefetch(self, unit: Unit) -> None:
        """For the pool: build the unit, unless a thread is at it already."""
        self._future(unit, None)

    def _future(self, unit: Unit, kernel: str | None) -> Future[UnitOutputs]:
        """The unit's one future in this process; the first caller builds it."""
        from concurrent.futures import Future

        with self._lock:
            future = self._units.get(unit)
            if future is not None:
                return future
            future = self._units[unit] = Future()
            if not self._wanted[unit]:
                self._remember(unit)
        try:
            label = self._label(unit, kernel)
            future.set_result(self.cache.unit(unit, self.toolkit, self.ptxas_timeout, label=label))
        except BaseException as exc:
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        return future

    def _label(self, unit: Unit, kernel: str | None) -> str:
        """How a build's errors name it: the kernel that asked, or the planned ones."""
        kernels = [kernel] if kernel is not None else self._kernels.get(replace(unit, names=()), [])
        more = f" and {len(kernels) - 1} more" if len(kernels) > 1 else ""
        return f"{kernels[0]}{more} [{unit.arch}]" if kernels else f"{unit.source.name} [{unit.arch}]"

    def _release(self, spec: Spec, unit: Unit) -> None:
        with self._lock:
            self._planned[spec] -= 1
            if self._planned[spec] <= 0:
                del self._planned[spec]
            self._unwant(unit)

    def _unwant(self, unit: Unit) -> None:
        """One hold on `unit` fewer; without any, it is among the recent units. Under the lock."""
        self._wanted[unit] -= 1
        if self._wanted[unit] <= 0:
            del self._wanted[unit]
            self._remember(unit)

    def _remember(self, unit: Unit) -> None:
        """Keep `unit` among the recent ones, forgetting the oldest built one that no plan wants."""
        self._recent[unit] = None
        self._recent.move_to_end(unit)
        if len(self._recent) <= _RECENT_UNITS or self.cache.directory is None:
            return  # without a cache on disk, a build let go would have to be made again
        old = next((u for u in self._recent if u not in self._wanted and self._done(u)), None)
        if old is not None:
            del self._recent[old]
            self._units.pop(old, None)

    def _done(self, unit: Unit) -> bool:
        future = self._units.get(unit)
        return future is None or future.done()

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _worker_order(units: list[Unit], env: Mapping[str, str] = os.environ) -> list[Unit]:
    """The order a pytest-xdist worker builds the run's units in: every worker plans them all, so each starts
    at its own share (gw1 of 2 halfway) rather than all waiting on the first unit's lock."""
    worker, count = env.get("PYTEST_XDIST_WORKER", ""), int(env.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if not worker.startswith("gw") or not worker[2:].isdigit() or count < 2:
        return units
    start = len(units) * (int(worker[2:]) % count) // count
    return units[start:] + units[:start]


def default_jobs(env: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The cores this process may use: all of them, divided among pytest-xdist's workers."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    workers = int(env.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    return max(1, cores // max(1, workers))
