"""What each toolkit builds, read from the toolkit (nvrtcGetSupportedArchs, `nvcc --list-gpu-code`) and
remembered with it, and the one line for an arch a compiler does not build: its words for each reason
(renamed, dropped, newer than the compiler) and each way to pick another compiler. The wheels' real NVRTC,
ptxas and nvcc; the messages also from `Targets` made by hand, for releases no wheel here has."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from msgspec.structs import replace

from pytest_regbudget.core.arch import SUPPORTED_ARCHS
from pytest_regbudget.core.errors import CompileError, Rejected
from pytest_regbudget.tools import nvcc
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.nvrtc import compile_ptx
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.ptxas import run_ptxas
from pytest_regbudget.tools.running import ToolMemo
from pytest_regbudget.tools.targets import (
    NVCC_OPTION,
    TOOLKIT_OPTION,
    Targets,
    assembled_by,
    gpu_names,
    in_explain_words,
    with_variants,
)
from pytest_regbudget.tools.toolkit import Toolkit, discover, nvrtc_archs, ptxas_archs

KERNELS = Path(__file__).parent.parent / "kernels"
PTXAS_HELP = Path(__file__).parent.parent / "data" / "ptxas_help"


@pytest.fixture(scope="module")
def cu12() -> Toolkit:
    return discover(named="cu12")


@pytest.fixture(scope="module")
def cu13() -> Toolkit:
    return discover(named="cu13")


def cuda(release: str, *numbers: int, option: str = TOOLKIT_OPTION) -> Targets:
    who = f"NVRTC {release}.1 (here)" if option == TOOLKIT_OPTION else f"nvcc {release}.1 (/x/nvcc)"
    return Targets(who, release, with_variants(f"sm_{n}" for n in numbers), option)


CUDA_12_9 = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121)
CUDA_13_0 = (75, 80, 86, 87, 88, 89, 90, 100, 110, 103, 120, 121)
CUDA_13_5 = (*CUDA_13_0, 107)


# -- read from the toolkit ---------------------------------------------------------------------------------


def test_each_wheels_nvrtc_says_what_it_builds(cu12: Toolkit, cu13: Toolkit) -> None:
    assert cu12.archs == nvrtc_archs(cu12.require_nvrtc())
    assert {"sm_50", "sm_70", "sm_101", "sm_121"} <= set(cu12.archs)
    assert not {"sm_88", "sm_107", "sm_110"} & set(cu12.archs)
    assert {"sm_75", "sm_88", "sm_107", "sm_110", "sm_121"} <= set(cu13.archs)
    assert not {"sm_70", "sm_72", "sm_101"} & set(cu13.archs)


def test_the_archs_are_remembered_with_the_toolkit(
    tmp_path: Path, fresh_discovery: None, cu13: Toolkit
) -> None:
    memo = tmp_path / "tools"
    first = discover(named="cu13", memo=ToolMemo(memo))
    assert first.archs == cu13.archs
    toolchain._discover_cached.cache_clear()
    assert discover(named="cu13", memo=ToolMemo(memo)).archs == cu13.archs


def test_the_ptxas_gpu_name_list_is_read_from_its_help() -> None:
    # Recorded `ptxas --help` of the 12.9 and 13.5 wheels: the sm_ values of --gpu-name, not compute_/lto_.
    old = gpu_names((PTXAS_HELP / "help_12.9.txt").read_text())
    new = gpu_names((PTXAS_HELP / "help_13.5.txt").read_text())
    assert old[:3] == ("sm_100", "sm_100a", "sm_100f")
    assert old[-1] == "sm_90a"
    assert len(old) == 30
    assert len(new) == 26
    assert {"sm_50", "sm_101f", "sm_90a"} <= set(old)
    assert not {"sm_88", "sm_107", "sm_110"} & set(old)
    assert {"sm_88", "sm_107f", "sm_110a"} <= set(new)
    assert not {"sm_70", "sm_101"} & set(new)
    assert not [a for a in (*old, *new) if not a.startswith("sm_")]
    assert gpu_names("--gpu-name <gpu name>\n        Specify name of NVIDIA GPU\n--help\n") == ()


def test_each_wheels_ptxas_says_what_it_assembles(cu12: Toolkit, cu13: Toolkit) -> None:
    for toolkit, recorded in ((cu12, "help_12.9.txt"), (cu13, "help_13.5.txt")):
        assert toolkit.ptxas_archs == ptxas_archs(toolkit.ptxas)
        assert toolkit.ptxas_archs == gpu_names((PTXAS_HELP / recorded).read_text())
        # The wheels' NVRTC and ptxas agree: nothing is taken out.
        assert toolkit.targets().archs == with_variants(toolkit.archs)
    assert ptxas_archs(KERNELS / "hungry.cu") == ()  # not a program: its first build says why


def test_an_arch_nvrtc_lists_and_its_ptxas_lacks_is_refused_before_the_build(
    cu12: Toolkit, cu13: Toolkit
) -> None:
    """NVRTC 13.5 with ptxas 12.9 (each list read from the real tool): sm_110 is refused before NVRTC runs,
    in one line naming ptxas, its release and what builds it; what both take still builds."""
    mixed = replace(cu13, ptxas=cu12.ptxas, ptxas_version=cu12.ptxas_version, ptxas_archs=cu12.ptxas_archs)
    targets = mixed.targets()
    assert targets.builds("sm_90a")
    assert not targets.builds("sm_110")
    assert not targets.builds("sm_88")
    source = KERNELS / "hungry.cu"
    with pytest.raises(CompileError) as caught:
        compile_ptx(source.read_text(), str(source), "sm_110", CompileOptions(), mixed)
    assert not isinstance(caught.value, Rejected)
    assert str(caught.value) == (
        f"ptxas {cu12.ptxas_version} ({cu12.ptxas}) does not build sm_110 (its --gpu-name list lacks it), "
        f"though NVRTC {cu13.nvrtc_version} ({cu13.origin}) lists it: CUDA 13.0 and 13.5 build it. "
        'Fix: run with --regbudget-toolkit=cu13 (pip install "pytest-regbudget[cu13]")'
    )
    assert "\n" not in str(caught.value)
    assert compile_ptx(source.read_text(), str(source), "sm_90", CompileOptions(), mixed).ptx
    # Where NVRTC cannot say, ptxas's list stands for it; where ptxas cannot, nothing changes.
    assert assembled_by(cuda("13.5"), "ptxas", ("sm_90",)).archs == ("sm_90",)
    assert assembled_by(cuda("13.5", 90), "ptxas", ()) == cuda("13.5", 90)


def test_a_library_that_does_not_load_says_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "libnvrtc.so.13"
    empty.write_bytes(b"")
    assert nvrtc_archs(empty) == ()
    assert cuda("13.5").builds("sm_999")  # an empty list builds everything: the compiler's own error decides


def test_nvcc_lists_its_archs_once(cu13: Toolkit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = cu13.ptxas.parent / "nvcc"
    if not path.is_file():
        pytest.skip(f"no nvcc in the CUDA 13 wheel at {path}")
    listed = subprocess.run([str(path), "--list-gpu-code"], capture_output=True, text=True, check=True)
    found = nvcc.find_nvcc(None, ToolMemo(tmp_path / "tools"), pinned=path)
    assert found.archs == tuple(listed.stdout.split())
    assert {"sm_88", "sm_107", "sm_110"} <= set(found.archs)

    def refuse(cmd: list[str], timeout: float) -> tuple[int, str]:
        raise AssertionError(f"a remembered nvcc started {cmd}")

    monkeypatch.setattr(nvcc, "run_tool", refuse)
    assert nvcc.find_nvcc(None, ToolMemo(tmp_path / "tools"), pinned=path) == found


def test_variants_follow_the_table() -> None:
    assert with_variants(["sm_88", "sm_90", "sm_110", "sm_60"]) == (
        "sm_88",
        "sm_90",
        "sm_90a",
        "sm_110",
        "sm_110a",
        "sm_110f",
        "sm_60",
    )


# -- the one line -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("targets", "arch", "expected"),
    [
        (
            cuda("12.9", *CUDA_12_9),
            "sm_110",
            "NVRTC 12.9.1 (here) does not build sm_110: CUDA 13.0 and 13.5 build it. Fix: run with "
            '--regbudget-toolkit=cu13 (pip install "pytest-regbudget[cu13]")',
        ),
        (
            cuda("12.9", *CUDA_12_9),
            "sm_107f",
            "NVRTC 12.9.1 (here) does not build sm_107f: CUDA 13.5 builds it. Fix: run with "
            '--regbudget-toolkit=cu13 (pip install "pytest-regbudget[cu13]")',
        ),
        (
            cuda("13.5", *CUDA_13_5),
            "sm_101a",
            "NVRTC 13.5.1 (here) does not build sm_101a: CUDA 13 calls this arch sm_110a. Fix: "
            "--regbudget-arch=sm_110a (sm_101a is CUDA 12's name: run with --regbudget-toolkit=cu12)",
        ),
        (
            cuda("13.5", *CUDA_13_5),
            "sm_72",
            "NVRTC 13.5.1 (here) does not build sm_72: its oldest target is sm_75; CUDA 13 dropped sm_72. "
            "Fix: build it with CUDA 12.x: run with --regbudget-toolkit=cu12",
        ),
        (
            cuda("13.0", *CUDA_13_0, option=NVCC_OPTION),
            "sm_107",
            "nvcc 13.0.1 (/x/nvcc) does not build sm_107: CUDA 13.5 builds it. Fix: pin an nvcc of CUDA 13.5 "
            'with --regbudget-nvcc (pip install "pytest-regbudget[nvcc]" installs one)',
        ),
        (
            cuda("13.5", *CUDA_13_5, option=NVCC_OPTION),
            "sm_70",
            "nvcc 13.5.1 (/x/nvcc) does not build sm_70: its oldest target is sm_75; CUDA 13 dropped sm_70. "
            "Fix: build it with CUDA 12.x: pin an nvcc of CUDA 12.x with --regbudget-nvcc (a CUDA 12 "
            "install's bin/nvcc)",
        ),
    ],
)
def test_the_refusal_says_why_and_what_builds_it(targets: Targets, arch: str, expected: str) -> None:
    assert targets.refusal(arch) == expected
    assert "newer" not in expected
    assert "\n" not in expected


def test_every_arch_of_the_table_is_built_by_a_release_the_advice_can_name() -> None:
    """No arch of the table ends in `drop it` for every compiler: some release of 12.9, 13.0 and 13.5 builds
    each, and the refusal of the others names it."""
    for arch in SUPPORTED_ARCHS:
        refusals = [t.refusal(arch) for t in (cuda("12.9", *CUDA_12_9), cuda("13.5", *CUDA_13_5))]
        assert None in refusals, arch
        assert all(r is None or "Fix: drop" not in r for r in refusals), refusals


def test_explain_words_the_advice_with_its_own_options() -> None:
    line = cuda("13.5", *CUDA_13_5).refusal("sm_101")
    assert line is not None
    assert in_explain_words(line).endswith(
        "Fix: --arch sm_110 (sm_101 is CUDA 12's name: run with --toolkit cu12)"
    )


# -- where each build says it --------------------------------------------------------------------------------


def test_nvrtc_refuses_before_compiling(cu12: Toolkit) -> None:
    source = KERNELS / "hungry.cu"
    with pytest.raises(CompileError) as caught:
        compile_ptx(source.read_text(), str(source), "sm_88", CompileOptions(), cu12)
    assert not isinstance(caught.value, Rejected)  # no verdict on the source: nothing cached as failed
    assert str(caught.value).startswith("NVRTC 12.9.")
    assert "does not build sm_88: CUDA 13.0 and 13.5 build it" in str(caught.value)


def test_ptxas_refusing_an_arch_names_the_release_that_builds_it(cu12: Toolkit, cu13: Toolkit) -> None:
    """PTX from NVRTC 13.5 for sm_110 handed to ptxas 12.9 (as a front end of a later release would):
    ptxas's own error, then the line that says what builds sm_110."""
    source = KERNELS / "hungry.cu"
    ptx = compile_ptx(source.read_text(), str(source), "sm_110", CompileOptions(), cu13).ptx
    with pytest.raises(Rejected) as caught:
        run_ptxas(ptx, "sm_110", [], cu12)
    last = str(caught.value).splitlines()[-1]
    assert last.startswith(f"ptxas {cu12.ptxas_version} ({cu12.ptxas}) does not build sm_110: CUDA 13.0")
    assert "newer" not in str(caught.value)


def test_nvcc_refuses_before_running(cu13: Toolkit, tmp_path: Path) -> None:
    path = cu13.ptxas.parent / "nvcc"
    if not path.is_file():
        pytest.skip(f"no nvcc in the CUDA 13 wheel at {path}")
    found = nvcc.find_nvcc(None, ToolMemo(tmp_path / "tools"), pinned=path)
    with pytest.raises(CompileError) as caught:
        nvcc.build_nvcc_unit(KERNELS / "hungry.cu", "sm_101", CompileOptions(), found)
    assert not isinstance(caught.value, Rejected)
    assert str(caught.value) == (
        f"hungry.cu [sm_101]: nvcc {found.version} ({path}, from --regbudget-nvcc) does not build sm_101: "
        "CUDA 13 calls this arch sm_110. Fix: --regbudget-arch=sm_110 (sm_101 is CUDA 12's name: pin an nvcc "
        "of CUDA 12.x with --regbudget-nvcc (a CUDA 12 install's bin/nvcc))"
    )
