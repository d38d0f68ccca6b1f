"""Generic file helpers that know nothing of CUDA: reads of regular files only, parsers kept from recursing
past their depth, atomic writes, SHA-256 digests, checksummed JSON documents, and the writes of a cache
directory that others may have planted links in.

A document is JSON with the checksum of its payload's exact text, written atomically. One that is damaged (cut
short, edited, of another format or shape) reads as an error, never as a value: msgspec checks the payload's
types on the way in. The compile cache, the binary reader and the history cache keep their documents so.

A cache's files are written by `replace_in`: a temporary file, then a rename over the path, in folders made
without following a link (`cache_folder`). A link planted at a name the cache writes is so replaced, never
written through, and one planted as a folder stops the write. `unsafe_dir` says why a directory is not
safe to keep a cache in at all (others could write it).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import TypeVar

import msgspec
from msgspec import Struct

from .regular import NotRegular, TooDeep, not_regular, open_regular, parse_nested, read_regular

__all__ = ["NotRegular", "TooDeep", "not_regular", "open_regular", "parse_nested", "read_regular"]

# A file changed less than this long ago may change again within the same timestamp tick (some file
# systems count whole seconds): its digest is not remembered by its stat.
_RACY_NS = 2_000_000_000

T = TypeVar("T")
# Who may own what the cache reads and writes besides this user: root, who can write anything anyway.
_TRUSTED_OWNERS = frozenset({os.geteuid(), 0}) if hasattr(os, "geteuid") else frozenset({0})


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def json_digest(parts: object) -> str:
    return sha256_hex(json.dumps(parts, sort_keys=True).encode())


def file_sha256(path: Path) -> str:
    """A file's SHA-256, read in pieces: a library can be half a gigabyte."""
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def settled(st: os.stat_result) -> bool:
    """Whether a file has been still for longer than a timestamp tick: only then may its digest be
    remembered by its stat (an edit of the same size within the tick would keep the old one)."""
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS


def not_a_file(path: Path) -> str:
    """Why `path` cannot be a file that is read and replaced ("" if it is a regular file, a symbolic link to
    one, or nothing yet): a device, a FIFO, a socket or a directory would hang a read or be replaced."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except OSError as exc:
        return exc.strerror or str(exc)
    return not_regular(mode)


def one_globstar(pattern: str) -> str:
    """`pattern` with each run of `**` parts made one (`a/**/**/b` is `a/**/b`), and `.` and empty parts
    dropped (an absolute pattern stays absolute): they match the same files, but pathlib and glob walk the
    tree again for every `**` of a run, so that ten of them took minutes. "" where nothing is left (`.`)."""
    first, *rest = pattern.replace(os.sep, "/").split("/")
    parts = [first] if first != "." else []
    for part in rest:
        if part not in ("", ".") and not (part == "**" and parts[-1:] == ["**"]):
            parts.append(part)
    return "/".join(parts)


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write a temp file beside `path`, then replace: readers never see half a file. Text is UTF-8.

    A symbolic link is written through (its target replaced, in the target's directory, so the link stays a
    link); anything but a regular file or a missing path (a device such as /dev/null, a FIFO, a directory) is
    refused with OSError rather than replaced."""
    special = not_a_file(path)
    if special:
        raise OSError(errno.EINVAL, f"{path} is {special}", str(path))
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text if isinstance(text, bytes) else text.encode())
        # mkstemp makes the file private (0600); a committed file keeps its mode, a new one gets the umask's.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_in(root: Path, path: Path, data: str | bytes) -> None:
    """Write `path`, a file below the cache directory `root`: its folders made below `root` following no
    link (`cache_folder`), then a temporary file there renamed over the path. The rename replaces whatever
    name stands there, a symbolic link included, where opening the path would write through a link planted
    there to a file outside the cache. OSError if it cannot be written (the caller's cache then goes without
    it)."""
    cache_folder(root, path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data if isinstance(data, bytes) else data.encode())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's is private (0600): a cache file gets the umask's
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cache_folder(root: Path, folder: Path) -> None:
    """Make `folder`, a folder below the cache directory `root`, following no link below `root`: each part
    that is missing is made, a symbolic link in its place (which whoever else could write there may have
    planted, to make the cache write elsewhere) is replaced by a folder (removing a link touches nothing it
    points to), and each part must then be a directory of this user's (or root's). OSError otherwise.
    `root` itself and the folders above it are the user's to name, through links too."""
    parts = folder.relative_to(root).parts
    root.mkdir(parents=True, exist_ok=True)
    here = root
    for part in parts:
        here = here / part
        with contextlib.suppress(FileExistsError):
            os.mkdir(here)
        st = os.lstat(here)
        if stat.S_ISLNK(st.st_mode):
            os.unlink(here)
            os.mkdir(here)  # FileExistsError where another link was planted meanwhile: no write
            st = os.lstat(here)
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, f"{here} is not a directory", str(here))
        if st.st_uid not in _TRUSTED_OWNERS:
            raise OSError(errno.EPERM, f"{here} belongs to uid {st.st_uid}, not to this user", str(here))


def ready_lock(root: Path, path: Path) -> None:
    """Ready the lock file `path` below the cache directory `root` for filelock: its folder made as
    `cache_folder` makes one, and a symbolic link planted at its name removed (which touches nothing it
    points to). filelock opens a lock with O_NOFOLLOW, so a link planted after this fails the lock rather
    than truncating a file outside the cache. OSError if the folder cannot be made."""
    cache_folder(root, path.parent)
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.lstat(path).st_mode):
            os.unlink(path)


def unsafe_dir(directory: Path) -> str:
    """Why others than this user could write the cache directory `directory`, or swap it for theirs ("" where
    they cannot): then whatever it holds may be theirs. Decided as pip decides for its cache
    (`check_path_owner`), and as strictly as ssh's StrictModes for the folders above:

    - the directory (where it does not exist yet, its nearest existing parent, where it will be made) must
      be this user's, or root's where it is not the directory itself, and writable by no one else;
    - no folder above it may be writable by others without the sticky bit (/tmp's), which keeps them from
      renaming what is not theirs.

    Group-writable counts as the user's own where the group is the user's private one (same name, no other
    member: the umask-002 convention of Red Hat's user private groups). Links are followed: the path is the
    user's to name. The reason names the folder and the fix."""
    if not hasattr(os, "geteuid"):
        return ""  # no owners to compare (Windows)
    path = Path(os.path.realpath(directory))
    first = True  # the nearest existing: the directory, or the folder it will be made in
    for here in (path, *path.parents):
        try:
            st = os.stat(here)
        except FileNotFoundError:
            continue
        except OSError:
            return ""  # cannot be searched: the cache's own writes fail, which says nothing worse
        mode = stat.S_IMODE(st.st_mode)
        if first and st.st_uid not in ({os.geteuid()} if here == path else _TRUSTED_OWNERS):
            return f"{here} belongs to {_user(st.st_uid)}, not to you. Fix: use a directory of your own"
        first = False
        others = mode & 0o002 or (mode & 0o020 and not _own_group(st.st_gid))
        if others and (here == path or not mode & stat.S_ISVTX):
            who = "others" if mode & 0o002 else f"group {_group(st.st_gid)}"
            sticky = "" if here == path else ", no sticky bit"
            return f"{here} is writable by {who} (mode {mode:o}{sticky}). Fix: chmod go-w {here}"
    return ""


def _user(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        import grp

        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except (ImportError, KeyError):
        return f"gid {gid}"


def _own_group(gid: int) -> bool:
    """Whether group `gid` is this user's private group: the user's primary group, of the user's name, with
    no other member."""
    try:
        import grp
        import pwd

        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except (ImportError, KeyError):
        return False
    return gid == me.pw_gid and group.gr_name == me.pw_name and set(group.gr_mem) <= {me.pw_name}


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


class _Document(Struct, frozen=True):
    """Every document: the format, the checksum of the payload's JSON text, and that text."""

    format: int
    sha256: str
    payload: msgspec.Raw


def read_document(path: str, kind: type[T], format: int) -> T:
    """The payload of the document at `path`, as `kind`. FileNotFoundError when there is none; another
    OSError or a ValueError (msgspec's DecodeError and ValidationError are ValueErrors) when it is damaged."""
    doc = parse_nested(_DOCUMENT.decode, read_regular(path))
    # The checksum is of the payload's text as it stands in the file (msgspec.Raw keeps it).
    if doc.format != format or doc.sha256 != sha256_hex(bytes(doc.payload)):
        raise ValueError("checksum mismatch")
    return parse_nested(lambda raw: msgspec.json.decode(raw, type=kind, dec_hook=_from_json), doc.payload)


def write_document(path: str, payload: object, format: int, *, root: Path) -> None:
    """Write `payload` (a Struct, or JSON's types) as a document below the cache directory `root`, as
    `replace_in` writes (OSError if it cannot be)."""
    body = _ENCODER.encode(payload)
    text = _ENCODER.encode(_Document(format, sha256_hex(body), msgspec.Raw(body)))
    replace_in(root, Path(path), text)


def _to_json(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    raise NotImplementedError(type(value))


def _from_json(kind: type, value: object) -> object:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError(kind)


_ENCODER = msgspec.json.Encoder(enc_hook=_to_json)
_DOCUMENT = msgspec.json.Decoder(_Document)
