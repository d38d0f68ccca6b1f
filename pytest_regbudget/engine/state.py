"""The records the session works on: the run's `Settings` (read from pytest's options by options.py) and
what a marked test carries from collection to its end (`ItemState`). No pytest here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from ..core.arch import (
    ALL,
    NATIVE,
    SUPPORTED_ARCHS,
    SUPPORTED_VARIANTS,
    unknown_arch,
)
from ..core.baseline import Key
from ..core.errors import ToolchainError
from ..core.facts import KernelFacts
from ..core.gpu_facts import Timing
from ..core.kernel_report import KernelReport
from ..core.verdict import TimeBasis
from ..gpu.runner import GpuMode
from ..project.markers import Budget
from ..sources import KernelSource
from ..tools.options import Timeouts
from ..tools.targets import Targets, table_lacks
from ..update.scope import NOT_A_FILE
from ..util.paths import distribution_of, install_search, source_path, under_root
from .builder import BuildSettings
from .sharding import Shard


class Settings(Struct, frozen=True):
    # As given until the session resolves them (`resolve_archs`): `all` and `native` stand for archs then.
    archs: tuple[str, ...]
    rootdir: Path
    cuda_home: str | None = None
    json_path: Path | None = None
    timeouts: Timeouts = field(
        default_factory=Timeouts
    )  # ini regbudget_ptxas_timeout, regbudget_nvcc_timeout
    baseline_path: Path | None = None
    # Whether the user typed the baseline's path (--regbudget-baseline on the command line or in
    # PYTEST_ADDOPTS): else it came from the repository, and an update may not lead out of it (confine).
    baseline_chosen: bool = False
    update: bool = False
    tolerance: dict[str, float] = field(default_factory=dict)
    markdown_path: Path | None = None
    step_summary: Path | None = None  # $GITHUB_STEP_SUMMARY
    annotate: bool = False  # GITHUB_ACTIONS=true
    gpu_mode: GpuMode = "auto"
    sass: bool = False  # --regbudget-sass
    html_path: Path | None = None
    html_all: bool = False  # --regbudget-html-all: every kernel's staircase, not only failing or changed ones
    html_history: int = 50  # ini regbudget_html_history: commits of the baseline the HTML charts show
    cache_dir: Path | None = None  # None: --regbudget-no-cache, or `cache_refused`
    cache_refused: str = ""  # why the cache directory is not used (core/dirs.py usable_cache_dir)
    jobs: int = 1  # compile threads
    compiler: str = "nvrtc"  # ini regbudget_compiler: a registered source name (sources.names())
    strict: bool = False  # --regbudget-strict: a kernel without an enforced entry of its release fails
    time_basis: TimeBasis = "time"  # ini regbudget_time_basis: "cycles" judges time x SM clock
    # --regbudget-toolkit: every kernel is built and judged with each (toolchain.TOOLKIT_NAMES or paths);
    # () builds with the one toolkit discovery finds.
    toolkits: tuple[str, ...] = ()
    nvcc: str | None = None  # --regbudget-nvcc: the nvcc for compiler="nvcc", pinned
    # Where the archs were named, for the messages about them: "--regbudget-arch", "regbudget_arch (ini)", or
    # the manifest's arch key.
    archs_from: str = "--regbudget-arch"
    shard: Shard | None = None  # --regbudget-shard=K/N: this run builds and runs only its own build units

    def build(self, toolkit: str | None = None) -> BuildSettings:
        return BuildSettings(
            rootdir=self.rootdir,
            cuda_home=self.cuda_home,
            timeouts=self.timeouts,
            cache_dir=self.cache_dir,
            jobs=self.jobs,
            sass=self.sass,
            toolkit=toolkit,
            nvcc=self.nvcc,
        )

    def display(self, path: Path) -> str:
        """`path` as the run's lines name it: relative to the rootdir where it is inside it."""
        try:
            return str(path.relative_to(self.rootdir))
        except ValueError:
            return str(path)

    def baseline_key(self, facts: KernelFacts) -> Key:
        """The baseline key of a kernel: (source relative to the rootdir, or its import path where it is
        installed code, readable name, variant, arch, release of the toolkit that measured it)."""
        source = _relative(facts.source, self.rootdir)
        if not facts.from_file:
            source = f"{NOT_A_FILE}{facts.provenance.compiler}>{source}"
        return (source, facts.kernel, facts.variant, facts.arch, facts.provenance.release)

    def key_before(self, key: Key, facts: KernelFacts) -> Key | None:
        """The key 0.1 gave a kernel outside the rootdir (its path relative to the rootdir, with `..`), where
        that is not `key`: its entry is read there, and an update moves it to `key`."""
        if not facts.from_file or under_root(facts.source, self.rootdir) is not None:
            return None
        dotted = os.path.relpath(facts.source, self.rootdir).replace(os.sep, "/")
        return (dotted, key[1], key[2], key[3], key[4])

    def package_of(self, facts: KernelFacts) -> str | None:
        """The installed distribution and version that holds a kernel's file ("liger_kernel 0.8.5"), which
        its entry records; None for the project's own files and for code without a file."""
        return _package(facts.source, self.rootdir) if facts.from_file else None


class ItemState(Struct):
    """What a marked test carries from collection to the end of its call phase."""

    arch: str
    budget: Budget | None = None
    marker_error: str | None = None
    toolkit: str | None = None  # the --regbudget-toolkit name it builds with (None: the run's one toolkit)
    source: KernelSource | None = None  # the marker's kernel, if it names one
    item_archs: tuple[str, ...] = ()  # every arch this item runs for, in order
    reports: list[KernelReport] = field(default_factory=list)  # compile-time verdicts, in order
    facts: dict[tuple[str, str], KernelFacts] = field(default_factory=dict)  # (kernel id, arch) -> facts
    loaded: dict[tuple[str, str], Any] = field(default_factory=dict)  # (kernel id, arch) -> CuPy kernel
    timings: dict[tuple[str, str], Timing] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget this run of the test once it is torn down (its records are made): a rerun starts afresh,
        and a finished test keeps no kernels (CuPy modules, cubins, reports) alive to the session's end."""
        self.reports = []
        self.facts = {}
        self.loaded = {}
        self.timings = {}

    def loaded_report(self, kernel: str | KernelReport, *, gpu_checks: bool) -> KernelReport | None:
        """The report of `kernel` (a name compiled in this test, or its report) whose cubin is loaded on the
        GPU; None when none is (`gpu_checks`: whether this instance runs them). ValueError naming the
        kernels compiled when `kernel` is not among them."""
        wanted = kernel.kernel if isinstance(kernel, KernelReport) else kernel
        loaded = [r for r in self.reports if (r.kernel, r.arch) in self.loaded]
        if not loaded:
            if not self.reports and gpu_checks:
                raise ValueError(f"benchmark({wanted!r}): this test compiled no kernel; compile it first")
            return None
        for r in loaded:
            if r.kernel == wanted:
                return r
        names = ", ".join(sorted({r.kernel for r in loaded}))
        raise ValueError(f"benchmark({wanted!r}): no such kernel compiled in this test (compiled: {names})")


@functools.lru_cache(maxsize=4096)
def _relative(source: Path, rootdir: Path) -> str:
    """`source` as a baseline key names it (remembered: every kernel of a file, on every arch, asks):
    relative to the rootdir, else its import path inside an install (util/paths.py `source_path`)."""
    return source_path(source, rootdir)


@functools.lru_cache(maxsize=1024)
def _package(source: Path, rootdir: Path) -> str | None:
    if under_root(source, rootdir) is not None:
        return None  # the project's own file, even where the project sits in an install directory
    return distribution_of(source, install_search(rootdir))


def resolve_archs(
    requested: Sequence[str],
    compilers: Sequence[Targets],
    nvcc: Callable[[], Targets | None],
    device: Callable[[], tuple[str | None, str]],
) -> tuple[str, ...]:
    """The run's archs: `all` and `native` replaced by what they stand for, each checked against the arch
    table and the compilers of the run. ToolchainError (a usage error at start-up) with one line per arch
    that no compiler of the run builds, that the table has no limits for, or that `native` cannot name.

    `compilers`: what each toolkit of the run builds (and a pinned nvcc); `nvcc` the run's nvcc otherwise,
    asked only for an arch that no toolkit builds (None: the run has none); `device` the GPU's arch, or None
    and why there is none. A compiler that could not say what it builds is taken to build every arch: its
    own error says otherwise when a kernel is built."""
    found: list[str] = []
    errors: list[str] = []
    for name in requested:
        if name == ALL:
            found += _every_arch(compilers, errors)
        elif name == NATIVE:
            arch, why = device()
            if arch is None:
                errors.append(
                    f"native: the GPU checks find no GPU to take the arch from ({why}). Fix: name "
                    "the archs, e.g. --regbudget-arch=sm_90"
                )
            else:
                found.append(arch)
        else:
            found.append(name)
    out: list[str] = []
    for arch in found:
        if arch in out:
            continue
        problem = _arch_problem(arch, compilers, nvcc)
        if problem is None:
            out.append(arch)
        else:
            errors.append(problem)
    if errors:
        raise ToolchainError("\n".join(errors))
    return tuple(out)


def _every_arch(compilers: Sequence[Targets], errors: list[str]) -> list[str]:
    """`all`: every real arch of the table that every compiler of the run builds, in the table's order."""
    known = [c for c in compilers if c.known]
    if not known:
        errors.append(
            "all: no CUDA toolkit of this run could say which archs it builds (none was found, or its NVRTC "
            "did not load). Fix: name the archs, e.g. --regbudget-arch=sm_80,sm_90"
        )
        return []
    archs = [a for a in SUPPORTED_ARCHS if all(a in c.archs for c in known)]
    if not archs:
        whose = " and ".join(c.who for c in known)
        errors.append(f"all: {whose} build no arch in common. Fix: compare fewer toolkits, or name the archs")
    return archs


def _arch_problem(arch: str, compilers: Sequence[Targets], nvcc: Callable[[], Targets | None]) -> str | None:
    """The one line about `arch` when no compiler of the run builds it or the table has no limits for it."""
    builders = [c for c in compilers if c.known and arch in c.archs]
    refusing = [c for c in compilers if c.known and arch not in c.archs]
    in_table = arch in SUPPORTED_ARCHS or arch in SUPPORTED_VARIANTS
    if not builders and (refusing or not in_table):
        # No toolkit builds it: the run's nvcc may (a CUDA 13 nvcc beside CUDA 12 wheels). Asked only now, as
        # finding it may start `nvcc --list-gpu-code`.
        other = nvcc()
        if other is not None and other.known and all(other.release != c.release for c in refusing):
            (builders if arch in other.archs else refusing).append(other)
    if not in_table:
        if builders:
            return table_lacks(arch, builders)
        return str(unknown_arch(arch))
    if builders or not refusing:
        return None
    lines = [r for c in refusing if (r := c.refusal(arch)) is not None]
    if len(lines) == 1:
        return lines[0]
    return f"no compiler of this run builds {arch}: " + "; ".join(lines)
