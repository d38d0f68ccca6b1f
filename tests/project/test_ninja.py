"""project/ninja.py: a build.ninja as torch writes it, read into each CUDA file's nvcc words. Where ninja is
installed, its own expansion (`ninja -t commands`) is the reference for ours."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_regbudget.core.errors import ManifestError
from pytest_regbudget.project import ninja

# What torch 2.x writes (setup.py's shape), with what a path may hold: a space ($ ), a `$` ($$), `${var}`, a
# continued line, a comment, a devlink edge and a C++ edge that are not read.
TEXT = """\
# written by torch
ninja_required_version = 1.3
cxx = c++
nvcc = /opt/cuda/bin/nvcc
root = /src/my$ ext

cuda_cflags = -I${root}/include -isystem /venv/site-packages/torch/include -c
cuda_post_cflags = -D__CUDA_NO_HALF_OPERATORS__ --compiler-options ''"'"'-fPIC'"'"'' -O3 $
    -gencode=arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 --threads 4 -DPRICE=$$5 $
    -std=c++17

rule compile
  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags
  depfile = $out.d
  deps = gcc

rule cuda_compile
  depfile = $out.d
  deps = gcc
  command = $nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags $extra

rule cuda_devlink
  command = $nvcc $in -o $out $cuda_dlink_post_cflags

build /b/binding.o: compile /src/my$ ext/csrc/binding.cpp
build /b/a.o: cuda_compile /src/my$ ext/csrc/a.cu
  extra = -DWHICH=${out}
build /b/b.o: cuda_compile /src/my$ ext/csrc/b.cu | /src/my$ ext/include/common.cuh || order
build /b/dlink.o: cuda_devlink /b/a.o /b/b.o
default /b/dlink.o
"""


def test_each_cuda_edge_is_its_command_as_sh_splits_it() -> None:
    found = dict(ninja.commands(TEXT))
    assert list(found) == ["/src/my ext/csrc/a.cu", "/src/my ext/csrc/b.cu"]
    argv = found["/src/my ext/csrc/a.cu"]
    assert argv[:4] == ["/opt/cuda/bin/nvcc", "-MD", "-MF", "/b/a.o.d"]
    # ${root}'s `$ ` is a space ninja hands /bin/sh unquoted (it quotes only $in and $out): two words
    assert argv[4:6] == ["-I/src/my", "ext/include"]
    # torch's ''"'"'-fPIC'"'"'' is, to /bin/sh, the word '-fPIC' with its quotes (nvcc's own shell drops them)
    assert argv[argv.index("--compiler-options") + 1] == "'-fPIC'"
    assert "-DPRICE=$5" in argv  # `$$`
    assert argv[-1] == "-DWHICH="  # an edge's binding is expanded in the file's scope: no $out there
    assert "/src/my ext/csrc/a.cu" in argv


def test_what_the_plugin_gives_itself_is_dropped_and_the_rest_kept_in_order() -> None:
    argv = dict(ninja.commands(TEXT))["/src/my ext/csrc/b.cu"]
    kept = ninja.cuda_words(argv, "/src/my ext/csrc/b.cu")
    assert kept == [
        "-I/src/my",
        "ext/include",
        "-isystem",
        "/venv/site-packages/torch/include",
        "-D__CUDA_NO_HALF_OPERATORS__",
        "--compiler-options",
        "'-fPIC'",
        "-O3",
        "-DPRICE=$5",
        "-std=c++17",
    ]


@pytest.mark.parametrize(
    "words",
    [
        ["-o", "x.o"],
        ["-ox.o"],
        ["--output-file=x.o"],
        ["--output-file", "x.o"],
        ["-c"],
        ["--compile"],
        ["-MD"],
        ["-MF", "x.d"],
        ["-MFx.d"],
        ["--generate-dependencies-with-compile", "--dependency-output", "x.d"],
        ["--dependency-output=x.d"],
        ["-gencode", "arch=compute_80,code=sm_80"],
        ["-gencode=arch=compute_80,code=sm_80"],
        ["--generate-code=arch=compute_90a,code=sm_90a"],
        ["--generate-code", "arch=compute_90,code=sm_90"],
        ["-arch=sm_80"],
        ["-arch", "sm_80"],
        ["--gpu-architecture=sm_90"],
        ["--threads", "4"],
        ["--threads=4"],
        ["-t", "4"],
        ["-ccbin", "/usr/bin/g++-12"],
        ["-ccbin=/usr/bin/g++-12"],
        ["--compiler-bindir=/usr/bin/g++-12"],
    ],
)
def test_outputs_archs_dependencies_threads_and_host_compiler_are_dropped(words: list[str]) -> None:
    assert ninja.cuda_words(["nvcc", "-O3", *words, "k.cu", "-lineinfo"], "k.cu") == ["-O3", "-lineinfo"]


def test_a_flag_that_only_begins_like_a_dropped_one_and_a_value_that_looks_like_one_are_kept() -> None:
    argv = ["nvcc", "-objtemp", "-optf", "opts.txt", "-Xcompiler", "-MD", "-Xptxas", "-c", "k.cu"]
    assert ninja.cuda_words(argv, "k.cu") == [
        "-objtemp",
        "-optf",
        "opts.txt",
        "-Xcompiler",
        "-MD",
        "-Xptxas",
        "-c",
    ]


def test_a_rule_of_another_name_that_runs_nvcc_on_a_cu_is_read() -> None:
    text = "nvcc = nvcc\nrule nv\n  command = ${nvcc} -c $in -o $out -DX\nbuild k.o: nv k.cu\n"
    assert ninja.commands(text) == [("k.cu", ["nvcc", "-c", "k.cu", "-o", "k.o", "-DX"])]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("include other.ninja\n", "include is not read"),
        ("  x = 1\n", "indented line outside a rule or build"),
        ("build a.o cuda_compile a.cu\n", "without ':'"),
        ("x = ${bad\n", "bad ${...}"),
        ("x = $!\n", "bad $-escape"),
        ("this is not ninja\n", "not a ninja line"),
    ],
)
def test_what_is_not_ninja_is_an_error_with_its_line(text: str, message: str) -> None:
    with pytest.raises(
        ninja.NinjaError, match="line 1: .*" + message.replace("$", r"\$").replace("{", r"\{")
    ):
        ninja.parse(text)


def test_a_missing_or_unreadable_file_names_it_and_how_to_write_it(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as missing:
        ninja.load(tmp_path / "build.ninja", tmp_path)
    assert str(tmp_path / "build.ninja") in str(missing.value)
    assert "python setup.py build_ext" in str(missing.value)
    assert "build_directory=" in str(missing.value)
    assert "torch_extension" in str(missing.value)
    (tmp_path / "bad.ninja").write_bytes(b"x = \xff\n")
    with pytest.raises(ManifestError, match="cannot be read"):
        ninja.load(tmp_path / "bad.ninja", tmp_path)


def test_files_outside_the_rootdir_are_left_out_and_relative_paths_are_the_build_dirs(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "k.cu").write_text("__global__ void k() {}\n")
    build = root / "build" / "temp"
    build.mkdir(parents=True)
    text = (
        "nvcc = nvcc\nrule cuda_compile\n  command = $nvcc -c $in -o $out -O3\n"
        "build k.o: cuda_compile ../../csrc/k.cu\nbuild o.o: cuda_compile /elsewhere/o.cu\n"
    )
    (build / "build.ninja").write_text(text)
    found = ninja.load(build / "build.ninja", root)
    assert list(found) == [(root / "csrc" / "k.cu").resolve()]
    assert found[(root / "csrc" / "k.cu").resolve()][0].options == ("-O3",)


@pytest.mark.skipif(
    shutil.which("ninja") is None, reason="ninja is not installed: its expansion is the reference"
)
def test_the_commands_equal_ninjas_own_expansion(tmp_path: Path) -> None:
    (tmp_path / "build.ninja").write_text(TEXT)
    done = subprocess.run(
        ["ninja", "-C", str(tmp_path), "-t", "commands", "/b/a.o", "/b/b.o"],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = [shlex.split(line) for line in done.stdout.splitlines() if "nvcc" in line]
    assert theirs == [argv for _, argv in ninja.commands(TEXT)]
