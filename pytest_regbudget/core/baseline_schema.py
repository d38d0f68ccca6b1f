"""The baseline file's format, checked with the standard library alone: reading and decoding the file, its
version and tables, each entry's fields, and `regbudget baseline check`'s rules (no arch the plugin does not
know, no kernel spelled two ways), with the command's output and exit status.

baseline.py builds its records from what this module has checked, so the plugin and the command refuse a file
with the same words. pre-commit's `regbudget-baseline-check` hook runs `check` (hooks/baseline_check.py) with
no dependency installed: this module imports nothing outside the standard library and the stdlib-only modules
it names (tomli only where Python 3.10 has no tomllib). tests/test_purity.py holds it so.
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..util.patterns import lazy
from ..util.regular import NotRegular, parse_nested, read_regular
from . import names
from .arch_names import known_base, unknown_message
from .errors import BaselineError
from .text import one_line, safe_block

FORMAT_VERSION = 3
# (source, kernel, variant, arch, release): see baseline.py's Key.
Key = tuple[str, str, str, str, str]
BuildKey = tuple[str, str, str, str]
NO_VARIANT = "-"  # the variant of a kernel built without defines

# Stored whole-number metrics, in file order: the metrics table's baseline fields (baseline.py checks at
# import that core/metrics.py's table gives these). "occupancy" (a fraction) and the provenance fields follow.
INT_FIELDS = ("registers", "spill_stores", "spill_loads", "stack", "smem", "const_mem", "local_instructions")
TEXT_FIELDS = ("ptxas", "nvrtc", "compiler", "options_hash")
# Absent where unknown: spills for binaries, which do not record them; local instructions where the SASS was
# not read, and 0 (most kernels), which is not written; the callees' part of the spills (CALLEE_FIELDS, after
# spill_loads in the file) where no callee spills, so that most entries gain no line.
CALLEE_FIELDS = ("spill_stores_callees", "spill_loads_callees")
OPTIONAL_INT_FIELDS = ("spill_stores", "spill_loads", "local_instructions", *CALLEE_FIELDS)
FILE_INT_FIELDS = tuple(f for n in INT_FIELDS for f in ((n, *CALLEE_FIELDS) if n == "spill_loads" else (n,)))
KNOWN_FIELDS = frozenset(
    {
        *FILE_INT_FIELDS,
        *TEXT_FIELDS,
        *("occupancy", "gpu", "tests", "ptxas_messages", "setmaxnreg", "build_settings", "package"),
    }
)
_TARGET = lazy(r"(inc|dec) \d+")


def toml_loads() -> Callable[[str], dict[str, Any]]:
    """tomli where installed (the plugin's dependency: the standard library's tomllib parser, compiled in its
    wheels, 4x faster on a large baseline), else tomllib (Python 3.11+), as in the pre-commit hook."""
    try:
        import tomli

        return tomli.loads
    except ModuleNotFoundError:  # the hook's interpreter
        pass
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads
    raise BaselineError(
        f"Python {sys.version_info[0]}.{sys.version_info[1]} reads no TOML without tomli. Fix: "
        "pip install tomli, or run pre-commit with Python 3.11 or later"
    )


def read(path: Path) -> str | None:
    """The text of the baseline file at `path`, None where there is none; BaselineError where it cannot be
    read or is not UTF-8."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None
    except NotRegular as exc:
        raise BaselineError(f"baseline {path} is {exc.strerror}. Fix: give the path of a TOML file") from None
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror}") from None
    return decode(data, path)


def decode(data: bytes, path: Path) -> str:
    """UTF-8, as TOML requires; a UTF-8 byte order mark (Notepad's) is dropped.

    UTF-16 and UTF-32 (PowerShell's `>` writes UTF-16) are refused rather than read: git shows such a file
    as binary, so its diffs could not be reviewed, and an update would silently change its encoding.
    """
    wide = next(
        (
            name
            for name, boms in (
                ("UTF-32", (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)),
                ("UTF-16", (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)),
            )
            if data.startswith(boms)
        ),
        # UTF-16 without a byte order mark: ASCII text has a NUL in every other byte.
        "UTF-16" if len(data) >= 2 and data[1::2].count(0) + data[0::2].count(0) >= len(data) // 2 else None,
    )
    if wide is not None:
        raise BaselineError(
            f"baseline {path} is {wide}; TOML files must be UTF-8. Fix: save it as UTF-8, e.g. "
            f"iconv -f {wide} -t UTF-8 {path} > {path}.utf8 && mv {path}.utf8 {path}"
        )
    if b"\x00" in data:
        at = data.index(b"\x00")
        line = data.count(b"\n", 0, at) + 1
        raise BaselineError(
            f"baseline {path}, line {line}: a NUL byte (byte offset {at}), which TOML does not allow. Fix: "
            "remove it (a damaged file: git checkout restores the committed one)"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BaselineError(
            f"baseline {path}, line {line}: byte 0x{data[exc.start]:02X} (byte offset {exc.start}) is not "
            "UTF-8; TOML files must be UTF-8. Fix: save it as UTF-8"
        ) from None


def load_document(text: str, path: Path, loads: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    try:
        return parse_nested(loads, text)
    except ValueError as exc:  # TOMLDecodeError, or TooDeep
        raise BaselineError(f"{path} is not valid TOML: {exc}") from None


def checked(doc: dict[str, Any], path: Path) -> tuple[dict[Key, dict[str, Any]], dict[BuildKey, str]]:
    """A whole file's entry tables by key (kernel names as names.stable reads them, the first of two that
    read alike kept) and its broken builds' errors; the first problem raises BaselineError naming the file
    and place."""
    if not doc:
        return {}, {}  # an empty file: nothing recorded yet
    version = doc.get("version", 1)  # version 1 wrote none
    if isinstance(version, bool) or not isinstance(version, int):
        raise BaselineError(
            f"{path}: version = {version!r}, expected a whole number (this pytest-regbudget writes "
            f"{FORMAT_VERSION}). Fix: correct the version"
        )
    if version in (1, 2):
        raise BaselineError(
            f"{path}: baseline format version {version}, written by a development version of "
            f"pytest-regbudget before 0.1.0; this one reads version {FORMAT_VERSION} only. "
            "Fix: delete the file and record it anew with pytest --regbudget-update"
        )
    if version != FORMAT_VERSION:
        raise BaselineError(
            f"{path}: version = {version!r}; this pytest-regbudget reads version {FORMAT_VERSION}. "
            "Fix: upgrade pytest-regbudget (a newer one wrote it), or correct the version"
        )
    unknown = sorted(set(doc) - {"version", "kernels", "broken"})
    if unknown:
        raise BaselineError(
            f"{path}: unknown top-level key {unknown[0]!r} (expected 'broken', 'kernels', 'version')"
        )
    entries: dict[Key, dict[str, Any]] = {}
    for key, table in _tables(path, "kernels", doc.get("kernels", {}), 5):
        where = f"{path}: [kernels" + "".join(f'."{k}"' for k in key) + "]"
        check_entry(where, table)
        # A kernel name written before build marks were left out of names (names.stable) is read as today's,
        # so an older file holds the same kernels; the next update writes it so. Two that become one were the
        # same kernel recorded from two checkouts: the first is kept.
        source, kernel, variant, arch, release = key
        entries.setdefault((source, names.stable(kernel), variant, arch, release), table)
    return entries, _broken(path, doc.get("broken", {}))


def _tables(
    path: Path, where: str, node: object, depth: int, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(key, entry table) of each table nested `depth` levels deep; a level that is not a table is named."""
    if depth == 0:
        yield prefix, node
        return
    if not isinstance(node, dict):
        shown = "".join(f'."{p}"' for p in prefix)
        raise BaselineError(f"{path}: [{where}{shown}] must hold tables")
    for name, child in node.items():
        yield from _tables(path, where, child, depth - 1, (*prefix, name))


def _broken(path: Path, node: object) -> dict[BuildKey, str]:
    out: dict[BuildKey, str] = {}
    for key, table in _tables(path, "broken", node, 4):
        where = f"{path}: [broken" + "".join(f'."{k}"' for k in key) + "]"
        error = table.get("error") if isinstance(table, dict) else None
        if not isinstance(error, str) or set(table) != {"error"}:
            raise BaselineError(
                f'{where}: expected a table with one string, error = "..." (the failed build\'s log). Fix: '
                "correct it, or delete the table and record it anew with pytest --regbudget-update"
            )
        source, variant, arch, release = key
        out[(source, variant, arch, release)] = error
    return out


def check_entry(where: str, table: object) -> dict[str, Any]:
    """`table`, checked: BaselineError naming the place and the key where it is not what an update writes."""
    if not isinstance(table, dict):
        raise BaselineError(f"{where}: expected a table of numbers, found {table!r}")
    gpu = table.get("gpu", {})
    if not isinstance(gpu, dict) or not all(isinstance(v, dict) for v in gpu.values()):
        raise BaselineError(f'{where}: gpu must hold one table per device, e.g. [...gpu."NVIDIA H200"]')
    for device, figures in gpu.items():
        time_ms = figures.get("time_ms")
        if time_ms is not None and (
            isinstance(time_ms, bool) or not isinstance(time_ms, (int, float)) or time_ms <= 0
        ):
            raise BaselineError(f'{where}: gpu."{device}".time_ms = {time_ms!r}, expected milliseconds > 0')
    for name in FILE_INT_FIELDS:
        value = table.get(name)
        if value is None and name in OPTIONAL_INT_FIELDS:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BaselineError(f"{where}: {name} = {value!r}, expected a whole number >= 0")
    for name in TEXT_FIELDS:
        if not isinstance(table.get(name), str):
            raise BaselineError(f"{where}: {name} = {table.get(name)!r}, expected a string")
    package = table.get("package")
    if package is not None and not isinstance(package, str):
        raise BaselineError(f'{where}: package = {package!r}, expected a string ("name version")')
    occ = table.get("occupancy", {})
    if not isinstance(occ, dict) or not all(isinstance(k, str) and _fraction(v) for k, v in occ.items()):
        raise BaselineError(
            f'{where}: occupancy = {occ!r}, expected fractions in [0, 1] per launch, e.g. "256 threads" = 0.5'
        )
    # A file's arrays are lists; BaselineEntry.to_toml's are tuples (a run's records, kept out of the
    # collector's walks, hold them).
    tests = table.get("tests", [])
    if not isinstance(tests, (list, tuple)) or not all(isinstance(t, str) for t in tests):
        raise BaselineError(f"{where}: tests = {tests!r}, expected a list of test ids")
    for name in ("ptxas_messages", "build_settings"):
        value = table.get(name, [])
        if not isinstance(value, (list, tuple)) or not all(isinstance(m, str) for m in value):
            raise BaselineError(f"{where}: {name} = {value!r}, expected a list of strings")
    targets = table.get("setmaxnreg", [])
    if not isinstance(targets, (list, tuple)) or not all(
        isinstance(v, str) and _TARGET.fullmatch(v) for v in targets
    ):
        raise BaselineError(
            f'{where}: setmaxnreg = {targets!r}, expected a list such as ["dec 40", "inc 232"]'
        )
    return table


def _fraction(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= 1


def release_label(release: str) -> str:
    """ "CUDA 12.9" for a toolkit release; a release that is none ("prebuilt") as it is."""
    return f"CUDA {release}" if release[:1].isdigit() else release


def key_text(key: Sequence[str]) -> str:
    """`kernels/poly.cu poly_eval (NACC=8) [sm_90, CUDA 12.9]` for a kernel's entry."""
    source, kernel, variant, arch, release = key
    shown = "" if variant == NO_VARIANT else f" ({variant})"
    return f"{source} {kernel}{shown} [{arch}, {release_label(release)}]"


def unknown_arch_lines(keys: Iterable[Key], baseline: str) -> list[str]:
    """A line per arch of the baseline that this plugin does not know (a typo or a hand edit): no run can
    build for it, so its entries are never checked, and no update removes them."""
    by_arch: dict[str, list[Key]] = {}
    for key in keys:
        by_arch.setdefault(key[3], []).append(key)
    lines = []
    for arch, found in sorted(by_arch.items()):
        if known_base(arch) is None:
            example = key_text(min(found))
            entries = f"{len(found)} entr{'y' if len(found) == 1 else 'ies'}"
            lines.append(
                one_line(
                    f"baseline {baseline}: {entries} for arch {arch!r} (e.g. {example}) are never "
                    f"checked and never removed: correct the arch or delete them; {unknown_message(arch)}"
                )
            )
    return [safe_block(line) for line in lines]


def problems(path: Path, loads: Callable[[str], dict[str, Any]]) -> tuple[int, list[str]]:
    """(entries, problems) of a baseline file that loads: entries for archs this plugin does not know, and
    kernel names that differ only in their spelling (two entries for one kernel). The file's own errors
    (missing, unreadable, TOML, schema) raise BaselineError."""
    text = read(path)
    if text is None:
        raise BaselineError(f"{path}: no such file")
    entries, _ = checked(load_document(text, path, loads), path)
    found = list(unknown_arch_lines(list(entries), str(path)))
    seen: dict[tuple[str, ...], Key] = {}
    for key in sorted(entries):
        source, kernel, variant, arch, release = key
        same = (source, names.normalize(kernel), variant, arch, release)
        if same in seen:
            found.append(
                one_line(
                    f"{path}: {key_text(seen[same])} and {key_text(key)} are one kernel spelled two ways; "
                    "keep one (the next update writes the spelling its test uses)"
                )
            )
        seen.setdefault(same, key)
    return len(entries), found


# `regbudget baseline check`'s exit statuses (cli/base.py's OK, FAILED, BAD_INPUT).
OK, FAILED, BAD_INPUT = 0, 1, 2


def check(files: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`regbudget baseline check FILE...`: each file's problems on `err` and 1, or `FILE: ok (N entries)` on
    `out`; a file that does not load stops the check with `regbudget baseline: error: ...` and 2."""
    out, err = out or sys.stdout, err or sys.stderr
    failed = False
    for name in files:
        try:
            count, found = problems(Path(name), toml_loads())
        except BaselineError as exc:
            print(safe_block(f"regbudget baseline: error: {exc}"), file=err)
            return BAD_INPUT
        for line in found:
            print(safe_block(line), file=err)
        failed = failed or bool(found)
        if not found:
            print(safe_block(f"{name}: ok ({count} entries)"), file=out)
    return FAILED if failed else OK
