"""The documents of one compile cache directory, and how each is read back.

A unit's entry holds what its build printed and made (`_EntryDocument`), but its PTX and cubin, which are in
a body file of their own, read only when first needed and made again (`rebuild`) when damaged. A dependency
record holds an nvcc unit's builds (`DepBuild`), a `FailedBuild` a build the compiler rejected. Every
document is a JSON file written atomically with a checksum (`util.files.write_document`): a corrupt or
unreadable one is counted and rebuilt, never trusted. The checksum detects damage, not tampering: whoever
can write the cache directory can make it report anything. Which key finds which document is store.py's.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from msgspec import Struct

from ..core import names
from ..core.errors import CompileError
from ..core.facts import Deferred
from ..tools import compiler
from ..tools.outputs import UnitOutputs
from ..tools.units import Unit
from ..util.files import read_document, read_regular, replace_in, sha256_hex, write_document
from .fingerprint import FORMAT
from .nvcc_deps import DepBuild

T = TypeVar("T")


class Entries:
    """The documents of a cache directory (None: no cache; then nothing may be read or written), each
    named by its key. `count` is told of each hit, miss and damaged document ("hits", "misses",
    "corrupt")."""

    def __init__(self, directory: Path | None, count: Callable[[str], None]) -> None:
        self.directory = directory
        self._count = count

    def path(self, key: str, kind: str = "", suffix: str = ".json") -> str:
        assert self.directory is not None
        # A string, from one join: every kernel of a warm run reads one, and a Path costs more than the read.
        return os.path.join(self.directory, f"v{FORMAT}", kind, key[:2], f"{key}{suffix}")

    def hit(
        self, key: str, unit: Unit, rebuild: Callable[[], UnitOutputs], *, quiet: bool = False
    ) -> UnitOutputs | None:
        """The entry of `key`, if it is there and sound (a damaged one is counted, unless `quiet`). Its body
        (PTX and cubin) is read when first needed; `rebuild` makes it again if it turns out damaged then."""
        loaded = self._load(key, rebuild, quiet=quiet)
        if loaded is None:
            return None
        cached, demangled = loaded
        if not sound(cached, unit):
            if not quiet:
                self._count("corrupt")
            return None
        names.learn(demangled)
        self._count("hits")
        return cached

    def read(self, path: str, kind: type[T], *, quiet: bool = False) -> T | None:
        """A document's payload as `kind`; None if absent or damaged (counted, unless `quiet`)."""
        try:
            return read_document(path, kind, FORMAT)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            if not quiet:
                self._count("corrupt")
            return None

    def write(self, path: str, payload: object) -> None:
        # A read-only or full cache directory slows the run down; it must not fail it.
        assert self.directory is not None
        with contextlib.suppress(OSError):
            write_document(path, payload, FORMAT, root=self.directory)

    def _load(
        self, key: str, rebuild: Callable[[], UnitOutputs], *, quiet: bool = False
    ) -> tuple[UnitOutputs, dict[str, str]] | None:
        """An entry's outputs, with its body to be read when first needed, and its kernels' demangled
        names."""
        doc = self.read(self.path(key), _EntryDocument, quiet=quiet)
        if doc is None:
            return None
        body = doc.body
        outputs = UnitOutputs(
            outline=doc.outline,
            nvrtc_log=doc.nvrtc_log,
            ptxas_log=doc.ptxas_log,
            body=Deferred(
                lambda: self._body(key, body.sha256, body.ptx_bytes, doc.outline, doc.ptxas_log, rebuild)
            ),
            lowered=doc.lowered,
            messages=doc.messages,
        )
        return outputs, doc.names

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
            data = read_regular(self.path(key, suffix=".body"))
            if sha256_hex(data) != digest or ptx_bytes > len(data):
                raise ValueError("checksum mismatch")
            return data[:ptx_bytes].decode(), data[ptx_bytes:]
        except (OSError, ValueError):
            self._count("corrupt")
        fresh = rebuild()
        self._count("misses")
        # The logs may differ in a temporary file's name; the numbers read from them may not.
        if _report(fresh.ptxas_log, fresh.outline) != _report(ptxas_log, outline):
            raise CompileError(
                f"the compile cache entry {self.path(key)} lost its PTX and cubin, and building them again "
                "gave a different ptxas report; run again (the entry is replaced), or with "
                "--regbudget-no-cache",
                fresh.ptxas_log,
            )
        self.store(key, fresh)
        return fresh.ptx, fresh.cubin

    def store(self, key: str, outputs: UnitOutputs) -> None:
        ptx = outputs.ptx.encode()
        data = ptx + outputs.cubin
        # The entries, and the functions that spill, which a kernel's spill budget names by their C++ names.
        mangled = [e for e in (*outputs.entries, *_spilling(outputs)) if e.startswith("_Z")]
        doc = _EntryDocument(
            outline=outputs.outline,
            nvrtc_log=outputs.nvrtc_log,
            ptxas_log=outputs.ptxas_log,
            lowered=dict(outputs.lowered),
            # As the demangler prints them now: a run that finds every build here demangles nothing.
            names={e: names.demangle(e) for e in mangled},
            body=_BodyDigest(sha256_hex(data), len(ptx)),
            messages=dict(outputs.messages),
        )
        # The body first: an entry is only ever found with the body it names (or a damaged one, made again).
        assert self.directory is not None
        with contextlib.suppress(OSError):
            replace_in(self.directory, Path(self.path(key, suffix=".body")), data)
            self.write(self.path(key), doc)

    def record(self, key: str, *, quiet: bool = False) -> list[DepBuild]:
        return self.read(self.path(key, "records"), list[DepBuild], quiet=quiet) or []

    def store_record(self, key: str, builds: Sequence[DepBuild]) -> None:
        self.write(self.path(key, "records"), list(builds))

    def failed(self, key: str) -> FailedBuild | None:
        """The rejected build kept under `key`, if there is one."""
        return self.read(self.path(key, "failed"), FailedBuild)

    def store_failed(self, key: str, failure: FailedBuild) -> None:
        self.write(self.path(key, "failed"), failure)


class FailedBuild(Struct, frozen=True):
    """A build the compiler rejected: its error, as the build raised it."""

    message: str
    log: str


class _BodyDigest(Struct, frozen=True):
    sha256: str  # of the body file: the PTX's bytes, then the cubin's
    ptx_bytes: int


class _EntryDocument(Struct, frozen=True):
    """A unit's entry: what its build printed and made, but the PTX and cubin, which are in its body file."""

    outline: str
    nvrtc_log: str
    ptxas_log: str
    lowered: dict[str, str]  # name expression -> mangled entry
    names: dict[str, str]  # mangled entry -> demangled name
    body: _BodyDigest
    messages: dict[str, tuple[str, ...]]


def _spilling(outputs: UnitOutputs) -> list[str]:
    """The functions of a build that spill, by the name a relocatable build's clones ("$5") share."""
    return [f.name.partition("$")[0] for f in compiler.read_functions(outputs.ptxas_log) if f.spills]


def _report(ptxas_log: str, outline: str) -> object:
    try:
        return compiler.read_report(ptxas_log, outline)
    except ValueError as exc:
        return exc


def sound(outputs: UnitOutputs, unit: Unit) -> bool:
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
