"""The kernel manifest: budgets for whole files and libraries, without a test per kernel.

It is `[tool.regbudget]` in the rootdir's pyproject.toml, or a `regbudget.toml` at the rootdir holding the
same tables without the prefix:

    arch = ["sm_80", "sm_90"]            # optional: the run's archs, as ini regbudget_arch
    [[kernels]]
    source = ["kernels/*.cu"]            # or binary = ["build/**/*.so"]; globs relative to the rootdir
    kernels = ["*"]                      # names, name expressions, fnmatch patterns over readable names
    exclude = ["kernels/*_impl.cu"]      # optional: globs taken out of source/binary (or {glob, reason})
    variants = [{NACC = 8}, {NACC = 16}] # optional: one item per define set, or per table
                                         # {defines = {BM = 128}, dynamic_smem = 98304, max_regs = 128}
    compile_commands = "build/compile_commands.json"  # optional: each file's flags, from CMake or Bear
    # or build_ninja = "build/temp.*/build.ninja", or torch_extension = "setup.py": a PyTorch extension's
    # own nvcc commands (torch_tables.py)
    spills = 0                           # any marker key

Owns where the file is (`find`, `load`), its top level (`arch`, the list of tables), and which tables apply
to a kernel; each `[[kernels]]` table is read and checked, its globs expanded, by kernel_tables.py. Each
table selects kernels of its files; a kernel's keys are those of every table that selects it, a later
table's value replacing an earlier one's (`Kernel.keys`). A file is built one way: its compile keys
(defines, include dirs, options, ...) are those of every table that names it, whichever kernels they select,
so that its listing and its items share one build per variant and arch. A bad file is one `ManifestError`
naming the file, the table and the key. What "*" finds takes a build; that, and the pytest nodes, live in
plugin/collect.py. No pytest, no tool runs.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from msgspec import Struct, field
from msgspec.structs import replace

from ..core import names
from ..core.arch import KEYWORDS, get_arch, is_arch_name
from ..core.errors import ManifestError, UnknownArchError
from ..core.text import close_key_hint
from ..tools.options import CompileOptions
from ..util.files import NotRegular, parse_nested, read_regular
from .kernel_tables import NO_VARIANT, Table, Variant, read_table
from .markers import COMPILE_KEYS, Budget, parse_marker
from .options import PYPROJECT, STANDALONE

TOP_KEYS = ("arch", "kernels")
# The keys that say how a file is built: merged over every table that names the file (`Manifest.file_keys`).
FILE_COMPILE_KEYS = tuple(k for k in COMPILE_KEYS if k not in ("source", "kernel", "binary"))


class Kernel(Struct, frozen=True):
    """A kernel of a manifest file: its name, the entry a listing found it by (None when only named), the
    tables that select it, in file order, and the file's compile keys (`Manifest.file_keys`)."""

    name: str  # the readable name (of the entry), else as the table wrote it
    entry: str | None
    tables: tuple[Table, ...]
    file_keys: Mapping[str, Any] = field(default_factory=dict)
    # One per compile_commands entry of a file the database lists several times (else none)
    database_variants: tuple[Variant, ...] = ()

    def keys(self) -> dict[str, Any]:
        """The marker keys of every table that selects it, a later table's value replacing an earlier's,
        with the file's compile keys, which every table that names the file sets."""
        merged: dict[str, Any] = {}
        for table in self.tables:
            merged.update(table.keys)
        for key in FILE_COMPILE_KEYS:
            merged.pop(key, None)
        merged.update(self.file_keys)
        return merged

    def variants(self) -> list[Variant]:
        """The variants of its items: `variants` (the last table's that gives them), else one of none."""
        given = self.keys().get("variants")
        return list(given) if given else list(self.database_variants) or [NO_VARIANT]

    def budget(self, path: Path, rootdir: Path, variant: Variant) -> Budget:
        """The Budget of one variant: the merged keys, this file and kernel. The variant's defines choose
        it (they are in its key); the tables' `defines` are build settings (recorded, not keyed: see
        `build_options`). Raises MarkerError for keys that only disagree once merged (min_occupancy from one
        table without a launch from any)."""
        return file_budget(self.keys(), path, rootdir, variant, self.name, binary=self.tables[0].binary)


def file_budget(
    keys: Mapping[str, Any], path: Path, rootdir: Path, variant: Variant, name: str, *, binary: bool = False
) -> Budget:
    """The Budget of a file's `name` (a kernel; "" for the file's own build) under merged `keys` and one
    `variant`: its defines keyed, its budgets over the tables', a database entry's flags after them."""
    keys = dict(keys)
    keys.pop("variants", None)
    for key, value in variant.keys.items():
        if key in ("include_dirs", "options", "ptxas_options"):  # a compile_commands entry's flags
            keys[key] = [*_listed(keys.get(key)), *value]
        else:
            keys[key] = value
    table_defines = keys.pop("defines", None)
    if variant.defines:
        keys["defines"] = _spelled(variant.defines)
    keys["binary" if binary else "source"] = str(path)
    # Parsed once per file and set of keys, not once per kernel: the kernels of a file mostly share
    # their tables, and the name is only carried (a MarkerError is raised anew for each kernel).
    try:
        text = json.dumps(keys)
    except (TypeError, ValueError):  # a TOML date, say: parse_marker says what is wrong with it
        budget = parse_marker((), {**keys, "kernel": name}, rootdir)
    else:
        budget = replace(_parsed(text, rootdir), kernel=name)
    return replace(budget, options=build_options(budget.options, table_defines))


def _listed(value: object) -> list[str]:
    """A compile key's value as a list of words (`options = "-O3 -std=c++17"` is two, split as a shell
    would, as markers.parse_marker splits it)."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in cast(Sequence[object], value)]


def _define_list(value: object) -> list[str]:
    """`defines` as a list of "NAME" and "NAME=VALUE" (a table may give a dict, a list or one string)."""
    return _spelled(CompileOptions.make(defines=cast(Any, value)).defines)


def _spelled(defines: Sequence[tuple[str, str | None]]) -> list[str]:
    """Define pairs as a marker's `defines` list spells them: "NAME", "NAME=VALUE"."""
    return [k if v is None else f"{k}={v}" for k, v in defines]


def build_options(options: CompileOptions, table_defines: object) -> CompileOptions:
    """`options` with a manifest table's `defines` (checked with the table) as build-wide defines."""
    if not table_defines:
        return options
    return replace(options, build_defines=CompileOptions.make(defines=cast(Any, table_defines)).defines)


@functools.lru_cache(maxsize=256)
def _parsed(keys: str, rootdir: Path) -> Budget:
    """parse_marker of a manifest table's merged keys (as JSON, in their order), for a kernel named later."""
    return parse_marker((), {**json.loads(keys), "kernel": ""}, rootdir)


class Manifest(Struct, frozen=True):
    path: Path
    rootdir: Path
    archs: tuple[str, ...]  # () when the file sets none
    tables: tuple[Table, ...]
    label: str = ""  # "pyproject.toml [tool.regbudget]" or "regbudget.toml"
    _by_file: dict[Path, tuple[Table, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for table in self.tables:
            for f in table.files:
                self._by_file[f] = (*self._by_file.get(f, ()), table)

    def files(self) -> list[Path]:
        """Every file a table names, in the order the tables first name them."""
        return list(self._by_file)

    def tables_of(self, path: Path) -> tuple[Table, ...]:
        return self._by_file.get(path, ())

    def relative(self, path: Path) -> str:
        return path.relative_to(self.rootdir).as_posix()

    def compiler_of(self, path: Path, default: str) -> str:
        """The compiler of a source file: the one its tables name (checked to agree), else `default`."""
        return next((t.compiler for t in self.tables_of(path) if t.compiler), default)

    def lists(self, path: Path) -> bool:
        """Whether the file's kernels must be listed (a build, or cuobjdump) to know its items."""
        return any(t.lists for t in self.tables_of(path))

    def listing_table(self, path: Path) -> Table:
        """The first table that names a file: whether it is a binary, and how messages name its tables."""
        return self.tables_of(path)[0]

    def file_keys(self, path: Path) -> dict[str, Any]:
        """The compile keys of a file: those of every table that names it, in table order, a later table's
        value replacing an earlier one's; then a compile_commands entry's flags (a file the database lists
        once), after them as a later table's would be."""
        merged: dict[str, Any] = {}
        for table in self.tables_of(path):
            merged.update({k: v for k, v in table.keys.items() if k in FILE_COMPILE_KEYS})
        for table in self.tables_of(path):
            entries = table.database.get(path, ())
            if len(entries) == 1:
                entry = entries[0]
                merged["defines"] = [*_define_list(merged.get("defines")), *entry.defines]
                merged["include_dirs"] = [*_listed(merged.get("include_dirs")), *entry.include_dirs]
                merged["options"] = [*_listed(merged.get("options")), *entry.options]
        return merged

    def file_variants(self, path: Path) -> list[Variant]:
        """Every variant a table that names the file gives (a table without `variants` gives the plain
        build), in table order: the builds its kernels' items may need."""
        found: dict[str, Variant] = {}
        for table in self.tables_of(path):
            for variant in table.keys.get("variants") or self.database_variants(path) or [NO_VARIANT]:
                found.setdefault(variant.id, variant)
        return list(found.values())

    def database_variants(self, path: Path) -> tuple[Variant, ...]:
        """A variant per compile_commands entry of a file the database lists several times: its defines
        select it, its include dirs and options build it."""
        for table in self.tables_of(path):
            entries = table.database.get(path, ())
            if len(entries) > 1:
                return tuple(
                    Variant(
                        CompileOptions.make(defines=e.defines).defines,
                        {"include_dirs": list(e.include_dirs), "options": list(e.options)},
                    )
                    for e in entries
                )
        return ()

    def build_budget(self, path: Path, variant: Variant) -> Budget:
        """The Budget of the file's own build of `variant` (its listing, its broken-build item): its compile
        keys exactly as its kernels' items have them, so that they share the build."""
        # Its budgets are its kernels' (a variant's min_occupancy may take the launch of their tables).
        built = Variant(variant.defines, {k: v for k, v in variant.keys.items() if k in FILE_COMPILE_KEYS})
        return file_budget(self.file_keys(path), path, self.rootdir, built, "")

    def excluded(self) -> list[tuple[str, str]]:
        """Each file an `exclude` took out (rootdir-relative), with its reason, once, in table order; files
        another table names are not excluded from that table."""
        out: dict[str, str] = {}
        for table in self.tables:
            for path, reason in table.excluded:
                if path not in self._by_file:
                    out.setdefault(self.relative(path), reason)
        return list(out.items())

    def kernels(
        self, path: Path, entries: Sequence[str] | None, compiler: str = "nvrtc"
    ) -> tuple[list[Kernel], list[str]]:
        """The kernels of a file, and a warning per pattern that selects none. `entries` are the kernels a
        listing found (PTX or binary entry names, in order); None when the tables only name kernels.

        A name finds its entry as a marker's kernel= does (`names.match`); a name no listing found (an NVRTC
        template instance) is a kernel of its own, once per normalized spelling. A pattern selects among all
        of them: the listed kernels and those any table names."""
        found = list(entries or ())
        file_keys, database_variants = self.file_keys(path), self.database_variants(path)
        shown = names.display_names(found)
        named: dict[str, str] = {}  # identity of a kernel no listing found -> its name as first written
        for table in self.tables_of(path):
            for pattern in table.patterns:
                if not names.is_pattern(pattern) and names.match(pattern, found) is None:
                    named.setdefault(_named(pattern), " ".join(pattern.split()))
        selected: dict[str, list[Table]] = {}  # identity (an entry, or a named one's) -> its tables
        warnings = []
        for table in self.tables_of(path):
            for pattern in table.patterns:
                if names.is_pattern(pattern):
                    hits = names.select([pattern], found)
                    hits += [i for i, name in named.items() if names.select([pattern], [name])]
                    if not hits:
                        warnings.append(_no_match(table, pattern, self.relative(path), found, compiler))
                else:
                    hits = [names.match(pattern, found) or _named(pattern)]
                for ident in hits:
                    chosen = selected.setdefault(ident, [])
                    if table not in chosen:
                        chosen.append(table)
        # In the order of the listing, then of the names; each kernel's tables in file order.
        kernels = [
            Kernel(
                shown.get(i) or named[i],
                i if i in shown else None,
                tuple(sorted(selected[i], key=_index)),
                file_keys,
                database_variants,
            )
            for i in [*found, *named]
            if i in selected
        ]
        return kernels, warnings


def _named(pattern: str) -> str:
    return "\0" + names.normalize(pattern)


def _index(table: Table) -> int:
    return table.index


def _no_match(table: Table, pattern: str, file: str, found: Sequence[str], compiler: str) -> str:
    listing = names.candidates(pattern, found)
    nvrtc = ""
    if not found and not table.binary and compiler == "nvrtc":
        nvrtc = (
            '. NVRTC lists only extern "C" kernels, non-template __global__ functions and explicit '
            'instantiations: name template instances, e.g. kernels = ["softmax<256>"]'
        )
    return (
        f"{table.label}: kernels pattern {pattern!r} matches no kernel of {file} (it holds: {listing}){nvrtc}"
    )


def kernel_id(name: str) -> str:
    """The item name's kernel part: the normalized readable name with `::` as `.` and no brackets of
    pytest's own (`[`, `]`), so that a node id names it and `-k` words find it. `ns::Kern<float, 256u>` ->
    `ns.Kern<float,256>`; select it with `-k "Kern and float and 256"` or its (quoted) node id."""
    text = names.normalize(name).replace("::", ".").replace("[", "(").replace("]", ")")
    return text.replace(" ", "_")


# -- where the manifest is --------------------------------------------------------------------------------
# The manifest's pytest plugin (collect.py): the plugin asks for it by name without importing collect.py.
PLUGIN_NAME = "regbudget-manifest"


class Found(Struct, frozen=True):
    """The files that may hold the manifest. `pyproject` only where it mentions regbudget (a pyproject that
    does not cannot have [tool.regbudget]); `pyproject_text` is its text, or None where it could not be read
    (manifest.load then says why)."""

    standalone: Path | None
    pyproject: Path | None
    pyproject_text: str | None


def find(rootdir: Path) -> Found | None:
    """The rootdir's manifest files; None when it can have no manifest. ManifestError for a regbudget.toml
    that is there but is not a file (a directory of that name would otherwise be silently ignored)."""
    standalone, path = rootdir / STANDALONE, rootdir / PYPROJECT
    if standalone.exists() and not standalone.is_file():
        what = "a directory?" if standalone.is_dir() else "a FIFO, a device or a socket"
        raise ManifestError(f"{standalone} is not a file ({what}): rename it, or make it the manifest file")
    pyproject: Path | None = path
    text = None
    try:
        text = read_regular(path).decode("utf-8")
    except (FileNotFoundError, NotADirectoryError):
        pyproject = None
    except NotRegular as exc:
        if not path.is_dir():  # a FIFO or a device: never read (that would hang), never taken for none
            raise ManifestError(f"{path} is {exc.strerror}: make it a file, or remove it") from None
        pyproject = None
    except (OSError, UnicodeDecodeError):
        pass  # manifest.load reads it again, and says what is wrong with it
    if text is not None and "regbudget" not in text:
        pyproject = None
    found = Found(standalone if standalone.is_file() else None, pyproject, text if pyproject else None)
    return None if found.standalone is None and found.pyproject is None else found


def load(rootdir: Path, *, cache: bool = True) -> Manifest | None:
    """The rootdir's manifest, checked; None when it has none. Raises ManifestError. `cache`: whether a
    `torch_extension` table's capture may be read from and kept in the compile cache (not under
    --regbudget-no-cache)."""
    found = find(rootdir)
    if found is None:
        return None
    pyproject = found.pyproject
    tool = None if pyproject is None else _tool_table(pyproject, found.pyproject_text)
    if found.standalone is not None:
        if tool is not None:
            raise ManifestError(
                f"{pyproject} has [tool.regbudget] and {found.standalone} exists too: keep the manifest in "
                "one of them"
            )
        return parse(_toml(found.standalone), found.standalone, rootdir, cache=cache)
    if tool is None or pyproject is None:
        return None
    return parse(tool, pyproject, rootdir, "tool.regbudget", cache=cache)


def _tool_table(pyproject: Path, text: str | None) -> dict[str, Any] | None:
    """pyproject.toml's [tool.regbudget], if it has one (`text`: the file's, None to read it)."""
    tool = _toml(pyproject, text).get("tool")
    table: object = tool.get("regbudget") if isinstance(tool, dict) else None
    if table is None or isinstance(table, dict):
        return table
    raise ManifestError(f"{pyproject}: tool.regbudget must be a table ([tool.regbudget])")


def _read(path: Path) -> str:
    try:
        return read_regular(path).decode("utf-8")
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None


def _toml(path: Path, text: str | None = None) -> dict[str, Any]:
    import tomli  # only where a TOML file is read (1.5 ms, with its teardown, of a run that reads none)

    try:
        doc: dict[str, Any] = parse_nested(tomli.loads, _read(path) if text is None else text)
    except ValueError as exc:  # TOMLDecodeError, or TooDeep
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None
    return doc


def parse(
    doc: Mapping[str, Any], path: Path, rootdir: Path, prefix: str = "", *, cache: bool = True
) -> Manifest:
    """Check a manifest's tables (`doc` is the TOML, without the tool.regbudget prefix)."""
    dotted = f"{prefix}." if prefix else ""
    where = f"{path.name} [{prefix}]" if prefix else path.name
    for key in doc:
        if key not in TOP_KEYS:
            raise ManifestError(
                f"{where}: unknown key {key!r}{close_key_hint(key, TOP_KEYS)}; valid keys: arch, kernels"
            )
    archs = _archs(doc.get("arch"), f"{where}: arch")
    raw = doc.get("kernels", [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ManifestError(
            f"{where}: kernels must be an array of tables: write each as [[{dotted}kernels]] with "
            "source = [...]"
        )
    tables = tuple(
        read_table(i, t, f"{path.name}, [[{dotted}kernels]] table {i}", rootdir, cache=cache)
        for i, t in enumerate(raw, 1)
    )
    manifest = Manifest(path, rootdir, archs, tables, where)
    _check_compilers(manifest)
    return manifest


def _archs(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.replace("\n", ",").split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(a, str) for a in items):
        raise ManifestError(
            f'{where} = {value!r}: expected a list of arch names, e.g. arch = ["sm_80", "sm_90"]'
        )
    out: list[str] = []
    for name in (a.strip() for a in items):
        if not name or name in out:
            continue
        # As ini regbudget_arch: all, native, and a name spelt as an arch are judged at start-up against the
        # run's toolkits (an arch of a later release gets that message, not "unknown").
        if name not in KEYWORDS and not is_arch_name(name):
            try:
                get_arch(name)
            except UnknownArchError as exc:
                raise ManifestError(f"{where}: {exc}") from None
        out.append(name)
    return tuple(out)


def _check_compilers(manifest: Manifest) -> None:
    """A file is built one way: two tables that name it may not give different compilers."""
    for path in manifest.files():
        given = [(t, t.compiler) for t in manifest.tables_of(path) if t.compiler]
        for table, compiler in given[1:]:
            first, first_compiler = given[0]
            if compiler != first_compiler:
                raise ManifestError(
                    f"{table.label}, key 'compiler': {manifest.relative(path)} is compiled by "
                    f"{first_compiler!r} in table {first.index} and by {compiler!r} here: a file's kernels "
                    "are built one way (one compile per file and arch), so give its tables one compiler"
                )
        if any(t.binary for t in manifest.tables_of(path)) and not all(
            t.binary for t in manifest.tables_of(path)
        ):
            table = next(t for t in manifest.tables_of(path) if not t.binary)
            raise ManifestError(
                f"{table.label}, key 'source': {manifest.relative(path)} is a binary in another table: a "
                "file is either compiled (source) or read (binary)"
            )


def arch_conflict(manifest: Manifest, ini: Iterable[str]) -> str | None:
    """The error when ini regbudget_arch and the manifest's arch both set the run's archs, differently."""
    ini_archs = [a.strip() for v in ini for a in v.replace("\n", ",").split(",") if a.strip()]
    if manifest.archs and ini_archs and tuple(dict.fromkeys(ini_archs)) != manifest.archs:
        return (
            f"{manifest.label}: arch = {list(manifest.archs)} and ini regbudget_arch = {','.join(ini_archs)} "
            "disagree: set the run's archs in one place (--regbudget-arch still overrides both)"
        )
    return None
