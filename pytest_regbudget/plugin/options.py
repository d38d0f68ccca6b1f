"""The plugin's command-line options and ini keys (`pytest_addoption`), checked when pytest parses them.

Every pytest run in a venv that has the plugin reads this table, kernels or none: it imports nothing of the
engine (an option's check loads what it needs when the option is given). The run's settings are read from the
parsed values by settings.py.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import pytest

from ..core.defaults import DEFAULT_CUOBJDUMP_TIMEOUT, DEFAULT_NVCC_TIMEOUT, DEFAULT_PTXAS_TIMEOUT
from ..project import options as shared

if TYPE_CHECKING:
    from ..engine.sharding import Shard

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
    from ..engine.sharding import parse_shard  # loaded only when the option is given

    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--regbudget-shard={exc}") from None
