"""The `regbudget` fixture: several builds and asserts in one test (`compile`, `compile_source`, `load`,
`compile_triton`, `compile_numba`, `measure`), each judged and reported as a marked kernel is, and GPU timing
through `benchmark`. The fixture is handed the run's session and its item's state; it holds no state of its
own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.errors import (
    CompileError,
    LaunchError,
    MarkerError,
    Unbuildable,
)
from ..core.gpu_facts import Timing
from ..core.kernel_report import KernelReport
from ..core.text import safe_block
from ..engine.session import RegbudgetSession
from ..engine.state import ItemState
from ..gpu.device import Device, device
from ..project.markers import Budget, check_text, compile_options, source_path
from ..sources import KernelSource, SourceSpec
from ..sources import make as make_source
from ..sources.nvrtc import CodeString
from ..tools.options import CompileOptions
from .hooks import ITEM_KEY, session_of

if TYPE_CHECKING:
    from ..sources.python import TritonKernel
    from ..tools.triton import TritonJob

# Each kind of kernel but CUDA C++ is imported by the method that builds it: the binary reader, the Triton and
# Numba adapters together cost a test that takes the fixture about 9 ms (benchmarks/import_speed.py), and
# most such tests compile CUDA C++ only.


class RegbudgetFixture:
    """The `regbudget` fixture: compile kernels inside a test; each is judged by the test's marker."""

    def __init__(self, session: RegbudgetSession, state: ItemState, nodeid: str, test_dir: Path) -> None:
        self._session = session
        self._state = state
        self._nodeid = nodeid
        self._test_dir = test_dir

    @property
    def arch(self) -> str:
        """The arch this run of the test is for (the id's last part)."""
        return self._state.arch

    @property
    def reports(self) -> list[KernelReport]:
        """This test's kernels so far, judged; empty once the test is torn down (its records stay)."""
        return list(self._state.reports)

    @property
    def gpu(self) -> Device | None:
        """The CUDA device when this instance of the test runs the GPU checks, else None.

        Use it to build launch arguments only when they will be used: `regbudget.gpu.cupy` is CuPy.
        """
        if self._session.gpu_arch(self._state) is None:
            return None

        return device()

    def compile(
        self,
        source: str | os.PathLike[str],
        kernel: str,
        *,
        defines: dict[str, object] | Sequence[str] | None = None,
        include_dirs: Sequence[str | os.PathLike[str]] = (),
        options: Sequence[str] = (),
        ptxas_options: Sequence[str] = (),
        compiler: str | None = None,
        depends: Sequence[str | os.PathLike[str]] = (),
    ) -> KernelReport:
        """Compile `kernel` of `source` for `self.arch`. As in the marker, `$VAR` and `{package}/...` (a file
        of an installed package) expand, and a relative path is from the test file's dir.

        `compiler="nvcc"` builds a translation unit with host code (`options` are then nvcc flags); the
        default is the marker's `compiler`, else ini `regbudget_compiler`, else NVRTC. `depends` names files
        the compile cache cannot find by itself (such as a header included through a macro), as the marker's.
        """
        __tracebackhide__ = True
        opts = self._options(
            defines, include_dirs, options, ptxas_options, depends, source=source, kernel=kernel
        )
        chosen = compiler or (self._state.budget or Budget()).compiler or self._session.settings.compiler
        return self._measure_one(make_source(chosen, SourceSpec(self._source(source), kernel, opts)))

    def compile_source(
        self,
        code: str,
        kernel: str,
        *,
        name: str = "kernel.cu",
        defines: dict[str, object] | Sequence[str] | None = None,
        include_dirs: Sequence[str | os.PathLike[str]] = (),
        options: Sequence[str] = (),
        ptxas_options: Sequence[str] = (),
        depends: Sequence[str | os.PathLike[str]] = (),
    ) -> KernelReport:
        """Compile `kernel` from a code string, as CuPy's RawKernel would. `name` is what errors (and the
        reports) call the code; `#include "x.h"` resolves against the test file's directory."""
        __tracebackhide__ = True

        opts = self._options(defines, include_dirs, options, ptxas_options, depends, name=name, kernel=kernel)
        return self._measure_one(CodeString(self._test_dir / name, code, kernel, opts))

    def load(self, path: str | os.PathLike[str], kernel: str | None = None) -> list[KernelReport]:
        """Read the kernels of a prebuilt cubin, fatbin, object or shared library for `self.arch` (all of
        them, or `kernel` only), judged by the marker's budgets. Spills are reported only where the binary
        records them."""
        __tracebackhide__ = True

        self._options(None, (), (), (), path=path, kernel=kernel)
        from ..sources.prebuilt import Binary

        return self.measure(Binary(self._source(path), kernel))

    def compile_triton(
        self,
        fn: Any,
        *,
        args: Sequence[Any] | Mapping[str, Any] | None = None,
        signature: Mapping[str, str] | None = None,
        constexprs: Mapping[str, object] | None = None,
        num_warps: int | None = None,
        num_stages: int | None = None,
        num_ctas: int | None = None,
        maxnreg: int | None = None,
        config: Any = None,
        variant: str | None = None,
    ) -> KernelReport:
        """Compile a `@triton.jit` function for `self.arch` as a launch compiles it, with Triton's own ptxas
        (no GPU needed).

        `args`: what the launch passes (a sequence in parameter order, or a mapping by name): tensors (torch's
        on any device, `MockTensor`, anything with `dtype` and `data_ptr()`), a torch dtype alone for an
        aligned tensor, ints, floats, bools, None. Triton's own binder specializes them (16-byte alignment,
        ints divisible by 16, ints equal to 1 and None). `signature`, instead: the types compiled exactly as
        written, with Triton's AOT hints ("*fp16:16", "i32:16", "i32:1"). `config`: one config of an
        @triton.autotune function. `variant`: a name of its own for this build's baseline entry.
        Its block is num_warps * 32 threads, the launch the verdict assumes."""
        __tracebackhide__ = True
        from ..tools.triton import TritonJob

        job = TritonJob(
            fn, signature, constexprs, num_warps, num_stages, args, num_ctas, maxnreg, config, variant
        )
        return self._measure_one(self._triton(job))

    def compile_triton_configs(
        self,
        fn: Any,
        *,
        args: Sequence[Any] | Mapping[str, Any] | None = None,
        signature: Mapping[str, str] | None = None,
        constexprs: Mapping[str, object] | None = None,
        configs: Sequence[Any] | None = None,
    ) -> list[KernelReport]:
        """One report per config of an `@triton.autotune` function (`configs`, or all of `fn.configs`), each
        built with the config's kwargs, num_warps, num_stages, num_ctas and maxnreg, as compile_triton builds
        one, and judged by the marker's budgets. Each has a baseline entry of its own."""
        __tracebackhide__ = True
        from ..tools.triton import TritonJob
        from ..tools.triton_launch import kernel_name

        chosen = list(configs) if configs is not None else list(getattr(fn, "configs", None) or [])
        if not chosen:
            raise ValueError(
                f"compile_triton_configs: {kernel_name(fn)} has no configs: decorate it with "
                "@triton.autotune(configs=[...]), or pass configs=[triton.Config(...)]"
            )
        reports: list[KernelReport] = []
        for config in chosen:
            job = TritonJob(fn, signature, constexprs, args=args, config=config)
            reports += self.measure(self._triton(job))
        return reports

    def _triton(self, job: TritonJob) -> TritonKernel:
        """The source of one Triton build, its call checked first: arguments that name no launch are the
        test's error, said plainly (a ValueError), as a bad argument of compile() is."""
        __tracebackhide__ = True
        from ..sources.python import TritonKernel
        from ..tools.triton_launch import TritonArgumentError

        try:
            job.launch(self.arch)
        except TritonArgumentError as exc:
            raise ValueError(safe_block(str(exc))) from None
        except CompileError:
            pass  # a Triton that cannot bind: the build fails again under measure(), as an error row
        return TritonKernel(job, self._test_dir)

    def compile_numba(self, fn: Any, signature: object) -> KernelReport:
        """Compile a Python function with Numba for `self.arch`, no GPU needed: numba-cuda lowers it to NVVM
        IR, which the libNVVM of this run's toolkit turns into PTX for this run's ptxas to measure."""
        __tracebackhide__ = True
        from ..sources.python import numba_kernel

        return self._measure_one(numba_kernel(fn, signature, self._test_dir))

    def measure(self, source: KernelSource) -> list[KernelReport]:
        """Build any kernel source (an object implementing `pytest_regbudget.sources.KernelSource`) for
        `self.arch` and judge its kernels by the marker's budgets, as the methods above do."""
        __tracebackhide__ = True
        try:
            return self._session.measure(self._state, self._nodeid, source)
        except Unbuildable as exc:
            pytest.skip(safe_block(str(exc)))
        except CompileError as exc:
            kernel = source.kernel or str(source.where)
            self._session.record_error(self._state, self._nodeid, kernel, source.where, str(exc))
            # A fresh exception keeps the plugin's internals out of the user's traceback.
            raise type(exc)(safe_block(str(exc)), exc.log) from None

    def _measure_one(self, source: KernelSource) -> KernelReport:
        __tracebackhide__ = True
        (report,) = self.measure(source)
        return report

    def _source(self, given: str | os.PathLike[str]) -> Path:
        """A source or binary named by a call, expanded as the marker's `source`; a bad one is the test's
        error (a ValueError)."""
        try:
            return source_path(os.fspath(given), self._test_dir)
        except MarkerError as exc:
            raise ValueError(safe_block(str(exc))) from None

    def _options(
        self,
        defines: dict[str, object] | Sequence[str] | None,
        include_dirs: Sequence[str | os.PathLike[str]],
        options: Sequence[str],
        ptxas_options: Sequence[str],
        depends: Sequence[str | os.PathLike[str]] = (),
        **named: object,
    ) -> CompileOptions:
        """The compile keys, checked as a marker's; `named`: the call's names (kernel, source), checked as a
        marker's strings are."""
        given = {
            "defines": defines,
            "include_dirs": include_dirs,
            "options": options,
            "ptxas_options": ptxas_options,
            "depends": depends,
        }
        try:
            for key, value in named.items():
                check_text(key, value)
            return compile_options(given, self._test_dir)
        except MarkerError as exc:
            # The same rules as the marker's keys: a bad argument is the test's error, said plainly.
            raise ValueError(safe_block(str(exc))) from None

    def benchmark(
        self,
        kernel: str | KernelReport,
        grid: int | tuple[int, ...],
        block: int | tuple[int, ...],
        args: Sequence[Any],
        *,
        dynamic_smem: int = 0,
        flush_l2: bool = True,
    ) -> Timing | None:
        """Launch the very cubin ptxas measured for `kernel` (a name compiled in this test, or its report)
        and time it with CUDA events: warm-up, L2 flush per sample, samples until the noise is low.

        Returns None where GPU checks do not run (no GPU, --regbudget-gpu=off, or another arch's instance
        of this test); the summary says why. Time budgets (max_time_ms, max_time_ratio) are judged when
        the test ends.
        """
        __tracebackhide__ = True
        grid_t = (grid,) if isinstance(grid, int) else tuple(grid)
        block_t = (block,) if isinstance(block, int) else tuple(block)
        try:
            return self._session.benchmark(self._state, kernel, grid_t, block_t, args, dynamic_smem, flush_l2)
        except LaunchError as exc:
            message = str(exc)
        pytest.fail(safe_block(message), pytrace=False)


def make_fixture(request: pytest.FixtureRequest) -> RegbudgetFixture:
    """The `regbudget` fixture's value (entry.py defines the fixture, which every pytest run loads)."""
    state = request.node.stash.get(ITEM_KEY, None)
    if state is None:  # pragma: no cover - every test using the fixture is parametrized by arch
        raise pytest.UsageError("the regbudget fixture has no arch; is the plugin registered?")
    return RegbudgetFixture(session_of(request.config), state, request.node.nodeid, Path(request.path).parent)
