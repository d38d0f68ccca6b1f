"""A `build.ninja` written by PyTorch's `BuildExtension` (setup.py) or `torch.utils.cpp_extension.load`, read
into the manifest's compile keys: for each CUDA file under the rootdir, the nvcc command torch wrote for it.

Owns reading the file (the subset of ninja's syntax such files use: file-level variables, `rule` and `build`
blocks with their indented bindings, `$`-escapes, line continuations, `default`, comments; `include` and
`subninja` are refused by name), expanding an edge's command as ninja would (`$in`, `$out`, the edge's
bindings, then the rule's, then the file's), choosing the CUDA edges (the rule `cuda_compile`, or any rule
whose command runs `$nvcc` on a `.cu`), and splitting each command as `/bin/sh` splits it
(`shlex`, posix: torch writes `--compiler-options ''"'"'-fPIC'"'"''`). What selects the outputs, the archs,
the dependency files and the host compiler is dropped (the plugin builds `-cubin -arch=sm_XX` itself, with
the run's own nvcc, not the file's `nvcc =`); every other word is kept, in the command's order.

Why not a library: PyPI's `ninja_syntax` only writes files, the `ninja` package ships the binary and no
parser, and `ninja -t compdb` would need that binary on every machine that reads the file (a CPU-only CI job
need not have it). No pytest, no tool runs: the file is the one thing read.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from msgspec import Struct

from ..core.errors import ManifestError
from ..util.files import read_regular
from ..util.patterns import lazy
from . import compile_commands
from .compile_commands import KEPT_WITH_VALUE, CompileEntry

# Words that select the outputs, archs, dependency files and host compiler: the plugin gives its own. A
# compilation database's (outputs, dependency files, archs), and nvcc's threads and host compiler, which torch
# sets where a database of CMake's would not.
DROPPED_WITH_VALUE = compile_commands.DROPPED_WITH_VALUE | {"--threads", "-t", "-ccbin", "--compiler-bindir"}
DROPPED = frozenset(
    {
        "-c",
        "--compile",
        "-MD",
        "-MMD",
        "-MP",
        "--generate-dependencies-with-compile",
        "--generate-nonsystem-dependencies-with-compile",
    }
)
# Flags whose value a word may hold with no "=" between ("-MFx.d", "-oout.o", "-gencodearch=..."), and the
# nvcc flags that merely begin like one of them.
GLUED_DROPPED = ("-o", "-MF", "-MT", "-MQ", "-gencode", "-arch")
NOT_GLUED = ("-odir", "-optf", "-objtemp", "-opt-info")
# Words kept with the value that follows them, so that a value is never read as a flag ("-Xcompiler -MD").
KEPT_VALUED = KEPT_WITH_VALUE - DROPPED_WITH_VALUE
CUDA_RULE = "cuda_compile"
_HOW = (
    "write it with `python setup.py build_ext` (torch's BuildExtension writes build/temp.*/build.ninja) or "
    "torch.utils.cpp_extension.load(..., build_directory=...), or let the plugin run setup.py: "
    'torch_extension = "setup.py"'
)
_VAR = lazy(r"[A-Za-z0-9_.-]+")
_SIMPLE_VAR = lazy(r"[A-Za-z0-9_-]+")


class NinjaError(ValueError):
    """A line of the file that is not ninja, or that uses what such files never do."""


class Edge(Struct, frozen=True):
    """One `build` line: its rule, explicit outputs and inputs (paths as written, escapes undone), and its
    bindings (already expanded in the file's scope, as ninja expands them)."""

    rule: str
    outputs: tuple[str, ...]
    inputs: tuple[str, ...]
    bindings: Mapping[str, str]


class NinjaFile(Struct, frozen=True):
    variables: Mapping[str, str]  # file-level, expanded
    rules: Mapping[str, Mapping[str, str]]  # rule -> its bindings, unexpanded (ninja expands them late)
    edges: tuple[Edge, ...]

    def command(self, edge: Edge) -> str:
        """The edge's command as ninja runs it: `$in`/`$out` shell-quoted where needed, then the edge's
        bindings, the rule's (expanded late, in the edge's scope), the file's."""

        def lookup(name: str, seen: tuple[str, ...]) -> str:
            if name == "in":
                return " ".join(shlex.quote(p) for p in edge.inputs)
            if name == "out":
                return " ".join(shlex.quote(p) for p in edge.outputs)
            if name in edge.bindings:
                return edge.bindings[name]
            rule = self.rules.get(edge.rule, {})
            if name in rule:
                if name in seen:
                    raise NinjaError(f"rule {edge.rule!r}: variable {name!r} refers to itself")
                return _expand(rule[name], lambda n: lookup(n, (*seen, name)))
            return self.variables.get(name, "")

        return lookup("command", ())


def _expand(text: str, lookup: Callable[[str], str]) -> str:
    """`text` with `$var`, `${var}`, `$$`, `$ `, `$:` and `$\\n` undone; `lookup(name)` gives a variable."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "$":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1 : i + 2]
        if nxt in ("$", " ", ":"):
            out.append(nxt)
            i += 2
        elif nxt == "{":
            end = text.find("}", i + 2)
            if end < 0 or not _VAR.fullmatch(text[i + 2 : end]):
                raise NinjaError(f"bad ${{...}} in {text!r}")
            out.append(lookup(text[i + 2 : end]))
            i = end + 1
        elif (m := _SIMPLE_VAR.match(text, i + 1)) is not None:
            out.append(lookup(m.group()))
            i = m.end()
        else:
            raise NinjaError(f"bad $-escape in {text!r}")
    return "".join(out)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines with `$` line continuations joined (the next line's leading spaces dropped), numbered by the
    first, with comment lines left out."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].rstrip("\r")
        i += 1
        while _continued(line) and i < len(lines):
            line = line[:-1] + lines[i].rstrip("\r").lstrip(" ")
            i += 1
        if line.strip().startswith("#") or not line.strip():
            continue
        yield number, line


def _continued(line: str) -> bool:
    dollars = len(line) - len(line.rstrip("$"))
    return dollars % 2 == 1


def _paths(text: str, lookup: Callable[[str], str]) -> list[str]:
    """Space-separated paths (a `$ ` is a space inside one), each expanded."""
    parts = re.split(r"(?<!\$) +", text.strip()) if text.strip() else []
    # `$$ ` ends a path with a `$`: the split above keeps it joined, which such files never write.
    return [_expand(p, lookup) for p in parts if p]


def _split_build(rest: str) -> tuple[str, str]:
    """`outputs: rule inputs` split at the first unescaped colon."""
    i = 0
    while i < len(rest):
        if rest[i] == "$":
            i += 2
            continue
        if rest[i] == ":":
            return rest[:i], rest[i + 1 :]
        i += 1
    raise NinjaError(f"build line without ':' ({rest!r})")


def parse(text: str) -> NinjaFile:
    variables: dict[str, str] = {}
    rules: dict[str, dict[str, str]] = {}
    edges: list[Edge] = []
    block: dict[str, str] | None = None  # the bindings of the rule or build above an indented line
    pending: tuple[str, list[str], list[str], dict[str, str]] | None = None

    def file_lookup(name: str) -> str:
        return variables.get(name, "")

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            edges.append(Edge(pending[0], tuple(pending[1]), tuple(pending[2]), dict(pending[3])))
            pending = None

    for number, line in _logical_lines(text):
        try:
            if line.startswith(" ") or line.startswith("\t"):
                name, eq, value = line.strip().partition("=")
                if not eq or block is None:
                    raise NinjaError("an indented line outside a rule or build block")
                name, value = name.strip(), value.lstrip(" ")
                if pending is not None:  # a build binding: expanded now, in the file's scope and its own
                    block[name] = _expand(value, functools.partial(_edge_lookup, pending[3], variables))
                else:
                    block[name] = value
                continue
            flush()
            block = None
            word, _, rest = line.partition(" ")
            if word == "rule":
                block = rules.setdefault(rest.strip(), {})
            elif word == "build":
                outs, after = _split_build(rest)
                rule, _, ins = after.strip().partition(" ")
                outputs = _paths(outs.split(" | ")[0].split(" |@ ")[0], file_lookup)
                inputs = _paths(ins.split(" | ")[0].split(" || ")[0].split(" |@ ")[0], file_lookup)
                pending = (rule, outputs, inputs, {})
                block = pending[3]
            elif word in ("default", "pool"):
                block = {} if word == "pool" else None
            elif word in ("include", "subninja"):
                raise NinjaError(f"{word} is not read (torch's files have none): inline {rest.strip()!r}")
            else:
                name, eq, value = line.partition("=")
                if not eq or not _VAR.fullmatch(name.strip()):
                    raise NinjaError(f"not a ninja line: {line!r}")
                variables[name.strip()] = _expand(value.lstrip(" "), file_lookup)
        except NinjaError as exc:
            raise NinjaError(f"line {number}: {exc}") from None
    flush()
    return NinjaFile(variables, rules, tuple(edges))


def _edge_lookup(edge: Mapping[str, str], variables: Mapping[str, str], name: str) -> str:
    return edge[name] if name in edge else variables.get(name, "")


def _runs_nvcc(ninja: NinjaFile, edge: Edge) -> bool:
    command = ninja.rules.get(edge.rule, {}).get("command", "")
    return edge.rule == CUDA_RULE or bool(re.match(r"\s*\$(\{nvcc\}|nvcc\b)", command))


def cuda_words(argv: Sequence[str], source: str) -> list[str]:
    """The words of an nvcc command (argv[0] is nvcc) that the plugin keeps, in order: without its inputs,
    outputs, archs, dependency files, thread count and host compiler."""
    kept: list[str] = []
    i = 1
    while i < len(argv):
        word = argv[i]
        i += 1
        name, eq, _ = word.partition("=")
        if word in DROPPED:
            continue
        if word in DROPPED_WITH_VALUE:
            i += 1
            continue
        if eq and name in DROPPED_WITH_VALUE:
            continue
        if any(word.startswith(g) and len(word) > len(g) for g in GLUED_DROPPED) and not any(
            word == n or word.startswith(f"{n}=") for n in NOT_GLUED
        ):
            continue
        if word in KEPT_VALUED:
            kept.extend(argv[i - 1 : i + 1])
            i += 1
            continue
        if word == source:
            continue
        kept.append(word)
    return kept


def commands(text: str) -> list[tuple[str, list[str]]]:
    """Each CUDA edge's source (as the file names it) and its full command, split as /bin/sh splits it."""
    ninja = parse(text)
    out = []
    for edge in ninja.edges:
        sources = [p for p in edge.inputs if p.endswith(".cu")]
        if len(sources) != 1 or not _runs_nvcc(ninja, edge):
            continue
        command = ninja.command(edge)
        try:
            out.append((sources[0], shlex.split(command, posix=True)))
        except ValueError as exc:
            raise NinjaError(f"the command of {sources[0]} is not valid /bin/sh ({exc})") from None
    return out


def read(path: Path) -> str:
    """The file's text; ManifestError naming it, and how to write it, when it cannot be read."""
    try:
        return read_regular(path).decode("utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist: {_HOW}") from None
    except (OSError, UnicodeDecodeError) as exc:
        shown = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ManifestError(f"{path} cannot be read ({shown}): {_HOW}") from None


def load_text(text: str, where: str, directory: Path, rootdir: Path) -> dict[Path, list[CompileEntry]]:
    """The CUDA edges of a build.ninja's `text` under rootdir, by resolved file, each with its kept words as
    options (in command order). Paths in the file are relative to `directory` (ninja runs there). A file that
    two edges build with different words is one entry per command. ManifestError names `where`."""
    try:
        found = commands(text)
    except NinjaError as exc:
        raise ManifestError(f"{where}: {exc}: {_HOW}") from None
    root = os.path.realpath(rootdir)
    out: dict[Path, list[CompileEntry]] = {}
    for index, (source, argv) in enumerate(found):
        resolved = os.path.realpath(os.path.join(directory, source))
        if os.path.commonpath((root, resolved)) != root:
            continue
        words = tuple(cuda_words(argv, source))
        entry = CompileEntry(Path(resolved), (), (), words, index)
        same = out.setdefault(entry.file, [])
        if not any(e.options == words for e in same):
            same.append(entry)
    return out


def load(path: Path, rootdir: Path) -> dict[Path, list[CompileEntry]]:
    """`load_text` of the file at `path`."""
    return load_text(read(path), str(path), path.parent, rootdir)


def how_to_write() -> str:
    return _HOW
