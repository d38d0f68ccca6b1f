"""Failed builds in the compile cache (issue 39): a build the compiler rejected costs no compiler run while
nothing it could read changes, and is never returned once something has: the missing header appearing in a
searched directory, a header edited, the source or the flags changed. A damaged failure document is
rebuilt, and a failure that is not the compiler's verdict (a timeout) is not kept. Real NVRTC + ptxas and nvcc
from the wheels; the compilers are only counted, never replaced."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_regbudget.cache.store import CompileCache, compile_kernel
from pytest_regbudget.core.errors import CompileError, Rejected, ToolchainError
from pytest_regbudget.tools import compiler as compiler_module
from pytest_regbudget.tools import nvcc as nvcc_module
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.options import CompileOptions

SOURCE = '#include "size.h"\nextern "C" __global__ void k(float* x) { x[threadIdx.x] *= SIZE; }\n'


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each real compiler run, by kind: the compilers run; they are only counted."""
    runs: list[str] = []

    def count(kind: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            runs.append(kind)
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(compiler_module, "build_unit", count("nvrtc", compiler_module.build_unit))
    monkeypatch.setattr(nvcc_module, "build_nvcc_unit", count("nvcc", nvcc_module.build_nvcc_unit))
    return runs


def attempt(source: Path, cache_dir: Path, options: CompileOptions, nvcc: Any = None) -> str:
    """Build `k` through a cache on `cache_dir` (a new one each time, as a new run has); its registers, or
    the error's first line."""
    try:
        built = compile_kernel(
            source, "k", "sm_90", options, toolchain.discover(None), nvcc=nvcc, cache=CompileCache(cache_dir)
        )
    except CompileError as exc:
        return "error: Rejected" if isinstance(exc, Rejected) else f"error: {exc.__class__.__name__}"
    return f"{built.facts.resources.registers} registers"


def test_a_failed_nvrtc_build_is_cached_until_what_it_could_read_changes(
    tmp_path: Path, counted: list[str]
) -> None:
    cache, source = tmp_path / "cache", tmp_path / "src" / "k.cu"
    source.parent.mkdir()
    source.write_text(SOURCE)
    inc = tmp_path / "inc"
    inc.mkdir()
    options = CompileOptions.make(include_dirs=[str(inc)])
    assert attempt(source, cache, options) == "error: Rejected"
    assert attempt(source, cache, options) == "error: Rejected"
    assert counted == ["nvrtc"]  # the second run read the failure from the cache
    # The missing header appears in a searched directory: rebuilt, and it builds.
    (inc / "size.h").write_text("#define SIZE 2.0f\n")
    assert attempt(source, cache, options).endswith("registers")
    assert counted == ["nvrtc", "nvrtc"]
    # The header edited into an error: rebuilt, and fails; again from the cache.
    (inc / "size.h").write_text("#define SIZE not_defined_anywhere\n")
    assert attempt(source, cache, options) == "error: Rejected"
    assert attempt(source, cache, options) == "error: Rejected"
    assert counted == ["nvrtc"] * 3
    # Other flags are another build: a define that makes it build.
    defined = CompileOptions.make(include_dirs=[str(inc)], defines=["not_defined_anywhere=1.0f"])
    assert attempt(source, cache, defined).endswith("registers")
    assert counted == ["nvrtc"] * 4


def test_a_damaged_failure_document_is_rebuilt_not_trusted(tmp_path: Path, counted: list[str]) -> None:
    cache, source = tmp_path / "cache", tmp_path / "k.cu"
    source.write_text(SOURCE)
    assert attempt(source, cache, CompileOptions()) == "error: Rejected"
    (document,) = [p for p in cache.rglob("*.json") if "failed" in p.parts]
    document.write_text("{ not json")
    assert attempt(source, cache, CompileOptions()) == "error: Rejected"
    assert counted == ["nvrtc", "nvrtc"]


def test_a_timeout_is_not_kept(tmp_path: Path) -> None:
    """ptxas killed after a millisecond fails the build, but says nothing of the source: the next run with
    time enough builds it."""
    source = tmp_path / "k.cu"
    source.write_text(SOURCE.replace('#include "size.h"\n', "#define SIZE 2.0f\n"))
    cache = CompileCache(tmp_path / "cache")
    toolkit = toolchain.discover(None)
    with pytest.raises(CompileError) as info:
        compile_kernel(source, "k", "sm_90", CompileOptions(), toolkit, ptxas_timeout=0.001, cache=cache)
    assert not isinstance(info.value, Rejected)
    again = compile_kernel(
        source, "k", "sm_90", CompileOptions(), toolkit, cache=CompileCache(tmp_path / "cache")
    )
    assert again.facts.resources.registers > 0


def test_a_failed_nvcc_build_is_cached_until_the_missing_header_appears(
    tmp_path: Path, counted: list[str]
) -> None:
    try:
        nvcc = find_nvcc(toolchain.discover(None), None)
    except (CompileError, ToolchainError) as exc:
        pytest.skip(f"needs nvcc: {exc}")
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("nvcc needs a host C++ compiler")
    cache, source = tmp_path / "cache", tmp_path / "src" / "k.cu"
    source.parent.mkdir()
    source.write_text(SOURCE)
    inc = tmp_path / "inc"
    inc.mkdir()
    options = CompileOptions.make(options=[f"-I{inc}"])
    assert attempt(source, cache, options, nvcc) == "error: Rejected"
    assert attempt(source, cache, options, nvcc) == "error: Rejected"
    assert counted == ["nvcc"]
    (inc / "size.h").write_text("#define SIZE 3.0f\n")
    assert attempt(source, cache, options, nvcc).endswith("registers")
    assert counted == ["nvcc", "nvcc"]
    # The source edited back into an error: rebuilt.
    source.write_text(SOURCE.replace("SIZE;", "SIZE + oops;"))
    assert attempt(source, cache, options, nvcc) == "error: Rejected"
    assert counted == ["nvcc"] * 3
