"""What a launch of a `@triton.jit` kernel compiles (`Launch`), worked out without a GPU by Triton's own code.

Owns the arguments' specialization: `args=` go through Triton's own binder, the function `JITFunction.run`
calls (`create_function_from_signature`, then `_pack_args`), so a 16-byte-aligned tensor or an int divisible
by 16 gets `tt.divisibility=16` and an int 1 or a `None` becomes a constexpr by the rules of the Triton
installed, `do_not_specialize` included; an autotune config and `@triton.heuristics` values are applied as
`Autotuner.run` and `Heuristics.run` apply them. A signature written out (`signature=`) is compiled exactly as
written, with Triton's AOT hints (`"*fp16:16"`, `"i32:1"`) read as `triton/tools/compile.py` reads them.
Building it is tools/triton.py's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from msgspec import Struct

from ..core.errors import FrontendError
from .frontends import _dist_version, _require


class TritonArgumentError(FrontendError):
    """A call that names no launch of the kernel (arguments missing, unknown, or given two ways): the test's
    mistake, raised where it is made."""


def kernel_name(fn: object) -> str:
    """The name of the `@triton.jit` function behind every wrapper (autotune, heuristics), without
    importing Triton: each wrapper, and the JITFunction itself, holds the next layer in `.fn`."""
    current: Any = fn
    for _ in range(8):
        inner = getattr(current, "fn", None)
        if inner is None:
            break
        current = inner
    name = getattr(current, "__name__", None)
    return name if isinstance(name, str) else repr(fn)


def layers(fn: object) -> tuple[Any, list[Any]]:
    """The JITFunction behind `fn`, and the wrappers around it from the outermost in: the order in which
    a launch runs them."""
    runtime = _require("triton.runtime.jit", "triton")
    current: Any = fn
    layers: list[Any] = []
    for _ in range(8):
        if isinstance(current, runtime.JITFunction):
            return current, layers
        layers.append(current)
        current = getattr(current, "fn", None)
        if current is None:
            break
    raise TritonArgumentError(
        f"{kernel_name(fn)!r} is not a Triton kernel: decorate it with @triton.jit "
        "(compile_triton compiles JITFunctions, with or without @triton.autotune/@triton.heuristics)"
    )


def _kind(layer: object) -> str:
    return type(layer).__name__  # Autotuner, Heuristics: Triton's names, stable since 2.0


def parameters_text(jit_fn: Any) -> str:
    """`X, Y, N, BLOCK (constexpr)`: what every error about the call lists."""
    return ", ".join(f"{p.name} (constexpr)" if p.is_constexpr else p.name for p in jit_fn.params)


def triton_version() -> str:
    triton = _require("triton", "triton")
    return f"triton {getattr(triton, '__version__', _dist_version('triton'))}"


class Launch(Struct, frozen=True):
    """One compile of a kernel as a launch makes it: Triton's signature (a type or "constexpr" per
    parameter), constexprs and attrs (keyed by parameter path, as ASTSource takes them), the options, and
    the autotune config it comes from."""

    names: tuple[str, ...]
    signature: dict[str, Any]
    constexprs: dict[Any, Any]
    attrs: dict[Any, Any]
    options: dict[str, Any]
    config: str | None = None
    # The variant pytest-regbudget gave a signature= call before build settings left the key.
    legacy: str | None = None

    def aot(self) -> tuple[tuple[str, str], ...]:
        """Every parameter as compiled, in Triton's AOT syntax: "*fp16:16", "i32", "constexpr 1"."""
        out = []
        for i, name in enumerate(self.names):
            ty = self.signature[name]
            if ty == "constexpr":
                out.append((name, f"constexpr {_shown(self.constexprs.get((i,)))}"))
                continue
            divisible = any(list(a) == ["tt.divisibility", 16] for a in self.attrs.get((i,), []))
            out.append((name, f"{ty}:16" if divisible else str(ty)))
        return tuple(out)

    def variant(self, label: str | None = None) -> str:
        """What the kernel computes, as its baseline key names it: the parameters' types with the launch's
        specialization and the constexprs' values (template arguments, in C++ terms), then the config
        (each config is a kernel that may run), then the caller's own label."""
        parts = [",".join(f"{n}={t.removeprefix('constexpr ')}" for n, t in self.aot())]
        if self.config is not None:
            parts.append(f"config={self.config}")
        if label:
            parts.append(f"variant={label}")
        return " | ".join(parts)

    def settings(self) -> tuple[str, ...]:
        """The build settings (num_warps, num_stages, num_ctas, maxnreg...): not what the kernel computes but
        how it is built, recorded with the entry so that a change is named, and the entry still enforced."""
        return tuple(f"{k}={v}" for k, v in self.options.items() if k != "ptx_version")


def _shown(value: object) -> str:
    return str(getattr(value, "value", value)) if type(value).__name__ == "constexpr" else str(value)


def stand_in(value: object) -> object:
    """A torch dtype alone stands for an aligned tensor of it, as JITFunction.warmup treats it."""
    runtime = _require("triton.runtime.jit", "triton")
    mock = getattr(runtime, "MockTensor", None)
    wrap: Callable[[object], object] = getattr(mock, "wrap_dtype", lambda v: v)
    return wrap(value)


def _has_default(param: Any) -> bool:
    return getattr(param, "default", inspect.Parameter.empty) is not inspect.Parameter.empty


def through_wrappers(
    jit_fn: Any,
    layers: Sequence[Any],
    values: dict[str, object],
    options: Mapping[str, object],
    config: Any,
    written: bool,
) -> dict[str, object]:
    """The constexprs the wrappers add, outermost first, as their run() methods pass them on: an
    autotune config's kwargs (Autotuner.run), then each heuristic not given, computed from everything
    known so far (Heuristics.run)."""
    name = jit_fn.__name__
    values = dict(values)
    autotuned: Any = None
    for layer in layers:
        if _kind(layer) == "Autotuner":
            autotuned = layer
            tuned = sorted({k for c in layer.configs for k in c.kwargs} - set(values))
            if config is None and tuned:
                raise _untuned(name, tuned)
            if config is not None:
                clash = sorted(set(config.kwargs) & set(values))
                if clash:
                    raise TritonArgumentError(
                        f"{name}: {', '.join(clash)} given both by the config ({config}) and the call"
                    )
                values.update(config.kwargs)
        elif _kind(layer) == "Heuristics":
            for key, heuristic in layer.values.items():
                if key in values:
                    continue
                try:
                    values[key] = heuristic({**values, **options})
                except Exception as exc:
                    how = "give args= (the heuristic reads them)" if written else "give it in constexprs"
                    raise TritonArgumentError(
                        f"{name}: its @triton.heuristics value {key} could not be computed from the "
                        f"arguments ({type(exc).__name__}: {exc}); {how} (its parameters: "
                        f"{parameters_text(jit_fn)})"
                    ) from exc
    if config is not None and autotuned is None:
        raise TritonArgumentError(f"{name} is not @triton.autotune'd: config= is for autotuned kernels")
    return values


def _untuned(name: str, tuned: Sequence[str]) -> TritonArgumentError:
    return TritonArgumentError(
        f"{name} is @triton.autotune'd and its tuned constexprs {', '.join(tuned)} come from a config: "
        f"measure every config with regbudget.compile_triton_configs({name}, args=...), or one with "
        f"compile_triton(..., config=cfg) for cfg in {name}.configs (a test parametrized over them)"
    )


def _missing(jit_fn: Any, missing: Sequence[str]) -> TritonArgumentError:
    return TritonArgumentError(
        f"{jit_fn.__name__} needs {', '.join(missing)} (its parameters: {parameters_text(jit_fn)}); "
        "signature types are Triton's: '*fp32' (pointer), 'i32', 'fp16', with AOT hints '*fp16:16' "
        "(16-byte aligned), 'i32:16' (divisible by 16), 'i32:1' (the constant 1); tl.constexpr "
        "parameters take their value from constexprs"
    )


def _binder(jit_fn: Any, backend: Any) -> Callable[..., Any]:
    """Triton's launcher binder for this kernel and backend, as JITFunction.create_binder makes it (without
    the driver it asks for the target); a FrontendError that names the version where Triton has none."""
    runtime = _require("triton.runtime.jit", "triton")
    make = getattr(runtime, "create_function_from_signature", None)
    try:
        params = list(inspect.signature(make).parameters) if make is not None else []
    except (TypeError, ValueError):
        params = []
    if len(params) != 3 or not hasattr(jit_fn, "params") or not hasattr(jit_fn, "signature"):
        raise FrontendError(
            f"{triton_version()} has no launcher binder that pytest-regbudget can call "
            "(triton.runtime.jit.create_function_from_signature(sig, kparams, backend), Triton 3.3 to 3.9): "
            "args= needs it. Give signature= with AOT hints ('*fp16:16', 'i32:16', 'i32:1') instead, or "
            "install a Triton that has it"
        )
    binder: Callable[..., Any] = make(jit_fn.signature, jit_fn.params, backend)  # type: ignore[misc]
    return binder


def bind(jit_fn: Any, values: Mapping[str, object], options: Mapping[str, Any], cc: int) -> Launch:
    """The launch's specialization, by Triton's own binder and argument packing (JITFunction.run)."""
    compiler = _require("triton.compiler.compiler", "triton")
    backends = _require("triton.backends.compiler", "triton")
    names = tuple(p.name for p in jit_fn.params)
    missing = [
        f"{p.name!r} in args" if not p.is_constexpr else f"{p.name}=<value> in constexprs"
        for p in jit_fn.params
        if p.name not in values and not _has_default(p)
    ]
    if missing:
        raise _missing(jit_fn, missing)
    backend = compiler.make_backend(backends.GPUTarget("cuda", cc, 32))
    binder = _binder(jit_fn, backend)
    kwargs = dict(options)
    runtime_knobs = getattr(_require("triton", "triton"), "knobs", None)
    debug = jit_fn.debug or bool(getattr(getattr(runtime_knobs, "runtime", None), "debug", False))
    if debug:  # JITFunction.run passes it: it changes the code
        kwargs["debug"] = True
    try:
        bound, specialization, bound_options = binder(**values, **kwargs)
        pack = getattr(jit_fn, "_pack_args", None)
        if pack is not None:
            _, signature, constexprs, attrs = pack(backend, kwargs, bound, specialization, bound_options)
        else:
            signature = {n: s[0] for n, s in zip(names, specialization, strict=True)}
            constexprs = {(i,): v for i, (n, v) in enumerate(bound.items()) if signature[n] == "constexpr"}
            attrs = {
                (i,): backend.parse_attr(s[1])
                for i, s in enumerate(specialization)
                if s[0] != "constexpr" and isinstance(s[1], str)
            }
    except Exception as exc:  # a value Triton cannot pass to a kernel: its own words
        raise TritonArgumentError(
            f"{triton_version()} cannot launch {jit_fn.__name__} with these args "
            f"({type(exc).__name__}: {exc}) (its parameters: {parameters_text(jit_fn)})"
        ) from exc
    return Launch(names, dict(signature), dict(constexprs), dict(attrs), {**kwargs})


def written(
    jit_fn: Any, signature: Mapping[str, str], values: Mapping[str, object], options: Mapping[str, Any]
) -> Launch:
    """A signature as written, with Triton's AOT hints read as triton/tools/compile.py reads them: ":16"
    is divisibility 16, ":1" the constant 1."""
    names = tuple(p.name for p in jit_fn.params)
    sig: dict[str, Any] = {}
    consts: dict[Any, Any] = {}
    attrs: dict[Any, Any] = {}
    missing: list[str] = []
    for i, param in enumerate(jit_fn.params):
        pname = param.name
        if pname in values:
            sig[pname], consts[(i,)] = "constexpr", values[pname]
        elif param.is_constexpr:
            if _has_default(param):
                sig[pname], consts[(i,)] = "constexpr", param.default
            else:
                missing.append(f"{pname}=<value> in constexprs")
        elif pname in signature:
            ty, _, hint = str(signature[pname]).partition(":")
            ty = ty.strip()
            if hint and hint.strip() not in ("1", "16"):
                raise TritonArgumentError(
                    f"{jit_fn.__name__}: signature {signature[pname]!r} of {pname!r} has the hint "
                    f"{hint.strip()!r}; Triton's AOT hints are 16 (divisible by 16, or a 16-byte-aligned "
                    f"pointer) and 1 (the constant 1) (its parameters: {parameters_text(jit_fn)})"
                )
            _check_type(jit_fn.__name__, pname, ty)
            if hint.strip() == "1":
                sig[pname], consts[(i,)] = "constexpr", 1
            else:
                sig[pname] = ty
                if hint.strip() == "16":
                    attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            missing.append(f"{pname!r} in signature")
    if missing:
        raise _missing(jit_fn, missing)
    return Launch(names, sig, consts, attrs, dict(options))


def _check_type(name: str, pname: str, ty: str) -> None:
    """Triton's own error for a bad type is a bare KeyError far from the cause."""
    language = _require("triton.language", "triton")
    str_to_ty = getattr(language, "str_to_ty", None)
    if str_to_ty is None or ty == "constexpr":
        return
    try:
        str_to_ty(ty, None)
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise TritonArgumentError(
            f"{name}: signature type {ty!r} of {pname!r} is not a Triton type ({exc!r}); use e.g. "
            "'*fp32', '*fp16:16' for pointers and 'i32', 'i32:16', 'i64', 'fp32' for scalars"
        ) from exc
