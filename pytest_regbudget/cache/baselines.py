"""A baseline file's entries as parsed, kept in the cache directory: a run whose baseline did not change reads
them back instead of parsing the TOML again. libcublas's 8,436 entries (3.5 MB of TOML) take 0.5 s to parse
and 30 ms to read back, on every run of every shard and xdist worker (docs/speed.md, "Issue 42").

One document per baseline path (`baselines/<digest of the path>.json`), holding the SHA-256 of the text it
was parsed from: a changed file misses and replaces it, so the folder does not grow with the file's history.
The document is checksummed (util/files.py), and one that is damaged, of another format, or of other text is
parsed anew and rewritten; a cache that cannot be written costs the parse, never the run.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec
from msgspec import Struct

from ..core import baseline as bl
from ..util.files import read_document, sha256_hex, write_document

# Bump when core/baseline.py's parse, its records or names.stable (which it applies to kernel names) change
# what a file reads as: a document of another format is parsed anew.
_FORMAT = 1
# What reading a document may raise: OSError, msgspec's errors (ValueErrors), and a type the decoder does not
# know (NotImplementedError, TypeError): each is a miss.
_UNREADABLE = (OSError, ValueError, NotImplementedError, TypeError)


class _Parsed(Struct, frozen=True):
    text_sha256: str
    entries: list[tuple[bl.Key, bl.BaselineEntry]]
    broken: list[tuple[bl.BuildKey, bl.BrokenBuild]]


def load(path: Path, cache_dir: Path | None) -> bl.Baseline:
    """The entries of `path` (core/baseline.py `load`), read back from `cache_dir` where they were parsed
    from the same text."""
    text = bl.read(path)
    if text is None:
        return bl.Baseline()
    if cache_dir is None:
        return bl.parse(text, path)
    document = str(cache_dir / "baselines" / f"{sha256_hex(str(path.resolve()).encode())}.json")
    digest = sha256_hex(f"{bl.FORMAT_VERSION}|".encode() + text.encode())
    with contextlib.suppress(*_UNREADABLE):
        parsed = read_document(document, _Parsed, _FORMAT)
        if parsed.text_sha256 == digest:
            return bl.Baseline(dict(parsed.entries), dict(parsed.broken))
    baseline = bl.parse(text, path)  # BaselineError for a bad file, whatever the cache holds
    kept = _Parsed(digest, list(baseline.entries.items()), list(baseline.broken.items()))
    # An entry's free-form tables (`gpu`, `extra`) may hold what JSON does not (a TOML date): such a file is
    # parsed on every run rather than read back as something else.
    with contextlib.suppress(*_UNREADABLE):
        if msgspec.json.decode(msgspec.json.encode(kept), type=_Parsed) == kept:
            write_document(document, kept, _FORMAT, root=cache_dir)
    return baseline
