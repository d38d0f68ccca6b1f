"""The run's `Settings`, read from a pytest config (`settings_of`): the one place an option's or ini key's
value becomes a setting, each checked with a message that names it. Loaded with the engine (plugin/hooks.py),
not with the option table (options.py), which every pytest run reads.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import cast, get_args

import pytest

from .. import sources
from ..cache.prefetch import default_jobs
from ..core.arch import parse_archs
from ..core.defaults import DEFAULT_CUOBJDUMP_TIMEOUT, DEFAULT_NVCC_TIMEOUT, DEFAULT_PTXAS_TIMEOUT
from ..core.dirs import usable_cache_dir
from ..core.errors import MarkerError, UnknownArchError
from ..core.verdict import TimeBasis
from ..engine.state import Settings
from ..gpu.runner import GpuMode
from ..project import options as shared
from ..project.archs import choose_archs
from ..project.manifest import Manifest
from ..project.markers import parse_tolerance
from ..project.options import DEFAULT_BASELINE
from ..tools.options import Timeouts


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


def _typed(config: pytest.Config, flag: str) -> bool:
    """Whether `flag` was given by the user (on the command line, or in PYTEST_ADDOPTS), not by an ini file's
    `addopts`, which is the repository's."""
    given = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in given)


def settings_of(config: pytest.Config, manifest: Manifest | None = None) -> Settings:
    cli: Sequence[str] | None = config.getoption("regbudget_arch")
    ini: list[str] = config.getini("regbudget_arch")
    try:
        chosen = choose_archs(cli, ini, manifest, flag="--regbudget-arch")
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
    typed = baseline is not None and _typed(config, "--regbudget-baseline")
    ini_baseline = str(config.getini("regbudget_baseline"))
    if baseline is None:
        ini_dir = config.inipath.parent if config.inipath else config.rootpath
        baseline = ini_dir / ini_baseline if ini_baseline else config.rootpath / DEFAULT_BASELINE
    gpu_mode = _gpu_mode(config.getoption("regbudget_gpu") or str(config.getini("regbudget_gpu")).strip())
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    cache_dir, cache_refused = (None, "") if config.getoption("regbudget_no_cache") else usable_cache_dir()
    return Settings(
        archs=tuple(archs),
        rootdir=config.rootpath,
        cuda_home=config.getoption("regbudget_cuda_home"),
        json_path=_path_option(config, "regbudget_json"),
        timeouts=timeouts,
        baseline_path=baseline,
        baseline_chosen=typed,
        update=bool(config.getoption("regbudget_update")),
        tolerance=tolerance,
        markdown_path=_path_option(config, "regbudget_markdown"),
        step_summary=Path(step_summary) if step_summary else None,
        annotate=os.environ.get("GITHUB_ACTIONS") == "true",
        gpu_mode=gpu_mode,
        sass=bool(config.getoption("regbudget_sass")),
        cache_dir=cache_dir,
        cache_refused=cache_refused,
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
