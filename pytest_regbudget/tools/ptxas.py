"""The assembler: `ptxas -v` over a PTX module for one arch, and the one way this package runs a tool with a
timeout and a readable failure (`run_compiler`). ptxas's report is parsed in core/ptxas.py.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..core.defaults import DEFAULT_PTXAS_TIMEOUT
from ..core.errors import CompileError, Rejected, ToolTimeout
from ..util.patterns import lazy
from .options import Timeouts
from .running import run_tool, start_failure
from .targets import TOOLKIT_OPTION, Targets, with_variants
from .toolkit import Toolkit


def run_ptxas(
    ptx: str,
    arch: str,
    ptxas_options: Sequence[str],
    toolkit: Toolkit,
    timeout: float = DEFAULT_PTXAS_TIMEOUT,
    label: str = "",
) -> tuple[str, bytes]:
    """`ptxas -v -arch=sm_XX`: (its report, the cubin). Raises CompileError with ptxas's output."""
    with tempfile.TemporaryDirectory(prefix="regbudget-") as tmp:
        ptx_path, cubin_path = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        ptx_path.write_text(ptx, encoding="utf-8")
        cmd = [
            str(toolkit.ptxas),
            "-v",
            f"-arch={arch}",
            *ptxas_options,
            str(ptx_path),
            "-o",
            str(cubin_path),
        ]
        returncode, output = run_compiler(cmd, timeout, f"ptxas {toolkit.ptxas_version} on {label or arch}")
        if returncode != 0:
            hint = ""
            if re.search(r"not defined for option 'gpu-name'|Unsupported .target|is not a supported", output):
                hint = "\n" + _arch_hint(arch, toolkit)
            what = f"ptxas {toolkit.ptxas_version} failed on {label or 'the kernel'}"
            failed = f"{what} for {arch} (exit {returncode})"
            quoted = _quoted_file_names(ptx)
            if quoted:
                # Said on the failure's first line: ptxas's own "Parsing error near 'b'" names no file.
                failed += (
                    f": the file name {quoted[0]!r} holds a '\"', which ptxas cannot read in the PTX's line "
                    "information (.file). Fix: rename the file. ptxas said"
                )
            raise Rejected(f"{failed}:\n{output.strip()}{hint}", output)
        cubin = cubin_path.read_bytes() if cubin_path.is_file() else b""
        if not cubin:
            raise CompileError(
                f"ptxas {toolkit.ptxas_version} ({toolkit.ptxas}) exited 0 but wrote no cubin for "
                f"{label or 'the kernel'} for {arch}; this ptxas is broken. Fix: reinstall the toolkit, or "
                f"point --regbudget-cuda-home at another one. Its output:\n{output.strip() or '(none)'}",
                output,
            )
        return output, cubin


# A .file directive of the PTX's line information: NVRTC writes a `"` in a file name as `\\"`, which ptxas
# does not read as an escape (ptxas 12.9, 13.x: "Parsing error near ...").
_FILE_DIRECTIVE = lazy(r'^\s*\.file\s+\d+\s+"(.*)"', re.MULTILINE)


def _quoted_file_names(ptx: str) -> list[str]:
    """The file names of the PTX's .file directives that hold a `"`."""
    return [m[1].replace('\\"', '"') for m in _FILE_DIRECTIVE.finditer(ptx) if '"' in m[1]]


def _arch_hint(arch: str, toolkit: Toolkit) -> str:
    """Why ptxas refused the arch or the PTX's .target: the toolkit's list decides which (one release's NVRTC
    and ptxas build the same archs). Where its list holds the arch, the PTX came from a newer front end."""
    ptxas = Targets(
        f"ptxas {toolkit.ptxas_version} ({toolkit.ptxas})",
        toolkit.release,
        with_variants(toolkit.archs),
        TOOLKIT_OPTION,
    )
    refusal = ptxas.refusal(arch)
    if refusal is not None:
        return refusal
    return (
        f"ptxas {toolkit.ptxas_version} does not take this PTX for {arch}: a front end of a later CUDA "
        f"release wrote it, or {arch} is not one ptxas {toolkit.ptxas_version} builds (`ptxas --help` lists "
        "them under --gpu-name). Fix: build the PTX with the toolkit's own release"
    )


def run_compiler(
    cmd: Sequence[str], timeout: float, what: str, setting: str = Timeouts.INI["ptxas"]
) -> tuple[int, str]:
    """(exit code, stdout + stderr) of a compiler run that must finish within `timeout` seconds; on a
    timeout the compiler and every process it started are killed. `setting` is the ini key that raises it."""
    try:
        return run_tool(cmd, timeout)
    except subprocess.TimeoutExpired:
        raise ToolTimeout(
            f"{what} did not finish within {timeout:g} s (killed with its child processes). Fix: raise "
            f"the limit in your ini file, e.g. {setting} = {timeout * 2:g} (pytest.ini, or "
            "[tool.pytest.ini_options] in pyproject.toml), or simplify the kernel"
        ) from None
    except OSError as exc:
        raise CompileError(f"{what}: cannot run {cmd[0]}: {start_failure(exc, cmd[0])}") from None
