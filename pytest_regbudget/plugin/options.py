"""The plugin's command-line options and ini keys (`pytest_addoption`), checked when pytest parses them,
and the run's `Settings` read from a config (`settings_of`): the one place an option's value becomes a
setting.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import cast, get_args

import pytest

from .. import sources
from ..cache.prefetch import default_jobs
from ..core.dirs import default_cache_dir
from ..core.errors import (
    MarkerError,
    UnknownArchError,
)
from ..core.verdict import TimeBasis
from ..engine.sharding import Shard, parse_shard
from ..engine.state import Settings
from ..gpu.runner import GpuMode
from ..project import options as shared
from ..project.manifest import Manifest
from ..project.markers import parse_tolerance
from ..project.options import DEFAULT_BASELINE, parse_archs
from ..tools.options import (
    DEFAULT_CUOBJDUMP_TIMEOUT,
    DEFAULT_NVCC_TIMEOUT,
    DEFAULT_PTXAS_TIMEOUT,
    Timeouts,
)

ARCH_PARAM = "regbudget_arch"
TOOLKIT_PARAM = "regbudget_toolkit"  # with several --regbudget-toolkit: which one an item builds with
# The options and ini keys that the `regbudget` command shares are defined in project/options.py.
PREFIX = "regbudget-"  # --regbudget-arch here, --arch in `regbudget explain`


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("regbudget", "CUDA register and spill budgets (pytest-regbudget)")
    shared.add_arch_option(group.addoption, PREFIX)
    group.addoption(
        "--regbudget-cuda-home",
        default=None,
        metavar="DIR",
        help="CUDA toolkit to use (the directory holding bin/ptxas). Default: $REGBUDGET_CUDA_HOME, "
        "the pip wheels, $CUDA_HOME/$CUDA_PATH, then PATH.",
    )
    group.addoption(
        "--regbudget-update",
        action="store_true",
        default=False,
        help="write or refresh the baseline entries of the kernels that ran (absolute budgets still fail); "
        "it removes an entry only when the run could have seen it and did not, and never when interrupted.",
    )
    shared.add_toolkit_option(
        group.addoption,
        PREFIX,
        does="build and judge every kernel with each toolkit",
        several="With more than one, item ids end in the release (test_x[sm_90-12.9]) and the summary "
        "compares them.",
    )
    group.addoption(
        "--regbudget-nvcc",
        default=None,
        metavar="PATH",
        help='the nvcc for compiler="nvcc" kernels. Default: ini regbudget_nvcc, else the toolkit\'s.',
    )
    group.addoption(
        "--regbudget-strict",
        action="store_true",
        default=None,
        help="fail every kernel that is not held to a baseline entry of its own CUDA release (no entry, an "
        "entry of another release only, unknown spills): a toolkit upgrade cannot pass unnoticed. Default: "
        "ini regbudget_strict.",
    )
    group.addoption(
        "--regbudget-baseline",
        default=None,
        metavar="PATH",
        help="the baseline file. Default: ini regbudget_baseline, else regbudget-baseline.toml in the "
        "rootdir.",
    )
    group.addoption(
        "--regbudget-markdown",
        default=None,
        metavar="PATH",
        help="write a Markdown table of kernels, metrics and baseline deltas to PATH "
        "(also appended to $GITHUB_STEP_SUMMARY when set).",
    )
    group.addoption(
        "--regbudget-gpu",
        choices=("auto", "off", "require"),
        default=None,
        help="GPU checks (driver attributes and occupancy, regbudget.benchmark timings): auto runs them when "
        "CuPy and a CUDA device are present, require fails without them, off never touches the GPU. "
        "Default: ini regbudget_gpu, else auto.",
    )
    group.addoption(
        "--regbudget-sass",
        action="store_true",
        default=False,
        help="disassemble each measured cubin with nvdisasm: spill instructions inside loops, local arrays, "
        "source lines (needs the sass extra).",
    )
    group.addoption(
        "--regbudget-html",
        default=None,
        metavar="PATH",
        help="write a self-contained HTML report: an index of every kernel (failures first), then budgets, "
        "diagnosis and occupancy staircase of the failing and changed ones.",
    )
    group.addoption(
        "--regbudget-html-all",
        action="store_true",
        default=False,
        help="with --regbudget-html: a section with the occupancy staircase for every kernel, not only the "
        "failing and changed ones (a larger page).",
    )
    group.addoption(
        "--regbudget-summary",
        choices=("changes", "all", "failures"),
        default=None,
        help="which kernels the terminal table shows: changes (the default: failing, warned, changed and new "
        "ones, then a count of the rest), all (also pytest -v; -vv leaves long names uncut) or failures.",
    )
    group.addoption(
        "--regbudget-no-cache",
        action="store_true",
        default=False,
        help="compile everything afresh and write no cache entries (the cache lives in $REGBUDGET_CACHE_DIR, "
        "else $XDG_CACHE_HOME/pytest-regbudget, else ~/.cache/pytest-regbudget).",
    )
    group.addoption(
        "--regbudget-jobs",
        type=int,
        default=None,
        metavar="N",
        help="compile threads. Default: ini regbudget_jobs, else the available cores divided by pytest-xdist "
        "workers.",
    )
    group.addoption(
        "--regbudget-json",
        default=None,
        metavar="PATH",
        help='write every kernel\'s numbers and verdict to PATH as {"kernels": [...]}.',
    )
    group.addoption(
        "--regbudget-shard",
        default=None,
        type=_shard,
        metavar="K/N",
        help="run shard K of N (1 <= K <= N): each source file or binary, with every item that builds it, "
        "goes to one shard, and a shard builds only its own. Merge the shards' --regbudget-json reports "
        "with `regbudget merge`.",
    )
    for key in (
        shared.ARCH_INI,
        shared.BASELINE_INI,
        shared.TOLERANCE_INI,
        shared.COMPILER_INI,
        shared.TOOLKIT_INI,
        shared.NVCC_INI,
        shared.HEADROOM_INI,
    ):
        key.add(parser.addini)
    parser.addini(
        "regbudget_time_basis",
        "time (default) or cycles: judge max_time_ratio on time x SM clock, for runners whose clock varies",
        default="time",
    )
    shared.STRICT_INI.add(parser.addini)
    parser.addini("regbudget_jobs", "compile threads (default: cores / xdist workers)", default="")
    parser.addini("regbudget_gpu", "auto, off or require (see --regbudget-gpu)", default="auto")
    parser.addini(
        "regbudget_ptxas_timeout",
        f"seconds one ptxas run may take (default {DEFAULT_PTXAS_TIMEOUT:g})",
        default=str(DEFAULT_PTXAS_TIMEOUT),
    )
    parser.addini(
        "regbudget_nvcc_timeout",
        f"seconds one nvcc build of a translation unit may take (default {DEFAULT_NVCC_TIMEOUT:g})",
        default=str(DEFAULT_NVCC_TIMEOUT),
    )
    parser.addini(
        "regbudget_html_history",
        "commits of the baseline file's git history the HTML report's charts show (default 50; 0: none)",
        default="50",
    )
    parser.addini(
        "regbudget_cuobjdump_timeout",
        "seconds one cuobjdump run may take per 100 MB of the binary it reads "
        f"(default {DEFAULT_CUOBJDUMP_TIMEOUT:g})",
        default=str(DEFAULT_CUOBJDUMP_TIMEOUT),
    )


def _shard(text: str) -> Shard:
    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--regbudget-shard={exc}") from None


def _seconds(config: pytest.Config, name: str, default: float) -> float:
    text = str(config.getini(name))
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):  # also false for nan
        raise pytest.UsageError(
            f"{name} = {text!r}: expected a finite number of seconds > 0, e.g. {default:g}"
        )
    return value


def _count(config: pytest.Config, name: str) -> int:
    text = str(config.getini(name)).strip()
    if not text.isdigit():
        raise pytest.UsageError(f"{name} = {text!r}: expected a whole number >= 0, e.g. 50")
    return int(text)


def _path_option(config: pytest.Config, name: str) -> Path | None:
    value: str | None = config.getoption(name)
    return Path(config.invocation_params.dir, value) if value else None


def settings_of(config: pytest.Config, manifest: Manifest | None = None) -> Settings:
    cli: Sequence[str] | None = config.getoption("regbudget_arch")
    ini: list[str] = config.getini("regbudget_arch")
    try:
        chosen = shared.choose_archs(cli, ini, manifest, flag="--regbudget-arch")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    # Where the archs came from, for every message about them (the default reads as the option's).
    archs_from = chosen.named_by
    try:
        archs = parse_archs(chosen.given)
    except UnknownArchError as exc:
        raise pytest.UsageError(f"{archs_from}: {exc}") from None
    if not archs:  # --regbudget-arch= or =,, : nothing would be built, and every listing would look empty
        given = f"--regbudget-arch={','.join(cli)}" if cli else "regbudget_arch (ini)"
        raise pytest.UsageError(f"{given} names no arch. Fix: e.g. --regbudget-arch=sm_80,sm_90")
    timeouts = Timeouts(
        ptxas=_seconds(config, "regbudget_ptxas_timeout", DEFAULT_PTXAS_TIMEOUT),
        nvcc=_seconds(config, "regbudget_nvcc_timeout", DEFAULT_NVCC_TIMEOUT),
        cuobjdump=_seconds(config, "regbudget_cuobjdump_timeout", DEFAULT_CUOBJDUMP_TIMEOUT),
    )
    try:
        tolerance = parse_tolerance(str(config.getini("regbudget_tolerance")), "regbudget_tolerance (ini)")
    except MarkerError as exc:
        raise pytest.UsageError(str(exc)) from None
    baseline = _path_option(config, "regbudget_baseline")
    ini_baseline = str(config.getini("regbudget_baseline"))
    if baseline is None:
        ini_dir = config.inipath.parent if config.inipath else config.rootpath
        baseline = ini_dir / ini_baseline if ini_baseline else config.rootpath / DEFAULT_BASELINE
    gpu_mode = _gpu_mode(config.getoption("regbudget_gpu") or str(config.getini("regbudget_gpu")).strip())
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    return Settings(
        archs=tuple(archs),
        rootdir=config.rootpath,
        cuda_home=config.getoption("regbudget_cuda_home"),
        json_path=_path_option(config, "regbudget_json"),
        timeouts=timeouts,
        baseline_path=baseline,
        update=bool(config.getoption("regbudget_update")),
        tolerance=tolerance,
        markdown_path=_path_option(config, "regbudget_markdown"),
        step_summary=Path(step_summary) if step_summary else None,
        annotate=os.environ.get("GITHUB_ACTIONS") == "true",
        gpu_mode=gpu_mode,
        sass=bool(config.getoption("regbudget_sass")),
        cache_dir=None if config.getoption("regbudget_no_cache") else default_cache_dir(),
        jobs=_jobs(config),
        compiler=_compiler(config),
        html_path=_path_option(config, "regbudget_html"),
        html_all=bool(config.getoption("regbudget_html_all")),
        html_history=_count(config, "regbudget_html_history"),
        strict=bool(config.getoption("regbudget_strict") or config.getini("regbudget_strict")),
        time_basis=_time_basis(config),
        toolkits=_toolkits(config),
        nvcc=config.getoption("regbudget_nvcc") or str(config.getini("regbudget_nvcc")).strip() or None,
        archs_from=archs_from,
        shard=config.getoption("regbudget_shard"),
    )


def _time_basis(config: pytest.Config) -> TimeBasis:
    value = str(config.getini("regbudget_time_basis")).strip() or "time"
    if value not in ("time", "cycles"):
        raise pytest.UsageError(f"regbudget_time_basis = {value!r} (ini): expected time or cycles")
    return cast(TimeBasis, value)


def _toolkits(config: pytest.Config) -> tuple[str, ...]:
    cli: Sequence[str] | None = config.getoption("regbudget_toolkit")
    return shared.toolkit_names(cli, config.getini("regbudget_toolkit"))


def _jobs(config: pytest.Config) -> int:
    value: int | None = config.getoption("regbudget_jobs")
    ini = str(config.getini("regbudget_jobs")).strip()
    if value is None and ini:
        try:
            value = int(ini)
        except ValueError:
            raise pytest.UsageError(f"regbudget_jobs = {ini!r} (ini): expected a whole number") from None
    if value is not None and value < 1:
        raise pytest.UsageError(f"--regbudget-jobs={value}: expected 1 or more")
    return value or default_jobs()


def _gpu_mode(value: str) -> GpuMode:
    for mode in get_args(GpuMode):
        if value == mode:
            return cast(GpuMode, mode)
    raise pytest.UsageError(f"regbudget_gpu = {value!r} (ini): expected {', '.join(get_args(GpuMode))}")


def _compiler(config: pytest.Config) -> str:
    value = str(config.getini("regbudget_compiler")).strip() or "nvrtc"
    if value not in sources.names():
        raise pytest.UsageError(
            f"regbudget_compiler = {value!r} (ini): expected one of {', '.join(sources.names())}"
        )
    return value
