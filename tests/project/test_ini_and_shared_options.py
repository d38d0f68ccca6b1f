"""project/ini.py reads pytest's ini files as pytest finds them, without pytest: the first file of the nearest
directory that holds pytest's settings, in pytest's order of names. project/options.py's shared options are
one definition in both faces: the same flags after the face's prefix, checked as they are parsed."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pytest_regbudget.project import ini
from pytest_regbudget.project import options as shared
from pytest_regbudget.project.archs import choose_archs

HEADROOM = shared.HEADROOM_INI
ARCH = shared.ARCH_INI


def write(root: Path, name: str, text: str) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pytest.ini", "[pytest]\nregbudget_headroom = registers=8\nregbudget_arch =\n  sm_80\n  sm_90\n"),
        (
            "pyproject.toml",
            '[tool.pytest.ini_options]\nregbudget_headroom = "registers=8"\n'
            'regbudget_arch = ["sm_80", "sm_90"]\n',
        ),
        (
            "pyproject.toml",
            '[tool.pytest]\nregbudget_headroom = "registers=8"\nregbudget_arch = ["sm_80", "sm_90"]\n',
        ),
        (
            "pytest.toml",
            '[pytest]\nregbudget_headroom = "registers=8"\nregbudget_arch = ["sm_80", "sm_90"]\n',
        ),
        ("tox.ini", "[pytest]\nregbudget_headroom = registers=8\nregbudget_arch = sm_80\n  sm_90\n"),
        ("setup.cfg", "[tool:pytest]\nregbudget_headroom = registers=8\nregbudget_arch = sm_80\n  sm_90\n"),
    ],
    ids=["pytest.ini", "ini_options", "tool.pytest", "pytest.toml", "tox.ini", "setup.cfg"],
)
def test_each_file_pytest_reads_gives_the_keys(tmp_path: Path, name: str, text: str) -> None:
    write(tmp_path, name, text)
    (tmp_path / "sub" / "dir").mkdir(parents=True)
    found = ini.read(tmp_path / "sub" / "dir")
    assert (found.rootdir, found.path) == (tmp_path, tmp_path / name)
    assert shared.parse_headroom(found.string(HEADROOM)) == 8
    assert found.linelist(ARCH) == ["sm_80", "sm_90"]


def test_the_first_file_with_settings_wins_as_in_pytest(tmp_path: Path) -> None:
    # pytest.ini counts even without a [pytest] section; a pyproject.toml only with one.
    write(tmp_path, "pytest.ini", "")
    write(tmp_path, "pyproject.toml", '[tool.pytest.ini_options]\nregbudget_headroom = "registers=8"\n')
    found = ini.read(tmp_path)
    assert (found.path, found.string(HEADROOM)) == (tmp_path / "pytest.ini", "")
    (tmp_path / "pytest.ini").unlink()
    write(tmp_path, "tox.ini", "[pytest]\nregbudget_headroom = registers=4\n")
    assert shared.parse_headroom(ini.read(tmp_path).string(HEADROOM)) == 8
    # A directory nearer the start whose files hold no pytest settings is passed over.
    write(tmp_path, "inner/setup.cfg", "[metadata]\nname = x\n")
    write(tmp_path, "inner/tox.ini", "[tox]\nenvlist = py\n")
    assert ini.read(tmp_path / "inner").path == tmp_path / "pyproject.toml"


def test_defaults_flags_and_a_file_pytest_cannot_read(tmp_path: Path) -> None:
    write(tmp_path, "a/pyproject.toml", "[project]\nname = 'x'\n")
    bare = ini.read(tmp_path / "a")
    assert (bare.rootdir, bare.path) == (tmp_path / "a", tmp_path / "a" / "pyproject.toml")
    assert (bare.string(shared.COMPILER_INI), bare.linelist(ARCH), bare.flag(shared.STRICT_INI)) == (
        "nvrtc",
        [],
        False,
    )
    write(tmp_path, "b/pytest.ini", "[pytest]\nregbudget_strict = yes\n")
    assert ini.read(tmp_path / "b").flag(shared.STRICT_INI)
    write(tmp_path, "c/pyproject.toml", "[tool.pytest\n")
    with pytest.raises(ini.IniError, match=r"pyproject\.toml"):
        ini.read(tmp_path / "c")


@pytest.mark.parametrize(
    ("text", "registers"), [("registers=8", 8), ("spills=16, registers = 4", 4), ("", 0)]
)
def test_headroom(text: str, registers: int) -> None:
    assert shared.parse_headroom(text) == registers


def test_one_definition_of_the_arch_and_toolkit_options_in_both_faces() -> None:
    faces = {}
    for prefix in ("regbudget-", ""):
        parser = argparse.ArgumentParser(exit_on_error=False)
        shared.add_arch_option(parser.add_argument, prefix)
        shared.add_toolkit_option(parser.add_argument, prefix, does="build", several="")
        faces[prefix] = parser
    plugin = faces["regbudget-"].parse_args(["--regbudget-arch=sm_80,sm_90", "--regbudget-toolkit", "cu12"])
    cli = faces[""].parse_args(["--arch", "sm_80,sm_90", "--toolkit", "cu12"])
    assert (
        (plugin.regbudget_arch, plugin.regbudget_toolkit)
        == (cli.arch, cli.toolkit)
        == (["sm_80,sm_90"], ["cu12"])
    )
    for prefix, parser in faces.items():
        with pytest.raises(argparse.ArgumentError, match=r"sm_9O.*sm_90"):
            parser.parse_args([f"--{prefix}arch=sm_9O"])
    # The default the help names is the one a run takes.
    assert choose_archs(None, [], None, flag="--arch").given == (shared.DEFAULT_ARCH,)
    assert f"else {shared.DEFAULT_ARCH}." in " ".join(faces[""].format_help().split())
