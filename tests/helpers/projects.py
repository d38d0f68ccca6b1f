"""Scratch projects written for one test: files under a root (folders made), the suite's kernels copied in,
copies of example_project, and CUDA homes with a ptxas of the test's own."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Mapping
from pathlib import Path

from helpers.data import KERNELS
from pytest_regbudget.tools import toolkit


def write(root: Path, name: str, text: str | bytes) -> Path:
    """`root/name` holding `text` (bytes as they are), its folders made; returns the path."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> None:
    """Each of `files` (a path under `root` -> its text) written, folders made."""
    for name, text in files.items():
        write(root, name, text)


def copy_kernels(root: Path, *names: str, into: str = ".") -> list[Path]:
    """The suite's kernel sources `names` (files of tests/kernels) copied into `root/into`; returns the
    copies."""
    folder = root / into
    folder.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy(KERNELS / name, folder / name)) for name in names]


EXAMPLE = Path(__file__).parent.parent.parent / "example_project"
# Two kernels of example_project made worse, as issue 46's trial made them: median7x7 spills more (its
# registers fall), the softmax kernels take more registers.
REGRESSIONS = {
    "kernels/median.cu": ("#define MIN_BLOCKS 6\n", "#define MIN_BLOCKS 8\n"),
    "kernels/softmax.cu": ("#define UNROLL 4\n", "#define UNROLL 8\n"),
}


def copy_example(root: Path, edits: Mapping[str, tuple[str, str]] = REGRESSIONS) -> Path:
    """example_project copied to `root` (made), each of `edits` (a file -> the text to replace and its
    replacement) made once; returns `root`."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    for name, (old, new) in edits.items():
        text = (root / name).read_text()
        assert text.count(old) == 1, f"{name} no longer holds {old!r} once"
        (root / name).write_text(text.replace(old, new))
    return root


def fake_home(tmp: Path, ptxas_body: str) -> Path:
    """A CUDA home with the wheels' real NVRTC and a ptxas script; the script gets the real ptxas as $REAL."""
    real = toolkit.discover()
    home = tmp / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    ptxas = home / "bin" / "ptxas"
    ptxas.write_text(f'#!/bin/sh\nREAL="{real.ptxas}"\n' + textwrap.dedent(ptxas_body))
    ptxas.chmod(0o755)
    for lib in [real.require_nvrtc(), *real.require_nvrtc().parent.glob("libnvrtc-builtins.so.*")]:
        (home / "lib" / lib.name).symlink_to(lib)
    return home
