"""Record the `ptxas -v` reports and cubins in this folder: tests/kernels/callees.cu built for sm_90 by the
plugin's own build path, whole-program with NVRTC and relocatable with nvcc -rdc=true.

    PYTHONPATH=. python tests/data/callees/record_callees.py

Writes <label>.txt (ptxas's report) and <label>.cubin next to this file, for each build below.
"""

from __future__ import annotations

from pathlib import Path

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import discover

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "kernels" / "callees.cu"
RDC = CompileOptions.make(defines={"BOUNDS": ""}, options=["-rdc=true"], ptxas_options=["-maxrregcount=32"])


def main() -> None:
    toolkit = discover()
    nvcc = find_nvcc(None)
    builds = {
        f"nvrtc_{toolkit.ptxas_version}": compile_kernel(SOURCE, "first", "sm_90", CompileOptions(), toolkit),
        f"nvcc_rdc_{nvcc.version}": compile_kernel(SOURCE, "first", "sm_90", RDC, toolkit, nvcc=nvcc),
    }
    for label, built in builds.items():
        (HERE / f"{label}_sm_90.txt").write_text(built.ptxas_log)
        (HERE / f"{label}_sm_90.cubin").write_bytes(built.cubin)
        print(label, len(built.cubin), "bytes of cubin")


if __name__ == "__main__":
    main()
