"""The compile cache and the compile pool, with the real toolchain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.data import ACC_KERNEL, KERNELS
from helpers.projects import write_tree
from helpers.runs import run_json, start_pytest
from msgspec.structs import replace

from pytest_regbudget.cache.fingerprint import FORMAT
from pytest_regbudget.cache.keys import cache_key
from pytest_regbudget.cache.prefetch import default_jobs
from pytest_regbudget.cache.store import CompileCache
from pytest_regbudget.core.dirs import default_cache_dir
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import discover

HUNGRY = KERNELS / "hungry.cu"

KERNEL = '#include "params.h"\n' + ACC_KERNEL


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(path))
    return path


def project(pytester: pytest.Pytester, n: int = 8, tests: int = 1) -> None:
    write_tree(pytester.path, {"inc/params.h": f"#define N {n}\n", "acc.cu": KERNEL})
    body = "".join(
        f"""
@pytest.mark.regbudget(source="acc.cu", kernel="acc", include_dirs=["inc"], defines={{"VARIANT": {i}}})
def test_{i}():
    pass
"""
        for i in range(tests)
    )
    pytester.makepyfile(test_k="import pytest\n" + body)


def test_second_run_hits_and_agrees(pytester: pytest.Pytester, cache_dir: Path) -> None:
    project(pytester)
    result, cold = run_json(pytester)
    result.stdout.fnmatch_lines([f"compile cache {cache_dir}: 0 hits, 1 misses (* compile thread(s))"])
    result, warm = run_json(pytester)
    result.stdout.fnmatch_lines([f"compile cache {cache_dir}: 1 hits, 0 misses*"])
    assert cold == warm
    (entry,) = cache_dir.rglob("*.json")
    assert json.loads(entry.read_text())["format"] == FORMAT
    # The PTX and cubin sit in a body file of their own, which a run without GPU or SASS never reads.
    body = entry.with_suffix(".body")
    assert body.read_bytes()[:200].decode().lstrip().startswith("//")
    assert b"\x7fELF" in body.read_bytes()
    assert len(entry.read_bytes()) < len(body.read_bytes())


def test_editing_an_included_header_misses(pytester: pytest.Pytester, cache_dir: Path) -> None:
    project(pytester, n=8)
    _, (small,) = run_json(pytester)
    project(pytester, n=24)
    result, (big,) = run_json(pytester)
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses*"])
    assert big["registers"] > small["registers"]
    project(pytester, n=8)
    result, (again,) = run_json(pytester)
    result.stdout.fnmatch_lines(["compile cache *: 1 hits, 0 misses*"])
    assert again == small


@pytest.mark.parametrize("damage", ["garbage", "checksum", "truncated"])
def test_corrupt_entry_is_rebuilt_not_trusted(
    pytester: pytest.Pytester, cache_dir: Path, damage: str
) -> None:
    project(pytester)
    _, (good,) = run_json(pytester)
    (entry,) = cache_dir.rglob("*.json")
    doc = json.loads(entry.read_text())
    if damage == "garbage":
        entry.write_bytes(b"\x00not json")
    elif damage == "checksum":
        doc["payload"]["ptxas_log"] = doc["payload"]["ptxas_log"].replace("Used", "Used 1")
        entry.write_text(json.dumps(doc))
    else:
        entry.write_text(entry.read_text()[:100])
    result, (rebuilt,) = run_json(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses, 1 corrupt entries rebuilt*"])
    assert rebuilt == good
    # The entry was rewritten whole: the next run trusts it again.
    result, _ = run_json(pytester)
    result.stdout.fnmatch_lines(["compile cache *: 1 hits, 0 misses*"])


def test_no_cache_option_and_default_location(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project(pytester)
    monkeypatch.delenv("REGBUDGET_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    result, _ = run_json(pytester, "--regbudget-no-cache")
    result.stdout.fnmatch_lines(["compile cache: off (--regbudget-no-cache)"])
    assert not (tmp_path / "xdg").exists()
    result, _ = run_json(pytester)
    result.stdout.fnmatch_lines([f"compile cache {tmp_path / 'xdg' / 'pytest-regbudget'}: 0 hits, 1 misses*"])
    assert default_cache_dir({"HOME": "/h"}) == Path.home() / ".cache" / "pytest-regbudget"
    assert default_cache_dir({"REGBUDGET_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c")


def test_compile_pool_gives_the_same_results(pytester: pytest.Pytester, cache_dir: Path) -> None:
    project(pytester, tests=6)
    result, serial = run_json(pytester, "--regbudget-jobs=1", "--regbudget-no-cache")
    result.stdout.fnmatch_lines(["compile cache: off*"])
    result, parallel = run_json(pytester, "--regbudget-jobs=3", "--regbudget-arch=sm_80,sm_90")
    result.assert_outcomes(passed=12)
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 12 misses (3 compile thread(s))"])
    assert [r["registers"] for r in serial] == [r["registers"] for r in parallel if r["arch"] == "sm_90"]


def test_jobs_follow_cores_and_xdist_workers() -> None:
    cores = default_jobs({})
    assert cores >= 1
    assert default_jobs({"PYTEST_XDIST_WORKER_COUNT": str(cores)}) == 1
    assert default_jobs({"PYTEST_XDIST_WORKER_COUNT": str(cores * 4)}) == 1


def test_bad_jobs_value(pytester: pytest.Pytester) -> None:
    project(pytester)
    result = pytester.runpytest("--regbudget-jobs=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--regbudget-jobs=0: expected 1 or more*"])


def test_concurrent_processes_share_one_cache(pytester: pytest.Pytester, cache_dir: Path) -> None:
    project(pytester, tests=4)
    args = ["-p", "no:cacheprovider", "-q", "--regbudget-jobs=2"]
    procs = [start_pytest(pytester.path, *args) for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    result, _ = run_json(pytester)
    result.stdout.fnmatch_lines(["compile cache *: 4 hits, 0 misses*"])


def test_key_covers_headers_options_arch_and_toolkit(tmp_path: Path) -> None:
    tk = discover()
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "params.h"
    header.write_text('#define N 4\n#include "deeper.h"\n')
    (tmp_path / "inc" / "deeper.h").write_text("// nothing\n")
    source = tmp_path / "acc.cu"
    text = KERNEL.replace('"params.h"', '"params.h"\n#include <cuda_fp16.h>')
    source.write_text(text)
    opts = CompileOptions(include_dirs=(str(tmp_path / "inc"),))
    key = cache_key(source, text, "acc", "sm_90", opts, tk)
    assert key == cache_key(source, text, "acc", "sm_90", opts, tk)
    assert key != cache_key(source, text, "acc", "sm_80", opts, tk)
    assert key != cache_key(
        source,
        text,
        "acc",
        "sm_90",
        CompileOptions.make(defines={"A": 1}, include_dirs=opts.include_dirs),
        tk,
    )
    assert key != cache_key(source, text, "acc", "sm_90", opts, replace(tk, ptxas_version="12.8.93"))
    (tmp_path / "inc" / "deeper.h").write_text("// changed\n")
    assert key != cache_key(source, text, "acc", "sm_90", opts, tk)


def test_cache_without_directory_compiles_every_time(tmp_path: Path) -> None:
    cache = CompileCache(None)
    compiled = cache.compile(
        HUNGRY, "poly_eval", "sm_90", CompileOptions.make(defines={"NACC": 4}), discover()
    )
    assert compiled.resources.registers > 0
    assert (cache.stats.hits, cache.stats.misses) == (0, 0)
