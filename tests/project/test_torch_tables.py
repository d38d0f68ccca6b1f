"""project/torch_tables.py: a manifest table's PyTorch extension keys, checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_regbudget.core.errors import ManifestError
from pytest_regbudget.project import manifest
from pytest_regbudget.tools.torch_build import torch_version

NINJA = (
    "nvcc = nvcc\nrule cuda_compile\n  command = $nvcc -c $in -o $out -O3\nbuild k.o: cuda_compile {src}\n"
)


def load(root: Path, table: str) -> manifest.Manifest:
    (root / "regbudget.toml").write_text(f"[[kernels]]\n{table}\n")
    found = manifest.load(root)
    assert found is not None
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "build.ninja").write_text(NINJA.format(src=tmp_path / "k.cu"))
    return tmp_path


def test_a_build_ninja_table_is_built_by_nvcc_with_the_edges_words(project: Path) -> None:
    found = load(project, 'build_ninja = "build/*.ninja"\nspills = 0')
    (path,) = found.files()
    assert path == project / "k.cu"
    assert found.compiler_of(path, "nvrtc") == "nvcc"
    assert found.file_keys(path)["options"] == ["-O3"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('build_ninja = "build/*.ninja"\ncompiler = "nvrtc"', "holds nvcc commands: drop compiler"),
        ('build_ninja = "build/*.ninja"\nextensions = ["x"]', "'extensions': goes with torch_extension"),
        (
            'build_ninja = "build/*.ninja"\ncompile_commands = "c.json"',
            "give one of compile_commands, build_ninja",
        ),
        ('build_ninja = "../x/build.ninja"', "outside the rootdir"),
        ('build_ninja = "out/build.ninja"', "does not exist: write it with `python setup.py build_ext`"),
        ("build_ninja = 3", "expected a glob of build.ninja files"),
        ('torch_extension = "nosuch.py"', "is not a file"),
        ('build_ninja = "build/*.ninja"\nsource = ["other.cu"]', "'other.cu' matches no file"),
    ],
)
def test_a_bad_key_names_itself_and_the_fix(project: Path, table: str, message: str) -> None:
    (project / "c.json").write_text("[]")
    with pytest.raises(ManifestError, match=None) as raised:
        load(project, table)
    assert message in str(raised.value)


def test_a_build_ninja_with_no_cuda_file_under_the_rootdir_is_an_error(project: Path) -> None:
    (project / "build" / "build.ninja").write_text(NINJA.format(src="/elsewhere/k.cu"))
    with pytest.raises(ManifestError, match=r"builds no CUDA file \(\.cu\) under the rootdir"):
        load(project, 'build_ninja = "build/build.ninja"')


@pytest.mark.skipif(
    torch_version() is not None, reason="torch is installed: the error is for a machine without it"
)
def test_torch_extension_without_torch_says_to_install_it_or_use_build_ninja(project: Path) -> None:
    (project / "setup.py").write_text("raise SystemExit('never run')\n")
    with pytest.raises(ManifestError) as raised:
        load(project, 'torch_extension = "setup.py"')
    assert "pip install torch" in str(raised.value)
    assert "build_ninja" in str(raised.value)


def test_later_tables_refine_a_build_ninja_tables_files(project: Path) -> None:
    tables = 'build_ninja = "build/*.ninja"\nspills = 0\n\n[[kernels]]\nsource = "k.cu"\nmax_regs = 32'
    found = load(project, tables)
    (path,) = found.files()
    assert found.compiler_of(path, "nvrtc") == "nvcc"
    (kernel,), _ = found.kernels(path, ["_Z1kv"], "nvcc")
    keys = kernel.keys()
    assert (keys["spills"], keys["max_regs"], keys["options"]) == (0, 32, ["-O3"])
