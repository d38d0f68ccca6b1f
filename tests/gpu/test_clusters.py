"""On a GPU with clusters (sm_90 and later): the plugin's driver_active_clusters equals
cudaOccupancyMaxActiveClusters asked directly, for a kernel with __cluster_dims__(2, 1, 1) and for one
launched with a cluster it states (cluster=); min_active_clusters is judged on it.

CuPy wraps no cluster API (neither cupy.cuda.driver nor cupy.cuda.runtime has cuOccupancyMaxActiveClusters),
so the plugin calls the driver's through ctypes (gpu/clusters.py). This test asks the other API, the runtime's
cudaOccupancyMaxActiveClusters, through a CUDA runtime library (a runtime wheel's, else CUDA_HOME's), with
the kernel handle cudaLibraryGetKernel gives for the same cubin: another library, another handle and another
launch-config layout than the plugin's.

Run on a GPU machine: `pytest -p no:cacheprovider -m gpu -s tests/gpu/test_clusters.py`; skipped elsewhere.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.data import KERNELS
from helpers.runs import run_json

from pytest_regbudget import CompileOptions, compile_kernel, discover
from pytest_regbudget.gpu.device import Device
from pytest_regbudget.tools.toolkit import nvidia_roots

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu_device")]

BLOCK = 256

TESTS = """
import pytest

@pytest.mark.regbudget(source="blackwell.cu", kernel="clustered", launch=({block},))
def test_compiled():
    pass

@pytest.mark.regbudget(source="blackwell.cu", kernel="unclustered", launch=({block},), cluster=(2, 1, 1))
def test_stated():
    pass

@pytest.mark.regbudget(
    source="blackwell.cu", kernel="clustered", launch=({block},), min_active_clusters=1_000_000
)
def test_floor():
    pass
"""


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _AttrValue(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("align", ctypes.c_uint64), ("clusterDim", _Dim3)]


class _Attr(ctypes.Structure):
    # cudaLaunchAttribute (driver_types.h)
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("val", _AttrValue)]


class _Config(ctypes.Structure):
    # cudaLaunchConfig_t (driver_types.h): dim3s and a size_t, unlike the driver's CUlaunchConfig.
    _fields_ = [
        ("gridDim", _Dim3),
        ("blockDim", _Dim3),
        ("dynamicSmemBytes", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_Attr)),
        ("numAttrs", ctypes.c_uint),
    ]


def _cudart() -> Any:
    """A CUDA runtime library: a CUDA runtime wheel's (12 or 13), else the toolkit's of CUDA_HOME. Any
    release from 12.0 has cudaLibraryLoadData and cudaOccupancyMaxActiveClusters with these layouts."""
    wheels = [
        p
        for root in nvidia_roots()
        for pattern in ("cuda_runtime/lib/libcudart.so.*", "cu13/lib/libcudart.so.*")
        for p in sorted(root.glob(pattern))
    ]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    found = [*wheels, *sorted(Path(home, "lib64").glob("libcudart.so.*"))]
    if not found:
        pytest.skip(f"no libcudart: none in the CUDA runtime wheels, nor in {home}/lib64")
    return ctypes.CDLL(str(found[0]))


def runtime_active_clusters(cubin: bytes, entry: str, cluster: tuple[int, int, int], attribute: bool) -> int:
    """cudaOccupancyMaxActiveClusters for one cluster-sized grid of BLOCK-thread blocks, called directly."""
    rt = _cudart()

    def ok(status: int, what: str) -> None:
        if status != 0:
            rt.cudaGetErrorName.restype = ctypes.c_char_p
            raise AssertionError(f"{what}: {rt.cudaGetErrorName(status).decode()}")

    library, kernel = ctypes.c_void_p(), ctypes.c_void_p()
    ok(
        rt.cudaLibraryLoadData(ctypes.byref(library), cubin, None, None, 0, None, None, 0),
        "cudaLibraryLoadData",
    )
    ok(rt.cudaLibraryGetKernel(ctypes.byref(kernel), library, entry.encode()), "cudaLibraryGetKernel")
    attr = _Attr(id=4)  # cudaLaunchAttributeClusterDimension
    attr.val.clusterDim = _Dim3(*cluster)
    config = _Config(
        _Dim3(*cluster),
        _Dim3(BLOCK, 1, 1),
        0,
        None,
        ctypes.pointer(attr) if attribute else None,
        int(attribute),
    )
    found = ctypes.c_int(-1)
    ok(
        rt.cudaOccupancyMaxActiveClusters(ctypes.byref(found), kernel, ctypes.byref(config)),
        "cudaOccupancyMaxActiveClusters",
    )
    rt.cudaLibraryUnload(library)
    return found.value


def test_driver_active_clusters_equals_cuda_occupancy_max_active_clusters(
    pytester: pytest.Pytester, gpu_device: Device
) -> None:
    if int(gpu_device.arch.removeprefix("sm_").rstrip("af")) < 90:
        pytest.skip(f"{gpu_device.name} is {gpu_device.arch}: thread block clusters start with sm_90")
    shutil.copy(KERNELS / "blackwell.cu", pytester.path / "blackwell.cu")
    pytester.makepyfile(test_k=TESTS.format(block=BLOCK))
    result, records = run_json(pytester, f"--regbudget-arch={gpu_device.arch}")
    print("\n".join(line for line in result.stdout.lines if "2x1x1" in line))
    recs = {r["nodeid"].split("::")[-1].split("[")[0]: r for r in records}
    result.assert_outcomes(passed=2, failed=1)
    toolkit = discover()
    for name, kernel, compiled in (
        ("test_compiled", "clustered", True),
        ("test_stated", "unclustered", False),
    ):
        rec = recs[name]
        cubin = compile_kernel(
            pytester.path / "blackwell.cu", kernel, gpu_device.arch, CompileOptions(), toolkit
        ).cubin
        direct = runtime_active_clusters(cubin, kernel, (2, 1, 1), attribute=not compiled)
        active = rec["driver_active_clusters"]
        print(f"{name}: driver_active_clusters {active}, cudaOccupancyMaxActiveClusters {direct}")
        assert rec["gpu_device"] == gpu_device.name
        assert rec["cluster"] == [2, 1, 1]
        assert rec["driver_active_clusters"] == direct > 0, rec
        if compiled:
            # A kernel with compile-time dims may be asked with its own dims given, with the same answer.
            assert runtime_active_clusters(cubin, kernel, (2, 1, 1), attribute=True) == direct
    floor = recs["test_floor"]
    result.stdout.fnmatch_lines(
        [
            f"*active clusters {floor['driver_active_clusters']} < min_active_clusters 1000000: the driver "
            f"of {gpu_device.name} fits * clusters of 2x1x1 = 2 blocks of {BLOCK} threads*"
        ]
    )
