"""What a kernel source is (`KernelSource`), what it may build with (`BuildEnv`), and what a marker or a
fixture call names (`SourceSpec`). The registry of sources by name is sources/__init__.py; each kind of
source is a module beside this one, and imports these types from here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from msgspec import Struct

from ..core.facts import KernelFacts
from ..tools.options import CompileOptions
from ..tools.outputs import CompiledKernel
from ..tools.toolkit import Nvcc, Toolkit
from ..tools.units import Spec

if TYPE_CHECKING:
    from ..tools.cuobjdump import Held
    from ..tools.frontends import FrontendPtx


class BuildEnv(Protocol):
    """What a source may use to build: the run's toolkit, nvcc, the compile cache and its settings.

    The session gives each test its own (line info follows that test's budgets).
    """

    ptxas_timeout: float

    def toolkit(self) -> Toolkit: ...

    def toolkit_or_none(self) -> Toolkit | None: ...

    def nvcc(self) -> Nvcc: ...

    def compile(self, spec: Spec, source_text: str | None = None) -> CompiledKernel:
        """NVRTC or nvcc through the compile cache (and the prefetch pool, for files)."""
        ...

    def options_hash(self, options: CompileOptions) -> str:
        """The baseline's digest of `options` (paths relative to the rootdir)."""
        ...

    def build_settings(self, options: CompileOptions) -> tuple[str, ...]:
        """The build settings a baseline entry records for `options` (paths relative to the rootdir)."""
        ...

    def frontend(self, key: str | None, make: Callable[[], FrontendPtx]) -> FrontendPtx:
        """A Python front end's build through the compile cache, by the front end's own key (None: not
        cached)."""
        ...

    def binary(self, path: Path, arch: str) -> Held:
        """The kernels a prebuilt binary holds for `arch` (cuobjdump, through the binary cache)."""
        ...


class KernelSource(Protocol):
    """One way to get kernels: build (or read) them for an arch and say what was measured."""

    @property
    def where(self) -> Path:
        """The file errors and annotations name (a code string's name, a Python function's file)."""
        ...

    @property
    def kernel(self) -> str | None:
        """The kernel asked for, as the user wrote it; None for every kernel the source holds."""
        ...

    @property
    def loadable(self) -> bool:
        """Whether its cubins can be loaded on a GPU for the driver checks and timing."""
        ...

    def plan(self, arch: str, env: BuildEnv) -> Spec | None:
        """What the compile cache keys this build on, to start it ahead of the test; None when the source
        is not cached (it is built when the test runs)."""
        ...

    def build(self, arch: str, env: BuildEnv) -> list[KernelFacts]:
        """The kernels for `arch`; raises CompileError (or a subclass) with the tool's log."""
        ...


class SourceSpec(Struct, frozen=True):
    """What a marker or a fixture call names: a file, a kernel and how to compile it."""

    path: Path
    kernel: str | None
    options: CompileOptions | None = None
