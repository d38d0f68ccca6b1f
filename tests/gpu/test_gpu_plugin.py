"""The plugin's GPU checks on a real device: driver agreement, driver occupancy, timing, time budgets.

Run on a GPU machine with `pytest -m gpu -s tests/gpu` (`-s` shows the tables); skipped elsewhere.
"""

from __future__ import annotations

import pytest
from helpers.data import KERNELS
from helpers.runs import run_json

from pytest_regbudget.gpu.device import Device

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu_device")]

HUNGRY = KERNELS / "hungry.cu"
TIMING = KERNELS / "timing.cu"

HUNGRY_TEST = """
import numpy as np
import pytest

@pytest.mark.regbudget(source={source!r}, kernel="poly_eval", defines={defines!r}, launch=({launch},){extra})
def test_poly(regbudget):
    dev = regbudget.gpu
    assert dev is not None
    cp = dev.cupy
    n, degree, block = 1 << 20, 32, {block}
    x = cp.random.rand(n, dtype=cp.float32)
    coef = cp.random.rand(degree, dtype=cp.float32)
    y = cp.empty(n, dtype=cp.float32)
    args = (x, coef, y, np.int32(n), np.int32(degree))
    regbudget.benchmark("poly_eval", (n + block - 1) // block, block, args)
"""


def show(result: pytest.RunResult) -> None:
    """Print the plugin's summary table (visible with -s), for the record of a GPU run."""
    lines = result.stdout.lines
    start = next((i for i, line in enumerate(lines) if "- regbudget -" in line), len(lines))
    print("\n".join(lines[start:]))


def hungry_file(block: int, bounds: str = "", extra: str = "", launch: int | None = None) -> str:
    """A test that checks the hungry kernel at launch size `launch` (default `block`) and times it."""
    return HUNGRY_TEST.format(
        source=str(HUNGRY),
        defines={"BOUNDS": bounds} if bounds else {"NACC": 64},
        launch=launch or block,
        block=block,
        extra=extra,
    )


@pytest.mark.parametrize(
    ("bounds", "blocks"),
    [
        ("", [64, 128, 256, 384]),
        ("__launch_bounds__(512)", [128, 256, 512]),
        ("__launch_bounds__(256, 2)", [64, 128, 256]),
    ],
)
def test_driver_occupancy_equals_static_with_time_beside_it(
    pytester: pytest.Pytester, gpu_device: Device, bounds: str, blocks: list[int]
) -> None:
    for block in blocks:
        pytester.makepyfile(**{f"test_b{block}": hungry_file(block, bounds)})
    result, records = run_json(pytester, f"--regbudget-arch={gpu_device.arch}")
    show(result)
    result.assert_outcomes(passed=len(blocks))
    assert len(records) == len(blocks)
    for rec in records:
        assert rec["gpu_device"] == gpu_device.name
        assert rec["driver_registers"] == rec["registers"]
        assert rec["driver_local_bytes"] == rec["stack_frame"]
        assert rec["driver_blocks"] == rec["active_blocks"], rec
        assert rec["driver_occupancy"] == pytest.approx(rec["occupancy"])
        assert rec["model_defects"] == []
        assert rec["time_ms"] > 0
        assert rec["samples"] >= 10


def test_launch_that_the_driver_refuses_explains_the_arithmetic(
    pytester: pytest.Pytester, gpu_device: Device
) -> None:
    pytester.makepyfile(test_k=hungry_file(512, launch=128))
    result, _ = run_json(pytester, f"--regbudget-arch={gpu_device.arch}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "poly_eval [[]sm_*[]]: launching block=(512,) failed (*): 1?? registers -> * per warp"
            " (units of 256) x 16 warps = * > 65,536 registers per block on sm_*",
        ]
    )


def test_min_occupancy_is_judged_on_the_driver(pytester: pytest.Pytester, gpu_device: Device) -> None:
    pytester.makepyfile(test_k=hungry_file(128, extra=", min_occupancy=0.5"))
    result, (rec,) = run_json(pytester, f"--regbudget-arch={gpu_device.arch}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*occupancy *% at 128 threads < min_occupancy 50.0%"
            f" (as the driver of {gpu_device.name} grants it)*"
        ]
    )
    assert rec["driver_occupancy"] < 0.5


def test_device_arch_is_compiled_when_not_targeted(pytester: pytest.Pytester, gpu_device: Device) -> None:
    other = "sm_80" if gpu_device.arch != "sm_80" else "sm_90"
    pytester.makepyfile(test_k=hungry_file(128))
    result, records = run_json(pytester, f"--regbudget-arch={other}")
    result.assert_outcomes(passed=1)
    by_arch = {r["arch"]: r for r in records}
    assert set(by_arch) == {other, gpu_device.arch}
    assert by_arch[gpu_device.arch]["gpu_device"] == gpu_device.name
    assert by_arch[gpu_device.arch]["time_ms"] > 0
    assert by_arch[other]["gpu_device"] is None


TIMED_TEST = """
import numpy as np
import pytest

@pytest.mark.regbudget(source="timing.cu", kernel="spin", launch=(256,), max_time_ratio=1.05)
def test_spin(regbudget):
    cp = regbudget.gpu.cupy
    n = 132 * 2048 * 4
    out = cp.empty(n, dtype=cp.float32)
    regbudget.benchmark("spin", (n + 255) // 256, 256, (out, np.int32(n)))
"""


def test_time_ceiling_has_no_false_alarms_and_catches_a_10_percent_slowdown(
    pytester: pytest.Pytester, gpu_device: Device
) -> None:
    arch = f"--regbudget-arch={gpu_device.arch}"

    # The work per thread is written into the kernel's source: a code change, which keeps the kernel's
    # baseline entry (a define would make it a variant of its own, with no time baseline).
    def spin(iters: int) -> None:
        text = TIMING.read_text().replace("#define ITERS 4000", f"#define ITERS {iters}")
        (pytester.path / "timing.cu").write_text(text)

    pytester.makepyfile(test_k=TIMED_TEST)
    spin(4000)
    result, (first,) = run_json(pytester, arch, "--regbudget-update")
    result.assert_outcomes(passed=1)
    baseline = (pytester.path / "regbudget-baseline.toml").read_text()
    assert f'.gpu."{gpu_device.name}"]' in baseline
    ratios: dict[str, list[float]] = {"same": [], "slower": []}
    outcomes: dict[str, list[str]] = {"same": [], "slower": []}
    for label, iters in (("same", 4000), ("slower", 4400)):
        spin(iters)
        for _ in range(10):
            result, (rec,) = run_json(pytester, arch)
            ratios[label].append(rec["time_ratio"])
            outcomes[label].append(rec["outcome"])
            if label == "slower":
                assert any("max_time_ratio 1.05" in v for v in rec["violations"]), rec["violations"]
    print(
        f"\nbaseline median {first['time_ms']:.4f} ms, noise {first['noise']:.2%}, {first['samples']} samples"
    )
    for label in ratios:
        print(
            f"{label:7s} ratios: "
            + " ".join(f"{r:.3f}" for r in ratios[label])
            + f"  outcomes: {outcomes[label]}"
        )
    assert outcomes["same"] == ["passed"] * 10
    assert outcomes["slower"] == ["failed"] * 10
