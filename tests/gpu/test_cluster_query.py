"""How gpu/device.py asks the driver for clusters (through gpu/clusters.py), without a GPU: the CUlaunchConfig
it packs for cuOccupancyMaxActiveClusters, read back from a stand-in for the driver library. The driver's own
answer is compared with the runtime's in tests/gpu/test_clusters.py, on a GPU.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_regbudget.core.errors import LaunchError
from pytest_regbudget.gpu import clusters
from pytest_regbudget.gpu.device import Device

FUNCTION = 0xF00D


class Driver:
    """Records each cuOccupancyMaxActiveClusters call's function and config; answers `answer`."""

    def __init__(self, answer: int = 66, status: int = 0) -> None:
        self.answer, self.status = answer, status
        self.calls: list[tuple[int, dict[str, Any]]] = []

    def cuOccupancyMaxActiveClusters(self, found: Any, func: ctypes.c_void_p, config: Any) -> int:
        c = config._obj
        attrs = [c.attrs[i] for i in range(c.numAttrs)]
        self.calls.append(
            (
                func.value or 0,
                {
                    "grid": (c.gridDimX, c.gridDimY, c.gridDimZ),
                    "block": (c.blockDimX, c.blockDimY, c.blockDimZ),
                    "smem": c.sharedMemBytes,
                    "attrs": [
                        (a.id, (a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z))
                        for a in attrs
                    ],
                    "null_attrs": not c.attrs,
                },
            )
        )
        found._obj.value = self.answer
        return self.status

    def cuGetErrorName(self, status: int, name: Any) -> int:
        name._obj.value = b"CUDA_ERROR_INVALID_CLUSTER_SIZE"
        return 0


@pytest.fixture
def dev() -> tuple[Device, Driver, list[tuple[int, int, int]]]:
    made = Device.__new__(Device)  # no CuPy, no GPU: only what active_clusters uses
    set_attribute: list[tuple[int, int, int]] = []
    made.cupy = SimpleNamespace(
        cuda=SimpleNamespace(driver=SimpleNamespace(funcSetAttribute=lambda *a: set_attribute.append(a)))
    )
    return made, Driver(), set_attribute


def kernel() -> Any:
    return SimpleNamespace(kernel=SimpleNamespace(ptr=FUNCTION), max_dynamic_shared_size_bytes=0)


def test_a_compiled_cluster_is_asked_without_an_attribute(
    dev: tuple[Device, Driver, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    made, driver, _ = dev
    monkeypatch.setattr(clusters, "_driver_library", lambda: driver)
    assert made.active_clusters(kernel(), 256, 1024, (2, 1, 1), compiled=True) == 66
    ((func, config),) = driver.calls
    assert func == FUNCTION
    assert config == {"grid": (2, 1, 1), "block": (256, 1, 1), "smem": 1024, "attrs": [], "null_attrs": True}


def test_a_stated_cluster_is_the_cluster_dimension_attribute(
    dev: tuple[Device, Driver, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    made, driver, set_attribute = dev
    monkeypatch.setattr(clusters, "_driver_library", lambda: driver)
    made.active_clusters(kernel(), 128, 0, (4, 2, 1), compiled=False)
    ((_, config),) = driver.calls
    assert (config["grid"], config["attrs"]) == (
        (4, 2, 1),
        [(4, (4, 2, 1))],
    )  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert set_attribute == []
    # Over the portable 8 blocks the kernel is allowed a non-portable cluster first, as its launch must be.
    made.active_clusters(kernel(), 128, 0, (16, 1, 1), compiled=False)
    assert set_attribute == [(FUNCTION, 14, 1)]  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED


def test_a_refusal_names_the_drivers_error(
    dev: tuple[Device, Driver, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    made, _, _ = dev
    monkeypatch.setattr(clusters, "_driver_library", lambda: Driver(status=912))
    with pytest.raises(
        LaunchError, match="cuOccupancyMaxActiveClusters failed: CUDA_ERROR_INVALID_CLUSTER_SIZE"
    ):
        made.active_clusters(kernel(), 128, 0, (32, 1, 1), compiled=False)


def test_the_struct_layouts_are_cuda_hs() -> None:
    # cuda.h (12.9 and 13.x): sizeof(CUlaunchAttribute) 72, its value at 8; sizeof(CUlaunchConfig) 56, hStream
    # at 32, attrs at 40, numAttrs at 48 (checked with gcc against the wheel's cuda.h).
    assert (ctypes.sizeof(clusters._LaunchAttribute), clusters._LaunchAttribute.value.offset) == (72, 8)
    assert ctypes.alignment(clusters._LaunchAttribute) == 8
    layout = clusters._LaunchConfig
    assert (ctypes.sizeof(layout), layout.hStream.offset, layout.attrs.offset, layout.numAttrs.offset) == (
        56,
        32,
        40,
        48,
    )
