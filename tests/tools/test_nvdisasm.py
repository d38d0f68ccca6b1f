"""nvdisasm's listings kept: one run per cubin, read back from the cache directory under the cubin's digest
and nvdisasm's contents (not its path or times), and a damaged document read as none."""

from __future__ import annotations

import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from helpers.data import KERNELS

from pytest_regbudget.core.sass import parse_sass
from pytest_regbudget.tools import nvdisasm
from pytest_regbudget.tools.running import run_tool
from pytest_regbudget.tools.toolkit import find_tool


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
    made: list[list[str]] = []

    def counting(cmd: Any, timeout: float) -> Any:
        made.append([str(c) for c in cmd])
        return run_tool(cmd, timeout)

    monkeypatch.setattr(nvdisasm, "run_tool", counting)
    return made


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
    assert len(runs) == 1  # both kernels from one listing
    listing = run_tool([str(tool), "-c", "-gi", str(cubin_path)], 120)[1]
    assert hot == parse_sass(listing, "hot")
    assert cold == parse_sass(listing, "cold", spills=False)
    assert hot.spill_instructions_in_loops > 0

    # Another process (nothing in memory), with nvdisasm copied elsewhere: same contents, same nvdisasm.
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    copy = tmp_path / "bin" / "nvdisasm"
    copy.parent.mkdir()
    shutil.copy(tool, copy)
    assert nvdisasm.read_sass(copy, bytes(cubin), "hot", cache_dir=cache) == hot
    assert len(runs) == 1

    # A damaged document is read as none: nvdisasm runs again, and the document is written anew.
    (doc,) = (cache / "sass").glob("sass-*.json")
    doc.write_text(doc.read_text()[:-20])
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    assert nvdisasm.read_sass(tool, cubin, "hot", cache_dir=cache) == hot
    assert len(runs) == 2
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    assert nvdisasm.read_sass(tool, cubin, "hot", cache_dir=cache) == hot
    assert len(runs) == 2

    # Another nvdisasm (other contents) is another key.
    copy.write_bytes(copy.read_bytes() + b"\0")
    monkeypatch.setattr(nvdisasm, "_read", OrderedDict())
    assert nvdisasm.read_sass(copy, cubin, "hot", cache_dir=cache) == hot
    assert len(runs) == 3
