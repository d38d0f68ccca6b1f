"""Running nvdisasm over a measured cubin: finding it, and turning its listing into a `SassReport`.

The parsing is sass.py's (pure); this module is the part that needs a toolkit and a subprocess.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from ..core.errors import SassError
from ..core.sass import SassReport, parse_sass
from .running import run_tool, start_failure
from .toolkit import Toolkit, find_tool

SASS_FIX = "pip install 'pytest-regbudget[sass]' (the nvidia-cuda-nvdisasm wheel)"


def find_nvdisasm(toolkit: Toolkit | None) -> Path | None:
    """The toolkit's own nvdisasm, else the CUDA 13 wheel's (the `sass` extra), else PATH's."""
    if toolkit is not None and toolkit.nvdisasm is not None:
        return toolkit.nvdisasm
    return find_tool("nvdisasm", None, "cuda_nvdisasm")


def disassemble(
    nvdisasm: Path, cubin: bytes, function: str, timeout: float = 120.0, *, spills: bool = True
) -> SassReport:
    """`nvdisasm -c -gi` (code only, with line info and inlining) over `cubin`, parsed for `function`;
    `spills`: whether ptxas counted spill bytes (see parse_sass)."""
    with tempfile.TemporaryDirectory(prefix="regbudget-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            # -gi: line info with each inlined helper's call site, so loops are named by the kernel's lines.
            returncode, output = run_tool([str(nvdisasm), "-c", "-gi", str(path)], timeout)
        except subprocess.TimeoutExpired:
            raise SassError(f"nvdisasm did not finish within {timeout:g} s") from None
        except OSError as exc:
            raise SassError(f"cannot run nvdisasm: {start_failure(exc, nvdisasm)}") from None
    if returncode != 0:
        raise SassError(f"nvdisasm ({nvdisasm}) failed (exit {returncode}): {output.strip()}")
    return parse_sass(output, function, spills=spills)
