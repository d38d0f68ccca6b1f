"""A Clang compilation database (compile_commands.json, as CMake's CMAKE_EXPORT_COMPILE_COMMANDS and Bear
write it) read into the manifest's compile keys: for each CUDA file under the rootdir, its defines, include
dirs and other options, one `CompileEntry` per distinct entry.

Owns reading and checking the database, telling CUDA entries from the rest, and sorting each command's
words into defines, include dirs, options kept, and flags dropped. It drops what the plugin supplies itself:
the compiler (and a ccache-like launcher), what to make and where (-c, -o), the archs and the dependency
files. Everything else is kept word for word, so that nvcc sees what the build gave it. No pytest, no tool
runs: the database is the one file read (other paths are only resolved, or checked for existence).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path

from msgspec import Struct

from ..core.errors import ManifestError
from ..util.files import parse_nested, read_regular

# Words a build puts before the compiler: argv[0] is one of these, argv[1] is the compiler.
LAUNCHERS = frozenset({"ccache", "sccache", "distcc"})

# Flags whose value may be the next word ("-o x.o"); each also takes it after "=" ("--output-file=x.o").
DEFINE = frozenset({"-D", "--define-macro"})
INCLUDE = frozenset({"-I", "--include-path", "-isystem", "--system-include"})
DROPPED_WITH_VALUE = frozenset(
    {
        # Where the output goes: the plugin names its own.
        "-o",
        "--output-file",
        "-odir",
        "--output-directory",
        # Dependency files: the plugin tracks a build's inputs itself.
        "-MF",
        "-MT",
        "-MQ",
        "-MJ",
        "--dependency-output",
        "--dependency-target-name",
        # The archs: the plugin builds for each arch of the run, one at a time.
        "-arch",
        "--gpu-architecture",
        "-gencode",
        "--generate-code",
        "-code",
        "--gpu-code",
        "--cuda-gpu-arch",
        "--offload-arch",
    }
)
KEPT_WITH_VALUE = frozenset(
    {
        "-x",
        "--x",
        "-U",
        "--undefine-macro",
        "-std",
        "--std",
        "-ccbin",
        "--compiler-bindir",
        "-Xcompiler",
        "--compiler-options",
        "-Xptxas",
        "--ptxas-options",
        "-Xnvlink",
        "--nvlink-options",
        "-Xcudafe",
        "-Xfatbin",
        "--fatbin-options",
        "-Xlinker",
        "--linker-options",
        "-Xclang",
        "-maxrregcount",
        "--maxrregcount",
        "-rdc",
        "--relocatable-device-code",
        "-include",
        "--pre-include",
        "-iquote",
        "-idirafter",
        "-optf",
        "--options-file",
        "-default-stream",
        "--default-stream",
        "-diag-suppress",
        "--diag-suppress",
        "-t",
        "--threads",
    }
)
VALUED = DEFINE | INCLUDE | DROPPED_WITH_VALUE | KEPT_WITH_VALUE
# Flags that may also hold their value in the same word, with no "=" between ("-DFOO", "-I/x", "-MFa.d").
GLUED = ("-D", "-I", "-U", "-isystem", "-MF", "-MT", "-MQ", "-MJ", "-o", "-x")
# nvcc's flags that begin like a glued one but are not ("-objtemp" is no "-o bjtemp").
NOT_GLUED = frozenset({"-objtemp"})
DROPPED = frozenset(
    {
        # What to make: the plugin asks for its own output (relocatable -dc and -rdc=true are kept).
        "-c",
        "--compile",
        # Dependency files, as above.
        "-M",
        "-MM",
        "-MD",
        "-MMD",
        "-MP",
        "--generate-dependencies",
        "--generate-dependencies-with-compile",
        "--generate-nonsystem-dependencies",
        "--generate-nonsystem-dependencies-with-compile",
        "--generate-dependency-targets",
    }
)
# Paths that mean the same from any working directory once absolute; the plugin runs nvcc elsewhere.
PATH_VALUED = frozenset(
    {"-include", "--pre-include", "-ccbin", "--compiler-bindir", "-optf", "--options-file"}
)
# -x's values that mean CUDA: nvcc's and clang's.
CUDA_LANGUAGES = frozenset({"cu", "cuda"})


class CompileEntry(Struct, frozen=True):
    """One CUDA entry of the database, its command sorted into the manifest's compile keys."""

    file: Path  # absolute, resolved (os.path.realpath)
    defines: tuple[str, ...]  # "NAME" or "NAME=VALUE", in command order
    include_dirs: tuple[str, ...]  # absolute, in command order
    options: tuple[str, ...]  # every other flag kept, as separate argv words
    index: int  # 0-based position of the entry in the database


class _Word(Struct, frozen=True):
    """One flag of a command with its value: `words` is how the command wrote it (one word or two)."""

    name: str  # the flag ("-D", "-o"), or "" for a word that is no flag (an input file)
    value: str | None  # its value, None for a flag that takes none
    words: tuple[str, ...]
    glued: str  # how the value was attached: "=" ("-x=cu"), "" ("-DFOO"), or " " (the next word)


def _glued(word: str, flag: str) -> bool:
    return word.startswith(flag) and len(word) > len(flag)


def _words(argv: Sequence[str]) -> Iterator[_Word]:
    """A command's words (without the compiler) as flags with their values."""
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        name, eq, rest = word.partition("=")
        if word in VALUED:
            value = argv[i] if i < len(argv) else ""
            i += 1
            yield _Word(word, value, (word, value), " ")
        elif eq and name in VALUED:
            yield _Word(name, rest, (word,), "=")
        elif word not in NOT_GLUED and (glued := next((g for g in GLUED if _glued(word, g)), None)):
            yield _Word(glued, word[len(glued) :], (word,), "")
        elif word.startswith("-"):
            yield _Word(word, None, (word,), "")
        else:
            yield _Word("", word, (word,), "")


def _compiler_args(argv: Sequence[str]) -> list[str]:
    """argv without the compiler, and without the launcher before it."""
    skip = 2 if argv and os.path.basename(argv[0]) in LAUNCHERS else 1
    return list(argv[skip:])


def is_cuda(entry_args: Sequence[str], file: str) -> bool:
    """Whether an entry compiles CUDA: its file ends in .cu, or its command (all of it, compiler included)
    sets the language to CUDA (`-x cu`, `-x=cu`, `--x cu`, clang's `-x cuda`) before the file."""
    if file.endswith(".cu"):
        return True
    language = None
    for word in _words(_compiler_args(entry_args)):
        if word.name in ("-x", "--x"):
            language = word.value
        elif word.name == "" and word.value == file:
            break
    return language in CUDA_LANGUAGES


def _absolute(path: str, directory: str) -> str:
    return os.path.normpath(os.path.join(directory, path))


def _entry(argv: Sequence[str], file: Path, directory: str, index: int) -> CompileEntry:
    """One entry's command sorted into the compile keys (see the tables at the top)."""
    defines: list[str] = []
    include_dirs: list[str] = []
    options: list[str] = []
    for word in _words(_compiler_args(argv)):
        if word.name in DEFINE:
            if word.value:
                defines.append(word.value)
        elif word.name in INCLUDE:
            if word.value:
                include_dirs.append(_absolute(word.value, directory))
        elif word.name in DROPPED or word.name in DROPPED_WITH_VALUE:
            continue
        elif word.name == "" and word.value is not None:
            if os.path.realpath(_absolute(word.value, directory)) != str(file):
                options.append(word.value)  # an input that is not the entry's file: the build gave it
        elif word.name in PATH_VALUED and word.value is not None:
            value = word.value
            resolved = _absolute(value, directory)
            if not os.path.isabs(value) and (
                word.name in ("-optf", "--options-file") or os.path.exists(resolved)
            ):
                value = resolved
            options.extend((word.name, value) if word.glued == " " else (f"{word.name}{word.glued}{value}",))
        else:
            options.extend(word.words)
    return CompileEntry(file, tuple(defines), tuple(include_dirs), tuple(options), index)


def _kind(value: object) -> str:
    """A JSON value's kind, as JSON names it."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _read(path: Path) -> list[object]:
    how = (
        "write it with cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON (in the build folder) or bear -- make, "
        "or fix the path"
    )
    try:
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        raise ManifestError(f"compilation database {path} does not exist: {how}") from None
    except (OSError, UnicodeDecodeError) as exc:
        shown = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ManifestError(f"compilation database {path} cannot be read ({shown}): {how}") from None
    try:
        data = parse_nested(json.loads, text)
    except ValueError as exc:  # JSONDecodeError, or TooDeep
        raise ManifestError(f"compilation database {path} is not JSON ({exc}): {how}") from None
    if not isinstance(data, list):
        raise ManifestError(
            f"compilation database {path} holds {_kind(data)}, not a list of entries "
            '([{"directory": ..., "file": ..., "command" or "arguments": ...}, ...]): ' + how
        )
    return data


def _argv(path: Path, index: int, raw: object) -> tuple[str, str, list[str]]:
    """(directory, file, argv) of one entry, checked."""
    where = f"compilation database {path}, entry [{index}]"
    need = ': each entry needs "directory", "file", and "arguments" (a list of words) or "command" (a string)'
    if not isinstance(raw, dict):
        raise ManifestError(f"{where} is {_kind(raw)}, not an object{need}")
    directory, file = raw.get("directory"), raw.get("file")
    if not isinstance(directory, str) or not isinstance(file, str):
        lacking = [k for k, v in (("directory", directory), ("file", file)) if not isinstance(v, str)]
        raise ManifestError(f"{where} has no string {' or '.join(repr(k) for k in lacking)}{need}")
    arguments, command = raw.get("arguments"), raw.get("command")
    if isinstance(arguments, list) and all(isinstance(a, str) for a in arguments):
        return directory, file, [str(a) for a in arguments]
    if isinstance(command, str):
        try:
            return directory, file, shlex.split(command)
        except ValueError as exc:
            raise ManifestError(f"{where}: its command cannot be split into words ({exc}){need}") from None
    raise ManifestError(
        f"{where} ({file}) has neither a list of strings 'arguments' nor a string 'command'{need}"
    )


def load(path: Path, rootdir: Path) -> dict[Path, list[CompileEntry]]:
    """The database's CUDA entries under rootdir, by resolved file, each file's entries in database order.

    A file listed several times keeps each entry (each one a variant of the file); identical entries (same
    flags) are one. Entries of other languages and of files outside the rootdir are left out. Raises
    ManifestError, naming the database, for a database that is missing, unreadable, not JSON or not a list,
    or an entry without "directory" and "file", or without both "command" and "arguments".
    """
    root = os.path.realpath(rootdir)
    base = os.path.dirname(os.path.abspath(path))
    out: dict[Path, list[CompileEntry]] = {}
    for index, raw in enumerate(_read(path)):
        directory, file, argv = _argv(path, index, raw)
        directory = _absolute(directory, base)  # the spec wants it absolute; a relative one is the database's
        resolved = os.path.realpath(_absolute(file, directory))
        if os.path.commonpath((root, resolved)) != root or not is_cuda(argv, file):
            continue
        entry = _entry(argv, Path(resolved), directory, index)
        same = out.setdefault(entry.file, [])
        if not any(
            (e.defines, e.include_dirs, e.options) == (entry.defines, entry.include_dirs, entry.options)
            for e in same
        ):
            same.append(entry)
    return out
