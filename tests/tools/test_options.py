"""CompileOptions turns itself into flags, for NVRTC and for nvcc, in one place."""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import pytest

from pytest_regbudget.tools.options import Backend, CompileOptions, _cuda_homes

OPTIONS = CompileOptions.make(
    defines={"N": 4, "DEBUG": None},
    include_dirs=["/p/inc"],
    options=["-std=c++17"],
    ptxas_options=["-O2"],
    depends=["/p/cfg.h"],
)


def test_nvrtc_flags_target_the_virtual_arch_and_add_the_toolkit_headers() -> None:
    flags = OPTIONS.flags("nvrtc", "sm_90a", Path("/p/src"), [Path("/cuda/include")])
    assert flags == [
        "--gpu-architecture=compute_90a",
        "-DN=4",
        "-DDEBUG",
        "--include-path=/p/inc",
        "--include-path=/p/src",
        "--include-path=/cuda/include",
        "-std=c++17",
    ]


def test_nvcc_flags_target_the_real_arch_and_pass_ptxas_options_through() -> None:
    flags = OPTIONS.flags("nvcc", "sm_90", Path("/p/src"))
    assert flags == ["-arch=sm_90", "-DN=4", "-DDEBUG", "-I/p/inc", "-I/p/src", "-std=c++17", "-Xptxas=-O2"]


def test_depends_reach_no_compiler() -> None:
    backends: tuple[Backend, ...] = ("nvrtc", "nvcc")
    for backend in backends:
        assert not any("cfg.h" in f for f in OPTIONS.flags(backend, "sm_90", Path("/p")))


def test_absolute_paths_in_options_are_recorded_and_hashed_portably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torch build.ninja's words name the checkout and the venv: two of each record and hash alike."""

    def words(root: Path, venv: Path) -> CompileOptions:
        torch = venv / "lib" / "python3.11" / "site-packages" / "torch" / "include"
        given = [
            f"-I{root}/csrc",
            "-isystem",
            str(torch),
            f"--pre-include={root}/pre.h",
            "-I/opt/cuda/include",
        ]
        return CompileOptions.make(options=[*given, "-O3", "-Irelative"])

    a, b = tmp_path / "a", tmp_path / "elsewhere" / "b"
    first, second = words(a, tmp_path / "venv-a"), words(b, tmp_path / "venv-b")
    assert first.settings(relative_to=a) == second.settings(relative_to=b)
    assert first.settings(relative_to=a) == (
        "-Icsrc",
        "-isystem",
        "{torch}/include",
        "--pre-include=pre.h",
        "-I/opt/cuda/include",
        "-O3",
        "-Irelative",
    )
    assert first.identity(relative_to=a) == second.identity(relative_to=b)
    assert first.identity() != second.identity()  # the cache's key: the paths nvcc is given
    # The interpreter's own header dirs, which torch adds to every extension, are named as such.
    here = CompileOptions.make(
        options=[f"-I{sysconfig.get_paths()['include']}", "-isystem", f"{sys.prefix}/include"]
    )
    assert here.settings(relative_to=a) == ("-I{python-include}", "-isystem", "{sys.prefix}/include")
    # Where torch finds CUDA ($CUDA_HOME, else /usr/local/cuda) is named as such: a workstation's CUDA and a
    # runner's record alike.
    cuda = tmp_path / "cuda-12.9"
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    _cuda_homes.cache_clear()
    try:
        homes = CompileOptions.make(options=[f"-I{cuda}/include", "-isystem", "/usr/local/cuda/include"])
        assert homes.settings(relative_to=a) == ("-I{cuda-home}/include", "-isystem", "{cuda-home}/include")
    finally:
        _cuda_homes.cache_clear()
    # Options without an absolute path hash as they always did.
    plain = CompileOptions.make(options=["-O3", "--use_fast_math"])
    assert plain.identity(relative_to=a) == plain.identity()
