"""The local-traffic estimate against Nsight Compute, on two sets of kernels: the 17 of
tests/data/local_share/kernels, written for this (ncu_sm90.json, measured on an H100 with ncu 2025.3.1 and
nvcc 13.0, sm_90), and those of tests/data/local_share/third_party, taken from other projects
(ncu_third_party_sm90.json). `benchmarks/local_share_ncu.py` measured each set and kept the very cubins it
profiled, which this test disassembles with the wheel's nvdisasm and estimates (core/estimate.py). The
issue's bar, on each set: every kernel within 10 points of the profiler, every two kernels more than 5 points
apart in the same order, and Spearman's rank correlation at least 0.9."""

from __future__ import annotations

import json
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_regbudget.core.sass import parse_sass_functions
from pytest_regbudget.tools.nvdisasm import find_nvdisasm

ROOT = Path(__file__).parent.parent.parent
DATA = ROOT / "tests" / "data" / "local_share"


@dataclass(frozen=True)
class KernelSet:
    measured: Path  # what benchmarks/local_share_ncu.py wrote
    kernels: Path  # the launch-lined .cu it read
    cubins: Path  # the cubins it profiled, <name>.<arch>.cubin
    # More than 10 points off, named (issue 43); exempt from the order check too.
    known_gaps: frozenset[str] = frozenset()


SETS = {
    "ours": KernelSet(DATA / "ncu_sm90.json", DATA / "kernels", DATA / "cubins"),
    "third_party": KernelSet(
        DATA / "ncu_third_party_sm90.json", DATA / "third_party", DATA / "third_party" / "cubins"
    ),
}


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


def _launch_names(folder: Path) -> set[str]:
    """The variants the .cu files of `folder` launch: each `// launch:` line's name=, else its kernel=."""
    names = set()
    for file in folder.glob("*.cu"):
        for line in file.read_text().splitlines():
            if not line.startswith("// launch:"):
                break
            fields = dict(token.partition("=")[::2] for token in line.split()[2:])
            names.add(fields.get("name", fields["kernel"]))
    return names


def _measured(kernel_set: KernelSet) -> dict[str, Any]:
    if not kernel_set.measured.exists():
        out, kernels, cubins = (
            p.relative_to(ROOT) for p in (kernel_set.measured, kernel_set.kernels, kernel_set.cubins)
        )
        pytest.skip(
            f"{out} is not measured yet: on a GPU machine with nvcc and ncu, run `python "
            f"benchmarks/local_share_ncu.py --kernels {kernels} --out {out} --cubins {cubins}` and check "
            "in the file and the cubins"
        )
    measured: dict[str, Any] = json.loads(kernel_set.measured.read_text())
    return measured


def _estimates(kernel_set: KernelSet, measured: dict[str, Any], names: list[str]) -> dict[str, float]:
    nvdisasm = find_nvdisasm(None)
    if nvdisasm is None:
        pytest.skip("no nvdisasm (the sass extra)")
    out = {}
    for name in names:
        kernel = measured["kernels"][name]["kernel"]
        cubin = kernel_set.cubins / f"{name}.{measured['arch']}.cubin"
        listing = subprocess.run([str(nvdisasm), "-c", "-gi", str(cubin)], capture_output=True, text=True)
        report = parse_sass_functions(listing.stdout)[kernel]
        assert report.unread == (), name
        out[name] = report.local_share
    return out


@pytest.fixture(scope="module", params=sorted(SETS))
def kernel_set(request: pytest.FixtureRequest) -> tuple[KernelSet, dict[str, float], dict[str, float]]:
    """A set, with the profiler's share and the estimate of each of its kernels."""
    chosen = SETS[request.param]
    measured = _measured(chosen)
    errors = {name: k["error"] for name, k in measured["kernels"].items() if k["share"] is None}
    assert not errors, f"{chosen.measured.name}: kernels not measured: {errors}"
    shares = {name: float(k["share"]) for name, k in measured["kernels"].items()}
    return chosen, shares, _estimates(chosen, measured, sorted(shares))


def test_the_estimate_follows_the_profiler(
    kernel_set: tuple[KernelSet, dict[str, float], dict[str, float]],
) -> None:
    chosen, measured, estimates = kernel_set
    assert set(measured) == _launch_names(chosen.kernels)
    assert len(measured) >= 12
    off = {name for name, share in measured.items() if abs(estimates[name] - share) > 0.10}
    assert off == chosen.known_gaps, {n: (measured[n], estimates[n]) for n in off ^ chosen.known_gaps}
    held = sorted(set(measured) - chosen.known_gaps)
    apart = [(a, b) for a in held for b in held if measured[a] - measured[b] > 0.05]
    misordered = [(a, b) for a, b in apart if estimates[a] <= estimates[b]]
    assert misordered == [], {n: (measured[n], estimates[n]) for pair in misordered for n in pair}
    names = sorted(measured)
    rho = statistics.correlation(_ranks([measured[n] for n in names]), _ranks([estimates[n] for n in names]))
    assert rho >= 0.9


def test_poly_eval_squeezed_as_profiled() -> None:
    """The issue's kernel, squeezed: the profiler's 55.0 % and 63.0 %."""
    ours = SETS["ours"]
    measured = _measured(ours)
    names = ["poly_eval_1024", "poly_eval_1024x2"]
    estimates = _estimates(ours, measured, names)
    for name in names:
        assert estimates[name] == pytest.approx(measured["kernels"][name]["share"], abs=0.02)
