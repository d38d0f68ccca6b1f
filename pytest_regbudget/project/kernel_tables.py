"""One `[[kernels]]` table of the manifest, checked: what it may hold and what its globs find.

Owns the records of a table (`Table`) and of a variant (`Variant`, `variant_id`), and reading one table:
every key is checked by the marker's own code (`markers.parse_marker`), so it means what the marker key
means; its `source`/`binary` globs are expanded relative to the rootdir and never leave it (`contained`),
less what its `exclude` names; its `variants` and its compilation database (`compile_commands`, read by
compile_commands.py) give one variant per define set; a PyTorch extension's build (`build_ninja`,
`torch_extension`: torch_tables.py) gives each file its nvcc flags. A bad table is one `ManifestError` naming
the file, the table and the key. How tables combine, and where the manifest is, is manifest.py's. No pytest;
no tool runs but a `torch_extension`'s setup.py (tools/torch_build.py), and that once per setup.py and torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from msgspec import Struct, field

from ..core import names
from ..core.errors import ManifestError, MarkerError
from ..core.text import close_key_hint
from ..tools.options import CompileOptions
from ..util.files import one_globstar
from ..util.patterns import lazy
from . import compile_commands as cdb
from . import torch_tables
from .markers import BUDGET_KEYS, VALID_KEYS, parse_marker

# Where a table's kernels are, which of them, and their variants; the rest are the marker's keys.
SELECT_KEYS = (
    "source",
    "binary",
    "exclude",
    "compile_commands",
    *torch_tables.KEYS,
    "kernels",
    "variants",
)
# What a variant table may hold besides its defines: its own launch, shared memory, roles and budgets.
VARIANT_KEYS = ("defines", *BUDGET_KEYS)
TABLE_KEYS = (*SELECT_KEYS, *(k for k in VALID_KEYS if k not in ("source", "binary", "kernel")))
# The compilers whose builds list their kernels, for "*" and other patterns (a binary lists its own).
LISTING_COMPILERS = ("nvrtc", "nvcc")
DEFAULT_KERNELS = ("*",)


class Table(Struct, frozen=True):
    """One `[[kernels]]` table, checked: the files its globs matched and its keys as written."""

    index: int  # 1-based, in file order
    label: str  # "regbudget.toml, [[kernels]] table 2": how errors name it
    files: tuple[Path, ...]
    binary: bool  # binary= (read by cuobjdump), not source= (compiled)
    patterns: tuple[str, ...]  # `kernels`
    keys: Mapping[str, Any]  # the marker keys it gives (compiler, budgets, defines, ...), `variants` too
    excluded: tuple[tuple[Path, str], ...] = ()  # files its `exclude` took out, each with its reason
    # compile_commands: each file's entries in the database (one: its flags; several: one variant each)
    database: Mapping[Path, tuple[cdb.CompileEntry, ...]] = field(default_factory=dict)

    @property
    def compiler(self) -> str | None:
        value = self.keys.get("compiler")
        return None if value is None else str(value)

    @property
    def lists(self) -> bool:
        """Whether a pattern needs the kernels of the file listed: a wildcard (a name selects itself)."""
        return any(names.is_pattern(p) for p in self.patterns)


class Variant(Struct, frozen=True):
    """One build of a file among several: the defines that select it (in its items' ids and baseline keys),
    and what else it sets: a variant table's budgets (`dynamic_smem`, `launch`, ...), or the include dirs
    and options of one compile_commands entry of a file the database lists several times."""

    defines: tuple[tuple[str, str | None], ...] = ()
    keys: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return variant_id(self.defines)


NO_VARIANT = Variant()


_NOT_IN_ID = lazy(r"[^\w.+-]+")


def variant_id(defines: Sequence[tuple[str, str | None]]) -> str:
    """`NACC_8-DEBUG` for {NACC = 8, DEBUG}: only characters a `-k` word may hold."""
    parts = [k if v is None else f"{k}_{_NOT_IN_ID.sub('_', v).rstrip('_') or 'empty'}" for k, v in defines]
    return "-".join(_NOT_IN_ID.sub("_", p) for p in parts)


def read_table(index: int, raw: Mapping[str, Any], label: str, rootdir: Path, *, cache: bool = True) -> Table:
    def error(key: str, message: str) -> ManifestError:
        return ManifestError(f"{label}, key {key!r}: {message}")

    for key in raw:
        if key not in TABLE_KEYS:
            hint = close_key_hint(key, TABLE_KEYS)
            raise error(key, f"unknown key{hint}; valid keys: {', '.join(TABLE_KEYS)}")
    databases = [k for k in ("compile_commands", *torch_tables.SOURCES) if k in raw]
    if ("source" in raw) == ("binary" in raw) and not (databases and "binary" not in raw):
        both = "give one of them, not both" if "source" in raw else "a table needs one of them"
        raise ManifestError(
            f"{label}: source (globs of CUDA files to compile), binary (globs of built binaries), "
            f"compile_commands (a compilation database), build_ninja or torch_extension (a PyTorch "
            f"extension's build): {both}"
        )
    if len(databases) > 1:
        raise error(databases[1], f"give one of {', '.join(databases)}: each names all of a file's flags")
    binary = "binary" in raw
    kind = "binary" if binary else "source"
    if binary and "compiler" in raw:
        raise error("compiler", "a binary is read as it is built (by cuobjdump), not compiled: drop compiler")
    database: dict[Path, tuple[cdb.CompileEntry, ...]] = {}
    if "compile_commands" in raw:
        if binary:
            raise error("compile_commands", "a binary is read as it is built: compile_commands is for source")
        database = _database(raw["compile_commands"], rootdir, lambda m: error("compile_commands", m))
    elif databases:
        if binary:
            raise error(databases[0], "a binary is read as it is built: an extension's build is for source")
        raw = {**raw, "compiler": torch_tables.compiler(raw, error)}  # checked before setup.py runs
        database = torch_tables.database(raw, rootdir, label, error, contained, cache=cache)
    files = _files(raw[kind], rootdir, lambda m: error(kind, m)) if kind in raw else tuple(database)
    if databases and kind in raw:
        missing = [f for f in files if f not in database]
        if missing:
            raise error(
                databases[0],
                f"{raw[databases[0]]!r} has no entry for {missing[0].relative_to(rootdir).as_posix()}"
                f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}: every file of source "
                "must be in it (drop source to take all of its CUDA files)",
            )
        database = {f: database[f] for f in files}
    excluded = _excluded(raw.get("exclude"), files, rootdir, lambda m: error("exclude", m))
    files = tuple(f for f in files if f not in {path for path, _ in excluded})
    patterns = _patterns(raw.get("kernels", list(DEFAULT_KERNELS)), lambda m: error("kernels", m))
    keys = {k: v for k, v in raw.items() if k not in SELECT_KEYS or k == "variants"}
    for key, value in keys.items():
        if key == "variants":
            continue
        if key == "depends":
            for pattern in _strings(value) or []:
                contained(pattern, rootdir, lambda m: error("depends", m))
        given: dict[str, object] = {key: value}
        if key == "min_occupancy":
            given["launch"] = (1,)  # its need for a launch is checked once the tables are merged
        try:
            parse_marker((), given, rootdir)
        except MarkerError as exc:
            raise error(key, str(exc)) from None
    compiler = keys.get("compiler")
    wild = [p for p in patterns if names.is_pattern(p)]
    if wild and compiler is not None and compiler not in LISTING_COMPILERS:
        raise error("kernels", _cannot_list(str(compiler), wild))
    if "variants" in keys:
        keys["variants"] = _variants(keys["variants"], rootdir, lambda m: error("variants", m))
    return Table(index, label, files, binary, patterns, keys, excluded, database)


def _database(value: object, rootdir: Path, error: Any) -> dict[Path, tuple[cdb.CompileEntry, ...]]:
    """The CUDA entries of a compilation database, by file (see compile_commands.py)."""
    if not isinstance(value, str) or not value.strip():
        raise error(
            f'{value!r}: expected the path of a compile_commands.json, e.g. "build/compile_commands.json"'
        )
    contained(value, rootdir, error)
    try:
        found = cdb.load(rootdir / value, rootdir)
    except ManifestError as exc:
        raise error(str(exc)) from None
    if not found:
        raise error(f"{value!r} lists no CUDA file under the rootdir {rootdir}")
    for path, entries in found.items():
        ids = [variant_id(CompileOptions.make(defines=e.defines).defines) for e in entries]
        if len(set(ids)) != len(ids):
            raise error(
                f"{value!r} lists {path.relative_to(rootdir).as_posix()} {len(entries)} times, and two of "
                "its entries differ in flags but not in defines: each entry is one variant of the file, "
                "selected by its defines (keep one of them, or give each a define of its own)"
            )
    # The database names files by their real paths; the manifest's globs by the rootdir's (a link, say).
    real = Path(os.path.realpath(rootdir))
    return {rootdir / p.relative_to(real): tuple(e) for p, e in found.items()}


def _excluded(
    value: object, files: Sequence[Path], rootdir: Path, error: Any
) -> tuple[tuple[Path, str], ...]:
    """The files of `files` that `exclude` names, each with its reason ("" when it gives none). A glob that
    matches nothing is no error: the file it guards against may come later, or be gone already."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    out: dict[Path, str] = {}
    for item in items:
        glob, reason = item, ""
        if isinstance(item, dict):
            unknown = sorted(set(item) - {"glob", "reason"})
            glob, reason = item.get("glob"), item.get("reason", "")
            if unknown or not isinstance(reason, str):
                raise error(f'{item!r}: expected {{ glob = "...", reason = "..." }}')
        if not isinstance(glob, str) or not glob.strip():
            raise error(
                f'{item!r}: expected a glob relative to the rootdir, or {{ glob = "...", reason = "..." }}, '
                'e.g. exclude = ["src/*/reference.cu"]'
            )
        # Expanded as source globs are, so that an exclude reads like the source it subtracts from.
        named = set(rootdir.glob(contained(glob, rootdir, error)))
        for path in files:
            if path in named:
                out.setdefault(path, reason)
    return tuple(out.items())


def _cannot_list(compiler: str, patterns: Sequence[str]) -> str:
    return (
        f"compiler {compiler!r} cannot list the kernels of a file, so {', '.join(map(repr, patterns))} "
        f"cannot be expanded (only {' and '.join(LISTING_COMPILERS)} builds, and binaries, can): name each "
        "kernel"
    )


def _strings(value: object) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _files(value: object, rootdir: Path, error: Any) -> tuple[Path, ...]:
    globs = _strings(value)
    if not globs:
        raise error(
            f'{value!r}: expected a glob or a list of globs relative to the rootdir, e.g. ["kernels/*.cu"]'
        )
    found: list[Path] = []
    for pattern in globs:
        # pathlib's `**` does not descend through symbolic links to directories (a link to / would walk the
        # file system); a file reached through a link under the rootdir is one of its files.
        matched = sorted(p for p in rootdir.glob(contained(pattern, rootdir, error)) if p.is_file())
        if not matched:
            raise error(f"{pattern!r} matches no file (globs are relative to the rootdir {rootdir})")
        for path in matched:
            if path not in found:
                found.append(path)
    return tuple(found)


def contained(pattern: str, rootdir: Path, error: Any) -> str:
    """The one rule of the manifest's globs, checked before anything is expanded; returns the pattern to
    expand. Relative to the rootdir, and not leaving it (no absolute path, no `..`), so that a pattern can
    never walk the whole file system (`/**/*.cuh`); naming files, not the rootdir itself (`""`, `"."`, which
    pathlib cannot expand); no NUL byte; a run of `**` expanded as one (`one_globstar`)."""
    if "\x00" in pattern:
        raise error(f"{pattern!r}: a NUL byte (\\x00) cannot be in a path")
    if os.path.isabs(pattern) or pattern.startswith("~") or ".." in Path(pattern).parts:
        raise error(
            f"{pattern!r} is outside the rootdir {rootdir}: the manifest's globs are relative to the rootdir "
            "and stay in it (move the manifest up, or give pytest a rootdir above both)"
        )
    expanded = one_globstar(pattern)
    if not expanded:
        raise error(
            f'{pattern!r} names the rootdir itself, not files: write a glob of files, e.g. "kernels/*.cu", '
            'or "**/*.cu" for every CUDA file under the rootdir'
        )
    return expanded


def _patterns(value: object, error: Any) -> tuple[str, ...]:
    patterns = _strings(value)
    if patterns and any("\x00" in p for p in patterns):
        raise error(f"{value!r}: a NUL byte (\\x00) cannot be in a kernel name")
    if not patterns or not all(p.strip() for p in patterns):
        raise error(
            f"{value!r}: expected a list of kernel names, name expressions or patterns, e.g. "
            '["*"], ["softmax<256>"], ["reduce*<float,*>"]'
        )
    return tuple(p.strip() for p in patterns)


def _variants(value: object, rootdir: Path, error: Any) -> tuple[Variant, ...]:
    """Each variant a define set (`{BM = 128}`), or a table with its defines and its own budgets
    (`{ defines = {BM = 128}, dynamic_smem = 98304 }`)."""
    if not isinstance(value, list) or not value:
        raise error(
            f"{value!r}: expected a non-empty list of define sets, e.g. "
            "variants = [{NACC = 8}, {NACC = 16}], or of tables such as "
            "{ defines = {BM = 128}, dynamic_smem = 98304 }"
        )
    out = []
    for i, given in enumerate(value, 1):
        defines, keys = given, {}
        if isinstance(given, dict) and "defines" in given:
            defines = given["defines"]
            keys = {k: v for k, v in given.items() if k != "defines"}
            unknown = [k for k in keys if k not in VARIANT_KEYS]
            if unknown:
                raise error(
                    f"variant {i}: key {unknown[0]!r} cannot differ per variant"
                    f"{close_key_hint(unknown[0], VARIANT_KEYS)}; a variant table holds defines and the "
                    f"budgets {', '.join(BUDGET_KEYS)}"
                )
        else:
            _refuse_flat_budget(i, given, error)
        try:
            parse_marker((), {"defines": defines}, rootdir)
            for key, v in keys.items():
                needs_launch = key in ("min_occupancy", "min_active_clusters")
                parse_marker((), {key: v, **({"launch": (1,)} if needs_launch else {})}, rootdir)
        except MarkerError as exc:
            raise error(f"variant {i}: {exc}") from None
        out.append(Variant(CompileOptions.make(defines=cast(Any, defines)).defines, keys))
    ids = [v.id for v in out]
    if len(set(ids)) != len(ids):
        raise error(
            f"{value!r}: two variants define the same (each variant is one item: give each its own defines)"
        )
    return tuple(out)


def _refuse_flat_budget(index: int, given: object, error: Any) -> None:
    """A flat variant is a define set, so `{BM = 128, dynamic_smem = 512}` would build with
    -Ddynamic_smem=512 and leave the budget at the table's: refused, with the table form that holds both."""
    if isinstance(given, dict):
        named: dict[str, object] = {str(k): v for k, v in given.items()}
    elif isinstance(given, list):
        named = {str(d).partition("=")[0]: str(d).partition("=")[2] or None for d in given}
    else:
        return
    budgets = [k for k in named if k in BUDGET_KEYS]
    if not budgets:
        return
    defines = ", ".join(f"{k} = {_toml(v)}" for k, v in named.items() if k not in BUDGET_KEYS)
    own = ", ".join(f"{k} = {_toml(named[k])}" for k in budgets)
    table = f"{{ defines = {{ {defines} }}, {own} }}" if defines else f"{{ {own} }}"
    raise error(
        f"variant {index}: {budgets[0]!r} is a budget key, and a flat variant is a define set: it would "
        f"build with -D{budgets[0]}={named[budgets[0]]} and leave the table's budget as it is. Write "
        f"the variant as a table, {table} (a macro of that name goes under defines)"
    )


def _toml(value: object) -> str:
    """A variant's value as the manifest spells it, for the table form the refusal shows."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return f"[{', '.join(map(_toml, value))}]"
    return str(value)
