"""On a real GPU: the driver agrees with our compile-only numbers (skipped where there is no GPU).

These run on the GPU machine, not in CPU-only CI; a skip here is not a pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.data import KERNELS

from pytest_regbudget import CompileOptions, compile_kernel, discover, get_arch, occupancy

pytestmark = pytest.mark.gpu

BOUNDS = ["", "__launch_bounds__(1024)", "__launch_bounds__(512)", "__launch_bounds__(256, 4)"]


@pytest.fixture(scope="module")
def cupy() -> Any:
    cp = pytest.importorskip("cupy")
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy raises its own CUDARuntimeError without a driver
        pytest.skip(f"no CUDA device: {exc}")
    if count == 0:
        pytest.skip("no CUDA device")
    return cp


@pytest.fixture(scope="module")
def device_arch(cupy: Any) -> str:
    major, minor = cupy.cuda.Device(0).compute_capability
    return f"sm_{major}{minor}"


def test_device_limits_match_arch_table(cupy: Any, device_arch: str) -> None:
    props = cupy.cuda.runtime.getDeviceProperties(0)
    lim = get_arch(device_arch)
    expected = {
        "maxThreadsPerBlock": lim.max_threads_per_block,
        "maxThreadsPerMultiProcessor": lim.max_threads_per_sm,
        "regsPerBlock": lim.max_regs_per_block,
        "regsPerMultiprocessor": lim.regs_per_sm,
        "sharedMemPerMultiprocessor": lim.smem_per_sm,
        "sharedMemPerBlockOptin": lim.smem_per_block_optin,
        "reservedSharedMemPerBlock": lim.reserved_smem_per_block,
        "maxBlocksPerMultiProcessor": lim.max_blocks_per_sm,
        "warpSize": lim.warp_size,
    }
    seen = {k: props[k] for k in expected if k in props}
    assert len(seen) >= 6, f"CuPy exposes too few properties: {sorted(props)}"
    assert seen == {k: expected[k] for k in seen}


def _load(cupy: Any, cubin: bytes, entry: str, tmp_path: Path) -> Any:
    path = tmp_path / f"{abs(hash(cubin))}.cubin"
    path.write_bytes(cubin)
    return cupy.RawModule(path=str(path)).get_function(entry)


@pytest.mark.parametrize("bounds", BOUNDS)
def test_driver_reads_ptxas_numbers_and_agrees_on_occupancy(
    cupy: Any, device_arch: str, tmp_path: Path, bounds: str
) -> None:
    opts = CompileOptions.make(defines={"BOUNDS": bounds} if bounds else None)
    k = compile_kernel(KERNELS / "hungry.cu", "poly_eval", device_arch, opts, discover())
    fn = _load(cupy, k.cubin, k.entry, tmp_path)
    attrs = fn.attributes
    assert attrs["num_regs"] == k.resources.registers
    assert attrs["local_size_bytes"] == k.resources.stack_frame
    assert attrs["shared_size_bytes"] == k.resources.shared_mem
    driver_max = attrs["max_threads_per_block"]
    occ_fn = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor
    mismatches = []
    for block in range(32, driver_max + 1, 32):
        for dyn in (0, 16 * 1024, 64 * 1024, 160 * 1024):
            if dyn > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = dyn
            ours = occupancy(
                device_arch,
                k.resources.registers,
                block,
                k.resources.shared_mem,
                dyn,
                k.resources.max_threads,
                barriers=k.resources.barriers,
            ).active_blocks
            theirs = occ_fn(fn.kernel.ptr, block, dyn)
            if ours != theirs:
                mismatches.append((block, dyn, ours, theirs))
    assert mismatches == []
