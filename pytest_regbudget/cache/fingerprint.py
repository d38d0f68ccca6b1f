"""File digests, and whether a file or a tree is still as it was: what the compile cache's keys are made of.

`StatCache` remembers each file's SHA-256 by (size, mtime, ctime, inode, device), in memory and in one file
of the cache, so that an unchanged tree is stat()ed, not read; `file_state` is what a lookup of a path
finds (a digest, "absent", ...); the walks give a tree's digest (names and contents) or its listing
(names). Also the version of the cache's documents (`FORMAT`) and `Uncacheable`, raised where a key cannot
cover what a compiler may read. The keys themselves are keys.py's; nvcc's dependency records,
nvcc_deps.py's.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

from ..util.files import parse_nested, read_regular, replace_in, settled, sha256_hex

# The format of the cache's documents (the keys, the stat cache, the entries, the dependency records).
# 2: an entry keeps the PTX and cubin in a body file of its own, read only when needed (0.2).
# 3: the outline keeps setmaxnreg instructions, and entries keep ptxas's messages per kernel.
# 4: a build is keyed by the files it read and the paths it probed, not by whole directories (0.2).
# 5: an nvcc unit places a module-level ptxas message (C7508) on its kernel with ptxas -e, as NVRTC's do.
# 6: the outline keeps tcgen05.alloc instructions (a kernel's tensor memory), their counts resolved.
# 7: keys hold no times and no checkout or venv paths: paths relative to the rootdir or the toolkit's root
#    (`StatCache.keyed`), the toolkit by its wheels' RECORD digests; the compilers see rootdir-relative names.
FORMAT = 7
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

    def __init__(self, path: Path | None, root: Path | None = None) -> None:
        self.path = path
        self.root = root  # the cache directory that holds `path` (else its own folder), see replace_in
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
        # (label, root) of the places a key names paths relative to (the rootdir, the toolkit's roots), in
        # both their given and real spellings; `keyed` picks the innermost (a venv inside the checkout).
        self._bases: list[tuple[str, str]] = []
        self._keyed: dict[str, str] = {}
        self._generation = 0  # bumped by add_base: names made before it are made again

    def add_base(self, label: str, root: str | Path) -> None:
        """Key paths under `root` as `label/relative` (`keyed`): a key then holds what a path is, not where
        this checkout or venv happens to lie, so a cache restored at another path still hits."""
        with self._lock:
            for spelling in dict.fromkeys([os.path.abspath(root), os.path.realpath(root)]):
                if (label, spelling) not in self._bases:
                    self._bases = [*self._bases, (label, spelling)]
                    self._generation += 1
                    self._keyed = {}

    def keyed(self, path: str | Path) -> str:
        """`path` as a key holds it: `label/relative` under the innermost base (`add_base`), "/" between
        parts; any other path as its real path. Remembered while this object lives (a run)."""
        text = str(path)
        known = self._keyed.get(text)
        if known is None:
            # A base added meanwhile (by another compile thread) must not leave a name made without it.
            generation, memo = self._generation, self._keyed
            known = self._keyed_anew(text)
            if generation == self._generation:
                memo[text] = known
        return known

    def _keyed_anew(self, text: str) -> str:
        real = self.realpath(text)
        for spelling in dict.fromkeys([os.path.abspath(text), real]):
            found = [(label, root) for label, root in self._bases if inside(spelling, [root])]
            if found:
                label, root = max(found, key=lambda b: len(b[1]))
                rel = os.path.relpath(spelling, root)
                return label if rel == "." else f"{label}/{rel.replace(os.sep, '/')}"
        return real

    def resolve(self, keyed: str) -> str:
        """The path a `keyed` text names now: under the base of its label, or itself (a real path, or a
        label this run does not know, which then names nothing)."""
        label, _, rel = keyed.partition("/")
        root = next((r for lbl, r in self._bases if lbl == label), None)
        if root is None:
            return keyed
        return os.path.join(root, *rel.split("/")) if rel else root

    def _load(self) -> None:
        self._loaded = True
        if self.path is None:
            return
        # A damaged stat cache only costs reading files again: it maps stats to digests of what was read.
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            doc = parse_nested(json.loads, read_regular(self.path).decode("utf-8"))
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
        digest = sha256_hex(read_regular(path))
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
        digest = tree_digest(root, self, skip)
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
            replace_in(self.root or self.path.parent, self.path, text)


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


def tree_digest(root: str, digests: StatCache, skip: frozenset[str]) -> str:
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


def outermost(roots: Iterable[str]) -> list[str]:
    """The roots that are not inside another (a tree covers its subdirectories)."""
    kept: list[str] = []
    for root in sorted(set(roots), key=len):
        if not any(root == k or root.startswith(k.rstrip(os.sep) + os.sep) for k in kept):
            kept.append(root)
    return sorted(kept)


def inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)
