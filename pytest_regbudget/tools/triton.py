"""The Triton front end: a `@triton.jit` kernel built for a named arch on a machine without a GPU, as a launch
builds it (what a launch compiles, `Launch`, is tools/triton_launch.py's).

Building: `triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", cc, 32))`;
the explicit target keeps Triton away from the driver. Natively (as a pytest run measures), Triton assembles
with the ptxas it picks for the arch, and that ptxas is asked of Triton itself (`get_ptxas(cc)`), or read
from its log's prefix (`ptxas-blackwell info`). Otherwise the PTX version is capped for our own ptxas, and
`.target` is reported, not rewritten (Triton builds `sm_90a` for "sm_90").

Triton is imported on first use only: `pytest --help` and collection must not need it.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from ..core.errors import FrontendError
from .frontends import (
    FrontendPtx,
    _check_version,
    _fmt,
    _limits,
    _ptx_target,
    _require,
    _single_entry,
    _where,
    max_ptx_version,
)
from .toolkit import Toolkit, discover, ptxas_version
from .triton_launch import (
    Launch,
    TritonArgumentError,
    bind,
    kernel_name,
    layers,
    parameters_text,
    stand_in,
    through_wrappers,
    triton_version,
    written,
)

DEFAULT_WARPS = 4  # Triton's defaults, where neither the call nor a config gives one
DEFAULT_STAGES = 3
_LOG_TOOL = re.compile(r"^(\S*ptxas\S*) info\s*:", re.MULTILINE)


class TritonJob(Struct, frozen=True):
    """One Triton compile as a test asks for it: the function (with its wrappers), the launch's arguments
    or a written signature, the constexprs, the build settings and an autotune config."""

    fn: object
    signature: Mapping[str, str] | None = None
    constexprs: Mapping[str, object] | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    args: Sequence[object] | Mapping[str, object] | None = None
    num_ctas: int | None = None
    maxnreg: int | None = None
    config: object | None = None
    label: str | None = None  # the caller's variant=

    @property
    def name(self) -> str:
        return kernel_name(self.fn)

    def place(self) -> tuple[Path | None, int | None]:
        """The file and `def` line of the function measured: from the function, never from a cached build."""
        jit_fn, _ = layers(self.fn)
        return _where(jit_fn.fn)

    def launch(self, arch: str) -> Launch:
        """What a launch with these arguments compiles for `arch` (TritonArgumentError for a call that names
        none)."""
        jit_fn, wrappers = layers(self.fn)
        name = jit_fn.__name__
        if self.args is not None and self.signature is not None:
            raise TritonArgumentError(
                f"{name}: give args= (what a launch passes; Triton specializes them) or signature= (types "
                f"compiled exactly as written), not both (its parameters: {parameters_text(jit_fn)})"
            )
        if self.args is None and self.signature is None:
            raise TritonArgumentError(
                f"{name}: give args= (the launch's arguments, e.g. args=(x, y, out, n) with tensors, "
                "MockTensor(torch.float16) or a torch dtype) or signature= ({'x': '*fp16:16', 'n': 'i32'}) "
                f"(its parameters: {parameters_text(jit_fn)})"
            )
        options = self._options(name)
        values = self._values(jit_fn)
        values = through_wrappers(jit_fn, wrappers, values, options, self.config, self.args is None)
        limits = _limits(arch)
        if self.args is not None:
            launch = bind(jit_fn, values, options, limits.major * 10 + limits.minor)
        else:
            assert self.signature is not None
            launch = written(jit_fn, self.signature, values, options)
        config = None if self.config is None else str(self.config)
        return replace(launch, config=config, legacy=self._legacy())

    def _options(self, name: str) -> dict[str, Any]:
        config: Any = self.config
        if config is None:
            options: dict[str, Any] = {
                "num_warps": DEFAULT_WARPS if self.num_warps is None else self.num_warps,
                "num_stages": DEFAULT_STAGES if self.num_stages is None else self.num_stages,
                "num_ctas": 1 if self.num_ctas is None else self.num_ctas,
            }
            if self.maxnreg is not None:
                options["maxnreg"] = self.maxnreg
            return options
        settings = ("num_warps", "num_stages", "num_ctas", "maxnreg")
        given = [k for k in settings if getattr(self, k) is not None]
        if given:
            raise TritonArgumentError(
                f"{name}: the config sets {', '.join(given)} ({config}); give them in the config, not both"
            )
        # Config.all_kwargs: what Autotuner.run passes besides the config's constexprs.
        options = {k: getattr(config, k) for k in ("num_warps", "num_stages", "num_ctas")}
        if getattr(config, "maxnreg", None) is not None:
            options["maxnreg"] = config.maxnreg
        return options

    def _values(self, jit_fn: Any) -> dict[str, object]:
        """The arguments by parameter name, with the constexprs, checked against the parameters."""
        names = [p.name for p in jit_fn.params]
        mapping = stand_in
        values: dict[str, object] = {}
        if isinstance(self.args, Mapping):
            values = {str(k): mapping(v) for k, v in self.args.items()}
        elif self.args is not None:
            given = list(self.args)
            if len(given) > len(names):
                raise TritonArgumentError(
                    f"{jit_fn.__name__}: {len(given)} args for {len(names)} parameters "
                    f"(its parameters: {parameters_text(jit_fn)})"
                )
            values = {n: mapping(v) for n, v in zip(names, given, strict=False)}
        constexprs = dict(self.constexprs or {})
        twice = sorted(set(values) & set(constexprs))
        unknown = [k for k in [*values, *constexprs, *(self.signature or {})] if k not in names]
        if unknown or twice:
            what = f"has no parameter {', '.join(map(repr, unknown))}" if unknown else ""
            if twice:
                what += ("; " if what else "") + f"gets {', '.join(twice)} in both args and constexprs"
            raise TritonArgumentError(f"{jit_fn.__name__} {what} (its parameters: {parameters_text(jit_fn)})")
        return {**values, **constexprs}

    def _legacy(self) -> str | None:
        """The variant a signature= call had before (with num_warps and num_stages in it), so that an entry
        written then is found, enforced and moved by an update."""
        if self.signature is None or self.config is not None or self.num_ctas not in (None, 1):
            return None
        if self.maxnreg is not None or self.label or any(":" in str(t) for t in self.signature.values()):
            return None
        warps = DEFAULT_WARPS if self.num_warps is None else self.num_warps
        stages = DEFAULT_STAGES if self.num_stages is None else self.num_stages
        try:
            consts = sorted((self.constexprs or {}).items())
            sig = sorted(self.signature.items())
        except TypeError:
            return None
        return f"triton signature={sig},constexprs={consts},num_warps={warps},num_stages={stages}"

    def ptx(
        self, arch: str, toolkit: Toolkit | None = None, *, native: bool = False, launch: Launch | None = None
    ) -> FrontendPtx:
        """The kernel built for `arch` (see triton_ptx)."""
        return _compile(self, launch or self.launch(arch), arch, toolkit, native)

    def key(self, arch: str, launch: Launch | None = None) -> str | None:
        """The key Triton's own cache gives this compile (triton.compile computes it the same way): Triton's
        code, the function's source with every @jit function it calls and the globals it reads
        (JITFunction.cache_key), the signature, constexprs and attrs, the backend with its ptxas version, the
        options and the environment variables that change code generation. None where this Triton cannot
        say: then the build is not cached."""
        try:
            triton_compiler = _require("triton.compiler.compiler", "triton")
            runtime_cache = _require("triton.runtime.cache", "triton")
            backends = _require("triton.backends.compiler", "triton")
            jit_fn, _ = layers(self.fn)
            limits = _limits(arch)
            made = launch or self.launch(arch)
            src = triton_compiler.ASTSource(
                fn=jit_fn, signature=made.signature, constexprs=made.constexprs, attrs=made.attrs
            )
            backend = triton_compiler.make_backend(
                backends.GPUTarget("cuda", limits.major * 10 + limits.minor, 32)
            )
            options = backend.parse_options(dict(made.options, **src.parse_options()))
            env = triton_compiler.get_cache_invalidating_env_vars()
            return str(runtime_cache.get_cache_key(src, backend, options, env_vars=env))
        except Exception:  # an older or newer Triton without these: build every time, as before
            return None


def _triton_own_ptx_version(cc: int) -> tuple[int, int] | None:
    """The PTX version Triton would pick for `cc` (from the ptxas it runs for that arch), so that the PTX
    suits both it and ours. Triton 3.x internals: None when they move."""
    try:
        nvidia = _require("triton.backends.nvidia.compiler", "triton")
        version = int(nvidia.ptx_get_version(nvidia.get_ptxas(cc).version))
    except Exception:  # any failure just means "unknown"
        return None
    return version // 10, version % 10


def tritons_ptxas(cc: int, log: str) -> Path:
    """The ptxas Triton ran for `cc`: asked of Triton (its `get_ptxas`), else named by its log's prefix
    (`ptxas-blackwell info`), else the one it bundles by that name."""
    knobs = _require("triton.knobs", "triton")
    try:
        nvidia = _require("triton.backends.nvidia.compiler", "triton")
        return Path(nvidia.get_ptxas(cc).path)
    except Exception:  # a Triton without get_ptxas: its log says which of its tools ran
        found = _LOG_TOOL.search(log)
        blackwell = found is not None and "blackwell" in found[1]
        return Path((knobs.nvidia.ptxas_blackwell if blackwell else knobs.nvidia.ptxas).path)


def _compile(job: TritonJob, launch: Launch, arch: str, toolkit: Toolkit | None, native: bool) -> FrontendPtx:
    triton = _require("triton", "triton")
    compiler = _require("triton.compiler", "triton")
    backends = _require("triton.backends.compiler", "triton")
    jit_fn, _ = layers(job.fn)
    limits = _limits(arch)
    cc = limits.major * 10 + limits.minor
    version = triton_version()
    label = f"{jit_fn.__name__} [{arch}]"
    options = dict(launch.options)
    ptx_version = (0, 0)
    if not native:
        toolkit = toolkit if toolkit is not None else discover()
        ptx_version = max_ptx_version(toolkit, limits.base_name)
        own = _triton_own_ptx_version(cc)
        if own is not None:
            ptx_version = min(ptx_version, own)
        options["ptx_version"] = ptx_version[0] * 10 + ptx_version[1]
    source_of = compiler.ASTSource(
        fn=jit_fn, signature=launch.signature, constexprs=launch.constexprs, attrs=launch.attrs
    )
    target = backends.GPUTarget("cuda", cc, 32)
    printed = io.StringIO()
    try:
        if native:
            knobs = _require("triton.knobs", "triton")
            with knobs.nvidia.scope(), knobs.compilation.scope(), contextlib.redirect_stdout(printed):
                knobs.nvidia.dump_ptxas_log = True
                knobs.compilation.always_compile = True
                compiled = triton.compile(source_of, target=target, options=options)
        else:
            compiled = triton.compile(source_of, target=target, options=options)
    except Exception as exc:  # CompilationError, PTXASError, or a plain error from Triton's passes
        raise FrontendError(f"{version} could not compile {label}:\n{exc}", str(exc)) from exc
    ptx = compiled.asm["ptx"]
    metadata = compiled.metadata
    if native:
        ptx_target = _ptx_target(ptx)
    else:
        assert toolkit is not None  # found above
        ptx_target = _check_version(ptx, toolkit, label, f"{version} (asked for PTX {_fmt(ptx_version)})")
    source, line = _where(jit_fn.fn)
    made = FrontendPtx(
        ptx=ptx,
        entry=_single_entry(ptx, label, metadata.name),
        name=jit_fn.__name__,
        source=source,
        line=line,
        frontend=version,
        # Warp specialization may change num_warps during compilation; metadata holds the final one.
        threads=int(metadata.num_warps) * int(getattr(metadata, "warp_size", 32)),
        dynamic_smem=int(metadata.shared or 0),
        ptx_target=ptx_target,
    )
    if not native:
        return made
    log = printed.getvalue()
    tool = tritons_ptxas(cc, log)
    return replace(
        made,
        cubin=bytes(compiled.asm["cubin"]),
        ptxas_log=log,
        ptxas_version=ptxas_version(tool),
        ptxas_origin=f"{version} (its {tool.name})",
    )


def triton_ptx(
    fn: object,
    arch: str,
    *,
    signature: Mapping[str, str] | None = None,
    args: Sequence[object] | Mapping[str, object] | None = None,
    constexprs: Mapping[str, object] | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    num_ctas: int | None = None,
    maxnreg: int | None = None,
    config: object | None = None,
    toolkit: Toolkit | None = None,
    native: bool = False,
) -> FrontendPtx:
    """PTX of a `@triton.jit` kernel for `arch`, as a launch with `args` compiles it (Triton's binder decides
    the specialization), or with `signature` exactly as written ("*fp32", "i32", with AOT hints "*fp16:16",
    "i32:16", "i32:1"). `constexprs` gives tl.constexpr values (a parameter's default is used when it has
    one; `@triton.heuristics` compute theirs); `config` one of an autotuned kernel's configs.

    Not native: within the PTX versions `toolkit`'s ptxas accepts; run ptxas for the result's `ptx_target`
    ("sm_90a" when `arch` is "sm_90"). `native`: as Triton builds it, with its PTX version, the ptxas it
    picks and its options; the result carries Triton's cubin and its ptxas's log (through Triton's public
    knobs: `dump_ptxas_log`, `always_compile` so that its cache cannot skip the ptxas run).
    """
    job = TritonJob(fn, signature, constexprs, num_warps, num_stages, args, num_ctas, maxnreg, config=config)
    return job.ptx(arch, toolkit, native=native)
