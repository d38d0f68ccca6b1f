"""The local-traffic estimate against Nsight Compute: tests/data/local_share/ncu_sm90.json holds what
`benchmarks/local_share_ncu.py` measured on an H100 (ncu 2025.3.1, nvcc 13.0, sm_90) for 17 kernels of the
shapes that matter, and cubins/ the very binaries it profiled, which this test disassembles with the wheel's
nvdisasm and estimates (core/estimate.py)."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest

from pytest_regbudget.core.sass import parse_sass_functions
from pytest_regbudget.tools.nvdisasm import find_nvdisasm

DATA = Path(__file__).parent.parent / "data" / "local_share"
MEASURED = json.loads((DATA / "ncu_sm90.json").read_text())


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


@pytest.fixture(scope="module")
def estimates() -> dict[str, float]:
    nvdisasm = find_nvdisasm(None)
    if nvdisasm is None:
        pytest.skip("no nvdisasm (the sass extra)")
    out = {}
    for name, kernel in MEASURED["kernels"].items():
        cubin = DATA / "cubins" / f"{name}.sm_90.cubin"
        listing = subprocess.run([str(nvdisasm), "-c", "-gi", str(cubin)], capture_output=True, text=True)
        report = parse_sass_functions(listing.stdout)[kernel["kernel"]]
        assert report.unread == (), name
        out[name] = report.local_share
    return out


def test_the_estimate_follows_the_profiler(estimates: dict[str, float]) -> None:
    measured = {name: k["share"] for name, k in MEASURED["kernels"].items()}
    assert len(measured) >= 12
    assert all(share is not None for share in measured.values())
    gaps = {name: estimates[name] - share for name, share in measured.items()}
    assert {name: gap for name, gap in gaps.items() if abs(gap) > 0.10} == {}
    names = sorted(measured)
    # Two kernels the profiler tells apart by more than 5 points are in the same order in the estimate.
    misordered = [
        (a, b)
        for a in names
        for b in names
        if measured[a] > measured[b] + 0.05 and not estimates[a] > estimates[b]
    ]
    assert misordered == []
    rho = statistics.correlation(_ranks([measured[n] for n in names]), _ranks([estimates[n] for n in names]))
    assert rho >= 0.9
    # The kernel, squeezed: the profiler's 55.0 % and 63.0 %.
    assert estimates["poly_eval_1024"] == pytest.approx(measured["poly_eval_1024"], abs=0.02)
    assert estimates["poly_eval_1024x2"] == pytest.approx(measured["poly_eval_1024x2"], abs=0.02)
