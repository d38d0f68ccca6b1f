"""Measure, with Nsight Compute, the local-memory share of a set of CUDA kernels: the ground truth for a
static estimate of how much of a kernel's run goes to spills and local arrays.

The figure is the share of executed warp instructions that are local loads or stores:

    share = (smsp__inst_executed_op_local_ld.sum + smsp__inst_executed_op_local_st.sum)
            / smsp__inst_executed.sum

ptxas's spill bytes say how much spill code a kernel has, not how often it runs: a spill on an error path
costs nothing, one in a hot loop costs on every trip. The kernels in tests/data/local_share/kernels cover
those shapes (straight-line spills, spills in constant, nested and argument-bound loops, on a path never
taken, in a __noinline__ callee, local arrays indexed at run time, and kernels with no local memory). Each
is built for --arch with nvcc, launched once under `ncu`, and the measured counts are written, with ptxas's
registers and spill bytes, to a JSON file that is checked in; each profiled cubin is copied to
tests/data/local_share/cubins/<name>.<arch>.cubin so that a CPU test reads the very binary that was measured.
A second set, kernels taken from other projects (tests/data/local_share/third_party, each file naming its
origin), is run the same way into its own file and cubin folder.

    python benchmarks/local_share_ncu.py              # all -> tests/data/local_share/ncu_sm90.json
    python benchmarks/local_share_ncu.py --only poly_eval_1024x2 --out /tmp/one.json
    python benchmarks/local_share_ncu.py --dry-run    # no GPU: parse, compile, print registers/spills
    python benchmarks/local_share_ncu.py --kernels tests/data/local_share/third_party \
        --out tests/data/local_share/ncu_third_party_sm90.json \
        --cubins tests/data/local_share/third_party/cubins
    python benchmarks/local_share_ncu.py --kernels tests/data/local_share/third_party \
        --dry-run --cubins /tmp/c     # no GPU; keeps the cubins and prints the estimate of each

Needs, for a measurement: an NVIDIA GPU of --arch, nvcc (PATH or /usr/local/cuda/bin), ncu (PATH or
/usr/local/cuda/bin), CuPy (cupy-cuda13x) and numpy. --dry-run needs only nvcc (it also tries the nvcc of the
`nvidia-cuda-nvcc` / `nvidia/cu13` wheels) and, where a libnvrtc is found, checks that NVRTC compiles each
kernel too; with --cubins it keeps the cubins it built there (never by default: the default folder holds the
measured ones) and, where this package and nvdisasm are importable, prints the static estimate of each.

Launch lines. Each .cu file starts with one or more lines (before any other line) of the form

    // launch: [name=NAME] kernel=SYMBOL grid=G block=B args=SPEC[,SPEC...] [define=MACRO[=VALUE]]...
    //         [maxrregcount=N]

whitespace-separated `key=value` tokens (a value holds no whitespace; split at the first `=`):
  name    the variant's name (the JSON key, the cubin's file name); default: the kernel's symbol. Must be
          unique over the whole directory; a file with several launch lines gives each its own name.
  kernel  the `extern "C" __global__` function's symbol.
  grid    blocks, `X` or `XxY` or `XxYxZ`;  block: threads per block, the same form.
  args    the kernel's parameters, in order, comma-separated:
            in:f32:N   a float buffer of N elements, filled with 1.0
            in:i32:N   an int buffer of N elements, filled with 1
            in:f32:N:rand  a float buffer of N elements, uniform in [0, 1): numpy's
                       default_rng(P).random(N, dtype=float32), P the parameter's position (0 first), so the
                       same numbers on every run (a kernel whose path depends on its data, e.g. a convex hull)
            out:f32:N  a float buffer of N elements, zeroed   (out:i32:N the same for int)
            i32:V      an int scalar V                        (f32:V a float scalar V)
  define  a macro, repeatable: `define=BOUNDS=__launch_bounds__(1024,2)` is `#define BOUNDS
          __launch_bounds__(1024,2)`. Defines go to nvcc in a pre-included header (-include), not as -D:
          nvcc splits -D values at commas.
  maxrregcount  a register cap for the whole file, passed as nvcc -maxrregcount=N (and to the NVRTC check):
          a kernel taken as its project builds it, squeezed without touching its source.
Other lines starting with `//` may follow the launch lines (a description); the first non-launch line ends
the launch block.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import ctypes.util
import datetime
import io
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "local_share"

# The hardware counters first; the SASS-patched twins (counted by instrumenting the kernel) where the
# first set is not offered by this ncu/GPU.
METRIC_SETS: tuple[tuple[str, str, str], ...] = (
    ("smsp__inst_executed.sum", "smsp__inst_executed_op_local_ld.sum", "smsp__inst_executed_op_local_st.sum"),
    (
        "smsp__inst_executed.sum",
        "smsp__sass_inst_executed_op_local_ld.sum",
        "smsp__sass_inst_executed_op_local_st.sum",
    ),
)

_ARG = re.compile(r"^(?:(in|out):(f32|i32):(\d+)(?::(rand))?|(i32|f32):(-?[0-9.eE+-]+))$")
_DIMS = re.compile(r"^\d+(?:x\d+){0,2}$")


@dataclass(frozen=True)
class Arg:
    kind: str  # "in", "out" or "scalar"
    dtype: str  # "f32" or "i32"
    count: int = 0  # elements, for a buffer
    value: float = 0.0  # for a scalar
    fill: str = "ones"  # an in buffer's contents: "ones" or "rand"


@dataclass(frozen=True)
class Launch:
    name: str
    kernel: str
    file: Path
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: tuple[Arg, ...]
    defines: tuple[str, ...] = ()
    maxrregcount: int | None = None


@dataclass
class Usage:
    """ptxas's report for one cubin: the kernel's registers, and stack/spill bytes summed over the kernel and
    its callees (each function's own figures in `functions`)."""

    registers: int | None = None
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    functions: dict[str, dict[str, int]] = field(default_factory=dict)


def parse_dims(text: str) -> tuple[int, ...]:
    if not _DIMS.match(text):
        raise ValueError(f"bad dimensions {text!r}: want X, XxY or XxYxZ")
    return tuple(int(part) for part in text.split("x"))


def parse_arg(text: str) -> Arg:
    m = _ARG.match(text)
    if not m:
        raise ValueError(f"bad argument spec {text!r}: want in:f32:N, in:f32:N:rand, out:i32:N, i32:V, ...")
    if m.group(1):
        if m.group(4) and (m.group(1), m.group(2)) != ("in", "f32"):
            raise ValueError(f"bad argument spec {text!r}: only in:f32 buffers take :rand")
        return Arg(kind=m.group(1), dtype=m.group(2), count=int(m.group(3)), fill=m.group(4) or "ones")
    dtype, value = m.group(5), m.group(6)
    return Arg(kind="scalar", dtype=dtype, value=float(int(value)) if dtype == "i32" else float(value))


def parse_launch_line(line: str, file: Path) -> Launch:
    body = line.split("launch:", 1)[1]
    fields: dict[str, str] = {}
    defines: list[str] = []
    for token in body.split():
        key, sep, value = token.partition("=")
        if not sep or not value:
            raise ValueError(f"{file.name}: bad token {token!r} in launch line")
        if key == "define":
            defines.append(value)
        elif key in fields:
            raise ValueError(f"{file.name}: {key}= given twice in one launch line")
        else:
            fields[key] = value
    unknown = set(fields) - {"name", "kernel", "grid", "block", "args", "maxrregcount"}
    missing = {"kernel", "grid", "block", "args"} - set(fields)
    if unknown or missing:
        raise ValueError(f"{file.name}: launch line has unknown {sorted(unknown)} / lacks {sorted(missing)}")
    cap = fields.get("maxrregcount")
    if cap is not None and not cap.isdigit():
        raise ValueError(f"{file.name}: maxrregcount={cap!r} is not a number of registers")
    return Launch(
        name=fields.get("name", fields["kernel"]),
        kernel=fields["kernel"],
        file=file,
        grid=parse_dims(fields["grid"]),
        block=parse_dims(fields["block"]),
        args=tuple(parse_arg(a) for a in fields["args"].split(",")),
        defines=tuple(defines),
        maxrregcount=None if cap is None else int(cap),
    )


def read_launches(kernels: Path) -> list[Launch]:
    launches: list[Launch] = []
    for file in sorted(kernels.glob("*.cu")):
        found = 0
        for line in file.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith("//") and stripped[2:].lstrip().startswith("launch:"):
                launches.append(parse_launch_line(stripped, file))
                found += 1
            else:
                break
        if not found:
            raise ValueError(f"{file}: no `// launch:` line at the top")
    names = [launch.name for launch in launches]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"launch names used twice: {duplicates}")
    return launches


def define_header(launch: Launch) -> str:
    lines = []
    for define in launch.defines:
        macro, _, value = define.partition("=")
        lines.append(f"#define {macro} {value}".rstrip())
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- tools


def find_tool(name: str, explicit: str | None, wheel_dirs: tuple[str, ...] = ()) -> str | None:
    if explicit:
        return explicit
    on_path = shutil.which(name)
    if on_path:
        return on_path
    candidates = [Path("/usr/local/cuda/bin") / name]
    purelib = Path(sysconfig.get_paths()["purelib"])
    candidates += [purelib / "nvidia" / d / "bin" / name for d in wheel_dirs]
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    return None


def version_line(tool: str, pattern: str) -> str:
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False).stdout
    except OSError as exc:
        return f"unavailable: {exc}"
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    for line in lines:
        if re.search(pattern, line):
            return line
    return lines[-1] if lines else "unknown"


def card_name() -> str:
    smi = shutil.which("nvidia-smi")
    if smi:
        proc = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip().splitlines()[0]
    try:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:  # no GPU, no CuPy: say so in the JSON rather than fail
        return f"unknown ({exc})"


# ---------------------------------------------------------------------------------------------- compile

_PROPS = re.compile(
    r"Function properties for (\S+)\s*\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores, "
    r"(\d+) bytes spill loads"
)
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_USED = re.compile(r"Function properties for (\S+)\s*\n[^\n]*\n[^\n]*Used (\d+) registers")


def parse_resource_usage(log: str, kernel: str) -> Usage:
    """nvcc --resource-usage (ptxas -v) output -> Usage. Every function of the one-kernel cubin counts."""
    usage = Usage()
    for m in _PROPS.finditer(log):
        usage.functions[m.group(1)] = {
            "stack_frame": int(m.group(2)),
            "spill_stores": int(m.group(3)),
            "spill_loads": int(m.group(4)),
        }
    for m in _USED.finditer(log):
        usage.functions.setdefault(m.group(1), {})["registers"] = int(m.group(2))
    entry = usage.functions.get(kernel, {})
    usage.registers = entry.get("registers")
    usage.stack_frame = entry.get("stack_frame", 0)
    usage.spill_stores = sum(f.get("spill_stores", 0) for f in usage.functions.values())
    usage.spill_loads = sum(f.get("spill_loads", 0) for f in usage.functions.values())
    return usage


def compile_cubin(nvcc: str, launch: Launch, arch: str, tmp: Path) -> tuple[Path, Usage]:
    """nvcc -cubin -arch=ARCH -O3 --resource-usage [-maxrregcount=N] [-include defines.h] file.cu; raises
    RuntimeError."""
    cubin = tmp / f"{launch.name}.cubin"
    cmd = [nvcc, "-cubin", f"-arch={arch}", "-O3", "--resource-usage", "-o", str(cubin)]
    if launch.maxrregcount is not None:
        cmd.append(f"-maxrregcount={launch.maxrregcount}")
    if launch.defines:
        header = tmp / f"{launch.name}.defines.h"
        header.write_text(define_header(launch))
        cmd += ["-include", str(header)]
    cmd.append(str(launch.file))
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed ({proc.returncode}): {log.strip()}")
    return cubin, parse_resource_usage(log, launch.kernel)


def find_nvrtc() -> Path | None:
    purelib = Path(sysconfig.get_paths()["purelib"])
    candidates = [
        *sorted(Path("/usr/local/cuda/lib64").glob("libnvrtc.so*")),
        *sorted((purelib / "nvidia" / "cu13" / "lib").glob("libnvrtc.so*")),
        *sorted((purelib / "nvidia" / "cuda_nvrtc" / "lib").glob("libnvrtc.so*")),
    ]
    for candidate in candidates:
        if "alt" not in candidate.name and "builtins" not in candidate.name:
            return candidate
    found = ctypes.util.find_library("nvrtc")
    return Path(found) if found else None


def nvrtc_check(library: Path, launch: Launch, arch: str) -> str | None:
    """Compile with NVRTC to PTX (the defines prepended to the source); None if it compiles, else the log."""
    lib = ctypes.CDLL(str(library))
    prog = ctypes.c_void_p()
    source = define_header(launch) + launch.file.read_text()
    status = lib.nvrtcCreateProgram(
        ctypes.byref(prog), source.encode(), launch.file.name.encode(), 0, None, None
    )
    if status != 0:
        return f"nvrtcCreateProgram: status {status}"
    try:
        options = [f"--gpu-architecture={arch.replace('sm_', 'compute_')}".encode(), b"-default-device"]
        if launch.maxrregcount is not None:
            options.append(f"--maxrregcount={launch.maxrregcount}".encode())
        array = (ctypes.c_char_p * len(options))(*options)
        status = lib.nvrtcCompileProgram(prog, len(options), array)
        if status == 0:
            return None
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        return buf.value.decode(errors="replace").strip() or f"status {status}"
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


# ---------------------------------------------------------------------------------------------- ncu


def _number(text: str) -> int:
    cleaned = text.strip().strip('"').replace(",", "").replace("\u202f", "").replace(" ", "")
    return int(float(cleaned))


def parse_ncu_csv(text: str, metrics: tuple[str, ...], kernel: str) -> dict[str, int]:
    """ncu --csv --page raw output -> {metric: value} for the (first) row of `kernel`.

    The CSV may follow other lines (==PROF== messages, the application's output): the header is the first
    line holding every metric name. Rows whose metric cells are not numbers (the units row) are skipped.
    Columns are found by name, values may be quoted and carry thousands separators."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if all(m in line for m in metrics)), None)
    if start is None:
        raise ValueError(f"no CSV header with {list(metrics)} in ncu's output")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = [cell.strip() for cell in rows[0]]
    columns = {m: header.index(m) for m in metrics}
    name_col = next((i for i, h in enumerate(header) if h in ("Kernel Name", "Function Name")), None)
    for row in rows[1:]:
        if len(row) < len(header):
            continue
        if name_col is not None and kernel not in row[name_col]:
            continue
        try:
            return {m: _number(row[c]) for m, c in columns.items()}
        except ValueError:
            continue  # the units row, or a row of n/a
    raise ValueError(f"no data row for kernel {kernel!r} in ncu's CSV")


def profile(ncu: str, launch: Launch, args: argparse.Namespace, cubin: Path, tmp: Path) -> dict[str, Any]:
    """Launch once under ncu, export a report, read it back as CSV. Tries each metric set in turn."""
    errors: list[str] = []
    for metrics in METRIC_SETS:
        report = tmp / f"{launch.name}.{len(errors)}"
        cmd = [
            ncu,
            "--metrics",
            ",".join(metrics),
            "--kernel-name",
            launch.kernel,
            "--launch-count",
            "1",
            "--export",
            str(report),
            "--force-overwrite",
            sys.executable,
            str(Path(__file__).resolve()),
            "--kernels",
            str(args.kernels),
            "--launch-one",
            launch.name,
            "--cubin",
            str(cubin),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=args.timeout)
        rep = report.with_suffix(report.suffix + ".ncu-rep")
        if proc.returncode != 0 or not rep.exists():
            errors.append(f"ncu ({proc.returncode}) with {metrics[1]}: {(proc.stdout + proc.stderr).strip()}")
            continue
        imported = subprocess.run(
            [ncu, "--import", str(rep), "--csv", "--page", "raw"],
            capture_output=True,
            text=True,
            check=False,
            timeout=args.timeout,
        )
        try:
            values = parse_ncu_csv(imported.stdout, metrics, launch.kernel)
        except ValueError as exc:
            errors.append(f"{exc}; ncu --import said: {(imported.stdout + imported.stderr).strip()[-2000:]}")
            continue
        total, local_ld, local_st = (values[m] for m in metrics)
        return {
            "metrics": list(metrics),
            "inst_executed": total,
            "local_ld": local_ld,
            "local_st": local_st,
            "share": (local_ld + local_st) / total if total else None,
        }
    raise RuntimeError("\n".join(errors))


def launch_one(launch: Launch, cubin: Path) -> None:
    """The process ncu profiles: load the cubin with CuPy, make the buffers, launch once, synchronize."""
    import cupy
    import numpy as np

    dtypes = {"f32": np.float32, "i32": np.int32}
    params: list[Any] = []
    for position, arg in enumerate(launch.args):
        dtype = dtypes[arg.dtype]
        if arg.kind == "scalar":
            params.append(np.int32(int(arg.value)) if arg.dtype == "i32" else np.float32(arg.value))
        elif arg.kind == "in" and arg.fill == "rand":
            values = np.random.default_rng(position).random(arg.count, dtype=np.float32)
            params.append(cupy.asarray(values))
        elif arg.kind == "in":  # filled on the host and copied: no CuPy fill kernel to profile or compile
            params.append(cupy.asarray(np.ones(arg.count, dtype=dtype)))
        else:
            params.append(cupy.zeros(arg.count, dtype=dtype))
    function = cupy.RawModule(path=str(cubin)).get_function(launch.kernel)
    function(launch.grid, launch.block, tuple(params))
    cupy.cuda.runtime.deviceSynchronize()


# ---------------------------------------------------------------------------------------------- main


def static_estimate(cubin: Path, kernel: str) -> str:
    """This package's estimate of the kernel's local share, read from the cubin, or why there is none."""
    try:
        sys.path.insert(0, str(ROOT))
        from pytest_regbudget.core.sass import parse_sass_functions
        from pytest_regbudget.tools.nvdisasm import find_nvdisasm
    except ImportError:
        return "no package"
    nvdisasm = find_nvdisasm(None)
    if nvdisasm is None:
        return "no nvdisasm"
    listing = subprocess.run([str(nvdisasm), "-c", "-gi", str(cubin)], capture_output=True, text=True)
    report = parse_sass_functions(listing.stdout).get(kernel)
    if report is None:
        return "not found"
    return f"{report.local_share:.1%}" + (" (unread)" if report.unread else "")


def dry_run(launches: list[Launch], nvcc: str | None, arch: str, keep: Path | None) -> int:
    library = find_nvrtc()
    print(f"nvcc:  {nvcc or 'not found'}" + (f"  ({version_line(nvcc, r'release')})" if nvcc else ""))
    print(f"NVRTC: {library or 'not found (NVRTC check skipped)'}\n")
    print(
        f"{'name':<24} {'kernel':<22} {'regs':>4} {'stack':>6} {'spill st':>8} {'spill ld':>8}  nvrtc"
        + ("  estimate" if keep else "")
    )
    failed = 0
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        for launch in launches:
            nvrtc_note = "-"
            if library is not None:
                error = nvrtc_check(library, launch, arch)
                nvrtc_note = "ok" if error is None else "FAILED"
                if error is not None:
                    failed += 1
                    print(f"{launch.name}: NVRTC: {error}", file=sys.stderr)
            if nvcc is None:
                print(f"{launch.name:<24} {launch.kernel:<22} {'':>4} {'':>6} {'':>8} {'':>8}  {nvrtc_note}")
                continue
            try:
                cubin, usage = compile_cubin(nvcc, launch, arch, Path(tmp_name))
            except RuntimeError as exc:
                failed += 1
                print(f"{launch.name:<24} {launch.kernel:<22} nvcc FAILED: {exc}")
                continue
            estimate = ""
            if keep is not None:
                kept = keep / f"{launch.name}.{arch}.cubin"
                shutil.copyfile(cubin, kept)
                estimate = f"  {static_estimate(kept, launch.kernel)}"
            print(
                f"{launch.name:<24} {launch.kernel:<22} {usage.registers!s:>4} {usage.stack_frame:>6} "
                f"{usage.spill_stores:>8} {usage.spill_loads:>8}  {nvrtc_note:<5}{estimate}"
            )
    return 1 if failed else 0


def measure(launches: list[Launch], args: argparse.Namespace) -> int:
    nvcc = find_tool("nvcc", args.nvcc)
    ncu = find_tool("ncu", args.ncu)
    if nvcc is None or ncu is None:
        print(f"need nvcc and ncu (found nvcc={nvcc}, ncu={ncu}); --dry-run needs only nvcc", file=sys.stderr)
        return 2
    out_path: Path = args.out
    result: dict[str, Any] = {
        "card": card_name(),
        "arch": args.arch,
        "ncu": version_line(ncu, r"^Version"),
        "nvcc": version_line(nvcc, r"release"),
        "date": datetime.date.today().isoformat(),
        "kernels": {},
    }
    if args.only and out_path.exists():  # --only updates the entries it measures, keeps the others
        result["kernels"] = json.loads(out_path.read_text()).get("kernels", {})
    args.cubins.mkdir(parents=True, exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for launch in launches:
            entry: dict[str, Any] = {
                "file": launch.file.relative_to(ROOT).as_posix()
                if launch.file.is_relative_to(ROOT)
                else str(launch.file),
                "kernel": launch.kernel,
                "defines": list(launch.defines),
                "maxrregcount": launch.maxrregcount,
                "grid": list(launch.grid),
                "block": list(launch.block),
                "args": [
                    f"{a.kind}:{a.dtype}:{a.count}" + (":rand" if a.fill == "rand" else "")
                    if a.kind != "scalar"
                    else f"{a.dtype}:{a.value:g}"
                    for a in launch.args
                ],
                "cubin": None,
                "registers": None,
                "stack_frame": None,
                "spill_stores": None,
                "spill_loads": None,
                "functions": {},
                "metrics": None,
                "inst_executed": None,
                "local_ld": None,
                "local_st": None,
                "share": None,
                "error": None,
            }
            try:
                cubin, usage = compile_cubin(nvcc, launch, args.arch, tmp)
                kept = args.cubins / f"{launch.name}.{args.arch}.cubin"
                shutil.copyfile(cubin, kept)
                entry["cubin"] = kept.relative_to(ROOT).as_posix() if kept.is_relative_to(ROOT) else str(kept)
                entry.update(
                    registers=usage.registers,
                    stack_frame=usage.stack_frame,
                    spill_stores=usage.spill_stores,
                    spill_loads=usage.spill_loads,
                    functions=usage.functions,
                )
                entry.update(profile(ncu, launch, args, kept, tmp))
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                entry["error"] = str(exc)
                failed += 1
            result["kernels"][launch.name] = entry
            share = entry["share"]
            shown = f"{share:.4f}" if isinstance(share, float) else "-"
            print(
                f"{launch.name:<24} regs={entry['registers']!s:>4} spill={entry['spill_stores']}/"
                f"{entry['spill_loads']} inst={entry['inst_executed']} ld={entry['local_ld']} "
                f"st={entry['local_st']} share={shown}" + (" ERROR" if entry["error"] else ""),
                flush=True,
            )
            if entry["error"]:
                print(f"  {entry['error'][:2000]}", file=sys.stderr)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n")
    print(f"wrote {out_path}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--kernels", type=Path, default=DATA / "kernels", help="directory of launch-lined .cu"
    )
    parser.add_argument("--out", type=Path, default=DATA / "ncu_sm90.json", help="the JSON to write")
    parser.add_argument(
        "--cubins",
        type=Path,
        help=f"where profiled cubins are kept (default {DATA / 'cubins'}); with --dry-run, where the built "
        "ones are (default: nowhere)",
    )
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="this variant (repeatable)"
    )
    parser.add_argument("--nvcc", help="nvcc to use (default: PATH, /usr/local/cuda/bin, the pip wheels)")
    parser.add_argument("--ncu", help="ncu to use (default: PATH, /usr/local/cuda/bin)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per ncu run")
    parser.add_argument(
        "--dry-run", action="store_true", help="parse and compile only; print registers/spills"
    )
    parser.add_argument("--launch-one", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument("--cubin", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.kernels = args.kernels.resolve()
    args.out = args.out.resolve()
    keep = None if args.cubins is None else args.cubins.resolve()
    args.cubins = keep or DATA / "cubins"

    launches = read_launches(args.kernels)
    if args.launch_one:
        launch = next((x for x in launches if x.name == args.launch_one), None)
        if launch is None or args.cubin is None:
            parser.error(f"--launch-one {args.launch_one}: unknown name, or no --cubin")
        launch_one(launch, args.cubin)
        return 0
    if args.only:
        unknown = set(args.only) - {x.name for x in launches}
        if unknown:
            parser.error(f"--only: no launch line named {sorted(unknown)}")
        launches = [x for x in launches if x.name in args.only]
    if args.dry_run:
        return dry_run(launches, find_tool("nvcc", args.nvcc, ("cu13", "cuda_nvcc")), args.arch, keep)
    return measure(launches, args)


if __name__ == "__main__":
    sys.exit(main())
