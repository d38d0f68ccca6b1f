"""Record the golden `ptxas -v` outputs in this folder from one CUDA toolkit.

Compiles kernels.cu to PTX with the toolkit's NVRTC (through ctypes, so no CUDA Python package is
needed), then runs that same toolkit's ptxas on the PTX for each arch: plain, with -maxrregcount=32,
and with -c (relocatable). NVRTC and ptxas must come from one toolkit: a newer NVRTC emits a PTX ISA
version that an older ptxas rejects, and mixing them would record numbers no user ever sees.

    python record.py --nvrtc .../libnvrtc.so.12 --ptxas .../bin/ptxas [--label 12.9] [--arch sm_90 ...]

Writes <label>_<arch>.txt, <label>_<arch>_cap32.txt, <label>_<arch>_rdc.txt, <label>_<arch>.ptx,
<label>_version.txt and <label>_lowered.txt (name expression -> lowered name) next to this file, or
under --out.
"""

from __future__ import annotations

import argparse
import ctypes
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "kernels.cu"
DEFAULT_ARCHS = ("sm_75", "sm_80", "sm_90", "sm_100", "sm_120")
# Template instantiations only exist if named; the lowered names are what ptxas will print.
NAME_EXPRESSIONS = ("scale<float, 4>", "scale<double, 2>")
NVRTC_OPTIONS = ("--std=c++17",)
CAP_OPTIONS = ("-maxrregcount=32",)
# Relocatable device code changes where ptxas prints non-entry functions' properties (first, not
# after their caller), which the parser must handle as well.
RDC_OPTIONS = ("-c",)
# Keeps the checked-in data small; past this only the directive lines of the PTX are kept.
MAX_PTX_BYTES = 100_000
_DIRECTIVE = re.compile(
    r"^\s*(\.version|\.target|\.address_size|(\.visible\s+|\.weak\s+)?\.(entry|func)\b|"
    r"\.maxntid|\.reqntid|\.minnctapersm|\.maxnreg|\.maxclusterrank|\.reqnctapercluster)"
)

NVRTC_SUCCESS = 0
NVRTC_ERROR_INVALID_OPTION = 5


class NvrtcError(RuntimeError):
    def __init__(self, message: str, result: int) -> None:
        super().__init__(message)
        self.result = result


class Nvrtc:
    """The handful of NVRTC entry points the recording needs, loaded from one shared library."""

    def __init__(self, path: str) -> None:
        # NVRTC dlopens its builtins library by soname; the 13.x wheel's libnvrtc has no RPATH to
        # find it, so load the one beside it first (a loaded soname satisfies the later dlopen).
        for builtins in sorted(Path(path).parent.glob("libnvrtc-builtins.so.*")):
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        self._lib = ctypes.CDLL(path)
        self._lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def version(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self._lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return f"{major.value}.{minor.value}"

    def _check(self, result: int, what: str) -> None:
        if result != NVRTC_SUCCESS:
            message = self._lib.nvrtcGetErrorString(result)
            text = message.decode() if isinstance(message, bytes) else str(result)
            raise NvrtcError(f"{what} failed: {text} ({result})", result)

    def compile(
        self, source: str, options: Sequence[str], name_expressions: Sequence[str]
    ) -> tuple[str, str, dict[str, str]]:
        """Return (ptx, log, {name expression: lowered name}); NvrtcError carries the log."""
        prog = ctypes.c_void_p()
        self._check(
            self._lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernels.cu", 0, None, None),
            "nvrtcCreateProgram",
        )
        try:
            for expr in name_expressions:
                self._check(self._lib.nvrtcAddNameExpression(prog, expr.encode()), "nvrtcAddNameExpression")
            c_options = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            result = self._lib.nvrtcCompileProgram(prog, len(options), c_options)
            log = self._log(prog)
            if result != NVRTC_SUCCESS:
                raise NvrtcError(
                    f"nvrtcCompileProgram failed ({result}) with {list(options)}:\n{log}", result
                )
            lowered: dict[str, str] = {}
            for expr in name_expressions:
                name = ctypes.c_char_p()
                self._check(
                    self._lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(name)),
                    "nvrtcGetLoweredName",
                )
                lowered[expr] = (name.value or b"").decode()
            size = ctypes.c_size_t()
            self._check(self._lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
            buf = ctypes.create_string_buffer(size.value)
            self._check(self._lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
            return buf.value.decode(), log, lowered
        finally:
            self._lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _log(self, prog: ctypes.c_void_p) -> str:
        size = ctypes.c_size_t()
        self._check(self._lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
        buf = ctypes.create_string_buffer(size.value)
        self._check(self._lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        return buf.value.decode(errors="replace")


def run_ptxas(ptxas: str, ptx: str, arch: str, extra: Sequence[str]) -> str:
    # A fixed relative file name in a scratch cwd keeps temp paths out of any warning ptxas prints.
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "kernels.ptx").write_text(ptx)
        proc = subprocess.run(
            [ptxas, "-v", f"-arch={arch}", *extra, "kernels.ptx", "-o", "/dev/null"],
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"ptxas failed for {arch} {list(extra)}:\n{proc.stdout}")
    return proc.stdout


def ptxas_version(ptxas: str) -> str:
    return subprocess.run([ptxas, "--version"], capture_output=True, text=True, check=True).stdout


def strip_ptx(ptx: str) -> str:
    return "".join(line for line in ptx.splitlines(keepends=True) if _DIRECTIVE.match(line))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nvrtc", required=True, help="path to libnvrtc.so.N of the toolkit")
    parser.add_argument("--ptxas", required=True, help="path to the same toolkit's ptxas")
    parser.add_argument("--label", help="file name prefix, e.g. 12.9 (default: ptxas's release)")
    parser.add_argument("--arch", action="append", help=f"repeatable (default: {', '.join(DEFAULT_ARCHS)})")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)

    version_text = ptxas_version(args.ptxas)
    release = re.search(r"release (\d+\.\d+)", version_text)
    label: str = args.label or (release.group(1) if release else "unknown")
    nvrtc = Nvrtc(args.nvrtc)
    if release and nvrtc.version() != release.group(1):
        print(
            f"NVRTC {nvrtc.version()} and ptxas {release.group(1)} are from different toolkits",
            file=sys.stderr,
        )
        return 2
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{label}_version.txt").write_text(version_text)
    source = SOURCE.read_text()

    lowered_all: dict[str, str] = {}
    for arch in args.arch or DEFAULT_ARCHS:
        virtual = arch.replace("sm_", "compute_")
        try:
            ptx, log, lowered = nvrtc.compile(
                source, [f"--gpu-architecture={virtual}", *NVRTC_OPTIONS], NAME_EXPRESSIONS
            )
        except NvrtcError as exc:
            if exc.result != NVRTC_ERROR_INVALID_OPTION:
                raise
            # Older toolkits do not know the newest archs; that is expected, not a failure.
            print(f"{label}: skipping {arch}: {' '.join(str(exc).split())}", file=sys.stderr)
            continue
        if log.strip():
            print(f"{label} {arch} NVRTC log:\n{log}", file=sys.stderr)
        lowered_all.update(lowered)
        (out / f"{label}_{arch}.ptx").write_text(strip_ptx(ptx) if len(ptx.encode()) > MAX_PTX_BYTES else ptx)
        (out / f"{label}_{arch}.txt").write_text(run_ptxas(args.ptxas, ptx, arch, ()))
        (out / f"{label}_{arch}_cap32.txt").write_text(run_ptxas(args.ptxas, ptx, arch, CAP_OPTIONS))
        (out / f"{label}_{arch}_rdc.txt").write_text(run_ptxas(args.ptxas, ptx, arch, RDC_OPTIONS))
        print(f"{label}: recorded {arch}", file=sys.stderr)
    (out / f"{label}_lowered.txt").write_text("".join(f"{e}\t{n}\n" for e, n in lowered_all.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
