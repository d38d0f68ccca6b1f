"""cuOccupancyMaxActiveClusters through ctypes: CuPy wraps no cluster API, so the call goes to the driver
library CuPy loaded. Apart from device.py so that only a GPU run that asks about a cluster kernel imports
ctypes (about 2 ms of every run otherwise, `benchmarks/import_speed.py`).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from ..core.errors import LaunchError

# cuda.h: CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION.
_CLUSTER_DIMENSION = 4


class _ClusterDim(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _LaunchAttributeValue(ctypes.Union):
    # CUlaunchAttributeValue: a 64-byte union (its access policy window holds a pointer, hence the 8-byte
    # alignment the c_uint64 member gives it).
    _fields_ = [("pad", ctypes.c_char * 64), ("align", ctypes.c_uint64), ("clusterDim", _ClusterDim)]


class _LaunchAttribute(ctypes.Structure):
    # CUlaunchAttribute: the id, padded to 8 bytes, then the value.
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _LaunchAttributeValue)]


class _LaunchConfig(ctypes.Structure):
    # CUlaunchConfig (cuda.h, CUDA 11.8 and later).
    _fields_ = [
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_LaunchAttribute)),
        ("numAttrs", ctypes.c_uint),
    ]


def _driver_library() -> Any:
    """The CUDA driver library, which CuPy has loaded already (opening it again returns the same one)."""
    # x64 Windows has one calling convention, so CDLL serves for nvcuda.dll too.
    return ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")


def max_active_clusters(
    function: int, block: int, dynamic_smem: int, cluster: tuple[int, int, int], compiled: bool
) -> int:
    """Clusters of `cluster` blocks of `block` threads of the CUfunction `function` that fit at once. A kernel
    compiled with __cluster_dims__ (`compiled`) is asked without a cluster attribute, as the driver requires.
    Raises LaunchError with the driver's error name."""
    attr = _LaunchAttribute(id=_CLUSTER_DIMENSION)
    attr.value.clusterDim = _ClusterDim(*cluster)
    config = _LaunchConfig(
        *cluster,
        block,
        1,
        1,
        dynamic_smem,
        None,
        None if compiled else ctypes.pointer(attr),
        0 if compiled else 1,
    )
    lib = _driver_library()
    found = ctypes.c_int(-1)
    status = lib.cuOccupancyMaxActiveClusters(
        ctypes.byref(found), ctypes.c_void_p(function), ctypes.byref(config)
    )
    if status != 0:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(status, ctypes.byref(name))
        shown = name.value.decode() if name.value else f"CUresult {status}"
        raise LaunchError(f"cuOccupancyMaxActiveClusters failed: {shown}")
    return found.value
