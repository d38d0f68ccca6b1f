"""What discovery and `nvcc --version` found is remembered in the compile cache, keyed on the stat of the
files and directories it came from: a later run starts no process, and a changed toolkit is probed again."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_regbudget.core.errors import CompileError, ToolchainError
from pytest_regbudget.tools import nvcc
from pytest_regbudget.tools import ptxas as assembler
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.running import ToolMemo
from pytest_regbudget.tools.toolkit import Toolkit, discover

pytestmark = pytest.mark.usefixtures("fresh_discovery")


def home_with_ptxas_copy(root: Path, tk: Toolkit) -> Path:
    """A CUDA home whose ptxas is a copy of the wheels' (so that it can be replaced) and NVRTC theirs."""
    (root / "bin").mkdir(parents=True)
    (root / "lib64").mkdir()
    shutil.copy2(tk.ptxas, root / "bin" / "ptxas")
    (root / "lib64" / tk.require_nvrtc().name).symlink_to(tk.require_nvrtc())
    for builtins in tk.require_nvrtc().parent.glob("libnvrtc-builtins.so.*"):
        (root / "lib64" / builtins.name).symlink_to(builtins)
    return root


def no_processes(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Make every tool run fail, and count the tries."""
    tried: list[list[str]] = []

    def refuse(cmd: list[str], timeout: float) -> tuple[int, str]:
        tried.append(list(cmd))
        raise OSError("no process may start here")

    monkeypatch.setattr(toolchain, "run_tool", refuse)
    monkeypatch.setattr(assembler, "run_tool", refuse)
    monkeypatch.setattr(nvcc, "run_tool", refuse)
    return tried


def test_a_remembered_toolkit_is_found_without_running_ptxas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_ptxas_copy(tmp_path / "cuda", discover(env={}))
    memo_file = tmp_path / "cache" / "tools"
    first = discover(str(home), env={}, memo=ToolMemo(memo_file))
    assert memo_file.exists()
    toolchain._discover_cached.cache_clear()
    toolchain.ptxas_version.cache_clear()
    tried = no_processes(monkeypatch)
    # A new run: a new memo read from the file, and no process.
    assert discover(str(home), env={}, memo=ToolMemo(memo_file)) == first
    assert tried == []
    # Another question (another home) is not answered from the memo.
    with pytest.raises(ToolchainError):
        discover(str(tmp_path / "elsewhere"), env={}, memo=ToolMemo(memo_file))


def test_a_changed_ptxas_is_probed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = home_with_ptxas_copy(tmp_path / "cuda", discover(env={}))
    memo_file = tmp_path / "cache" / "tools"
    discover(str(home), env={}, memo=ToolMemo(memo_file))
    toolchain._discover_cached.cache_clear()
    toolchain.ptxas_version.cache_clear()
    # An upgrade in place: same path, new file (new inode and times).
    ptxas = home / "bin" / "ptxas"
    data = ptxas.read_bytes()
    ptxas.unlink()
    ptxas.write_bytes(data)
    ptxas.chmod(0o755)
    tried = no_processes(monkeypatch)
    with pytest.raises(ToolchainError, match="no process may start here"):
        discover(str(home), env={}, memo=ToolMemo(memo_file))
    assert [Path(cmd[0]).name for cmd in tried] == ["ptxas"]


def test_a_damaged_memo_only_means_probing_again(tmp_path: Path) -> None:
    memo_file = tmp_path / "tools"
    memo_file.write_text("{not json")
    tk = discover(env={}, memo=ToolMemo(memo_file))
    assert tk == discover(env={})
    assert ToolMemo(memo_file).get("nothing") is None


def test_nvcc_version_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        first = nvcc.find_nvcc(discover(env={}), ToolMemo(tmp_path / "tools"))
    except CompileError as exc:
        pytest.skip(f"no nvcc: {exc}")
    tried = no_processes(monkeypatch)
    assert nvcc.find_nvcc(discover(env={}), ToolMemo(tmp_path / "tools")) == first
    assert tried == []
    # A memo without a file remembers nothing between runs.
    with pytest.raises(CompileError, match="no process may start here"):
        nvcc.find_nvcc(discover(env={}), ToolMemo(None))
    assert len(tried) == 1
    assert os.path.basename(tried[0][0]) == "nvcc"


@pytest.mark.parametrize(
    "forge",
    [
        lambda v, evil: v.update(ptxas=str(evil / "ptxas")),
        lambda v, evil: v.update(ptxas=str(evil / "bin" / "ptxas")),  # a home of its own, named nowhere
        lambda v, evil: v.update(nvrtc=str(evil / "libevil.so")),
        lambda v, evil: v.update(nvdisasm=str(evil / "nvdisasm")),
        lambda v, evil: v.update(ptxas=v["ptxas"] + "/../../../../../" + str(evil / "ptxas")),
    ],
    ids=["ptxas elsewhere", "another home", "a library of another name", "nvdisasm", "dot-dot"],
)
def test_a_forged_memo_starts_no_program_and_loads_no_library_of_its_own(
    tmp_path: Path, forge: Callable[[dict[str, Any], Path], None]
) -> None:
    """The memo lives in the compile cache (issue 44): a record that names a tool where discovery does not
    look, or of another name, is discovered again rather than run."""
    memo_file = tmp_path / "cache" / "tools"
    real = discover(env={}, memo=ToolMemo(memo_file))
    evil = tmp_path / "evil"
    (evil / "bin").mkdir(parents=True)
    doc = json.loads(memo_file.read_text())
    ((key, record),) = doc["probes"].items()
    forge(record["value"], evil)
    record["inputs"] = []  # trusted while nothing changes: nothing to change
    memo_file.write_text(json.dumps(doc))
    toolchain._discover_cached.cache_clear()
    assert discover(env={}, memo=ToolMemo(memo_file)) == real
    # The memo was rewritten with what discovery found.
    assert json.loads(memo_file.read_text())["probes"][key]["value"]["ptxas"] == str(real.ptxas)
