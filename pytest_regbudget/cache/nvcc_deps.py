"""nvcc's dependency records: the files each build opened, and the paths its headers were looked for at.

nvcc lists what it opened (`-MD -MF`, read by `parse_depfile`). A record (`DepBuild`) keeps, for each build
seen, those files with their digests, every user-side path a header may have been looked for at with what
stood there (`nvcc_probes`, `probe_kind`), and the listings of the system directories it read from; a
lookup re-checks them all, as ccache's "direct mode" does.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from msgspec import Struct

from ..tools.options import CompileOptions
from ..util.files import json_digest, read_regular, sha256_hex
from ..util.patterns import lazy
from .fingerprint import StatCache, file_state, inside, listing_digest, outermost
from .includes import (
    DIR_OPTIONS,
    PRE_INCLUDE_OPTIONS,
    Directive,
    candidates,
    directives_of,
    option_values,
    search_path,
)

_DEP_TOKEN = lazy(r"(?:\\.|[^\s\\])+")


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

    # Paths as keys hold them (`StatCache.keyed`: `<rootdir>/...`), resolved against this run's places.
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
        here = digests.resolve
        if not all(file_state(here(path), digests) == state for path, state in self.files):
            return False
        if not all(probe_kind(here(path)) == kind for path, kind in self.probes):
            return False
        for keyed, recursive, state in self.listings:
            d = here(keyed)
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
            data = read_regular(path)
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
    return outermost(os.path.realpath(d) for d in user)
