"""The `regbudget` command (also `python -m pytest_regbudget`): work on kernels and reports outside pytest.

    regbudget explain SOURCE::KERNEL   registers, spills, stack, largest block, occupancy and cliff of one
                                       kernel per launch-bounds variant and arch, and a marker line
    regbudget compare A.json B.json    the kernels that differ between two --regbudget-json reports
    regbudget merge SHARD.json...      one report (and one baseline update) from the reports of CI shards
    regbudget baseline check FILE      validate a baseline file (for a pre-commit hook)

Exit status: 0 success; 1 a check failed (`compare --fail-on`, `baseline check` finding problems); 2 bad
input (a missing file, a report of another version, a shard conflict, a kernel that does not build), with
one line on stderr saying what and how to fix it. argparse, from the standard library: the command has four
subcommands and a handful of options, which needs no third-party parser.

The command reuses the plugin's own compiler, occupancy, comparison and update code: its numbers are the
plugin's.
"""

from __future__ import annotations

import argparse
import configparser
import os
import platform
import shlex
import sys
import tempfile
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec
import tomli
from msgspec import Struct
from msgspec.structs import replace

from .._version import __version__
from ..cache.store import compile_kernel
from ..core import baseline as bl
from ..core import names, trend
from ..core.arch import get_arch
from ..core.blackwell import TmemUse, cluster_text, tmem_use
from ..core.checks import max_block
from ..core.dirs import default_cache_dir
from ..core.errors import (
    BaselineError,
    CompileError,
    ManifestError,
    MarkerError,
    RegbudgetError,
    ToolchainError,
    UnknownArchError,
)
from ..core.names import normalize
from ..core.occupancy import occupancy, register_cliff
from ..core.text import close_key_hint, one_line
from ..engine.builder import Builder, BuildSettings
from ..history import git as history_git
from ..project import manifest
from ..report import compare
from ..report.terminal import key_text, unknown_arch_lines
from ..report.writers import report_json
from ..tools.compiler import place_launch_bounds, read_source
from ..tools.nvcc import find_nvcc
from ..tools.options import CompileOptions, Timeouts, define_flag
from ..tools.toolkit import discover, in_explain_words, table_lacks
from ..update import broken, shards
from ..update import plan as update
from ..update.scope import Rule, merge_shards
from ..update.shards import Report
from ..util.files import atomic_write

OK, FAILED, BAD_INPUT = 0, 1, 2


class CliError(Exception):
    """Bad input: one line on stderr, exit status 2."""


# -- reports ----------------------------------------------------------------------------------------------
def read_report(path: Path) -> Report:
    """A --regbudget-json report of this plugin's version, every record checked; CliError naming the file."""
    try:
        return shards.read(path)
    except shards.BadReport as exc:
        raise CliError(str(exc)) from None


# -- compare ----------------------------------------------------------------------------------------------
# --fail-on metric names -> the compared metrics they cover, and the direction that is worse.
_FAIL_METRICS = {
    "registers": ("registers",),
    "spills": ("spill_stores", "spill_loads"),
    "spill_stores": ("spill_stores",),
    "spill_loads": ("spill_loads",),
    "stack": ("stack_frame",),
    "occupancy": ("occupancy",),
    "launchable": ("launchable",),
    "time": ("time_ms",),
}


def parse_fail_on(text: str) -> dict[str, float]:
    """`registers,spills:16,occupancy:0.05` -> {compared metric: tolerance}."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, tol = part.partition(":")
        if name not in _FAIL_METRICS:
            hint = close_key_hint(name, list(_FAIL_METRICS))
            raise CliError(f"--fail-on {part!r}: unknown metric{hint}; use {', '.join(_FAIL_METRICS)}")
        try:
            amount = float(tol) if tol else 0.0
        except ValueError:
            amount = float("nan")
        if not 0 <= amount < float("inf"):  # nan compares false: it would never fail
            raise CliError(f"--fail-on {part!r}: the tolerance must be a number >= 0 (e.g. registers:4)")
        for metric in _FAIL_METRICS[name]:
            out[metric] = amount
    return out


def _worse(change: compare.Change, tolerance: float) -> bool:
    old, new = change.old, change.new
    if change.metric == "launchable":
        return old is True and new is False
    if not isinstance(old, (int, float)) or not isinstance(new, (int, float)):
        return new is None and old is not None  # it stopped building or lost the figure
    if change.metric == "occupancy":
        return old - new > tolerance + 1e-9
    if change.metric == "time_ms":
        return new > old * (1 + tolerance) if old else False
    return new - old > tolerance


def compare_reports(a: Report, b: Report) -> compare.Comparison:
    return compare.between(a.records, b.records, a.path.name, b.path.name)


def _cmd_compare(args: argparse.Namespace) -> int:
    fail_on = parse_fail_on(args.fail_on) if args.fail_on else {}  # a misspelt metric before any file is read
    a, b = read_report(Path(args.a)), read_report(Path(args.b))
    result = compare_reports(a, b)
    if args.markdown:
        print(compare.markdown([result]), end="")
    else:
        print("\n".join(result.lines()))
    worse = [
        (d, c)
        for d in result.diffs
        for c in d.changes
        if c.metric in fail_on and _worse(c, fail_on[c.metric])
    ]
    for d, c in worse:
        print(f"worse: {d.label()}: {c.text()}", file=sys.stderr)
    return FAILED if worse else OK


# -- merge ------------------------------------------------------------------------------------------------
def _overlap(shards: Sequence[Report]) -> None:
    """Shards that ran one test (a retried job, overlapping -k selections) must agree on its numbers: the
    merge could keep only one of them. CliError naming both otherwise."""
    seen: dict[tuple[str, str, str], tuple[tuple[object, ...], str]] = {}
    for shard in shards:
        for r in shard.records:
            numbers = (r["compiler"], r["registers"], r["spill_stores"], r["spill_loads"], r["stack_frame"])
            first = seen.setdefault((r["nodeid"], r["kernel"], r["arch"]), (numbers, shard.path.name))
            if first[0] != numbers:
                raise CliError(
                    f"shards disagree: {r['nodeid']} {r['kernel']} [{r['arch']}] measured {first[0][1:]} in "
                    f"{first[1]} and {numbers[1:]} in {shard.path.name} (registers, spill stores and loads, "
                    "stack); their entries would conflict. Fix: merge the reports of one run"
                )


def _cmd_merge(args: argparse.Namespace) -> int:
    shards = [read_report(Path(p)) for p in args.reports]
    _overlap(shards)
    records = [r for shard in shards for r in shard.records]
    try:
        fresh = update.fresh_entries(records)
    except BaselineError as exc:
        raise CliError(str(exc)) from None
    if fresh.conflicts:
        where = {r["nodeid"]: s.path.name for s in shards for r in s.records}
        first = fresh.conflicts[0]
        named = ", ".join(sorted({v for k, v in where.items() if k in first}))
        raise CliError(f"shards disagree: {first} (in {named}); their entries would conflict")
    scopes = [s.scope for s in shards]
    builds = {k: b for s in shards for k, b in broken.from_json(s.broken_builds).items()}
    merged_scope = merge_shards(s.run.payload() for s in scopes)
    prefixes = sorted({p for s in scopes for p in s.prefixes})
    selection = next((s.selection for s in scopes if s.selection), None)
    archs = sorted({a for s in scopes for a in s.archs})
    built = frozenset((c, r) for s in scopes for c, r in s.built)
    rootdir = Path(args.rootdir or next((s.rootdir for s in scopes if s.rootdir), "."))
    scope_doc = {
        "run": merged_scope.payload(),
        "prefixes": prefixes,
        "selection": selection,
        "archs": archs,
        "toolkits": sorted({t for s in scopes for t in s.toolkits}),
        "built": [list(pair) for pair in sorted(built)],
        "rootdir": str(rootdir),
        "baseline": next((s.baseline for s in scopes if s.baseline), None),
        "update": any(s.update for s in scopes),
        "merged": [s.path.name for s in shards],
    }
    if args.output:
        # Each shard ran somewhere else: the merge says where it ran itself and keeps theirs as read.
        provenance = {
            "plugin_version": __version__,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node() or None,
            "merged": [s.provenance for s in shards],
        }
        text = report_json(records, scope_doc, provenance, broken.json_objects(builds))
        try:
            atomic_write(Path(args.output), text)
        except OSError as exc:
            why = exc.strerror or exc
            raise CliError(f"-o {args.output}: cannot write it: {why}; give a file path") from None
    entries = len(fresh.entries)
    print(f"merged {len(shards)} report(s): {len(records)} kernel records, {entries} baseline entries")
    if args.update:
        path = Path(args.update)
        if not path.parent.is_dir():
            raise CliError(
                f"--update {path}: no directory {path.parent}. Fix: give the path of the project's baseline "
                "(a new one is created in an existing directory)"
            )
        if not path.exists():
            print(f"baseline {path} does not exist: creating it")
        try:
            old = bl.load(path)
        except BaselineError as exc:
            raise CliError(str(exc)) from None
        # Each toolkit's entries are judged by the shards that built that toolkit (Rule.release_scopes).
        by_release = {
            pair: merge_shards(s.run.payload() for s in scopes if pair in {tuple(b) for b in s.built})
            for pair in built
        }
        rule = Rule(
            merged_scope,
            archs,
            prefixes,
            rootdir,
            selection,
            built,
            by_release,
            broken=broken.protected(builds),
        )
        planned = update.plan(old, records, fresh.entries, rule)
        failed = broken.plan(
            old,
            builds,
            rootdir=str(rootdir),
            prefixes=prefixes,
            archs=archs,
            releases={r for _, r in built} | {key[3] for key in builds},
            interrupted=bool(merged_scope.interrupted),
        )
        try:
            counts = bl.update(
                path,
                planned.write,
                planned.stale,
                moved=planned.moved,
                broken=failed.record,
                fixed=failed.drop,
            )
        except BaselineError as exc:
            raise CliError(f"baseline NOT updated: {exc}") from None
        print(f"baseline {path} updated: {counts}")
        for line in planned.decision.kept_lines():
            print(line)
    return OK


# -- baseline check ---------------------------------------------------------------------------------------
def check_baseline(path: Path) -> list[str]:
    """Problems of a baseline file that loads: entries for archs this plugin does not know, and kernel
    names that differ only in their spelling (two entries for one kernel). The file's own errors (TOML,
    schema) raise CliError."""
    try:
        loaded = bl.load(path)
    except BaselineError as exc:
        raise CliError(str(exc)) from None
    if not path.exists():
        raise CliError(f"{path}: no such file")
    problems = list(unknown_arch_lines(list(loaded.entries), str(path)))
    seen: dict[tuple[str, ...], bl.Key] = {}
    for key in sorted(loaded.entries):
        source, kernel, variant, arch, release = key
        same = (source, normalize(kernel), variant, arch, release)
        if same in seen:
            problems.append(
                one_line(
                    f"{path}: {key_text(seen[same])} and {key_text(key)} are one kernel spelled two ways; "
                    "keep one (the next update writes the spelling its test uses)"
                )
            )
        seen.setdefault(same, key)
    return problems


def _cmd_baseline_check(args: argparse.Namespace) -> int:
    failed = 0
    for name in args.files:
        problems = check_baseline(Path(name))
        for line in problems:
            print(line, file=sys.stderr)
        failed += bool(problems)
        if not problems:
            print(f"{name}: ok ({len(bl.load(Path(name)))} entries)")
    return FAILED if failed else OK


# -- explain ----------------------------------------------------------------------------------------------
class Bounds(Struct, frozen=True):
    threads: int | None  # None: the kernel as written
    blocks: int | None = None

    def __str__(self) -> str:
        if self.threads is None:
            return "as written"
        return f"({self.threads})" if self.blocks is None else f"({self.threads}, {self.blocks})"


def parse_bounds(text: str) -> list[Bounds]:
    """`none,256,1024,256x4` -> the launch-bounds variants to build."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part == "none":
            out.append(Bounds(None))
            continue
        threads, _, blocks = part.partition("x")
        try:
            bounds = Bounds(int(threads), int(blocks) if blocks else None)
        except ValueError:
            bounds = Bounds(0)
        # __launch_bounds__(threads, blocks): threads 1..1024 (every arch's block limit), blocks >= 1.
        if not 1 <= (bounds.threads or 0) <= 1024 or (bounds.blocks is not None and bounds.blocks < 1):
            raise CliError(
                f"--bounds {part!r}: expected none, THREADS or THREADSxBLOCKS with 1 <= THREADS <= 1024 and "
                "BLOCKS >= 1 (e.g. 256x4)"
            )
        out.append(bounds)
    return out or [Bounds(None)]


class Row(Struct, frozen=True):
    bounds: Bounds
    arch: str
    registers: int
    spill_stores: int
    spill_loads: int
    stack: int
    max_block: int
    occupancy: float | None  # at the bounds' block size
    blocks: int | None
    cliff: str
    tmem: TmemUse | None = None  # the tensor memory a block allocates (tcgen05.alloc)
    cluster: tuple[int, int, int] | None = None  # the compiled __cluster_dims__


def split_target(target: str) -> tuple[Path, str | None]:
    """`kernels/poly.cu::poly_eval` (the kernel name may hold `::` itself: `ns::k<256>`); a file alone
    (`kernels/poly.cu`) has no kernel: explain lists its kernels."""
    parts = target.split("::")
    for i in range(1, len(parts)):
        source = Path("::".join(parts[:i]))
        if source.is_file():
            return source, "::".join(parts[i:])
    if Path(target).is_file():
        return Path(target), None
    raise CliError(
        f"{target}: expected SOURCE::KERNEL with an existing SOURCE file (e.g. kernels/poly.cu::poly_eval), "
        "or a SOURCE file alone to list its kernels"
    )


class Build(Struct, frozen=True):
    """How explain builds a file: the options and compiler, and the manifest table that gave them, if any."""

    options: CompileOptions
    compiler: str
    table: str | None = None  # "regbudget.toml, [[kernels]] table 2"
    rootdir: Path | None = None  # the manifest's rootdir


def _manifests(source: Path) -> Iterable[manifest.Manifest]:
    """The manifests of the directories above the working directory, then above the source file: the first
    that lists the file is its project's (a linked checkout's files are listed under the link's path)."""
    seen: set[Path] = set()
    for start in (Path.cwd(), source.resolve().parent):
        for folder in (start, *start.parents):
            if folder in seen:
                continue
            seen.add(folder)
            try:
                found = manifest.load(folder)
            except (ManifestError, MarkerError) as exc:
                raise CliError(f"regbudget manifest: {exc}") from None
            if found is not None:
                yield found


def build_of(source: Path, kernel: str | None, given: CompileOptions, compiler: str | None) -> Build:
    """The build the plugin makes of `source`: the manifest tables that cover it (those that select `kernel`
    if any do), with `given` (-D, -I, --options) added, the compiler as --compiler names it, else the
    tables', else NVRTC."""
    real = source.resolve()
    for found in _manifests(source):
        covering = [t for t in found.tables if not t.binary and any(f.resolve() == real for f in t.files)]
        if not covering:
            continue
        chosen = [t for t in covering if kernel is None or names.select(t.patterns, [kernel])] or covering
        path = next(f for f in chosen[0].files if f.resolve() == real)
        mk = manifest.Kernel(
            kernel or "", None, tuple(chosen), found.file_keys(path), found.database_variants(path)
        )
        try:
            budget = mk.budget(path, found.rootdir, mk.variants()[0])
        except MarkerError as exc:
            raise CliError(f"regbudget manifest: {exc}") from None
        o = budget.options
        options = replace(
            o,
            defines=(*o.defines, *given.defines),
            include_dirs=(*o.include_dirs, *given.include_dirs),
            options=(*o.options, *given.options),
        )
        label = ", ".join(t.label for t in chosen)
        return Build(options, compiler or budget.compiler or "nvrtc", label, found.rootdir)
    return Build(given, compiler or "nvrtc")


def explain(
    source: Path,
    kernel: str,
    archs: Sequence[str],
    bounds: Sequence[Bounds],
    options: CompileOptions,
    compiler: str,
    toolkit_name: str | None,
) -> list[Row]:
    """Build `kernel` per (bounds, arch), as `__launch_bounds__` placed in its source would, and read each
    build as the plugin does."""
    toolkit = discover(named=toolkit_name)
    text = read_source(source)
    rows = []
    for b in bounds:
        try:
            variant = text if b.threads is None else place_launch_bounds(text, kernel, b.threads, b.blocks)
        except ValueError as exc:
            raise CliError(f"{source}::{kernel}: {exc}; give --bounds none") from None
        for arch in archs:
            get_arch(arch)
            nvcc = find_nvcc(toolkit, only_toolkit=toolkit_name) if compiler == "nvcc" else None
            facts = _facts(source, variant, kernel, arch, options, toolkit, nvcc)
            res = facts.resources
            # The block the occupancy is for: the bounds', or the kernel's own __launch_bounds__ as written.
            threads = b.threads or res.max_threads
            occ, cliff = None, "-"
            if threads is not None:
                shape = (res.shared_mem, 0, res.max_threads)
                occ = occupancy(arch, res.registers, threads, *shape, barriers=res.barriers)
                c = register_cliff(arch, res.registers, threads, *shape, barriers=res.barriers)
                cliff = f"+{c.grow}/-{c.shed}" if c.shed is not None else f"+{c.grow}/-"
            rows.append(
                Row(
                    bounds=b,
                    arch=arch,
                    registers=res.registers,
                    spill_stores=res.spill_stores,
                    spill_loads=res.spill_loads,
                    stack=res.stack_frame,
                    max_block=max_block(arch, res),
                    occupancy=None if occ is None else occ.occupancy,
                    blocks=None if occ is None else occ.active_blocks,
                    cliff=cliff,
                    tmem=tmem_use(facts.tmem, None),
                    cluster=res.cluster_dims,
                )
            )
    return rows


def _facts(source: Path, text: str, kernel: str, arch: str, options: Any, toolkit: Any, nvcc: Any) -> Any:
    """The build of `text` (a variant of `source`) as the plugin makes it (`compile_kernel`). nvcc reads a
    file, so its variant is compiled beside a copy, with the source's directory on the include path."""
    if nvcc is None:
        return compile_kernel(source, kernel, arch, options, toolkit, source_text=text).facts
    with tempfile.TemporaryDirectory(prefix="regbudget-explain-") as tmp:
        copy = Path(tmp) / source.name
        copy.write_text(text, encoding="utf-8")
        opts = replace(options, include_dirs=(*options.include_dirs, str(source.resolve().parent)))
        return compile_kernel(copy, kernel, arch, opts, toolkit, nvcc=nvcc).facts


def table(rows: Sequence[Row]) -> list[str]:
    header: tuple[str, ...] = (
        "bounds",
        "arch",
        "regs",
        "spill st/ld",
        "stack",
        "max block",
        "occupancy",
        "cliff",
    )
    body: list[tuple[str, ...]] = [
        (
            str(r.bounds),
            r.arch,
            str(r.registers),
            f"{r.spill_stores}/{r.spill_loads}",
            str(r.stack),
            str(r.max_block),
            "-" if r.occupancy is None else f"{r.occupancy:.0%} ({r.blocks} blk)",
            r.cliff,
        )
        for r in rows
    ]
    if any(r.tmem is not None for r in rows):
        header = (*header, "tmem")
        body = [(*line, _tmem_cell(r.tmem)) for line, r in zip(body, rows, strict=True)]
    if any(r.cluster is not None for r in rows):
        header = (*header, "cluster")
        body = [
            (*line, "-" if r.cluster is None else cluster_text(r.cluster))
            for line, r in zip(body, rows, strict=True)
        ]
    return aligned(header, body)


def _tmem_cell(tmem: TmemUse | None) -> str:
    """`512 cols, 1 blk` (blocks that hold their tensor memory at once), `unknown`, or `-` without any."""
    if tmem is None:
        return "-"
    if tmem.columns is None:
        return "unknown"
    return f"{tmem.columns} cols, {tmem.blocks} blk"


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain text table: the header, a rule, the rows, each column as wide as its widest cell."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, ["-" * w for w in widths], *rows]
    ]


def headroom(root: Path) -> int:
    """Registers of headroom for the suggested budget: ini `regbudget_headroom` (e.g. "registers=8") in the
    project's pyproject.toml or pytest.ini; 0 without one."""
    value = ""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        with pyproject.open("rb") as fh:
            doc = tomli.load(fh)
        value = str(
            doc.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("regbudget_headroom", "")
        )
    for name in ("pytest.ini", "tox.ini", "setup.cfg"):
        ini = root / name
        if not value and ini.is_file():
            parser = configparser.ConfigParser()
            parser.read(ini, encoding="utf-8")
            section = "pytest" if name != "setup.cfg" else "tool:pytest"
            value = parser.get(section, "regbudget_headroom", fallback="")
    for part in value.split(","):
        key, _, amount = part.partition("=")
        if key.strip() == "registers" and amount.strip().isdigit():
            return int(amount)
    return 0


def suggested_marker(
    source: Path, kernel: str, rows: Sequence[Row], extra: int, build: Build, tests_dir: Path
) -> str:
    """A marker line of today's numbers (the kernel as written, or the first bounds built) plus headroom,
    with the build that made them, ready to paste into a test file in `tests_dir`: a marker's paths are
    relative to its test file's directory."""
    first = rows[0].bounds
    mine = [r for r in rows if r.bounds == first]
    regs = {r.arch: r.registers + extra for r in mine}
    max_regs = next(iter(regs.values())) if len(set(regs.values())) == 1 else regs
    spills = max(r.spill_stores + r.spill_loads for r in mine)
    stack = max(r.stack for r in mine)
    blocks = f", {first.blocks}" if first.blocks else ""
    launch = "" if first.threads is None else f", launch=({first.threads}{blocks},)"

    def rel(path: str | Path) -> str:
        return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(tests_dir))).as_posix()

    o = build.options
    # A marker has no build-wide defines: the manifest table's go with the variant's.
    defines = [k if v is None else f"{k}={v}" for k, v in o.all_defines()]
    given = [f'compiler="{build.compiler}"'] if build.compiler != "nvrtc" else []
    given += [f"defines={defines!r}"] if defines else []
    given += [f"include_dirs={[rel(d) for d in o.include_dirs]!r}"] if o.include_dirs else []
    given += [f"options={list(o.options)!r}"] if o.options else []
    given += [f"ptxas_options={list(o.ptxas_options)!r}"] if o.ptxas_options else []
    keys = "".join(f", {key}" for key in given)
    return (
        f'@pytest.mark.regbudget(source="{rel(source)}", kernel="{kernel}"{keys}, '
        f"max_regs={max_regs!r}, spills={spills}, stack={stack}{launch})"
    )


def list_kernels(source: Path, build: Build, arch: str, toolkit_name: str | None) -> list[str]:
    """The readable names of the kernels `source` holds for `arch`, from the build the plugin lists a
    manifest's files with (NVRTC: extern "C" and non-template kernels; nvcc: every kernel instantiated)."""
    settings = BuildSettings(
        rootdir=build.rootdir or Path.cwd(),
        cuda_home=None,
        timeouts=Timeouts(),
        cache_dir=default_cache_dir(),
        jobs=1,
        sass=False,
        toolkit=toolkit_name,
    )
    builder = Builder(settings)
    try:
        entries = builder.entries(source.absolute(), arch, build.options, build.compiler)
    finally:
        builder.close()
    return sorted({names.readable(e) for e in entries})


def _explain_arch(arch: str, toolkit_name: str | None) -> None:
    """An arch explain can build: one of the table, or UnknownArchError. An arch the toolkit builds but the
    table has no limits for says so, naming the toolkit, instead of "unknown"."""
    try:
        get_arch(arch)
    except UnknownArchError as unknown:
        try:
            targets = discover(named=toolkit_name).targets(toolkit_name)
        except ToolchainError:
            raise unknown from None  # with no toolkit to ask, the table's word stands
        if targets.known and arch in targets.archs:
            raise CliError(in_explain_words(table_lacks(arch, [targets]))) from None
        raise


def _cmd_explain(args: argparse.Namespace) -> int:
    source, kernel = split_target(args.target)
    archs = list(_csv(args.arch))
    try:
        given = CompileOptions.make(
            defines=args.defines or [], include_dirs=args.include_dir or [], options=shlex.split(args.options)
        )
        for arch in archs:
            _explain_arch(arch, args.toolkit)
        bounds = parse_bounds(args.bounds)
        build = build_of(source, kernel, given, args.compiler)
        if kernel is None:
            found = list_kernels(source, build, archs[0] if archs else "sm_90", args.toolkit)
        else:
            rows = explain(source, kernel, archs, bounds, build.options, build.compiler, args.toolkit)
    except CompileError as exc:
        # The compiler's whole log: its first line ("could not compile ...") says nothing of why. An arch the
        # toolkit does not build is one line whose advice names explain's own options.
        raise CliError(in_explain_words(str(exc).strip()) or type(exc).__name__) from None
    except (ToolchainError, RegbudgetError, ValueError) as exc:
        raise CliError(
            one_line(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__
        ) from None
    variant = [define_flag(k, v) for k, v in build.options.defines]
    flags = " ".join([f"compiler {build.compiler}", *build.options.settings(), *variant])
    if build.table:
        print(f"{source}: built as {build.table} builds it ({flags})")
    if kernel is None:
        print(f"{source} holds {len(found)} kernel(s) on {archs[0] if archs else 'sm_90'}:")
        print("\n".join(f"  {name}" for name in found))
        print(f"explain one: regbudget explain '{source}::{found[0] if found else 'KERNEL'}'")
        return OK
    defines = f" ({', '.join(args.defines)})" if args.defines else ""
    print(f"{source}::{kernel}{defines}")
    print("\n".join(table(rows)))
    extra = headroom(Path.cwd())
    print(
        f"\nsuggested marker (today's numbers + {extra} registers of headroom, ini regbudget_headroom), for a"
    )
    print(f"test file in {args.tests_dir} (--tests-dir):")
    print(suggested_marker(source, kernel, rows, extra, build, Path(args.tests_dir)))
    return OK


# -- history and blame --------------------------------------------------------------------------------------
def _versions(args: argparse.Namespace) -> history_git.Versions:
    if not Path(args.baseline).is_file():
        raise CliError(
            f"{args.baseline}: no such file. Fix: name the baseline with --baseline (a renamed file is read "
            "by its name today; its history is followed through the rename)"
        )
    cache = None if args.no_cache else default_cache_dir()
    try:
        return history_git.versions(Path(args.baseline), since=args.since, until=args.until, cache_dir=cache)
    except history_git.GitError as exc:
        raise CliError(str(exc)) from None


def _history_notes(found: history_git.Versions) -> list[str]:
    """What the rows cannot show: unreadable versions, a shallow clone, no version at all."""
    notes = []
    for v in found.versions:
        if v.samples is None:
            notes.append(
                f"unreadable, skipped: {v.commit.sha[:10]} {v.commit.date[:10]} {v.commit.subject}: {v.error}"
            )
    if found.shallow:
        notes.append(f"shallow clone: {history_git.SHALLOW_FIX}")
    if not found.versions:
        notes.append(f"no commit of {found.path} in this range")
    return notes


def _row(change: trend.Change) -> dict[str, object]:
    """One row of `history`, as the terminal prints it and the JSON holds it."""
    return {
        "commit": change.commit.sha,
        "date": change.commit.date,
        "subject": change.commit.subject,
        "kind": change.kind,
        "changed": change.changed(),
        **{m: change.values.get(m) for m in trend.METRICS},
        "before": {m: change.before.get(m) for m in trend.METRICS},
    }


def _filters(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _csv(args.arch), _csv(args.release)


def _csv(value: str | None) -> tuple[str, ...]:
    """A comma-separated option's items, blanks dropped."""
    return tuple(x.strip() for x in (value or "").split(",") if x.strip())


def _series(args: argparse.Namespace, found: history_git.Versions, pattern: str | None) -> list[trend.Series]:
    """The matching kernels' rows; a pattern that matches no kernel of any version is an error (exit 2)."""
    archs, releases = _filters(args)
    series = trend.history(
        found.versions, pattern, archs, releases, base=found.base, complete=not found.shallow
    )
    if not series and pattern is not None and found.versions:
        raise CliError(
            f"no kernel matching {pattern!r} in any version of {found.path}"
            + (f" for {', '.join(archs + releases)}" if archs or releases else "")
            + "; regbudget history lists the kernels it holds"
        )
    return series


def _cmd_history(args: argparse.Namespace) -> int:
    found = _versions(args)
    series = _series(args, found, args.pattern)
    notes = _history_notes(found)
    if args.json:
        doc = {
            "baseline": found.path,
            "shallow": found.shallow,
            "unreadable": [
                {"commit": v.commit.sha, "date": v.commit.date, "subject": v.commit.subject, "error": v.error}
                for v in found.versions
                if v.samples is None
            ],
            "kernels": [
                {
                    "source": s.source,
                    "kernel": s.kernel,
                    "variant": s.variant,
                    "arch": s.arch,
                    "release": s.release,
                    "rows": [_row(c) for c in s.changes],
                }
                for s in series
            ],
        }
        print(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
        return OK
    readable = sum(1 for v in found.versions if v.samples is not None)
    print(
        f"{found.path}: {len(found.versions)} version(s) on this branch, {readable} readable; "
        f"{len(series)} kernel(s) match"
    )
    for s in series:
        print(f"\n{s.name()}")
        rows = [
            [
                c.commit.sha[:10],
                c.commit.date[:10],
                _cut(c.commit.subject, 40),
                *(trend.shown(m, c.values.get(m)) if c.kind != "removed" else "-" for m in trend.METRICS),
                _what(c),
            ]
            for c in s.changes
        ]
        header = ["commit", "date", "subject", "regs", "spills", "stack", "occupancy", "time ms", "change"]
        print("\n".join(aligned(header, rows)))
    for note in notes:
        print(note)
    return OK


def _what(change: trend.Change) -> str:
    if change.kind == "first":
        return "first seen (the history read starts here)"
    if change.kind != "changed":
        return change.kind
    return ", ".join(
        f"{m} {trend.shown(m, change.before.get(m))} -> {trend.shown(m, change.values.get(m))}"
        for m in change.changed()
    )


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _cmd_blame(args: argparse.Namespace) -> int:
    found = _versions(args)
    series = _series(args, found, args.kernel)
    if not series:
        raise CliError(
            f"no kernel matching {args.kernel!r}: {found.path} has no readable version in this range"
        )
    if args.json:
        doc = [{"kernel": s.name(), "rows": [_row(c) for c in trend.blame(s, args.metric)]} for s in series]
        print(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
        return OK
    for s in series:
        rows = trend.blame(s, args.metric)
        print(s.name())
        if not rows:
            print(f"  {args.metric}: never changed")
        for n, c in enumerate(rows):
            label = "last changed" if n == 0 else "changed"
            before = {"added": "(new)", "first": "(history starts)"}.get(
                c.kind, trend.shown(args.metric, c.before.get(args.metric))
            )
            after = "(gone)" if c.kind == "removed" else trend.shown(args.metric, c.values.get(args.metric))
            print(
                f"  {label}: {args.metric} {before} -> {after} in {c.commit.sha[:10]} {c.commit.date[:10]} "
                f"{c.commit.subject}"
            )
    for note in _history_notes(found):
        print(note)
    return OK


# -- the command line ---------------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(
        prog="regbudget",
        description="CUDA kernel register budgets outside pytest. Exit status: 0 ok, 1 a check failed, "
        "2 bad input.",
    )
    main.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # Not required: a bare `regbudget` prints this help and exits 0 (main), as git and pip do.
    sub = main.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "explain", help="the launch-bounds table of one kernel, and a marker line to start from"
    )
    p.add_argument(
        "target", metavar="SOURCE::KERNEL", help="e.g. kernels/poly.cu::poly_eval or k.cu::reduce<256>"
    )
    p.add_argument("--arch", default="sm_80,sm_90", help="archs, comma-separated (default sm_80,sm_90)")
    p.add_argument(
        "--bounds",
        default="none,256,1024,256x4,1024x2",
        help="launch-bounds variants: none (as written), THREADS, THREADSxBLOCKS "
        "(default none,256,1024,256x4,1024x2)",
    )
    p.add_argument("--defines", "-D", action="append", metavar="NAME[=VALUE]", help="a define, may repeat")
    p.add_argument(
        "--include-dir", "-I", action="append", metavar="DIR", help="an include directory, may repeat"
    )
    p.add_argument("--options", default="", metavar="FLAGS", help='compiler flags, e.g. "-std=c++17"')
    p.add_argument(
        "--compiler",
        choices=("nvrtc", "nvcc"),
        default=None,
        help="default: the manifest table's that covers the file, else nvrtc",
    )
    p.add_argument(
        "--tests-dir",
        default="tests",
        metavar="DIR",
        help="the directory of the test file the suggested marker goes in: its source= and include_dirs "
        "are relative to it (default tests)",
    )
    p.add_argument(
        "--toolkit",
        default=None,
        help="cu12, cu13, system or a toolkit's directory (default: as pytest finds one)",
    )
    p.set_defaults(run=_cmd_explain)

    p = sub.add_parser("compare", help="the kernels that differ between two --regbudget-json reports")
    p.add_argument("a", metavar="A.json")
    p.add_argument("b", metavar="B.json")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument(
        "--fail-on",
        metavar="METRICS",
        help="exit 1 when a kernel got worse in one of these: registers,spills:16,occupancy:0.05,time:0.1 "
        f"(metrics: {', '.join(_FAIL_METRICS)}; a tolerance after ':')",
    )
    p.set_defaults(run=_cmd_compare)

    p = sub.add_parser("merge", help="one report and one baseline update from the reports of CI shards")
    p.add_argument("reports", nargs="+", metavar="SHARD.json")
    p.add_argument("-o", "--output", metavar="MERGED.json", help="write the merged report")
    p.add_argument("--update", metavar="BASELINE", help="apply the shards' entries to this baseline file")
    p.add_argument("--rootdir", help="the project's rootdir (default: the one the shards ran in)")
    p.set_defaults(run=_cmd_merge)

    for name, help_text in (
        ("history", "each kernel's numbers over the baseline file's git history, one row per change"),
        ("blame", "the commits where one metric of a kernel changed, the last first: git blame for numbers"),
    ):
        h = sub.add_parser(name, help=help_text)
        if name == "history":
            h.add_argument(
                "pattern",
                nargs="?",
                metavar="KERNEL-PATTERN",
                help="fnmatch pattern of kernel names or SOURCE::KERNEL",
            )
            h.set_defaults(run=_cmd_history)
        else:
            h.add_argument(
                "kernel", metavar="KERNEL", help="a kernel name or fnmatch pattern (or SOURCE::KERNEL)"
            )
            h.add_argument(
                "--metric", default="spills", choices=trend.METRICS, help="the metric (default spills)"
            )
            h.set_defaults(run=_cmd_blame)
        h.add_argument("--json", action="store_true", help="write the rows as JSON")
        h.add_argument(
            "--baseline",
            default="regbudget-baseline.toml",
            help="the baseline file (default regbudget-baseline.toml)",
        )
        h.add_argument("--since", help="a revision (the range starts after it) or a date git understands")
        h.add_argument("--until", help="a revision (the range ends at it) or a date")
        h.add_argument("--arch", help="only these archs, comma-separated")
        h.add_argument("--release", help="only these CUDA releases, comma-separated (12.9,13.0)")
        h.add_argument(
            "--no-cache", action="store_true", help="parse every version again (not from the cache)"
        )

    p = sub.add_parser("baseline", help="baseline file commands")
    base = p.add_subparsers(dest="baseline_command", required=True, metavar="COMMAND")
    c = base.add_parser(
        "check", help="validate baseline files (exit 1 on a problem, 2 on an unreadable file)"
    )
    c.add_argument("files", nargs="+", metavar="FILE")
    c.set_defaults(run=_cmd_baseline_check)
    return main


def main(argv: Sequence[str] | None = None) -> int:
    command_line = parser()
    args = command_line.parse_args(argv)
    if args.command is None:
        command_line.print_help()
        return OK
    try:
        return int(args.run(args))
    except CliError as exc:
        print(f"regbudget {args.command}: error: {exc}", file=sys.stderr)
        return BAD_INPUT
    except BrokenPipeError:
        # The reader went away (`regbudget history | head`): stop quietly, as git does, and keep Python from
        # complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return FAILED


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
