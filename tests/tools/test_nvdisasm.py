"""nvdisasm's listings kept: one run per cubin, read back from the cache directory under the cubin's digest
and nvdisasm's contents (not its path or times), and a damaged document read as none. Beside the code's
listing, its life ranges, asked no more of a kind of cubin that nvdisasm gives none of."""

from __future__ import annotations

import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from helpers.data import KERNELS

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.core.sass import parse_sass_functions, without_spills
from pytest_regbudget.tools import nvdisasm
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.running import run_tool
from pytest_regbudget.tools.toolkit import discover, find_tool


@pytest.fixture
def tools() -> tuple[Path, Path]:
    found = nvdisasm.find_nvdisasm(None), find_tool("nvcc", None, "cuda_nvcc")
    if found[0] is None or found[1] is None:
        pytest.skip("needs nvdisasm and nvcc (the sass and nvcc extras)")
    return found[0], found[1]


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every nvdisasm run, with this process's readings forgotten."""
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    monkeypatch.setattr(nvdisasm, "_NO_LIFE_RANGES", set())
    made: list[list[str]] = []

    def counting(cmd: Any, timeout: float) -> Any:
        made.append([str(c) for c in cmd])
        return run_tool(cmd, timeout)

    monkeypatch.setattr(nvdisasm, "run_tool", counting)
    return made


def code(runs: list[list[str]]) -> int:
    """The listings of the code (`-c -gi`) among the runs; the life ranges' (`-c -plr`) come beside each."""
    return sum(run[1:3] == ["-c", "-gi"] for run in runs)


def life(runs: list[list[str]]) -> int:
    return sum(run[1:3] == ["-c", "-plr"] for run in runs)


def test_a_cubin_is_read_once_and_kept_under_nvdisasms_contents(
    tools: tuple[Path, Path], runs: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool, nvcc = tools
    cubin_path = tmp_path / "spills.cubin"
    run_tool(
        [str(nvcc), "-cubin", "-arch=sm_90", "-lineinfo", "-o", str(cubin_path), str(KERNELS / "spills.cu")],
        300,
    )
    cubin = cubin_path.read_bytes()
    cache = tmp_path / "cache"
    hot = nvdisasm.read_sass(tool, cubin, "hot", cache_dir=cache)
    cold = nvdisasm.read_sass(tool, cubin, "cold", spills=False, cache_dir=cache)
    assert (code(runs), life(runs)) == (1, 1)  # both kernels from one listing (and its life ranges)
    listing = run_tool([str(tool), "-c", "-gi", str(cubin_path)], 120)[1]
    ranges = run_tool([str(tool), "-c", "-plr", "-lrm", "count", str(cubin_path)], 120)[1]
    assert hot == parse_sass_functions(listing, ranges)["hot"]
    assert cold == without_spills(parse_sass_functions(listing, ranges)["cold"])
    assert hot.spill_instructions_in_loops > 0

    # Another process (nothing in memory), with nvdisasm copied elsewhere: same contents, same nvdisasm.
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    copy = tmp_path / "bin" / "nvdisasm"
    copy.parent.mkdir()
    shutil.copy(tool, copy)
    assert nvdisasm.read_sass(copy, bytes(cubin), "hot", cache_dir=cache) == hot
    assert code(runs) == 1

    # A damaged document is read as none: nvdisasm runs again, and the document is written anew.
    (doc,) = (cache / "sass").glob("sass-*.json")
    doc.write_text(doc.read_text()[:-20])
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    assert nvdisasm.read_sass(tool, cubin, "hot", cache_dir=cache) == hot
    assert code(runs) == 2
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    assert nvdisasm.read_sass(tool, cubin, "hot", cache_dir=cache) == hot
    assert code(runs) == 2

    # Another nvdisasm (other contents) is another key.
    copy.write_bytes(copy.read_bytes() + b"\0")
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    assert nvdisasm.read_sass(copy, cubin, "hot", cache_dir=cache) == hot
    assert code(runs) == 3


def test_life_ranges_come_beside_the_code_and_are_not_asked_again_where_nvdisasm_prints_none(
    tools: tuple[Path, Path], runs: list[list[str]], tmp_path: Path
) -> None:
    tool, nvcc = tools
    cubin_path = tmp_path / "spills.cubin"
    run_tool(
        [str(nvcc), "-cubin", "-arch=sm_90", "-lineinfo", "-o", str(cubin_path), str(KERNELS / "spills.cu")],
        300,
    )
    hot = nvdisasm.read_sass(tool, cubin_path.read_bytes(), "hot")
    assert (code(runs), life(runs)) == (1, 1)
    assert hot.peak_live is not None
    assert str(hot.peak_live.where).startswith("spills.cu:")

    # CUDA 12 cubins for sm_90 and older: nvdisasm 13 prints no life ranges of them. The code is read all the
    # same, and no cubin of their kind is asked for them again in this process; read_peak then runs nothing.
    runs.clear()
    options = CompileOptions(options=("-lineinfo",))
    old = [
        compile_kernel(KERNELS / "spills.cu", "hot", arch, options, discover(named="cu12")).facts.cubin
        for arch in ("sm_80", "sm_86", "sm_90")
    ]
    first = nvdisasm.read_sass(tool, old[0], "hot")
    assert (first.peak_live, first.spill_instructions > 0) == (None, True)
    assert (code(runs), life(runs)) == (1, 1)
    assert nvdisasm.read_sass(tool, old[1], "hot").peak_live is None
    assert (code(runs), life(runs)) == (2, 1)
    assert nvdisasm.read_peak(tool, old[2], "hot") is None
    assert len(runs) == 3
