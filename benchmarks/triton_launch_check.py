"""Issue 45's GPU check: Triton kernels launched with torch CUDA tensors, each compiled kernel's registers as
the driver gives them (`n_regs` of the CompiledKernel the launch returns) beside pytest-regbudget's figure for
the same arguments, worked out without the GPU (the build `regbudget.compile_triton(fn, args=...)` measures:
Triton's binder on the same tensors, Triton's compile for the device's arch, its ptxas's log). Exits 1 on any
mismatch.

Needs a CUDA GPU, torch and Triton (it imports nothing else but the standard library), and the package's own
dependencies (msgspec, tomli...). On the device machine (Python 3.12, torch 2.11, Triton 3.6, whose binder and
`_pack_args` take the same arguments as 3.9's: checked there), from the checkout's root with its cp312 wheels:

    python3 -m pip install -q --no-index --no-deps --target /tmp/deps .devwheels/*.whl
    PYTHONPATH=/tmp/deps:. python3 benchmarks/triton_launch_check.py

The kernels are those of tests/integration/test_triton_as_launched.py: the forward kernel of Triton's
layer-norm tutorial at N = 4096 and N = 4004, an RMS norm with a weight stride of 1 and a `None` residual,
and a four-config autotuned kernel with a heuristic, each config launched on its own.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest_regbudget
from pytest_regbudget.tools.triton import TritonJob

# Untyped packages, imported by name so that mypy takes them as they are.
torch: Any = importlib.import_module("torch")
triton: Any = importlib.import_module("triton")


def _kernels() -> Any:
    """The kernels of tests/integration/test_triton_as_launched.py, from the file that test writes into its
    scratch projects (Triton reads a kernel's source from its file, so they are loaded from there)."""
    path = Path(__file__).resolve().parent.parent / "tests" / "data" / "triton" / "launch_kernels.py"
    spec = importlib.util.spec_from_file_location("launch_kernels", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_k = _kernels()
layer_norm, rms_norm, scale_rows = _k.layer_norm, _k.rms_norm, _k.scale_rows


def driver_regs(kernel: Any) -> int:
    """The registers the driver reports for a launch's CompiledKernel (its handles are made at the launch)."""
    init = getattr(kernel, "_init_handles", None)
    if init is not None:
        init()
    return int(kernel.n_regs)


def plugin_regs(fn: Any, arch: str, args: tuple[Any, ...], **call: Any) -> tuple[int, str]:
    """pytest-regbudget's registers for the same arguments, built without the GPU, and the signature it
    compiled."""
    job = TritonJob(fn, args=args, **call)
    launch = job.launch(arch)
    made = job.ptx(arch, native=True, launch=launch)
    resources = pytest_regbudget.parse_ptxas_output(made.ptxas_log)[made.entry]
    return int(resources.registers), ", ".join(f"{n}: {t}" for n, t in launch.aot())


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: this check launches the kernels", file=sys.stderr)
        return 2
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    dev = "cuda"
    rows: list[tuple[str, int, int, str]] = []

    m = 4
    for n in (4096, 4004):
        x = torch.randn(m, n, device=dev, dtype=torch.float16)
        w = torch.randn(n, device=dev, dtype=torch.float16)
        b = torch.randn(n, device=dev, dtype=torch.float16)
        y = torch.empty_like(x)
        mean = torch.empty(m, device=dev, dtype=torch.float32)
        rstd = torch.empty(m, device=dev, dtype=torch.float32)
        args: tuple[Any, ...] = (x, y, w, b, mean, rstd, x.stride(0), n, 1e-5)
        launched = layer_norm[(m,)](*args, BLOCK_SIZE=4096, num_warps=8)
        ours, sig = plugin_regs(layer_norm, arch, args, constexprs={"BLOCK_SIZE": 4096}, num_warps=8)
        rows.append((f"layer_norm N={n}", driver_regs(launched), ours, sig))

    n = 4096
    x = torch.randn(m, n, device=dev, dtype=torch.float16)
    y = torch.empty_like(x)
    w = torch.randn(n, device=dev, dtype=torch.float16)
    args = (y, x, w, None, x.stride(0), w.stride(0), n, 1e-6)
    launched = rms_norm[(m,)](*args, BLOCK=4096, num_warps=8)
    ours, sig = plugin_regs(rms_norm, arch, args, constexprs={"BLOCK": 4096}, num_warps=8)
    rows.append(("rms_norm stride_w=1 R=None", driver_regs(launched), ours, sig))

    x = torch.randn(n, device=dev, dtype=torch.float16)
    y = torch.empty_like(x)
    args = (x, y, n, 2.0)
    for config in scale_rows.configs:
        grid = (triton.cdiv(n, config.kwargs["BLOCK"]),)
        # The config launched as Autotuner.run launches it: through the heuristics, with its kwargs.
        launched = scale_rows.fn[grid](*args, **config.all_kwargs())
        ours, sig = plugin_regs(scale_rows, arch, args, config=config)
        rows.append((f"scale_rows {config}", driver_regs(launched), ours, sig))

    torch.cuda.synchronize()
    print(f"{torch.cuda.get_device_name()} ({arch}), torch {torch.__version__}, triton {triton.__version__}")
    print(f"{'kernel':<75} {'n_regs':>6} {'plugin':>6}")
    bad = 0
    for name, driver, ours, sig in rows:
        mark = "" if driver == ours else "  MISMATCH"
        bad += driver != ours
        print(f"{name:<75} {driver:>6} {ours:>6}{mark}")
        print(f"    {sig}")
    print(f"{len(rows) - bad} of {len(rows)} equal")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
