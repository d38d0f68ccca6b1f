"""What `regbudget explain` builds, and how: a file as its project builds it (the manifest tables that cover
it, else the ini's compiler), the kernel as written through the engine's builder and kernel source, exactly
as a pytest run builds it, and each launch-bounds variant of it, as `__launch_bounds__` placed in its source
would; and the row of numbers each build gives.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from .. import sources
from ..cache.store import compile_kernel
from ..core import names
from ..core.arch import get_arch
from ..core.blackwell import TmemUse, tmem_use
from ..core.checks import max_block
from ..core.errors import ManifestError, MarkerError, SassError, ToolchainError, UnknownArchError
from ..core.facts import KernelFacts
from ..core.liveness import PeakLive
from ..core.occupancy import occupancy, register_cliff
from ..engine.builder import Builder, BuildSettings, ItemEnv
from ..project import manifest
from ..project.manifest import Manifest
from ..project.markers import Budget
from ..sources import SourceSpec
from ..tools.compiler import place_launch_bounds, read_source
from ..tools.options import CompileOptions, Timeouts
from ..tools.targets import in_explain_words, table_lacks
from ..tools.toolkit import Nvcc, Toolkit, discover
from .base import CliError, cache_dir


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
    spills: tuple[int, int]  # (stores, loads) in bytes
    stack: int
    max_block: int
    occupancy: float | None  # at the bounds' block size
    blocks: int | None
    cliff: str
    tmem: TmemUse | None = None  # the tensor memory a block allocates (tcgen05.alloc)
    cluster: tuple[int, int, int] | None = None  # the compiled __cluster_dims__
    # The estimated share of executed instructions that are local loads/stores, where nvdisasm is present.
    local_share: float | None = None
    # The most registers live at one instruction and its line, where nvdisasm gives life ranges of the cubin.
    peak: PeakLive | None = None


def occupancy_cell(row: Row) -> str:
    """`100% (8 blk)` at the bounds' block size. Where fewer blocks hold their tensor memory at once than the
    occupancy calculator lets reside, those blocks and their occupancy, marked as the summary's column marks
    them (report/terminal.py): `12% (1 blk TMEM)`; `TMEM?` where the kernel's column count is unknown."""
    if row.occupancy is None:
        return "-"
    occ, blocks, mark = row.occupancy, row.blocks, ""
    held = None if row.tmem is None else row.tmem.blocks
    if held is not None and blocks and held < blocks:
        occ, blocks, mark = occ * held / blocks, held, " TMEM"
    elif row.tmem is not None and row.tmem.columns is None:
        mark = " TMEM?"
    return f"{occ:.0%} ({blocks} blk{mark})"


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
    manifest: Manifest | None = None  # the manifest whose tables cover the file
    # The budget a pytest run holds the kernel to (its first variant's), where a table selects the kernel.
    budget: Budget | None = None


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


def build_of(
    source: Path, kernel: str | None, given: CompileOptions, compiler: str | None, default: str = "nvrtc"
) -> Build:
    """The build the plugin makes of `source`: the manifest tables that cover it (those that select `kernel`
    if any do), with `given` (-D, -I, --options) added, the compiler as --compiler names it, else the
    tables', else `default` (ini regbudget_compiler, as the plugin's)."""
    real = source.resolve()
    for found in _manifests(source):
        covering = [t for t in found.tables if not t.binary and any(f.resolve() == real for f in t.files)]
        if not covering:
            continue
        selecting = [t for t in covering if kernel is not None and names.select(t.patterns, [kernel])]
        chosen = [t for t in covering if kernel is None or t in selecting] or covering
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
        # Held to a budget where a pytest run makes an item of the kernel: a table selects it.
        held = budget if selecting else None
        return Build(options, compiler or budget.compiler or default, label, found.rootdir, found, held)
    return Build(given, compiler or default)


class Explained(Struct, frozen=True):
    """A kernel's rows, and the facts of the kernel as written on each arch (built as a pytest run builds
    it, to be judged as one judges it)."""

    rows: list[Row]
    written: dict[str, KernelFacts]


def builder_for(rootdir: Path | None, toolkit: str | None, nvcc: str | None = None) -> Builder:
    """The engine's builder, as a pytest run in `rootdir` makes it: the toolkit (a --toolkit name, else the
    one discovery finds), the pinned nvcc (ini regbudget_nvcc), the compile cache."""
    settings = BuildSettings(
        rootdir=rootdir or Path.cwd(),
        cuda_home=None,
        timeouts=Timeouts(),
        cache_dir=cache_dir(),
        jobs=1,
        sass=False,
        toolkit=toolkit,
        nvcc=nvcc,
    )
    return Builder(settings)


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
    builder = builder_for(None, toolkit_name)
    try:
        return explain_builds(source, kernel, archs, bounds, options, compiler, builder).rows
    finally:
        builder.close()


def explain_builds(
    source: Path,
    kernel: str,
    archs: Sequence[str],
    bounds: Sequence[Bounds],
    options: CompileOptions,
    compiler: str,
    builder: Builder,
) -> Explained:
    """The rows of `kernel` per (bounds, arch). The kernel as written is built by the kernel source that
    `compiler` names, in the engine's build environment: the build, and the facts, of a pytest run."""
    text = read_source(source)
    written_by = sources.make(compiler, SourceSpec(source.absolute(), kernel, options))
    env = ItemEnv(builder)
    rows = []
    written: dict[str, KernelFacts] = {}
    for b in bounds:
        try:
            variant = text if b.threads is None else place_launch_bounds(text, kernel, b.threads, b.blocks)
        except ValueError as exc:
            raise CliError(f"{source}::{kernel}: {exc}; give --bounds none") from None
        for arch in archs:
            get_arch(arch)
            if b.threads is None:
                facts = written[arch] = written_by.build(arch, env)[0]
            else:
                nvcc = builder.nvcc() if compiler == "nvcc" else None
                facts = _variant_facts(source, variant, kernel, arch, options, builder.toolkit(), nvcc)
            row = replace(row_of(b, facts), local_share=_local_share(facts, builder))
            rows.append(replace(row, peak=builder.peak_live(facts)))
    return Explained(rows, written)


def _local_share(facts: KernelFacts, builder: Builder) -> float | None:
    """The build's estimated local share (core/estimate.py), read as a run reads it; None without
    nvdisasm (the `sass` extra) or a cubin: explain shows what it can without it."""
    try:
        nvdisasm = builder.nvdisasm()
    except SassError:
        return None
    if not facts.cubin:
        return None
    from ..tools.nvdisasm import read_sass  # the SASS readers: only where nvdisasm is present

    res = facts.resources
    spills = res.spill_bytes > 0 or not res.spills_known
    return read_sass(
        nvdisasm, facts.cubin, facts.entry, spills=spills, cache_dir=builder.settings.cache_dir
    ).local_share


def _variant_facts(
    source: Path,
    text: str,
    kernel: str,
    arch: str,
    options: CompileOptions,
    toolkit: Toolkit,
    nvcc: Nvcc | None,
) -> KernelFacts:
    """The build of `text` (a launch-bounds variant of `source`) as the plugin makes one (`compile_kernel`).
    nvcc reads a file, so its variant is compiled beside a copy, with the source's directory on the include
    path."""
    if nvcc is None:
        return compile_kernel(source, kernel, arch, options, toolkit, source_text=text).facts
    with tempfile.TemporaryDirectory(prefix="regbudget-explain-") as tmp:
        copy = Path(tmp) / source.name
        copy.write_text(text, encoding="utf-8")
        opts = replace(options, include_dirs=(*options.include_dirs, str(source.resolve().parent)))
        return compile_kernel(copy, kernel, arch, opts, toolkit, nvcc=nvcc).facts


def row_of(bounds: Bounds, facts: KernelFacts) -> Row:
    """A build's row: its numbers, and the occupancy and register cliff at the bounds' block size (else at
    the kernel's own __launch_bounds__ as written; none without either)."""
    arch, res = facts.arch, facts.resources
    threads = bounds.threads or res.max_threads
    occ, cliff = None, "-"
    if threads is not None:
        shape = (res.smem, 0, res.max_threads)
        occ = occupancy(arch, res.registers, threads, *shape, barriers=res.barriers)
        c = register_cliff(arch, res.registers, threads, *shape, barriers=res.barriers)
        cliff = f"+{c.grow}/-{c.shed}" if c.shed is not None else f"+{c.grow}/-"
    return Row(
        bounds=bounds,
        arch=arch,
        registers=res.registers,
        spills=res.spills,
        stack=res.stack,
        max_block=max_block(arch, res),
        occupancy=None if occ is None else occ.occupancy,
        blocks=None if occ is None else occ.active_blocks,
        cliff=cliff,
        tmem=tmem_use(facts.tmem, None),
        cluster=res.cluster_dims,
    )


def list_kernels(source: Path, build: Build, arch: str, builder: Builder) -> list[str]:
    """The readable names of the kernels `source` holds for `arch`, from the build the plugin lists a
    manifest's files with (NVRTC: extern "C" and non-template kernels; nvcc: every kernel instantiated)."""
    entries = builder.entries(source.absolute(), arch, build.options, build.compiler)
    return sorted({names.readable(e) for e in entries})


def check_arch(arch: str, toolkit_name: str | None) -> None:
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
