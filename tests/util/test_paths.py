"""Portable paths: relative under the root, `{package}/rest` inside an install, else absolute; and back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_regbudget.util.paths import (
    PackageNotFound,
    import_path,
    install_dir,
    package_dirs,
    portable_path,
    resolve_portable,
)


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `pip install --target`-style directory on sys.path, holding the package `kpkg`."""
    target = tmp_path / "target"
    (target / "kpkg" / "include").mkdir(parents=True)
    (target / "kpkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(target))
    return target


def test_under_the_root_is_relative(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    assert portable_path(root / "inc" / "a", root) == "inc/a"
    assert portable_path("inc", root) == "inc"
    assert portable_path(root, root) == "."


def test_inside_an_install_on_sys_path_names_the_package(installed: Path, tmp_path: Path) -> None:
    text = portable_path(installed / "kpkg" / "include", tmp_path / "proj")
    assert text == "{kpkg}/include"
    assert resolve_portable(text, tmp_path / "proj") == installed / "kpkg" / "include"
    assert import_path(installed / "kpkg" / "k.cu") == "kpkg/k.cu"
    assert install_dir(installed / "kpkg" / "k.cu") == installed


def test_another_machines_site_packages_is_recognised(tmp_path: Path) -> None:
    # Not on this interpreter's path and not importable here: the directory's name says it is an install.
    elsewhere = "/home/ci/venv/lib/python3.10/site-packages/torch/include"
    assert portable_path(elsewhere, tmp_path) == "{torch}/include"
    assert portable_path("/opt/py/dist-packages/nvidia/cuda_runtime/include", tmp_path) == (
        "{nvidia}/cuda_runtime/include"
    )
    assert import_path(elsewhere, search=()) == "torch/include"


def test_other_absolute_paths_stay_as_they_are(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "include"
    text = portable_path(outside, tmp_path / "proj")
    assert text == outside.as_posix()
    assert ".." not in text
    assert resolve_portable(text, tmp_path / "proj") == outside
    # A file right in site-packages is no package's: kept as it is.
    assert portable_path("/x/site-packages/mod.py", tmp_path) == "/x/site-packages/mod.py"


def test_an_entry_above_the_root_is_not_an_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The checkout's parent on PYTHONPATH makes a sibling folder importable, but no other machine has it.
    monkeypatch.syspath_prepend(str(tmp_path))
    sibling = tmp_path / "shared" / "include"
    assert portable_path(sibling, tmp_path / "proj") == sibling.as_posix()


def test_a_package_that_is_not_found_is_named(tmp_path: Path) -> None:
    with pytest.raises(PackageNotFound, match=r"\{no_such_pkg_h45\}.*'no_such_pkg_h45'.*pip install"):
        resolve_portable("{no_such_pkg_h45}/include", tmp_path)
    with pytest.raises(PackageNotFound, match="is a module"):
        package_dirs("sys")


def test_a_namespace_package_resolves_to_the_folder_that_holds_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for part in ("a", "b"):
        (tmp_path / part / "nspkg_h45" / part).mkdir(parents=True)
        monkeypatch.syspath_prepend(str(tmp_path / part))
    assert resolve_portable("{nspkg_h45}/b", tmp_path) == tmp_path / "b" / "nspkg_h45" / "b"
    assert resolve_portable("{nspkg_h45}/a", tmp_path) == tmp_path / "a" / "nspkg_h45" / "a"
    assert sys.modules.get("nspkg_h45") is None  # found, not imported
