"""Reads that need nothing but the standard library: a regular file's bytes (never a FIFO's or a device's),
and a parser of nested documents kept from recursing past its depth. The baseline checker that pre-commit runs
without installing the package's dependencies (core/baseline_check.py) reads through these, as every other
reader does through util/files.py, which re-exports them.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from typing import BinaryIO, TypeVar

T = TypeVar("T")
A = TypeVar("A")


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
