"""The tools' default time limits, which `pytest --help` shows: here, apart from the records that use them
(tools/options.py), because the plugin's option table loads on every pytest run and must not load the engine.
"""

from __future__ import annotations

DEFAULT_PTXAS_TIMEOUT = 300.0
# nvcc runs the preprocessor, cicc and ptxas over a whole translation unit, host code and all: CUTLASS's
# sm_90 GEMM files take 290 to 325 s on a 2-core runner, so its default is ptxas's several times over.
DEFAULT_NVCC_TIMEOUT = 1800.0
# cuobjdump over 100 MB of a binary (a whole library's pass scales with its size; one cubin is small).
DEFAULT_CUOBJDUMP_TIMEOUT = 300.0
