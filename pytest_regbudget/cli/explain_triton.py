"""What `regbudget explain kernels.py::fn --signature "..."` builds: a `@triton.jit` function of a Python
file, as `regbudget.compile_triton(fn, signature=...)` builds it in a pytest run (the engine's build
environment, Triton's own ptxas), with the signature written as Triton's AOT compiler takes it
(`triton/tools/compile.py --signature "*fp16:16, i32:16, 1024"`: the parameters in order, a number a
constexpr's value; here also "-" for a value an autotune config or a heuristic gives), once per autotune
config where the function has them. Each row comes with the signature as compiled.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.errors import FrontendError
from ..core.facts import KernelFacts
from ..core.kernel_report import config_label, triton_signature_text
from ..engine.builder import Builder, ItemEnv
from ..sources.python import TritonKernel
from ..tools.triton import TritonJob
from ..tools.triton_launch import kernel_name, layers, parameters_text
from .base import CliError
from .explaining import Bounds, Row, row_of


def load_function(source: Path, name: str) -> Any:
    """`name` of the Python file `source`, imported as a test would import it (its directory on sys.path,
    for the modules beside it)."""
    spec = importlib.util.spec_from_file_location(f"_regbudget_explain_{source.stem}", source.absolute())
    if spec is None or spec.loader is None:
        raise CliError(f"{source}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(source.absolute().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's module: whatever it raises is the answer
        raise CliError(f"{source}: importing it failed: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(str(source.absolute().parent))
    fn = getattr(module, name, None)
    if fn is None:
        raise CliError(f"{source} has no {name!r}")
    return fn


def written_signature(fn: Any, text: str | None) -> tuple[dict[str, str], dict[str, object]]:
    """(signature, constexprs) from Triton's AOT syntax: one entry per parameter, in order; a number, a
    bool or None is that parameter's constexpr value, anything else its type with an optional hint."""
    try:
        jit_fn, _ = layers(fn)
    except FrontendError as exc:
        raise CliError(str(exc)) from None
    params = [p.name for p in jit_fn.params]
    entries = [e.strip() for e in (text or "").split(",")] if text else []
    if len(entries) != len(params):
        raise CliError(
            f"{kernel_name(fn)} has {len(params)} parameters ({parameters_text(jit_fn)}): give each in order "
            'with --signature, as Triton\'s AOT compiler takes them, e.g. "*fp16:16, *fp16:16, i32:16, 1024" '
            "(':16' an aligned pointer or an int divisible by 16, a number a constexpr's value, '-' a value "
            "its autotune config or heuristic gives)"
        )
    signature: dict[str, str] = {}
    constexprs: dict[str, object] = {}
    for name, entry in zip(params, entries, strict=True):
        if entry == "-":
            continue  # given by the autotune config or a heuristic
        try:
            value = ast.literal_eval(entry)
        except (ValueError, SyntaxError):
            signature[name] = entry
            continue
        constexprs[name] = value
    return signature, constexprs


def explain_triton(
    source: Path,
    name: str,
    archs: Sequence[str],
    signature_text: str | None,
    num_warps: int | None,
    num_stages: int | None,
    builder: Builder,
) -> list[tuple[Row, KernelFacts]]:
    """The rows of a Triton kernel per (config, arch): its block is num_warps * 32 threads."""
    fn = load_function(source, name)
    signature, constexprs = written_signature(fn, signature_text)
    configs: list[Any] = list(getattr(fn, "configs", None) or []) or [None]
    env = ItemEnv(builder)
    rows = []
    for config in configs:
        warps, stages = (num_warps, num_stages) if config is None else (None, None)
        job = TritonJob(fn, signature, constexprs, warps, stages, config=config)
        for arch in archs:
            try:
                (facts,) = TritonKernel(job, source.parent).build(arch, env)
            except FrontendError as exc:
                raise CliError(str(exc)) from None
            rows.append((row_of(Bounds(facts.block), facts), facts))
    return rows


def triton_lines(rows: Sequence[tuple[Row, KernelFacts]]) -> list[str]:
    """Each build's signature as compiled, and its config where it has one."""
    out = []
    for row, facts in rows:
        config = f" ({config_label(facts.triton_config)})" if facts.triton_config else ""
        out.append(f"{row.arch}{config}: triton signature {triton_signature_text(facts.triton_signature)}")
    return out
