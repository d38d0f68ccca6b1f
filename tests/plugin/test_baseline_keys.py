"""The source part of a baseline key: the path relative to the rootdir, as the file writes it, else the import
path of installed code, else the absolute path (state._relative). It is made from strings, not Path.resolve,
because every kernel of a warm run asks; these cases pin what the Path version gave."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_regbudget.engine.state import _relative


def test_a_source_under_the_rootdir_is_its_relative_path(tmp_path: Path) -> None:
    (tmp_path / "kernels" / "sub").mkdir(parents=True)
    source = tmp_path / "kernels" / "sub" / "k.cu"
    assert _relative(source, tmp_path) == "kernels/sub/k.cu"
    # Written with "..": the same key.
    assert _relative(tmp_path / "kernels" / ".." / "kernels" / "sub" / "k.cu", tmp_path) == "kernels/sub/k.cu"


def test_links_are_followed_on_both_sides(tmp_path: Path) -> None:
    real_root = tmp_path / "real"
    (real_root / "kernels").mkdir(parents=True)
    (tmp_path / "root").symlink_to(real_root)
    (real_root / "linked").symlink_to(real_root / "kernels")
    source = tmp_path / "root" / "linked" / "k.cu"
    assert _relative(source, tmp_path / "root") == "kernels/k.cu"
    assert _relative(real_root / "kernels" / "k.cu", tmp_path / "root") == "kernels/k.cu"


def test_a_sibling_whose_name_extends_the_rootdir_is_outside_it(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj2").mkdir()
    assert (
        _relative(tmp_path / "proj2" / "k.cu", tmp_path / "proj") == (tmp_path / "proj2" / "k.cu").as_posix()
    )


def test_a_source_outside_the_rootdir_and_every_install_is_absolute(tmp_path: Path) -> None:
    # Never `..`: that would name another file from another checkout's depth (issue 45).
    root = tmp_path / "a" / "b"
    root.mkdir(parents=True)
    assert _relative(tmp_path / "c" / "k.cu", root) == (tmp_path / "c" / "k.cu").as_posix()


def test_a_source_in_an_install_directory_is_its_import_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.syspath_prepend(str(tmp_path / "target"))
    assert _relative(tmp_path / "target" / "kpkg" / "ops" / "k.cu", root) == "kpkg/ops/k.cu"
    # A site-packages folder is one wherever it is, on sys.path or not (another venv's).
    venv = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    assert _relative(venv / "liger_kernel" / "ops" / "rms_norm.py", root) == "liger_kernel/ops/rms_norm.py"


@pytest.mark.skipif(os.sep != "/", reason="POSIX paths")
def test_the_filesystem_root_as_rootdir(tmp_path: Path) -> None:
    assert _relative(tmp_path / "k.cu", Path("/")) == os.path.realpath(tmp_path / "k.cu").lstrip("/")
