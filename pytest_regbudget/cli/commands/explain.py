"""`regbudget explain SOURCE::KERNEL` (or SOURCE alone): the launch-bounds table of one kernel, the verdict
a pytest run gives the kernel as written where its project's manifest holds it to a budget, and a marker
line to start from. A file alone lists its kernels.

The build is the project's (explaining.py: the manifest table that covers the file, the ini's compiler) and
the verdict the engine's (engine/judge.py), so that explain and pytest say the same of one kernel. The
settings it shares with the plugin (the archs, the toolkit, the ini keys) are project/options.py's, read
from pytest's ini files by project/ini.py.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from ... import sources
from ...core import baseline as bl
from ...core.arch import KEYWORDS, parse_archs
from ...core.blackwell import TmemUse, cluster_text
from ...core.diagnosis import percent
from ...core.errors import (
    BaselineError,
    CompileError,
    MarkerError,
    RegbudgetError,
    ToolchainError,
    UnknownArchError,
)
from ...core.text import one_line
from ...engine.builder import Builder
from ...engine.judge import item_archs, judge_alone
from ...engine.state import Settings, resolve_archs
from ...project import ini as pytest_ini
from ...project import options as shared
from ...project.archs import choose_archs
from ...project.markers import Budget, parse_tolerance
from ...tools.options import CompileOptions, define_flag
from ...tools.targets import in_explain_words
from ..base import OK, CliError, Command, aligned
from ..explain_triton import explain_triton, triton_lines
from ..explaining import (
    Build,
    Explained,
    Row,
    build_of,
    builder_for,
    check_arch,
    explain_builds,
    list_kernels,
    occupancy_cell,
    parse_bounds,
    split_target,
)


def run(args: argparse.Namespace) -> int:
    source, kernel = split_target(args.target)
    try:
        ini = pytest_ini.read(Path.cwd())
    except pytest_ini.IniError as exc:
        raise CliError(str(exc)) from None
    if source.suffix == ".py":
        return _run_triton(args, source, kernel, ini)
    try:
        given = CompileOptions.make(
            defines=args.defines or [], include_dirs=args.include_dir or [], options=shlex.split(args.options)
        )
        build = build_of(source, kernel, given, args.compiler, _compiler(ini))
        archs = _archs(args.arch, ini, build)
        toolkit = next(iter(shared.toolkit_names(args.toolkit, ini.linelist(shared.TOOLKIT_INI))), None)
        for arch in archs:
            if arch not in KEYWORDS:
                check_arch(arch, toolkit)
        bounds = parse_bounds(args.bounds)
        builder = builder_for(build.rootdir, toolkit, ini.string(shared.NVCC_INI).strip() or None)
        try:
            archs = _resolved(archs, builder, build.compiler)
            if kernel is None:
                found = list_kernels(source, build, archs[0], builder)
            else:
                explained = explain_builds(
                    source, kernel, archs, bounds, build.options, build.compiler, builder
                )
        finally:
            builder.close()
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
        print(f"{source} holds {len(found)} kernel(s) on {archs[0]}:")
        print("\n".join(f"  {name}" for name in found))
        print(f"explain one: regbudget explain '{source}::{found[0] if found else 'KERNEL'}'")
        return OK
    defines = f" ({', '.join(args.defines)})" if args.defines else ""
    rows = explained.rows
    print(f"{source}::{kernel}{defines}")
    print("\n".join(table(rows)))
    if build.budget is not None and explained.written:
        print()
        print("\n".join(verdict_lines(kernel, build.budget, build, explained, archs, ini)))
    extra = shared.parse_headroom(ini.string(shared.HEADROOM_INI))
    print(
        f"\nsuggested marker (today's numbers + {extra} registers of headroom, ini regbudget_headroom), for a"
    )
    print(f"test file in {args.tests_dir} (--tests-dir):")
    print(suggested_marker(source, kernel, rows, extra, build, Path(args.tests_dir)))
    return OK


def _run_triton(
    args: argparse.Namespace, source: Path, kernel: str | None, ini: pytest_ini.IniSettings
) -> int:
    """A `@triton.jit` function of a Python file, built as compile_triton(fn, signature=...) builds it: its
    rows, and each build's signature as compiled."""
    if kernel is None:
        raise CliError(f"{source}: name the Triton kernel, e.g. regbudget explain '{source}::my_kernel'")
    archs = _archs(args.arch, ini, Build(CompileOptions(), "triton"))
    for arch in archs:
        if arch in KEYWORDS:
            raise CliError(f"--arch {arch}: name the archs of a Triton kernel, e.g. --arch sm_80,sm_90")
        check_arch(arch, None)
    builder = builder_for(ini.rootdir, None)
    try:
        rows = explain_triton(source, kernel, archs, args.signature, args.num_warps, args.num_stages, builder)
    finally:
        builder.close()
    print(f"{source}::{kernel} (Triton, its block num_warps * 32 threads)")
    print("\n".join(table([row for row, _ in rows])))
    print("\n".join(triton_lines(rows)))
    return OK


def _compiler(ini: pytest_ini.IniSettings) -> str:
    """ini regbudget_compiler, the plugin's compiler of a file no table names one for."""
    value = ini.string(shared.COMPILER_INI).strip() or "nvrtc"
    if value not in sources.names():
        raise CliError(
            f"regbudget_compiler = {value!r} (ini): expected one of {', '.join(sources.names())} (a compiler "
            "a conftest registers builds only under pytest)"
        )
    return value


def _archs(option: Sequence[str] | None, ini: pytest_ini.IniSettings, build: Build) -> list[str]:
    """--arch, else ini regbudget_arch, else the manifest's arch, else the plugin's default: as pytest's."""
    try:
        chosen = choose_archs(option, ini.linelist(shared.ARCH_INI), build.manifest, flag="--arch")
    except ValueError as exc:  # the ini and the manifest disagree
        raise CliError(str(exc)) from None
    try:
        archs = parse_archs(chosen.given)
    except UnknownArchError as exc:  # an ini's or a manifest's arch: the option's are checked as parsed
        raise CliError(f"{chosen.named_by}: {one_line(str(exc))}") from None
    if not archs:
        raise CliError(f"{chosen.named_by} names no arch. Fix: e.g. --arch sm_80,sm_90")
    return archs


def _resolved(archs: Sequence[str], builder: Builder, compiler: str) -> list[str]:
    """`all` (every arch of the table the toolkit builds) resolved as the plugin resolves it; `native`
    names the GPU's, and explain looks for no GPU."""
    if not any(a in KEYWORDS for a in archs):
        return list(archs)
    targets = builder.nvcc().targets() if compiler == "nvcc" else builder.toolkit().targets(None)

    def no_gpu() -> tuple[str | None, str]:
        return None, "regbudget explain builds without one"

    try:
        return list(resolve_archs(archs, [targets], lambda: None, no_gpu))
    except ToolchainError as exc:
        raise CliError(in_explain_words(f"--arch: {one_line(str(exc))}")) from None


def verdict_lines(
    kernel: str,
    budget: Budget,
    build: Build,
    explained: Explained,
    archs: Sequence[str],
    ini: pytest_ini.IniSettings,
) -> list[str]:
    """What pytest says of the kernel as written on each arch, at compile time: the budgets of the tables
    that select it, its baseline entry with the ini's tolerance, and strict mode (engine/judge.py). `ok`,
    else the verdict and the lines a failing test shows."""
    rootdir = build.rootdir or ini.rootdir
    baseline_path = rootdir / shared.DEFAULT_BASELINE
    if given := ini.string(shared.BASELINE_INI).strip():
        baseline_path = (ini.path.parent if ini.path else ini.rootdir) / given
    try:
        tolerance = parse_tolerance(ini.string(shared.TOLERANCE_INI), "regbudget_tolerance (ini)")
        baseline = bl.load(baseline_path)
    except (MarkerError, BaselineError) as exc:
        raise CliError(one_line(str(exc))) from None
    settings = Settings(
        archs=tuple(archs),
        rootdir=rootdir,
        baseline_path=baseline_path,
        tolerance=tolerance,
        compiler=build.compiler,
        strict=ini.flag(shared.STRICT_INI),
    )
    count = f"{len(baseline)} entries" if baseline_path.exists() else "not yet written"
    lines = [
        f"verdict, as pytest gives it at compile time ({build.table}; baseline "
        f"{settings.display(baseline_path)}, {count}):"
    ]
    judged = item_archs(archs, budget)
    for arch in archs:
        facts = explained.written.get(arch)
        if arch not in judged or facts is None:
            lines.append(f"{one_line(kernel)} [{arch}]: skipped (the tables' archs= leave out {arch})")
            continue
        peak = next((r.peak for r in explained.rows if r.bounds.threads is None and r.arch == arch), None)
        report = judge_alone(facts, budget, settings, baseline, f"{facts.source}::{kernel}", peak)
        if report.outcome == "passed":
            lines.append(f"{report.label}: ok")
        else:
            lines += [f"{report.label}: {report.outcome.upper()}", report.failure_text()]
    return lines


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
            f"{r.spills[0]}/{r.spills[1]}",
            str(r.stack),
            str(r.max_block),
            occupancy_cell(r),
            r.cliff,
        )
        for r in rows
    ]
    if any(r.local_share is not None for r in rows):
        header = (*header, "local share")
        body = [
            (*line, "-" if r.local_share is None else percent(r.local_share))
            for line, r in zip(body, rows, strict=True)
        ]
    if any(r.peak is not None for r in rows):
        header = (*header, "peak live")
        body = [(*line, "-" if r.peak is None else r.peak.cell()) for line, r in zip(body, rows, strict=True)]
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
    spills = max(sum(r.spills) for r in mine)
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target", metavar="SOURCE::KERNEL", help="e.g. kernels/poly.cu::poly_eval or k.cu::reduce<256>"
    )
    shared.add_arch_option(p.add_argument, "")
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
        help="default: the manifest table's that covers the file, else ini regbudget_compiler, else nvrtc",
    )
    p.add_argument(
        "--tests-dir",
        default="tests",
        metavar="DIR",
        help="the directory of the test file the suggested marker goes in: its source= and include_dirs "
        "are relative to it (default tests)",
    )
    shared.add_toolkit_option(
        p.add_argument, "", does="the toolkit that builds", several="With more than one, the first builds."
    )
    p.add_argument(
        "--signature",
        default=None,
        metavar="TYPES",
        help="a Triton kernel (kernels.py::fn): its parameters in order, as Triton's AOT compiler takes "
        'them, e.g. "*fp16:16, i32:16, 1024"; "-" for a value its autotune config or heuristic gives',
    )
    p.add_argument("--num-warps", type=int, default=None, help="a Triton kernel's num_warps (default 4)")
    p.add_argument("--num-stages", type=int, default=None, help="a Triton kernel's num_stages (default 3)")


COMMAND = Command(
    "explain", "the launch-bounds table of one kernel, and a marker line to start from", add_arguments, run
)
