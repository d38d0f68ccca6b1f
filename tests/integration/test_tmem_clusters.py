"""Tensor memory and clusters with the real NVRTC and ptxas 12.9 of the wheels, for sm_100a (and sm_90):
tcgen05.alloc's columns judged against launch= and min_occupancy, tmem_cols, compile-time cluster dims, the
cluster= key in markers and the manifest, and `regbudget explain`. The kernels: tests/kernels/blackwell.cu."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.data import KERNELS
from helpers.projects import copy_kernels
from helpers.runs import regbudget
from helpers.toolchain import nvcc_usable

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.tools import cuobjdump as binary
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.cuobjdump import find_cuobjdump, read_binary
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.options import CompileOptions

TOOLKIT = "--regbudget-toolkit=cu12"  # NVRTC and ptxas 12.9: the first release that builds tcgen05

TESTS = """
import pytest

K = "blackwell.cu"

@pytest.mark.regbudget(source=K, kernel="tmem_imm", launch=(256, 2))
def test_imm_two():
    pass

@pytest.mark.regbudget(source=K, kernel="tmem_imm", launch=(256, 1))
def test_imm_one():
    pass

@pytest.mark.regbudget(source=K, kernel="tmem_reg", launch=(256, 2))
def test_reg_two():
    pass

@pytest.mark.regbudget(source=K, kernel="tmem_imm", launch=(256, 2), defines={"TMEM_COLS": 256})
def test_imm256_two():
    pass

@pytest.mark.regbudget(source=K, kernel="tmem_imm", launch=(256,), min_occupancy=0.25)
def test_imm_occupancy():
    pass

@pytest.mark.regbudget(source=K, kernel="tmem_runtime", launch=(256, 2))
def test_runtime_unknown():
    pass

@pytest.mark.regbudget(source=K, kernel="tmem_runtime", launch=(256, 2), tmem_cols=512)
def test_runtime_stated():
    pass

@pytest.mark.regbudget(source=K, kernel="tmem_imm", tmem_cols=256)
def test_imm_over_tmem_cols():
    pass

@pytest.mark.regbudget(source=K, kernel="clustered", launch=(256,))
def test_clustered():
    pass

@pytest.mark.regbudget(source=K, kernel="unclustered", launch=(256,))
def test_unclustered():
    pass

@pytest.mark.regbudget(source=K, kernel="unclustered", launch=(256,), cluster=(4, 1, 1))
def test_stated_cluster():
    pass

@pytest.mark.regbudget(source=K, kernel="clustered", launch=(256,), cluster=(4, 1, 1), level="warn")
def test_contradicted_cluster():
    pass
"""

ONE_BLOCK = (
    "512 TMEM columns per block into 512 per SM -> 1 block holds its tensor memory at a time; the next waits "
    "in tcgen05.alloc"
)


def run(
    pytester: pytest.Pytester, *args: str, toolkit: str | None = TOOLKIT
) -> tuple[pytest.RunResult, dict[str, dict[str, Any]]]:
    """The run's result and its records by test id; `toolkit` None: the toolkit found (nvcc's builds)."""
    out = pytester.path / "r.json"
    pinned = [] if toolkit is None else [toolkit]
    result = pytester.runpytest("-p", "no:cacheprovider", *pinned, f"--regbudget-json={out}", *args)
    # On a GPU machine a test also records the build it loads there: keep each test's own arch.
    kernels = json.loads(out.read_text())["kernels"]
    return result, {r["nodeid"].split("::")[-1]: r for r in kernels if f"[{r['arch']}" in r["nodeid"]}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_kernels(pytester.path, "blackwell.cu")
    pytester.makepyfile(test_k=TESTS)
    return pytester


def test_tmem_columns_bound_the_blocks_per_sm_on_sm_100a(project: pytest.Pytester) -> None:
    result, recs = run(project, "--regbudget-arch=sm_100a")
    outcome = {name.removesuffix("[sm_100a]"): r["outcome"] for name, r in recs.items()}
    assert outcome == {
        "test_imm_two": "failed",
        "test_imm_one": "passed",
        "test_reg_two": "failed",
        "test_imm256_two": "passed",
        "test_imm_occupancy": "failed",
        "test_runtime_unknown": "passed",
        "test_runtime_stated": "failed",
        "test_imm_over_tmem_cols": "failed",
        "test_clustered": "passed",
        "test_unclustered": "passed",
        "test_stated_cluster": "passed",
        "test_contradicted_cluster": "failed",
    }
    fix = "Fix: at most 256 TMEM columns per block for 2 blocks per SM, or launch=(256, 1)"
    # The immediate and the register (`mov.b32 %r3, 512;` then `[%r2], %r3;`) fail alike.
    for kernel in ("tmem_imm", "tmem_reg"):
        result.stdout.fnmatch_lines([f"{kernel} [[]sm_100a[]]: launch=(256, 2): {ONE_BLOCK}. {fix}"])
    imm, reg, imm256 = (recs[f"{t}[sm_100a]"] for t in ("test_imm_two", "test_reg_two", "test_imm256_two"))
    assert (imm["tmem_cols"], imm["tmem_blocks"], imm["tmem_source"]) == (512, 1, "ptx")
    assert (reg["tmem_cols"], reg["tmem_blocks"], reg["tmem_source"]) == (512, 1, "ptx")
    assert (imm256["tmem_cols"], imm256["tmem_blocks"]) == (256, 2)
    # active_blocks stays the header's count (the driver's is compared with it); the summary shows TMEM's.
    assert imm["active_blocks"] == imm256["active_blocks"] == 8
    result.stdout.fnmatch_lines(["test_imm_one *tmem_imm*sm_100a*  12% @256 TMEM  *ok"])
    result.stdout.fnmatch_lines(["test_imm256_two *tmem_imm*sm_100a*  25% @256 TMEM  *ok"])
    result.stdout.fnmatch_lines(
        [f"*occupancy 12.5% at 256 threads < min_occupancy 25.0% (*; TMEM-bound: {ONE_BLOCK})"]
    )
    unknown = recs["test_runtime_unknown[sm_100a]"]
    assert (unknown["tmem_cols"], unknown["tmem_blocks"], unknown["tmem_source"]) == (None, None, "unknown")
    assert unknown["diagnosis"][0].startswith(
        "TMEM columns per block unknown: tcgen05.alloc takes its column"
    )
    stated = recs["test_runtime_stated[sm_100a]"]
    assert (stated["tmem_cols"], stated["tmem_blocks"], stated["tmem_source"]) == (512, 1, "stated")
    result.stdout.fnmatch_lines(
        ["*launch=(256, 2): 512 TMEM columns per block into 512 per SM (stated with tmem_cols:*"]
    )
    result.stdout.fnmatch_lines(["tmem_imm [[]sm_100a[]]: TMEM columns 512 per block > tmem_cols 256*"])
    # Clusters: the compiled dims, or none; the marker's where the kernel fixes none; a contradiction fails
    # even at level="warn".
    assert recs["test_clustered[sm_100a]"]["cluster_dims"] == [2, 1, 1]
    assert recs["test_unclustered[sm_100a]"]["cluster_dims"] is None
    assert recs["test_unclustered[sm_100a]"]["cluster"] is None
    stated_cluster = recs["test_stated_cluster[sm_100a]"]
    assert (stated_cluster["cluster_dims"], stated_cluster["cluster"]) == (None, [4, 1, 1])
    result.stdout.fnmatch_lines(
        [
            "clustered [[]sm_100a[]]: cluster=(4, 1, 1) contradicts the kernel's compiled "
            "__cluster_dims__(2, 1, 1)*"
        ]
    )
    result.stdout.fnmatch_lines(["test_clustered *sm_100a*  2x1x1  *ok"])
    for rec in recs.values():
        assert rec["driver_active_clusters"] is None  # no GPU here; tests/gpu/test_clusters.py has one


def test_kernels_without_tmem_or_clusters_keep_null_fields(project: pytest.Pytester) -> None:
    # sm_90 builds the cluster kernels but no tcgen05 (blackwell.cu leaves the TMEM kernels out there).
    _, recs = run(project, "--regbudget-arch=sm_90", "-k", "clustered and not contradicted")
    assert {n: (r["cluster_dims"], r["tmem_cols"], r["tmem_blocks"]) for n, r in recs.items()} == {
        "test_clustered[sm_90]": ([2, 1, 1], None, None),
        "test_unclustered[sm_90]": (None, None, None),
    }


@pytest.mark.skipif(not nvcc_usable(), reason="needs nvcc (the nvcc extra) and a host C++ compiler")
def test_nvcc_builds_read_tmem_and_clusters_from_their_kept_ptx(pytester: pytest.Pytester) -> None:
    copy_kernels(pytester.path, "blackwell.cu")
    pytester.makepyfile(
        test_n="""
import pytest

@pytest.mark.regbudget(source="blackwell.cu", kernel="tmem_reg", launch=(256, 2), compiler="nvcc")
def test_tmem():
    pass

@pytest.mark.regbudget(source="blackwell.cu", kernel="clustered", launch=(256,), compiler="nvcc")
def test_cluster():
    pass
"""
    )
    result, recs = run(pytester, "--regbudget-arch=sm_100a", toolkit=None)
    tmem, cluster = recs["test_tmem[sm_100a]"], recs["test_cluster[sm_100a]"]
    assert (tmem["compiler"], tmem["tmem_cols"], tmem["tmem_blocks"], tmem["outcome"]) == (
        "nvcc",
        512,
        1,
        "failed",
    )
    assert (cluster["compiler"], cluster["cluster_dims"], cluster["outcome"]) == ("nvcc", [2, 1, 1], "passed")
    result.stdout.fnmatch_lines([f"tmem_reg [[]sm_100a[]]: launch=(256, 2): {ONE_BLOCK}*"])


def test_manifest_keys_tmem_cols_and_cluster(pytester: pytest.Pytester) -> None:
    copy_kernels(pytester.path, "blackwell.cu", into="kernels")
    pytester.makefile(
        ".toml",
        regbudget="""
arch = ["sm_100a"]

[[kernels]]
source = ["kernels/blackwell.cu"]
kernels = ["tmem_imm", "tmem_runtime"]
launch = [256, 2]
tmem_cols = 512

[[kernels]]
source = ["kernels/blackwell.cu"]
kernels = ["clustered", "unclustered"]
cluster = [2, 1, 1]
""",
    )
    result, recs = run(pytester)
    by_kernel = {r["kernel"]: r for r in recs.values()}
    assert (by_kernel["tmem_imm"]["outcome"], by_kernel["tmem_imm"]["tmem_source"]) == ("failed", "ptx")
    assert by_kernel["tmem_runtime"]["tmem_source"] == "stated"
    assert by_kernel["tmem_runtime"]["outcome"] == "failed"
    assert (by_kernel["clustered"]["cluster"], by_kernel["clustered"]["outcome"]) == ([2, 1, 1], "passed")
    assert by_kernel["unclustered"]["cluster"] == [2, 1, 1]
    result.stdout.fnmatch_lines([f"*launch=(256, 2): {ONE_BLOCK}*"])


def test_explain_shows_tmem_and_cluster_dims(tmp_path: Path) -> None:
    source = tmp_path / "blackwell.cu"
    shutil.copy(KERNELS / "blackwell.cu", source)
    done = regbudget(
        "explain", f"{source}::tmem_reg", "--arch", "sm_100a", "--bounds", "256", "--toolkit", "cu12"
    )
    assert done.returncode == 0, done.stderr
    header, _, row = done.stdout.splitlines()[1:4]
    assert header.split()[-1] == "tmem"
    assert row.endswith("512 cols, 1 blk")
    # The occupancy column is bounded as the summary's is: 8 blocks of 256 threads fit the SM, 1 holds its
    # 512 TMEM columns at a time, so 1/8 of the full occupancy, marked.
    assert "100% (8 blk)" not in row
    assert "12% (1 blk TMEM)" in row
    done = regbudget(
        "explain", f"{source}::clustered", "--arch", "sm_90", "--bounds", "256", "--toolkit", "cu12"
    )
    assert done.returncode == 0, done.stderr
    header, _, row = done.stdout.splitlines()[1:4]
    assert (header.split()[-1], row.split()[-1]) == ("cluster", "2x1x1")


@pytest.mark.skipif(find_cuobjdump(None) is None, reason="needs cuobjdump (the binary extra)")
def test_a_prebuilt_cubin_has_its_cluster_dims_and_an_unknown_tmem_count(pytester: pytest.Pytester) -> None:
    # The ELF says EIATTR_CTA_PER_CLUSTER 0x2 0x1 0x1 and EIATTR_TCGEN05_1CTA_USED, but has no column count.
    toolkit = toolchain.discover(named="cu12")
    built = compile_kernel(KERNELS / "blackwell.cu", "clustered", "sm_100a", CompileOptions(), toolkit)
    (pytester.path / "blackwell.cubin").write_bytes(built.cubin)
    pytester.makepyfile(
        test_b="""
import pytest

@pytest.mark.regbudget(binary="blackwell.cubin", kernel="clustered", launch=(256,))
def test_cluster():
    pass

@pytest.mark.regbudget(binary="blackwell.cubin", kernel="tmem_imm", launch=(256, 2))
def test_tmem():
    pass

@pytest.mark.regbudget(binary="blackwell.cubin", kernel="tmem_imm", launch=(256, 2), tmem_cols=512)
def test_tmem_stated():
    pass
"""
    )
    result, recs = run(pytester, "--regbudget-arch=sm_100a")
    assert recs["test_cluster[sm_100a]"]["cluster_dims"] == [2, 1, 1]
    tmem = recs["test_tmem[sm_100a]"]
    assert (tmem["tmem_cols"], tmem["tmem_source"], tmem["outcome"]) == (None, "unknown", "passed")
    assert "a prebuilt binary records that the kernel uses tcgen05" in tmem["diagnosis"][0]
    stated = recs["test_tmem_stated[sm_100a]"]
    assert (stated["tmem_cols"], stated["tmem_blocks"], stated["outcome"]) == (512, 1, "failed")
    result.stdout.fnmatch_lines(["test_tmem *sm_100a*100% @256 TMEM? *ok"])


@pytest.fixture(scope="module")
def fatbins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """blackwell.cu by the real nvcc into fatbins: with compute_100a PTX kept (512 and 256 columns), and
    without PTX."""
    if find_cuobjdump(None) is None or not nvcc_usable():
        pytest.skip("needs nvcc and cuobjdump (the nvcc and binary extras)")
    nvcc = find_nvcc(toolchain.discover(None), None).path
    out = tmp_path_factory.mktemp("fatbins")
    with_ptx = "arch=compute_100a,code=[sm_100a,compute_100a]"
    for name, code, defines in (
        ("ptx512", with_ptx, []),
        ("ptx256", with_ptx, ["-DTMEM_COLS=256"]),
        ("noptx", "arch=compute_100a,code=sm_100a", []),
    ):
        cmd = [str(nvcc), "-fatbin", "-gencode", code, *defines, str(KERNELS / "blackwell.cu")]
        subprocess.run([*cmd, "-o", str(out / f"{name}.fatbin")], check=True, capture_output=True)
    return out


def test_a_binary_with_ptx_has_the_tmem_columns_an_nvrtc_build_has(
    pytester: pytest.Pytester, fatbins: Path
) -> None:
    copy_kernels(pytester.path, "blackwell.cu")
    for name in ("ptx512", "ptx256", "noptx"):
        shutil.copy(fatbins / f"{name}.fatbin", pytester.path)
    pytester.makepyfile(
        test_b="""
import pytest

@pytest.mark.regbudget(binary="ptx512.fatbin", kernel="tmem_imm", launch=(256, 2))
def test_ptx512():
    pass

@pytest.mark.regbudget(binary="ptx256.fatbin", kernel="tmem_imm", launch=(256, 2))
def test_ptx256():
    pass

@pytest.mark.regbudget(binary="noptx.fatbin", kernel="tmem_imm", launch=(256, 2))
def test_noptx():
    pass

@pytest.mark.regbudget(source="blackwell.cu", kernel="tmem_imm", launch=(256, 2))
def test_nvrtc512():
    pass

@pytest.mark.regbudget(source="blackwell.cu", kernel="tmem_imm", launch=(256, 2), defines={"TMEM_COLS": 256})
def test_nvrtc256():
    pass
"""
    )
    result, recs = run(pytester, "--regbudget-arch=sm_100a")

    def tmem(test: str) -> tuple[object, ...]:
        rec = recs[f"{test}[sm_100a]"]
        return rec["tmem_cols"], rec["tmem_blocks"], rec["tmem_source"], rec["outcome"]

    assert tmem("test_nvrtc512") == (512, 1, "ptx", "failed")
    assert tmem("test_nvrtc256") == (256, 2, "ptx", "passed")
    assert tmem("test_ptx512") == tmem("test_nvrtc512")
    assert tmem("test_ptx256") == tmem("test_nvrtc256")
    assert tmem("test_noptx")[:3] == (None, None, "unknown")
    result.stdout.fnmatch_lines([f"*tmem_imm [[]sm_100a[]]: launch=(256, 2): {ONE_BLOCK}*"])
    assert "holds no PTX of the kernel for its arch" in recs["test_noptx[sm_100a]"]["diagnosis"][0]


def test_a_warm_read_of_a_binary_keeps_its_ptx_columns_without_cuobjdump(
    fatbins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cold = {
        k.name: k.tmem for k in read_binary(fatbins / "ptx512.fatbin", archs=["sm_100a"], cache_dir=cache)
    }
    assert cold["tmem_imm"] is not None
    assert cold["tmem_imm"].columns == 512
    for memo in (binary._listing, binary._arch_kernels, binary._held):
        memo.cache_clear()

    def no_tool(*args: object, **kwargs: object) -> list[str]:
        raise AssertionError("cuobjdump ran on a warm read")

    monkeypatch.setattr(binary, "_run", no_tool)
    warm = read_binary(fatbins / "ptx512.fatbin", archs=["sm_100a"], cache_dir=cache)
    assert {k.name: k.tmem for k in warm} == cold
