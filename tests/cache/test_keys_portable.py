"""Keys that travel: no times, no checkout path; names relative to the rootdir (cache/keys.py,
StatCache.keyed, tools/compiler.given_names)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pytest_regbudget.cache.fingerprint import StatCache
from pytest_regbudget.cache.keys import cache_key
from pytest_regbudget.tools.compiler import given_names
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Toolkit

KERNEL = '#include "params.h"\nextern "C" __global__ void k(float* y) { y[0] = N; }\n'


def toolkit(home: Path) -> Toolkit:
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "include").mkdir()
    (home / "bin" / "ptxas").write_bytes(b"ptxas")
    (home / "lib" / "libnvrtc.so").write_bytes(b"nvrtc")
    (home / "version.json").write_text("{}")
    return Toolkit(
        origin="test",
        ptxas=home / "bin" / "ptxas",
        nvrtc=home / "lib" / "libnvrtc.so",
        nvrtc_version="12.9",
        ptxas_version="12.9.86",
        include_dirs=(home / "include",),
    )


def project(root: Path) -> tuple[Path, CompileOptions]:
    (root / "inc").mkdir(parents=True)
    (root / "inc" / "params.h").write_text("#define N 4\n")
    (root / "k.cu").write_text(KERNEL)
    return root / "k.cu", CompileOptions(include_dirs=(str(root / "tests" / ".." / "inc"),))


def key(root: Path, tk: Toolkit, source: Path, options: CompileOptions) -> str:
    digests = StatCache(None)
    digests.add_base("<rootdir>", root)
    return cache_key(source, KERNEL, "k", "sm_90", options, tk, digests, fresh=True, base=root)


def test_keyed_names_paths_below_the_innermost_base_and_resolves_them_back(tmp_path: Path) -> None:
    digests = StatCache(None)
    digests.add_base("<rootdir>", tmp_path)
    digests.add_base("<nvidia>", tmp_path / "venv" / "nvidia")  # a venv inside the checkout
    assert digests.keyed(tmp_path / "a" / ".." / "k.cu") == "<rootdir>/k.cu"
    assert digests.keyed(tmp_path / "venv" / "nvidia" / "x.h") == "<nvidia>/x.h"
    assert digests.keyed("/elsewhere/k.cu") == os.path.realpath("/elsewhere/k.cu")
    assert digests.resolve("<rootdir>/sub/k.cu") == str(tmp_path / "sub" / "k.cu")
    assert digests.resolve("<unknown>/k.cu") == "<unknown>/k.cu"
    assert digests.resolve("/elsewhere/k.cu") == "/elsewhere/k.cu"


def test_given_names_are_relative_to_the_rootdir_inside_it_only(tmp_path: Path) -> None:
    options = CompileOptions(include_dirs=(str(tmp_path / "t" / ".." / "inc"), "/opt/inc"))
    name, given = given_names(tmp_path / "k" / "a.cu", options, tmp_path)
    assert (name, given.include_dirs) == ("k/a.cu", ("inc", "/opt/inc"))
    assert given_names(Path("/opt/a.cu"), options, tmp_path) == ("/opt/a.cu", options)
    assert given_names(tmp_path / "a.cu", options, None) == (str(tmp_path / "a.cu"), options)


def test_a_key_holds_no_checkout_path_and_no_time(tmp_path: Path) -> None:
    tk = toolkit(tmp_path / "cuda")
    first = tmp_path / "a" / "proj"
    source, options = project(first)
    before = key(first, tk, source, options)
    # The same project at another path, its files and the toolkit's dirs written anew later.
    second = tmp_path / "b" / "checkout"
    shutil.copytree(first, second)
    os.utime(tmp_path / "cuda" / "include", ns=(1, 1))
    moved = CompileOptions(include_dirs=(str(second / "inc"),))
    assert key(second, tk, second / "k.cu", moved) == before
    # What the build reads still counts: the included header, and the toolkit's contents.
    (second / "inc" / "params.h").write_text("#define N 5\n")
    assert key(second, tk, second / "k.cu", moved) != before
    (second / "inc" / "params.h").write_text("#define N 4\n")
    (tmp_path / "cuda" / "bin" / "ptxas").write_bytes(b"another ptxas")
    assert key(second, tk, second / "k.cu", moved) != before


def test_a_source_outside_the_rootdir_is_keyed_by_its_absolute_path(tmp_path: Path) -> None:
    tk = toolkit(tmp_path / "cuda")
    source, options = project(tmp_path / "outside")
    root = tmp_path / "proj"
    root.mkdir()
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "outside", other)
    moved = CompileOptions(include_dirs=(str(other / "inc"),))
    assert key(root, tk, source, options) != key(root, tk, other / "k.cu", moved)
