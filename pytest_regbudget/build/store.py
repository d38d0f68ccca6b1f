"""The compile cache's documents: JSON, each with the checksum of its payload's exact text, written
atomically. A document that is damaged (cut short, edited, of another format or shape) reads as an error,
never as a value: msgspec checks the payload's types on the way in.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import msgspec
from msgspec import Struct

from ..core.baseline import atomic_write
from .fingerprint import FORMAT, sha256_hex

T = TypeVar("T")


class _Document(Struct, frozen=True):
    """Every cache document: the format, the checksum of the payload's JSON text, and that text."""

    format: int
    sha256: str
    payload: msgspec.Raw


def read(path: str, kind: type[T]) -> T:
    """The payload of the document at `path`, as `kind`. FileNotFoundError when there is none; another
    OSError or a ValueError (msgspec's DecodeError and ValidationError are ValueErrors) when it is damaged."""
    with open(path, "rb") as fh:
        doc = _DOCUMENT.decode(fh.read())
    # The checksum is of the payload's text as it stands in the file (msgspec.Raw keeps it).
    if doc.format != FORMAT or doc.sha256 != sha256_hex(bytes(doc.payload)):
        raise ValueError("checksum mismatch")
    return msgspec.json.decode(doc.payload, type=kind, dec_hook=_from_json)


def write(path: str, payload: object) -> None:
    """Write `payload` (a Struct, or JSON's types) as a document, atomically (OSError if it cannot be)."""
    body = _ENCODER.encode(payload)
    text = _ENCODER.encode(_Document(FORMAT, sha256_hex(body), msgspec.Raw(body)))
    atomic_write(Path(path), text.decode())


def _to_json(value: object) -> object:
    if isinstance(value, Path):  # FrontendPtx.source
        return str(value)
    raise NotImplementedError(type(value))


def _from_json(kind: type, value: object) -> object:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError(kind)


_ENCODER = msgspec.json.Encoder(enc_hook=_to_json)
_DOCUMENT = msgspec.json.Decoder(_Document)
