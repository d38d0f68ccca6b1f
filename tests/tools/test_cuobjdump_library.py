"""A library of several translation units, read as cuBLAS's is: one kernel name in two cubins (a template
whose width each unit sets, and a `static` kernel of each unit) stays two kernels, each tagged by its
cubin's own kernel; the arch filter reads only the archs asked for; and the binary cache makes a warm read
run no cuobjdump, while a changed file or a damaged cache document is read again. Built with the real nvcc
from the wheels; copy_tags is also checked on generated records."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from msgspec.structs import replace
from test_cuobjdump import _wheel_nvcc

from pytest_regbudget.core import names
from pytest_regbudget.core.errors import BinaryError
from pytest_regbudget.tools import cuobjdump as binary
from pytest_regbudget.tools.cuobjdump import BinaryKernel, copy_tags, find_cuobjdump, read_binary
from pytest_regbudget.util.files import sha256_hex

HEADER = """
template <int N> __global__ void fill(float* y) {
    float acc[WIDTH];
#pragma unroll
    for (int k = 0; k < WIDTH; ++k) acc[k] = y[threadIdx.x * k];
    for (int d = 0; d < N; ++d) {
#pragma unroll
        for (int k = 0; k < WIDTH; ++k) acc[k] = acc[k] * acc[(k + 1) % WIDTH] + y[d];
    }
    float s = 0;
#pragma unroll
    for (int k = 0; k < WIDTH; ++k) s += acc[k];
    y[threadIdx.x] = s;
}
"""
UNIT = """
#define WIDTH {width}
#include "fill.cuh"
static __global__ void helper(float* y) {{ y[threadIdx.x] *= {width}; }}
__global__ void {own}(float* y) {{ y[threadIdx.x] = {width}; }}
void launch_{own}(float* y) {{ fill<64><<<1, 32>>>(y); helper<<<1, 32>>>(y); {own}<<<1, 32>>>(y); }}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libtwo.so: units narrow.cu (WIDTH 2) and wide.cu (WIDTH 24), for sm_80 and sm_90."""
    nvcc = _wheel_nvcc()
    if nvcc is None or find_cuobjdump(None) is None:
        pytest.skip("no nvcc or cuobjdump (pip install nvidia-cuda-nvcc nvidia-cuda-cuobjdump)")
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no host C++ compiler (g++) for nvcc")
    out = tmp_path_factory.mktemp("library")
    (out / "fill.cuh").write_text(HEADER)
    (out / "narrow.cu").write_text(UNIT.format(width=2, own="narrow_only"))
    (out / "wide.cu").write_text(UNIT.format(width=24, own="wide_only"))
    cmd = [
        str(nvcc),
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=sm_90",
        str(out / "narrow.cu"),
        str(out / "wide.cu"),
        "-o",
        str(out / "libtwo.so"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return out / "libtwo.so"


def _clear_memos() -> None:
    binary._listing.cache_clear()
    binary._arch_kernels.cache_clear()
    binary._held.cache_clear()


def test_one_name_in_two_cubins_is_two_kernels_tagged_by_their_cubins(library: Path) -> None:
    kernels = read_binary(library, archs=["sm_90"])
    fills = [k for k in kernels if names.readable(k.name) == "fill<64>"]
    assert len(fills) == 2
    # The narrow unit's copy needs fewer registers: the two are not merged, nor judged against each other.
    by_tag = {k.copy: k.registers for k in fills}
    narrow = f"narrow_only.{sha256_hex(b'_Z11narrow_onlyPf')[:6]}"
    wide = f"wide_only.{sha256_hex(b'_Z9wide_onlyPf')[:6]}"
    assert set(by_tag) == {narrow, wide}
    assert by_tag[narrow] < by_tag[wide]
    # A static kernel's mangled name differs per file; its stable name does not: two copies, tagged too.
    helpers = [k for k in kernels if names.base_name(k.name) == "helper"]
    assert sorted(str(k.copy) for k in helpers) == sorted([narrow, wide])
    assert len({names.readable(k.entry) for k in kernels}) == len(kernels)
    # The same tags on every arch: the anchor is the cubin's own kernel, not its place in the file.
    assert {k.copy for k in read_binary(library, archs=["sm_80"]) if k.copy} == {narrow, wide}


def test_each_entrys_signature_and_readable_name_are_kept_with_the_facts(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stable signature and the readable name of every entry, made when the file is read and kept: the
    manifest's one item per kernel and its names (plugin/collect.py) make none on a warm run. Read back, they
    are what names.signature and names.readable say."""
    tool = find_cuobjdump(None)
    assert tool is not None
    cache = tmp_path / "cache"
    made = binary.read_arch(library, tool, "sm_90", cache_dir=cache)
    expected = {k.entry: names.signature(k.entry) for k in made.kernels}
    readable = {k.entry: names.readable(k.entry) for k in made.kernels}
    assert readable["_Z11narrow_onlyPf"] == "narrow_only"
    # A fresh process: nothing remembered, and a name made now would fail the test.
    _clear_memos()
    names.readable.cache_clear()
    monkeypatch.setattr(names, "_READABLE", {})

    def made_again(entry: str) -> str:
        raise AssertionError(f"{entry}: made again on a warm read")

    monkeypatch.setattr(names, "_signature", made_again)
    kept = binary.read_arch(library, tool, "sm_90", cache_dir=cache)
    assert kept.signatures == made.signatures == expected
    assert expected["_Z11narrow_onlyPf"] == "narrow_only(float*)"
    assert {k.entry: names.readable(k.entry) for k in kept.kernels} == readable
    names.readable.cache_clear()  # what it answered while made_again stood in is no one else's


def test_only_the_archs_asked_for_are_read(library: Path) -> None:
    assert {k.arch for k in read_binary(library, archs=["sm_80"])} == {"sm_80"}
    assert {k.arch for k in read_binary(library)} == {"sm_80", "sm_90"}
    assert read_binary(library, archs=["sm_100"]) == []


def test_a_warm_read_runs_no_cuobjdump_and_a_changed_file_is_read_again(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    lib = tmp_path / "libtwo.so"
    shutil.copy(library, lib)
    first = read_binary(lib, archs=["sm_90"], cache_dir=cache, jobs=2)
    _clear_memos()

    def no_tool(*args: object, **kwargs: object) -> list[str]:
        raise AssertionError("cuobjdump ran on a warm read")

    with monkeypatch.context() as patched:
        patched.setattr(binary, "_run", no_tool)
        assert read_binary(lib, archs=["sm_90"], cache_dir=cache) == first
        # Moved (another path, another inode): its content digest finds the same facts.
        moved = tmp_path / "moved.so"
        shutil.copy(lib, moved)
        _clear_memos()
        assert read_binary(moved, archs=["sm_90"], cache_dir=cache) == first
    # Damaged documents are read as absent: the file is read again, and the same facts come back.
    for doc in (cache / "binaries").iterdir():
        doc.write_text(doc.read_text()[:40])
    _clear_memos()
    assert read_binary(lib, archs=["sm_90"], cache_dir=cache) == first
    # Another file at the same path (a rebuilt library): read again, never the old facts.
    (tmp_path / "notes.cu").write_text("")
    lib.write_bytes(b"not a CUDA binary at all")
    _clear_memos()
    with pytest.raises(BinaryError, match="cannot read"):
        read_binary(lib, archs=["sm_90"], cache_dir=cache)


def test_cuobjdump_is_known_by_its_contents_not_its_path_or_times(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh venv reinstalls the same cuobjdump at another path, with new times and inode: the facts a run
    # kept with the first are the second's. Another cuobjdump (other contents) reads the file again.
    cache = tmp_path / "cache"
    tool = find_cuobjdump(None)
    assert tool is not None
    first = binary.read_arch(library, tool, "sm_90", cache_dir=cache)
    copy = tmp_path / "venv2" / "bin" / "cuobjdump"
    copy.parent.mkdir(parents=True)
    shutil.copy(tool, copy)
    _clear_memos()
    binary._remembered_digest.cache_clear()
    runs: list[object] = []
    real = binary._run

    def counting(*args: object, **kwargs: object) -> list[str]:
        runs.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(binary, "_run", counting)
    again = binary.read_arch(library, copy, "sm_90", cache_dir=cache)
    assert again == first
    assert runs == []
    copy.write_bytes(copy.read_bytes() + b"\0")
    _clear_memos()
    assert binary.read_arch(library, copy, "sm_90", cache_dir=cache).kernels == first.kernels
    assert runs


def _k(name: str, elf: int, registers: int = 32) -> BinaryKernel:
    return BinaryKernel(
        name=name,
        arch="sm_90",
        registers=registers,
        stack=0,
        shared=0,
        local=0,
        const=0,
        max_threads=None,
        min_blocks=None,
        spill_stores=0,
        spill_loads=0,
        elf=elf,
    )


def test_copy_tags_on_generated_listings() -> None:
    # Unique names stay untagged; a copy in a cubin with a name of its own is tagged by it; two cubins with
    # no name of their own (one unit linked twice) are told apart by their place.
    kernels = [
        _k("_Z4initPi", 0, 8),
        _k("_Z5solvePi", 0),
        _k("_Z4initPi", 1, 12),
        _k("_Z6factorPi", 1),
        _k("_Z4initPi", 2, 8),
        _k("_Z4initPi", 3, 8),
        _k("alone", 4),
    ]
    tagged = copy_tags(kernels)
    tags = [k.copy for k in tagged]
    solve = sha256_hex(b"_Z5solvePi")[:6]
    factor = sha256_hex(b"_Z6factorPi")[:6]
    assert tags == [f"solve.{solve}", None, f"factor.{factor}", None, "#3", "#4", None]
    assert tagged[0].entry == f"_Z4initPi@solve.{solve}"
    assert names.readable(tagged[0].entry) == f"init@solve.{solve}"
    # Nothing to tell apart: the listing as it was.
    assert copy_tags([_k("a", 0), _k("b", 1)]) == [_k("a", 0), _k("b", 1)]
    # Adding a unit elsewhere in the library does not move an anchored tag.
    more = [_k("_Z4initPi", 5), _k("_Z5otherPi", 5), *kernels]
    assert [k.copy for k in copy_tags(more)][2] == f"solve.{solve}"
    assert replace(tagged[0], copy=None).entry == "_Z4initPi"


def test_a_library_in_a_manifest_is_every_kernel_its_own_entry(
    library: Path, pytester: pytest.Pytester
) -> None:
    """Through pytest: an item per function cuobjdump lists for the archs, nothing merged; an update, then a
    strict rerun that has nothing to accept; the header and summary name cuobjdump."""
    (pytester.path / "lib").mkdir()
    shutil.copy(library, pytester.path / "lib" / "libtwo.so")
    (pytester.path / "regbudget.toml").write_text(
        'arch = ["sm_80", "sm_90"]\n[[kernels]]\nbinary = ["lib/libtwo.so"]\n'
    )
    listed = subprocess.run(
        [str(find_cuobjdump(None)), "--dump-resource-usage", str(library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    functions = listed.count("Function ")
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-update", "-W", "error")
    result.assert_outcomes(passed=functions)
    text = (pytester.path / "regbudget-baseline.toml").read_text()
    assert text.count("[kernels.") == functions
    assert '"fill<64>@narrow_only.' in text
    assert '"fill<64>@wide_only.' in text
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-strict", "-v")
    result.assert_outcomes(passed=functions)
    out = result.stdout.str()
    assert "improved" not in out
    assert "--regbudget-update" not in out  # nothing to accept, nothing stale
    result.stdout.fnmatch_lines(
        [
            "regbudget: cuobjdump 1*.*.* (*cuobjdump); toolkit for compiled kernels: *",
            f"*cuobjdump * read {functions} kernel(s) from prebuilt binaries*",
        ]
    )
    result.stdout.fnmatch_lines(["fill<64>@narrow*  sm_90 * =  * ok"])


def test_a_marker_names_a_copy_by_its_tag(library: Path, pytester: pytest.Pytester) -> None:
    tag = f"narrow_only.{sha256_hex(b'_Z11narrow_onlyPf')[:6]}"
    pytester.makepyfile(
        test_copies=f"""
import pytest
LIB = {str(library)!r}

@pytest.mark.regbudget(binary=LIB, kernel="fill<64>", archs=["sm_90"])
def test_untagged():
    pass

@pytest.mark.regbudget(binary=LIB, kernel="fill<64>@{tag}", archs=["sm_90"], max_regs=64)
def test_tagged():
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-arch=sm_90")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*kernel 'fill<64>' not found in *libtwo.so [[]sm_90[]]; it contains: *fill<64>@*"]
    )
