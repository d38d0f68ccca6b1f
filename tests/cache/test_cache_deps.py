"""What the compile cache keys on: include directives, file digests, trees, nvcc's dependency lists, and
every field of CompileOptions. No toolkit needed: the toolkit here is a stand-in with no headers."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import fields, replace

from pytest_regbudget.cache.fingerprint import NOT_FINGERPRINTED, StatCache, Uncacheable, walk_tree
from pytest_regbudget.cache.includes import directives
from pytest_regbudget.cache.keys import cache_key
from pytest_regbudget.cache.nvcc_deps import parse_depfile
from pytest_regbudget.cache.store import CacheStats, CompileCache
from pytest_regbudget.core import baseline as bl
from pytest_regbudget.engine.builder import Builder
from pytest_regbudget.engine.state import Settings
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Toolkit

TOOLKIT = Toolkit(
    origin="test",
    ptxas=Path("/x/ptxas"),
    nvrtc=Path("/x/libnvrtc.so"),
    nvrtc_version="12.9",
    ptxas_version="12.9.86",
)
KERNEL = 'extern "C" __global__ void k(float* y) { y[0] = N; }\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('#include "a.h"', [("a.h", '#include "a.h"')]),
        ("  #  include <b/c.h>", [("b/c.h", "#include <b/c.h>")]),
        ('#include /* a comment */ "a.h"', [("a.h", '#include "a.h"')]),
        ('#include /* a comment\n across lines */ "a.h"', [("a.h", '#include "a.h"')]),
        ('#include \\\n   "a.h"', [("a.h", '#include "a.h"')]),
        ('#inc\\\nlude "a.h"', [("a.h", '#include "a.h"')]),
        ('%:include "a.h"', [("a.h", '#include "a.h"')]),
        ("#include_next <a.h>", [("a.h", "#include <a.h>")]),
        ("#include CFG", [(None, "#include CFG")]),
        ("#include CFG(x)  // why", [(None, "#include CFG(x)")]),
        ('/* #include "no.h" */\n// #include "no.h"\nint x;', []),
        ('const char* s = R"(\n#include "no.h"\n)";', []),
        ('const char* s = "#include \\"no.h\\"";', []),
        ('int x = 1\'000;\n#include "a.h"', [("a.h", '#include "a.h"')]),
        ('#if __has_include("a.h")\n#endif', [("a.h", '__has_include("a.h"')]),
        ("#if __has_include( <a.h> )\n#endif", [("a.h", "__has_include( <a.h>")]),
        ("#if __has_include(HDR)\n#endif", [(None, "__has_include")]),
        ("#define HAS __has_include\n", [(None, "__has_include")]),
        ("#if __has_embed(<d.bin>)\n#endif", [("d.bin", "__has_embed(<d.bin>")]),
        ("#embed <d.bin>", [("d.bin", "#include <d.bin>")]),
        ("#import <a.h>", [("a.h", "#include <a.h>")]),
        ('#pragma unroll\nint x; // no directive word here\nconst char* s = "#";', []),
        ('const char* s = u8R"x(\n#include "no.h"\n)x";\n#include \\\n"a.h"', [("a.h", '#include "a.h"')]),
    ],
)
def test_directives(text: str, expected: list[tuple[str | None, str]]) -> None:
    assert directives(text) == expected


def test_parse_depfile(tmp_path: Path) -> None:
    text = (
        "out/k.cubin : kernels/a.cu \\\n    /usr/include/x.h \\\n"
        "    dir\\ with\\ space/b.h \\\n    kernels/a.cu\n"
    )
    assert parse_depfile(text, str(tmp_path)) == [
        str(tmp_path / "kernels/a.cu"),
        "/usr/include/x.h",
        str(tmp_path / "dir with space/b.h"),
    ]


# One changed value per field. A new CompileOptions field fails here until it has a sample, and then the
# test proves it reaches the cache key and the baseline's options_hash.
SAMPLES: dict[str, Any] = {
    "defines": (("N", "4"),),
    "include_dirs": ("/r/inc",),
    "options": ("-std=c++17",),
    "ptxas_options": ("-O1",),
    "depends": ("/r/cfg.h",),
    "build_defines": (("GGML_CUDA_F16", None),),
}


def test_every_compile_option_is_in_the_cache_key_and_the_options_hash(tmp_path: Path) -> None:
    names = [f.name for f in fields(CompileOptions)]
    assert sorted(names) == sorted(SAMPLES), "give the new CompileOptions field a sample value here"
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    builder = Builder(Settings(archs=("sm_90",), rootdir=Path("/r")).build())
    base = CompileOptions()
    key = cache_key(source, KERNEL, "k", "sm_90", base, TOOLKIT)
    hashed = builder.options_hash(base)
    for name in names:
        changed = replace(base, **{name: SAMPLES[name]})
        assert changed.identity() != base.identity(), name
        assert cache_key(source, KERNEL, "k", "sm_90", changed, TOOLKIT) != key, name
        assert builder.options_hash(changed) != hashed, name


def test_options_hash_of_existing_baselines_is_unchanged() -> None:
    """Entries written before `depends` existed keep their options_hash (the 0.1 formula)."""
    options = CompileOptions.make(
        defines={"N": 4}, include_dirs=["/r/inc"], options=["-O3"], ptxas_options=["-O2"]
    )
    builder = Builder(Settings(archs=("sm_90",), rootdir=Path("/r")).build())
    old = bl.options_hash(options.defines, ["inc"], options.options, options.ptxas_options)
    assert builder.options_hash(options) == old
    assert builder.options_hash(replace(options, depends=("/r/cfg.h",))) != old
    # The hash by which a change from no settings at all reads as "added" (ratchet.settings_change).
    assert builder.options_hash(CompileOptions()) == bl.NO_OPTIONS_HASH


def test_a_define_made_build_wide_keeps_the_cache_key_and_the_options_hash(tmp_path: Path) -> None:
    """A manifest table's defines moved from the key to the build settings: the compilers see the same
    flags, so neither the cache key nor the hash of a baseline written by 0.1 changes (its entry is still
    found, and compared, until an update moves it)."""
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    keyed = CompileOptions.make(defines=["GGML_A", "N=4", "V=1"])
    split = replace(keyed, defines=(("V", "1"),), build_defines=(("GGML_A", None), ("N", "4")))
    builder = Builder(Settings(archs=("sm_90",), rootdir=Path("/r")).build())
    assert builder.options_hash(split) == builder.options_hash(keyed)
    assert cache_key(source, KERNEL, "k", "sm_90", split, TOOLKIT) == cache_key(
        source, KERNEL, "k", "sm_90", keyed, TOOLKIT
    )
    assert split.flags("nvcc", "sm_90", tmp_path) == keyed.flags("nvcc", "sm_90", tmp_path)
    assert (split.variant(), split.keyed_before_settings(), keyed.keyed_before_settings()) == (
        "V=1",
        "GGML_A,N=4,V=1",
        None,
    )
    assert split.settings() == ("-DGGML_A", "-DN=4")
    # A variant's value of a build-wide define wins, in the build-wide define's place.
    override = replace(split, defines=(("N", "8"),))
    assert override.all_defines() == (("GGML_A", None), ("N", "8"))
    assert override.settings() == ("-DGGML_A",)


def test_stat_cache_remembers_still_files_only(tmp_path: Path) -> None:
    still, fresh = tmp_path / "still.h", tmp_path / "fresh.h"
    still.write_text("A")
    fresh.write_text("B")
    old = time.time() - 60
    os.utime(still, (old, old))  # ctime stays new: remembered only once ctime is old too
    digests = StatCache(tmp_path / "stat-cache")
    first = digests.digest(str(fresh), os.stat(fresh))
    fresh.write_text("C")  # same size, maybe the same timestamp tick: must not be trusted
    assert digests.digest(str(fresh), os.stat(fresh)) != first
    digests.digest(str(still), os.stat(still))
    digests.save()
    assert not (tmp_path / "stat-cache").exists()  # nothing still enough to remember yet


def test_stat_cache_skips_reading_an_unchanged_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = tmp_path / "a.h"
    header.write_text("A")
    # Every file counts as settled, however recently it changed.
    monkeypatch.setattr("pytest_regbudget.util.files._RACY_NS", -(10**18))
    digests = StatCache(tmp_path / "stat-cache")
    value = digests.digest(str(header), os.stat(header))
    digests.save()
    reloaded = StatCache(tmp_path / "stat-cache")

    def no_reading(*args: object) -> None:
        raise AssertionError("read a file whose stat had not changed")

    monkeypatch.setattr("pytest_regbudget.cache.fingerprint.open", no_reading, raising=False)
    assert reloaded.digest(str(header), os.stat(header)) == value
    monkeypatch.undo()
    header.write_text("B")
    assert reloaded.digest(str(header), os.stat(header)) != value


def test_tree_leaves_out_generated_files_and_has_a_limit(tmp_path: Path) -> None:
    for name in [
        "a.h",
        "sub/b.cuh",
        "data.inc",
        ".git/x.h",
        "__pycache__/m.pyc",
        "venv/pyvenv.cfg",
        "venv/lib/c.h",
        "report.json",
        "regbudget-baseline.toml",
        "test_k.py",
        "cache/v1/x.json",
    ]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    skip = frozenset({str(tmp_path / "cache")})
    assert walk_tree(str(tmp_path), skip) == ["a.h", "data.inc", "sub/b.cuh"]
    assert walk_tree(str(tmp_path), skip, recursive=False) == ["a.h", "data.inc"]
    with pytest.raises(Uncacheable, match="more than 2 files"):
        walk_tree(str(tmp_path), skip, limit=2)
    assert {".json", ".toml", ".py"} <= NOT_FINGERPRINTED


def project(tmp_path: Path) -> Path:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "cfg.h").write_text("#define N 2\n")
    (tmp_path / "kernels" / "notes.txt").write_text("included by nobody\n")
    return tmp_path / "kernels" / "k.cu"


def test_nvrtc_key_covers_what_the_build_reads_and_probes_and_no_more(tmp_path: Path) -> None:
    source = project(tmp_path)
    text = '#include "cfg.h"\n' + KERNEL
    options = CompileOptions(include_dirs=(str(tmp_path / "common"),))
    digests = StatCache(None)

    def key() -> str:
        return cache_key(source, text, "k", "sm_90", options, TOOLKIT, digests, fresh=True)

    first = key()
    # What no #include names does not count: a note beside the kernel, a new header nobody includes.
    (tmp_path / "kernels" / "notes.txt").write_text("changed\n")
    (tmp_path / "common" / "new.h").write_text("")
    assert key() == first
    # The header it reads does, and so does one that shadows it where the search looks first.
    (tmp_path / "common" / "cfg.h").write_text("#define N 9\n")
    edited = key()
    assert edited != first
    (tmp_path / "kernels" / "cfg.h").write_text("#define N 2\n")
    assert key() not in (first, edited)
    assert digests.whole_dirs == {}


def test_a_computed_include_keys_its_trees_whole_and_says_so(tmp_path: Path) -> None:
    source = project(tmp_path)
    text = '#define CFG "../common/cfg.h"\n#include CFG\n' + KERNEL
    options = CompileOptions(depends=(str(tmp_path / "common" / "cfg.h"),))
    digests = StatCache(None)
    first = cache_key(source, text, "k", "sm_90", options, TOOLKIT, digests, fresh=True)
    (tmp_path / "kernels" / "notes.txt").write_text("changed\n")
    assert cache_key(source, text, "k", "sm_90", options, TOOLKIT, digests, fresh=True) != first
    assert digests.whole_dirs == {str(source): "#include CFG goes through a macro"}


def test_nvrtc_key_ignores_a_cache_dir_inside_the_tree(tmp_path: Path) -> None:
    source = project(tmp_path)
    cache_dir = tmp_path / "kernels" / "cache"
    key = cache_key(source, KERNEL, "k", "sm_90", CompileOptions(), TOOLKIT, cache_dir=cache_dir)
    (cache_dir / "v2").mkdir(parents=True)
    (cache_dir / "v2" / "stat-cache").write_text("{}")
    assert cache_key(source, KERNEL, "k", "sm_90", CompileOptions(), TOOLKIT, cache_dir=cache_dir) == key


def test_macro_include_needs_depends(tmp_path: Path) -> None:
    source = project(tmp_path)
    text = '#define CFG "../common/cfg.h"\n#include CFG\n' + KERNEL
    with pytest.raises(Uncacheable, match=r"#include CFG goes through a macro.*depends="):
        cache_key(source, text, "k", "sm_90", CompileOptions(), TOOLKIT)
    for depends in [
        str(tmp_path / "common" / "cfg.h"),
        str(tmp_path / "common" / "*.h"),
        str(tmp_path / "common"),
    ]:
        options = CompileOptions(depends=(depends,))
        key = cache_key(source, text, "k", "sm_90", options, TOOLKIT)
        (tmp_path / "common" / "cfg.h").write_text("#define N 9\n")
        assert cache_key(source, text, "k", "sm_90", options, TOOLKIT) != key, depends
        (tmp_path / "common" / "cfg.h").write_text("#define N 2\n")
        assert cache_key(source, text, "k", "sm_90", options, TOOLKIT) == key, depends


def test_cache_stats_line() -> None:
    stats = CacheStats(hits=3, misses=1)
    assert str(stats) == "3 hits, 1 misses"
    stats.not_cached = 2
    stats.reasons = {"kernels/x.cu": "#include CFG goes through a macro"}
    assert str(stats) == "3 hits, 1 misses, 2 not cached (kernels/x.cu: #include CFG goes through a macro)"
    worker = CacheStats(hits=1, corrupt=1, not_cached=1, reasons={"kernels/y.cu": "why"})
    total = stats.merged(CacheStats.from_payload(worker.to_payload()))
    assert CacheStats.from_payload({"hits": "many"}) == CacheStats()  # another version's worker
    keyed = CacheStats(hits=1, whole_dirs={"kernels/x.cu": "#include CFG goes through a macro"})
    assert str(keyed) == (
        "1 hits, 0 misses, 1 file(s) keyed by whole directories (kernels/x.cu: #include CFG goes through "
        "a macro; an edit anywhere there rebuilds them)"
    )
    assert str(total) == (
        "4 hits, 1 misses, 1 corrupt entries rebuilt, 3 not cached (kernels/x.cu: #include CFG goes "
        "through a macro; and 1 more file(s))"
    )


def test_cache_dir_that_is_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "cache"
    afile.write_text("")
    for directory in [afile, afile / "deeper"]:
        cache = CompileCache(directory)
        assert cache.directory is None
        assert str(cache.stats) == (
            f"{afile} is not a directory: caching off (remove it, or point REGBUDGET_CACHE_DIR at a "
            "directory)"
        )
    assert CompileCache(tmp_path / "new" / "dir").directory == tmp_path / "new" / "dir"
