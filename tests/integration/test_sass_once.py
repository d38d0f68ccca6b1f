"""SASS is read once per cubin: one nvdisasm run per arch for a unit's kernels (and one for its life ranges,
where nvdisasm gives them), none on a warm rerun.

The runs are counted by a conftest of the scratch project that wraps the function nvdisasm runs through;
both runs are fresh processes, so the warm one reads what the cold one kept in the cache directory, not
this process's memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.runs import NVDISASM_COUNTER

KERNELS = 20
ARCHS = ("sm_80", "sm_90")

SOURCE = "\n".join(
    f"""extern "C" __global__ void k{i}(const float* __restrict__ x, float* __restrict__ y, int n) {{
    float s = x[threadIdx.x];
    for (int d = 0; d < n; ++d) s = fmaf(s, {i + 2}.0f, x[d]);
    y[threadIdx.x] = s;
}}
"""
    for i in range(KERNELS)
)


TEST = "\n".join(
    f"""
@pytest.mark.regbudget(source="units.cu", kernel="k{i}", hot_spills=0)
def test_k{i}():
    pass
"""
    for i in range(KERNELS)
)


def runs(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_a_unit_of_twenty_kernels_runs_nvdisasm_once_per_arch_cold_and_never_warm(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "nvdisasm-runs.txt"
    monkeypatch.setenv("NVDISASM_RUNS", str(log))
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    pytester.makefile(".cu", units=SOURCE)
    pytester.makeconftest(NVDISASM_COUNTER)
    pytester.makepyfile(test_units=f"import pytest\n{TEST}")

    archs = f"--regbudget-arch={','.join(ARCHS)}"
    cold = pytester.runpytest_subprocess("-p", "no:cacheprovider", archs)
    cold.assert_outcomes(passed=KERNELS * len(ARCHS))
    # One listing of the code per arch: the 20 kernels of a cubin are read from it. The life ranges (the
    # peak of live registers) are asked of the first cubin alone: nvdisasm 13 gives none for a CUDA 12
    # cubin (the default toolkit's), and is not asked again for one in this process.
    listed = runs(log)
    assert sum(" -c -gi " in run for run in listed) == len(ARCHS), listed
    assert sum(" -c -plr -lrm count " in run for run in listed) == 1, listed
    assert len(listed) == len(ARCHS) + 1, listed
    assert list((tmp_path / "cache" / "sass").glob("sass-*.json"))

    log.unlink()
    warm = pytester.runpytest_subprocess("-p", "no:cacheprovider", archs)
    warm.assert_outcomes(passed=KERNELS * len(ARCHS))
    assert runs(log) == []
