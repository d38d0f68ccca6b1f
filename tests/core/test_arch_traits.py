"""The arch table against its second source: CCCL's `cuda/__device/arch_traits.h` from the CUDA 13 wheels the
test extras install (nvidia/cu13/include/cccl), compiled by the host C++ compiler and asked for every arch of
the table. cuda_occupancy.h (tests/core/test_occupancy.py) checks the occupancy arithmetic; this checks the
per-SM and per-block numbers that the header takes from the device.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
from msgspec.structs import replace

from pytest_regbudget.core.arch import ARCHS, SUPPORTED_ARCHS, get_arch

PROGRAM = r"""
#include <cuda/__device/arch_traits.h>
#include <cstdio>

// The throw for an unknown arch formats its message with the runtime's cudaGetErrorString; this program links
// no runtime (it needs none: the traits are constants).
const char* cudaGetErrorString(cudaError_t) { return "no CUDA runtime here"; }

// One compute capability (e.g. 110) per line in; its traits out, or "unknown" where CCCL has none.
int main() {
    int cc;
    while (std::scanf("%d", &cc) == 1) {
        try {
            const cuda::arch_traits_t t = cuda::arch_traits_for(cuda::compute_capability{cc});
            std::printf("%d %d %d %d %d %zu %zu %zu %d\n", t.max_threads_per_block,
                        t.max_threads_per_multiprocessor, t.max_blocks_per_multiprocessor,
                        t.max_registers_per_multiprocessor, t.max_registers_per_block,
                        t.max_shared_memory_per_multiprocessor, t.max_shared_memory_per_block_optin,
                        t.reserved_shared_memory_per_block, t.warp_size);
        } catch (...) {
            std::printf("unknown\n");
        }
    }
    return 0;
}
"""
# Archs CCCL 3.5 has no traits for: Volta's Jetson part, and Thor under its CUDA 12 name (CUDA 13 calls it
# sm_110, which it has).
NOT_IN_TRAITS = {"sm_72", "sm_101"}


def _cccl_include() -> Path:
    spec = importlib.util.find_spec("nvidia")
    for root in [] if spec is None else list(spec.submodule_search_locations or []):
        include = Path(root) / "cu13" / "include"
        if (include / "cccl" / "cuda" / "__device" / "arch_traits.h").is_file():
            return include
    pytest.fail("no nvidia/cu13/include/cccl/cuda/__device/arch_traits.h: install the test extras")


@pytest.fixture(scope="module")
def traits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, ...] | None]:
    compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no host C++ compiler (g++, c++, clang++) on PATH to compile arch_traits.h")
    include = _cccl_include()
    where = tmp_path_factory.mktemp("arch_traits")
    (where / "traits.cpp").write_text(PROGRAM)
    exe = where / "traits"
    cmd = [compiler, "-std=c++17", "-I", str(include / "cccl"), "-I", str(include), str(where / "traits.cpp")]
    built = subprocess.run([*cmd, "-o", str(exe)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, f"{' '.join(cmd)} failed:\n{built.stdout}{built.stderr}"
    numbers = [get_arch(a).major * 10 + get_arch(a).minor for a in SUPPORTED_ARCHS]
    ran = subprocess.run(
        [str(exe)], input="\n".join(map(str, numbers)), capture_output=True, text=True, check=True
    )
    rows = ran.stdout.splitlines()
    assert len(rows) == len(numbers)
    return {
        arch: None if row == "unknown" else tuple(int(f) for f in row.split())
        for arch, row in zip(SUPPORTED_ARCHS, rows, strict=True)
    }


def _ours(arch: str) -> tuple[int, ...]:
    lim = ARCHS[arch]
    return (
        lim.max_threads_per_block,
        lim.max_threads_per_sm,
        lim.max_blocks_per_sm,
        lim.regs_per_sm,
        lim.max_regs_per_block,
        lim.smem_per_sm,
        lim.smem_per_block_optin,
        lim.reserved_smem_per_block,
        lim.warp_size,
    )


@pytest.mark.parametrize("arch", sorted(set(SUPPORTED_ARCHS) - NOT_IN_TRAITS))
def test_table_row_equals_arch_traits(traits: dict[str, tuple[int, ...] | None], arch: str) -> None:
    # sm_107 included: its 228 KB per SM is traits' (the 13.5 header's carveout steps reach 328 KB).
    assert _ours(arch) == traits[arch]


def test_traits_lack_exactly_the_archs_the_table_cites_elsewhere(
    traits: dict[str, tuple[int, ...] | None],
) -> None:
    assert {arch for arch, row in traits.items() if row is None} == NOT_IN_TRAITS


def test_sm_101_is_sm_110_by_its_cuda_12_name() -> None:
    ours, cuda13 = get_arch("sm_101"), get_arch("sm_110")
    assert replace(ours, name="sm_110", major=11, minor=0) == cuda13
