"""The source part of a baseline key: the path relative to the rootdir, as the file writes it
(session._relative). It is made from strings, not Path.resolve, because every kernel of a warm run asks;
these cases pin what the Path version gave."""

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
    assert _relative(tmp_path / "proj2" / "k.cu", tmp_path / "proj") == "../proj2/k.cu"


def test_a_source_outside_the_rootdir_is_relative_with_dotdot(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b"
    root.mkdir(parents=True)
    assert _relative(tmp_path / "c" / "k.cu", root) == "../../c/k.cu"


@pytest.mark.skipif(os.sep != "/", reason="POSIX paths")
def test_the_filesystem_root_as_rootdir(tmp_path: Path) -> None:
    assert _relative(tmp_path / "k.cu", Path("/")) == os.path.realpath(tmp_path / "k.cu").lstrip("/")
