"""Toolkit discovery order, with homes built from the real wheel binaries (symlinked, not imitated)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_regbudget.core.errors import ToolchainError
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.toolkit import Toolkit, discover


@pytest.fixture(scope="module")
def wheels() -> Toolkit:
    tk = discover(env={})
    assert tk.origin.startswith("pip wheels")
    return tk


def make_home(root: Path, tk: Toolkit, lib: str = "lib64") -> Path:
    """A CUDA-install-shaped tree whose ptxas and NVRTC are the wheels' own files."""
    (root / "bin").mkdir(parents=True)
    (root / lib).mkdir()
    (root / "include" / "cccl").mkdir(parents=True)
    (root / "bin" / "ptxas").symlink_to(tk.ptxas)
    (root / lib / tk.require_nvrtc().name).symlink_to(tk.require_nvrtc())
    for builtins in tk.require_nvrtc().parent.glob("libnvrtc-builtins.so.*"):
        (root / lib / builtins.name).symlink_to(builtins)
    return root


@pytest.fixture(autouse=True)
def fresh_discovery() -> Iterator[None]:
    # discover() caches per environment; these tests change what the environment holds.
    toolchain._discover_cached.cache_clear()
    yield
    toolchain._discover_cached.cache_clear()


@pytest.fixture
def no_wheels(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hide the `nvidia` namespace package, as in an environment without the wheels.
    monkeypatch.setattr(toolchain, "nvidia_roots", list)


def test_wheels_are_found_with_their_headers(wheels: Toolkit) -> None:
    assert wheels.origin.startswith("pip wheels (nvidia-cuda-nvcc-cu12 ")
    assert wheels.ptxas.name == "ptxas"
    assert wheels.release == wheels.nvrtc_version[:4]
    names = {p.parent.name for p in wheels.include_dirs}
    assert names == {"cuda_runtime", "cuda_cccl"}
    assert any((d / "cuda_occupancy.h").exists() for d in wheels.include_dirs)
    assert any((d / "nv" / "target").exists() for d in wheels.include_dirs)


def test_explicit_home_wins_over_wheels(tmp_path: Path, wheels: Toolkit) -> None:
    home = make_home(tmp_path / "cuda", wheels)
    tk = discover(str(home), env={})
    assert tk.origin == f"--regbudget-cuda-home={home}"
    assert tk.ptxas == home / "bin" / "ptxas"
    assert tk.ptxas_version == wheels.ptxas_version
    assert home / "include" / "cccl" in tk.include_dirs


def test_env_home_and_lib_layout(tmp_path: Path, wheels: Toolkit) -> None:
    home = make_home(tmp_path / "cuda", wheels, lib="lib")
    tk = discover(env={"REGBUDGET_CUDA_HOME": str(home)})
    assert tk.origin == f"REGBUDGET_CUDA_HOME={home}"
    assert tk.require_nvrtc().parent == home / "lib"


def test_broken_explicit_home_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    with pytest.raises(ToolchainError) as info:
        discover(str(tmp_path), env={})
    msg = str(info.value)
    assert f"--regbudget-cuda-home={tmp_path}: no ptxas and libnvrtc" in msg
    assert "pip install" in msg


def test_wheels_win_over_cuda_home(tmp_path: Path, wheels: Toolkit) -> None:
    home = make_home(tmp_path / "cuda", wheels)
    assert discover(env={"CUDA_HOME": str(home)}).origin.startswith("pip wheels")


@pytest.mark.usefixtures("no_wheels")
def test_without_wheels_cuda_home_then_cuda_path_then_path(tmp_path: Path, wheels: Toolkit) -> None:
    a = make_home(tmp_path / "a", wheels)
    b = make_home(tmp_path / "b", wheels)
    c = make_home(tmp_path / "c", wheels)
    both = {"CUDA_HOME": str(a), "CUDA_PATH": str(b), "PATH": str(c / "bin")}
    assert discover(env=both).origin == f"CUDA_HOME={a}"
    assert discover(env={"CUDA_PATH": str(b), "PATH": str(c / "bin")}).origin == f"CUDA_PATH={b}"
    tk = discover(env={"PATH": str(c / "bin")})
    assert tk.origin.startswith("PATH (")
    assert tk.require_nvrtc().parent == c / "lib64"


@pytest.mark.usefixtures("no_wheels")
def test_nothing_found_lists_every_place_searched_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError) as info:
        discover(env={"CUDA_HOME": str(tmp_path / "missing"), "PATH": str(tmp_path)})
    msg = str(info.value)
    for place in (
        "pip wheels: no `nvidia` package",
        f"CUDA_HOME={tmp_path / 'missing'}",
        "CUDA_PATH: not set",
    ):
        assert place in msg
    assert "PATH: no ptxas on PATH" in msg
    assert 'pip install "nvidia-cuda-nvcc-cu12" "nvidia-cuda-nvrtc-cu12"' in msg


def test_cuda13_wheel_layout(tmp_path: Path, wheels: Toolkit, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "nvidia"
    make_home(root / "cu13", wheels, lib="lib")
    monkeypatch.setattr(toolchain, "nvidia_roots", lambda: [root])
    versions = {"nvidia-cuda-nvcc": "13.0.88", "nvidia-cuda-nvrtc": wheels.ptxas_version}
    monkeypatch.setattr(toolchain, "_dist_version", versions.get)
    tk = discover(env={})
    assert tk.origin == "pip wheels (nvidia-cuda-nvcc 13.0.88)"
    assert tk.ptxas == root / "cu13" / "bin" / "ptxas"
    assert root / "cu13" / "include" / "cccl" in tk.include_dirs


def test_nvrtc_and_ptxas_from_different_toolkits_are_refused(tmp_path: Path, wheels: Toolkit) -> None:
    home = make_home(tmp_path / "cuda", wheels)
    with pytest.raises(ToolchainError) as info:
        toolchain._toolkit_from_dirs(
            "test", [home / "bin"], [home / "lib64"], [], toolchain._Search(), nvrtc_version="11.8"
        )
    msg = str(info.value)
    assert f"NVRTC 11.8 ({home / 'lib64'}" in msg
    assert f"ptxas {wheels.ptxas_version}" in msg
    assert "different CUDA toolkits" in msg
