"""Generic file helpers that know nothing of CUDA: reads of regular files only, parsers kept from recursing
past their depth, atomic writes, SHA-256 digests, and checksummed JSON documents.

A document is JSON with the checksum of its payload's exact text, written atomically. One that is damaged (cut
short, edited, of another format or shape) reads as an error, never as a value: msgspec checks the payload's
types on the way in. The compile cache, the binary reader and the history cache keep their documents so.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

import msgspec
from msgspec import Struct

# A file changed less than this long ago may change again within the same timestamp tick (some file
# systems count whole seconds): its digest is not remembered by its stat.
_RACY_NS = 2_000_000_000

T = TypeVar("T")
A = TypeVar("A")


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


def not_regular(mode: int) -> str:
    """What a file of stat mode `mode` is where it is not a regular file ("a FIFO, not a regular file"); ""
    for a regular file."""
    if stat.S_ISREG(mode):
        return ""
    kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
    return f"{kind}, not a regular file"


# Opened without waiting: opening a FIFO for reading blocks until some process opens it for writing.
_NO_WAIT = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class NotRegular(OSError):
    """A path that names a FIFO, a device, a socket or a directory where a file is read; its strerror says
    which ("a FIFO, not a regular file")."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for reading in binary mode where it is a regular file (or a link to one); otherwise
    NotRegular. Every file the plugin reads from a project, a report or the cache is opened here: a FIFO
    would block the run for ever, and a device such as /dev/zero (a committed link can point at one) never
    ends. The check is made on the open file, so nothing can swap the path between the check and the read."""
    fd = os.open(path, os.O_RDONLY | _NO_WAIT)
    try:
        special = not_regular(os.fstat(fd).st_mode)
        if special:
            raise NotRegular(errno.EINVAL, special, os.fsdecode(path))
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)  # a regular file, read as usual
        return open(fd, "rb")  # open(), not os.fdopen(): a fault test replaces os.fdopen to fail writes
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file at `path` (`open_regular`'s refusals)."""
    with open_regular(path) as fh:
        return fh.read()


class TooDeep(ValueError):
    """A document nested deeper than its parser goes (see `parse_nested`)."""


def parse_nested(parse: Callable[[A], T], data: A) -> T:
    """`parse(data)` by a parser of nested documents (tomli, json, msgspec), with a document nested deeper
    than the parser goes raised as TooDeep, a ValueError as the parsers' other errors are
    (TOMLDecodeError, JSONDecodeError, msgspec's DecodeError), rather than as RecursionError, which no
    caller expects: 500 nested TOML arrays in a baseline stopped pytest with INTERNALERROR."""
    try:
        return parse(data)
    except RecursionError as exc:
        raise TooDeep(f"nested too deeply to read ({exc})") from None


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


def write_document(path: str, payload: object, format: int) -> None:
    """Write `payload` (a Struct, or JSON's types) as a document, atomically (OSError if it cannot be)."""
    body = _ENCODER.encode(payload)
    text = _ENCODER.encode(_Document(format, sha256_hex(body), msgspec.Raw(body)))
    atomic_write(Path(path), text.decode())


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
