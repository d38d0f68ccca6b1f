"""Kernels read back from real binaries with cuobjdump, checked number by number against ptxas.

nvcc (the CUDA 13 wheel) and g++ build data/binary/kernels.cu into a cubin, fatbins (sm_80 + sm_90 with
PTX; sm_75, sm_90a, sm_100, sm_120; PTX only), an object file, a relocatable object and a shared library
with host code, once per session, with `-Xptxas -v`: whatever cuobjdump says about a kernel must be what
ptxas said when it built it. The pure parsers also run on
recorded listings of the same builds, and of an 11.8 cubin (data/binary/README.md).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.core.arch import get_arch
from pytest_regbudget.core.cuobjdump import escape_names, parse_elf_dump, parse_resource_usage
from pytest_regbudget.core.errors import BinaryError, ParseError
from pytest_regbudget.core.metrics import KernelResources
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.tools import cuobjdump as binary
from pytest_regbudget.tools.cuobjdump import BinaryKernel, combine_listings, find_cuobjdump, read_binary
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Toolkit, discover, nvidia_roots

DATA = Path(__file__).parents[1] / "data" / "binary"
SOURCE = DATA / "kernels.cu"

# The launch bounds kernels.cu declares; every other kernel has none.
MAX_THREADS = {"bounded": 256, "_Z6scaledILi4EEvPf": 128, "hot": 1024, "wide": 1024, "calls_heavy": 1024}
SPILLING = ("hot", "wide", "calls_heavy")
DEVICE_FUNCTIONS = ("_Z11sum_squaresPKfi", "_Z5heavyPKfii")


def read(name: str) -> str:
    return (DATA / name).read_text()


def ptxas_reports(log: str) -> dict[str, dict[str, KernelResources]]:
    """Per arch, the kernels in nvcc's `-Xptxas -v` log: one ptxas run per arch, each from "N bytes gmem"."""
    reports: dict[str, dict[str, KernelResources]] = {}
    for run in re.split(r"(?m)^(?=ptxas info\s*:\s*\d+ bytes gmem)", log):
        kernels = parse_ptxas_output(run)
        if kernels:
            reports[next(iter(kernels.values())).arch] = kernels
    return reports


@dataclass(frozen=True)
class Build:
    path: Path
    ptxas: Mapping[str, Mapping[str, KernelResources]]  # arch -> entry -> what ptxas reported


def _wheel_nvcc() -> Path | None:
    # The CUDA 13 wheel's nvcc knows sm_80 and sm_90 and works with the machine's g++.
    for root in nvidia_roots():
        if (root / "cu13" / "bin" / "nvcc").is_file():
            return root / "cu13" / "bin" / "nvcc"
    on_path = shutil.which("nvcc")
    return Path(on_path) if on_path else None


# name -> (output file, nvcc flags); every build is of kernels.cu, with -Xptxas -v.
SM80_SM90 = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
BUILDS: dict[str, tuple[str, list[str]]] = {
    "cubin": ("kernels.cubin", ["-cubin", "-arch=sm_90"]),
    "fatbin": (
        "kernels.fatbin",
        [
            "-fatbin",
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_90,code=[sm_90,compute_90]",
        ],
    ),
    "so": ("libkernels.so", ["-shared", "-Xcompiler", "-fPIC", *SM80_SM90]),
    "o": ("kernels.o", ["-c", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90"]),
    "rdc": ("kernels_rdc.o", ["-dc", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90"]),
    "ptx_only": ("ptx_only.fatbin", ["-fatbin", "-gencode", "arch=compute_90,code=compute_90"]),
    "families": (
        "families.fatbin",
        ["-fatbin"] + [f"-gencode=arch=compute_{cc},code=sm_{cc}" for cc in ("75", "90a", "100", "120")],
    ),
}


@pytest.fixture(scope="session")
def cuobjdump() -> Path:
    found = find_cuobjdump(None)
    if found is None:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    return found


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory, cuobjdump: Path) -> dict[str, Build]:
    nvcc = _wheel_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc (pip install nvidia-cuda-nvcc) to build the test binaries")
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no host C++ compiler (g++) for nvcc to build the test binaries")
    out = tmp_path_factory.mktemp("binaries")

    def build(name: str) -> tuple[str, Build]:
        filename, flags = BUILDS[name]
        cmd = [str(nvcc), *flags, "-Xptxas", "-v", str(SOURCE), "-o", str(out / filename)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
        return name, Build(out / filename, ptxas_reports(proc.stdout + proc.stderr))

    with ThreadPoolExecutor() as pool:
        return dict(pool.map(build, BUILDS))


@functools.cache
def held(path: Path) -> tuple[BinaryKernel, ...]:
    """read_binary, once per built file: several tests look at the same binary."""
    return tuple(read_binary(path))


def check_against_ptxas(
    kernels: Sequence[BinaryKernel],
    reports: Mapping[str, Mapping[str, KernelResources]],
    *,
    linked: bool = True,
) -> None:
    """Each arch holds exactly ptxas's kernels, with ptxas's numbers (stack: only once linked)."""
    assert {k.arch for k in kernels} == set(reports)
    for arch, report in reports.items():
        listed = {k.name: k for k in kernels if k.arch == arch}
        assert sorted(listed) == sorted(report), arch
        for name, want in report.items():
            k = listed[name]
            got = (k.registers, k.shared, k.spill_stores, k.spill_loads, k.max_threads, k.min_blocks)
            expected = (
                want.registers,
                want.shared_mem,
                want.spill_stores,
                want.spill_loads,
                MAX_THREADS.get(name),
                None,
            )
            assert got == expected, f"{name} [{arch}]: {k}"
            if linked:
                assert k.stack == want.stack_frame, f"{name} [{arch}]"
                if want.cumulative_stack is not None:
                    assert k.stack == want.cumulative_stack, f"{name} [{arch}]"
            if want.const_banks:  # ptxas prints cmem[N] per kernel only up to sm_8x
                assert sorted(k.const_banks) == sorted(want.const_banks), f"{name} [{arch}]"
                assert k.const == want.const_mem


# ---------------------------------------------------------------------------------------------------
# Real binaries


def test_cubin_agrees_with_ptxas(builds: dict[str, Build]) -> None:
    cubin = builds["cubin"]
    # The spill checks below mean something only if ptxas did spill.
    assert all(cubin.ptxas["sm_90"][name].spill_stores > 0 for name in SPILLING)
    kernels = held(cubin.path)
    check_against_ptxas(kernels, cubin.ptxas)
    assert {k.elf for k in kernels} == {0}
    assert all(k.toolkit == "13.5" and not k.relocatable for k in kernels)


def test_fatbin_holds_both_archs_and_its_ptx_is_skipped(builds: dict[str, Build]) -> None:
    fatbin = builds["fatbin"]
    kernels = held(fatbin.path)
    check_against_ptxas(kernels, fatbin.ptxas)
    assert {(k.arch, k.elf) for k in kernels} == {("sm_80", 0), ("sm_90", 1)}


def test_shared_library_with_host_code(builds: dict[str, Build]) -> None:
    so = builds["so"]
    kernels = held(so.path)
    check_against_ptxas(kernels, so.ptxas)
    # The static CUDA runtime brings two ELFs of its own, without kernels, ahead of ours.
    assert {(k.arch, k.elf) for k in kernels} == {("sm_80", 2), ("sm_90", 3)}


def test_every_arch_family_agrees(builds: dict[str, Build]) -> None:
    # Turing, the arch-specific Hopper spelling, and both Blackwells (each with its shared reservation).
    families = builds["families"]
    kernels = held(families.path)
    check_against_ptxas(kernels, families.ptxas)
    assert {k.arch: k.reserved_shared for k in kernels if k.name == "bounded"} == {
        "sm_75": 0,
        "sm_90a": 1024,
        "sm_100": 1024,
        "sm_120": 1024,
    }


def test_object_file(builds: dict[str, Build]) -> None:
    check_against_ptxas(held(builds["o"].path), builds["o"].ptxas)


def test_relocatable_object_holds_kernels_only(builds: dict[str, Build]) -> None:
    rdc = builds["rdc"]
    kernels = held(rdc.path)
    # cuobjdump lists the device functions too (heavy, sum_squares, a CUDA division helper): not kernels.
    check_against_ptxas(kernels, rdc.ptxas, linked=False)
    assert all(k.relocatable for k in kernels)
    # Before nvlink, no stack sizes and no sm_90 shared-memory reservation.
    assert {k.stack for k in kernels} == {0}
    assert {k.reserved_shared for k in kernels} == {0}


def test_launch_bounds_and_register_cap(builds: dict[str, Build]) -> None:
    kernels = {(k.name, k.arch): k for k in held(builds["fatbin"].path)}
    for arch in ("sm_80", "sm_90"):
        bounded = kernels["bounded", arch]
        assert bounded.maxntid == (256, 1, 1)
        assert bounded.reqntid is None
        # __launch_bounds__(256, 2) leaves no trace of the 2 but the register cap it implies.
        assert bounded.min_blocks is None
        assert bounded.register_limit == get_arch(arch).regs_per_sm // (256 * 2)
        assert kernels["_Z6scaledILi4EEvPf", arch].register_limit is None
        assert kernels["_Z5plainPfi", arch].maxntid is None


def test_sm90_shared_section_holds_the_drivers_reservation(builds: dict[str, Build], cuobjdump: Path) -> None:
    usage = subprocess.run(
        [str(cuobjdump), "--dump-resource-usage", str(builds["fatbin"].path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = {(u.name, u.arch): u.shared for u in parse_resource_usage(usage)}
    kernels = {(k.name, k.arch): k for k in held(builds["fatbin"].path)}
    assert listed["bounded", "sm_80"] == kernels["bounded", "sm_80"].shared == 1024
    assert listed["bounded", "sm_90"] == 2048
    assert kernels["bounded", "sm_90"].shared == 1024
    assert kernels["bounded", "sm_90"].reserved_shared == get_arch("sm_90").reserved_smem_per_block
    # Dynamic shared memory only: a reserved section, no static bytes.
    assert listed["dynamic_only", "sm_90"] == 1024
    assert kernels["dynamic_only", "sm_90"].shared == 0


def test_callee_spills_are_not_the_kernels(builds: dict[str, Build]) -> None:
    kernels = {k.name: k for k in held(builds["cubin"].path)}
    caller = kernels["calls_heavy"]
    # ptxas reports heavy's own 312/328 bytes under heavy; the kernel keeps only its own few.
    assert caller.spill_stores is not None
    assert 0 < caller.spill_stores < 100
    wide = kernels["wide"]
    assert wide.spill_instructions is not None
    assert wide.spill_stores is not None
    assert wide.spill_loads is not None
    # Fewer instructions than 4-byte words: most of its spills are STL.64 / LDL.64.
    assert wide.spill_instructions < (wide.spill_stores + wide.spill_loads) // 4


def test_cubin_from_ptxas_12_9_is_read_the_same(tmp_path: Path, cuobjdump: Path) -> None:
    # The plugin's own build (NVRTC + ptxas from the CUDA 12.9 wheels), read by the CUDA 13.5 cuobjdump.
    toolkit = discover()
    compiled = compile_kernel(SOURCE, "hot", "sm_90", CompileOptions(), toolkit)
    path = tmp_path / "hot.cubin"
    path.write_bytes(compiled.cubin)
    kernels = read_binary(path)
    check_against_ptxas(kernels, {"sm_90": parse_ptxas_output(compiled.ptxas_log)})
    assert {k.toolkit for k in kernels} == {toolkit.release}
    hot = next(k for k in kernels if k.name == "hot")
    assert (hot.spill_stores, hot.spill_loads) == (
        compiled.resources.spill_stores,
        compiled.resources.spill_loads,
    )


def test_ptx_only_fatbin_has_no_kernels(builds: dict[str, Build]) -> None:
    assert read_binary(builds["ptx_only"].path) == []


def test_not_a_cuda_binary(tmp_path: Path, cuobjdump: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a CUDA binary\n")
    with pytest.raises(BinaryError, match=re.escape(str(text))) as info:
        read_binary(text)
    assert "does not contain device code" in str(info.value)  # cuobjdump's own words
    # A host executable with no device code at all.
    with pytest.raises(BinaryError, match="does not contain device code"):
        read_binary(Path(sys.executable).resolve())


def test_missing_file(tmp_path: Path, cuobjdump: Path) -> None:
    with pytest.raises(BinaryError, match="no such file"):
        read_binary(tmp_path / "absent.cubin")


def test_missing_cuobjdump_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(binary, "find_cuobjdump", lambda toolkit: None)
    target = tmp_path / "kernels.cubin"
    with pytest.raises(BinaryError, match=re.escape(str(target))) as info:
        read_binary(target)
    assert "pip install" in str(info.value)
    assert "nvidia-cuda-cuobjdump" in str(info.value)


def test_toolkits_own_cuobjdump_comes_first(tmp_path: Path, cuobjdump: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "cuobjdump").symlink_to(cuobjdump)
    toolkit = Toolkit(
        origin="test",
        ptxas=tmp_path / "bin" / "ptxas",
        nvrtc=tmp_path / "lib" / "libnvrtc.so",
        nvrtc_version="13.5",
        ptxas_version="13.5.37",
    )
    assert find_cuobjdump(toolkit) == tmp_path / "bin" / "cuobjdump"
    # A toolkit without one (the CUDA 12 wheels) falls back to the wheels' or PATH's.
    (tmp_path / "bin" / "cuobjdump").unlink()
    assert find_cuobjdump(toolkit) == cuobjdump


# ---------------------------------------------------------------------------------------------------
# Recorded listings (no toolkit needed)


def test_resource_usage_of_a_shared_library() -> None:
    usages = parse_resource_usage(read("libkernels_so.res.txt"))
    # Four ELFs: the CUDA runtime's two (no functions), then ours for sm_80 and sm_90.
    assert {(u.elf, u.arch) for u in usages} == {(2, "sm_80"), (3, "sm_90")}
    bounded = {u.arch: u for u in usages if u.name == "bounded"}
    assert (bounded["sm_80"].registers, bounded["sm_80"].stack, bounded["sm_80"].shared) == (42, 128, 1024)
    assert (bounded["sm_90"].registers, bounded["sm_90"].stack, bounded["sm_90"].shared) == (42, 128, 2048)
    assert bounded["sm_90"].const_banks == ((0, 548),)
    assert bounded["sm_90"].line.startswith("REG:42 STACK:128 SHARED:2048 LOCAL:0 CONSTANT[0]:548")


def test_resource_usage_skips_ptx_and_reads_every_constant_bank() -> None:
    usages = parse_resource_usage(read("kernels_fatbin.res.txt"))
    assert [u.elf for u in usages] == [0] * 8 + [1] * 8  # the third entry, PTX, has no resources
    banks = {u.arch: u for u in usages if u.name == "banks"}
    assert banks["sm_80"].const_banks == ((2, 112), (0, 368))
    assert banks["sm_80"].const == 480
    assert banks["sm_90"].const_banks == ((2, 36), (0, 544))


def test_recorded_cubin_agrees_with_ptxas() -> None:
    usages = parse_resource_usage(read("kernels_sm90_cubin.res.txt"))
    assert {u.arch for u in usages} == {None}  # a bare cubin's listing has no "arch =" header
    (elf,) = parse_elf_dump(read("kernels_sm90_cubin.elf.txt"))
    assert (elf.arch, elf.relocatable, elf.toolkit) == ("sm_90", False, "13.5")
    kernels = combine_listings(usages, [elf])
    reports = ptxas_reports(read("kernels_sm90_cubin.ptxas.txt"))
    assert [k.name for k in kernels] == list(reports["sm_90"])
    for k in kernels:
        want = reports["sm_90"][k.name]
        assert (k.registers, k.stack, k.shared) == (want.registers, want.stack_frame, want.shared_mem)
        assert k.max_threads == MAX_THREADS.get(k.name)
        marked = elf.kernels[k.name].spill_offsets
        # Spills are marked, but their bytes need the SASS (not given here): unknown, not 0.
        if want.spill_stores:
            assert marked
            assert k.spill_stores is None
        else:
            assert marked in ((), None)
            assert (k.spill_stores, k.spill_loads, k.spill_instructions) == (0, 0, 0)


def test_callees_marks_are_left_out_of_the_kernel() -> None:
    (elf,) = parse_elf_dump(read("kernels_sm90_cubin.elf.txt"))
    text = read("kernels_sm90_cubin.elf.txt")
    section = text[text.index("\n.nv.info.calls_heavy\n") + 1 :]
    section = section[: section.index("\n.", 1)]
    all_marks = re.findall(r"SpillRefill\s*:\s*Offset\s*:\s*(0x[0-9a-f]+)", section)
    own = elf.kernels["calls_heavy"].spill_offsets
    assert own is not None
    assert 0 < len(own) < len(all_marks)


def test_relocatable_listing_lists_device_functions_the_elf_tells_apart() -> None:
    usages = parse_resource_usage(read("kernels_rdc_o.res.txt"))
    names = {u.name for u in usages}
    assert {"_Z5heavyPKfii", "_Z5heavyPKfii$9", "__cuda_sm20_div_rn_f64_full"} <= names
    (elf,) = parse_elf_dump(read("kernels_rdc_o.elf.txt"))
    assert elf.relocatable
    kernels = combine_listings(usages, [elf])
    assert sorted(k.name for k in kernels) == sorted(
        [
            "calls_heavy",
            "wide",
            "hot",
            "banks",
            "dynamic_only",
            "_Z6scaledILi4EEvPf",
            "_Z5plainPfi",
            "bounded",
        ]
    )
    assert not any(k.name.startswith(DEVICE_FUNCTIONS) for k in kernels)


def test_ptxas_11_8_cubin_does_not_record_spills() -> None:
    usages = parse_resource_usage(read("ptxas118_sm90_cubin.res.txt"))
    elves = parse_elf_dump(read("ptxas118_sm90_cubin.elf.txt"))
    assert (elves[0].arch, elves[0].toolkit) == ("sm_90", "11.8")  # the "64bit elf: ..., toolkit=118" style
    kernels = combine_listings(usages, elves)
    report = parse_ptxas_output(read("ptxas118_sm90_cubin.ptxas.txt"))
    assert [k.name for k in kernels] == list(report)
    for k in kernels:
        want = report[k.name]
        assert (k.registers, k.stack, k.shared) == (want.registers, want.stack_frame, want.shared_mem)
        # ptxas 11.8 spilled in spill_heavy, but marked nothing: unknown for every kernel with a stack
        # frame, never 0; one without a frame spilled nothing (spills live in the frame), as ptxas says.
        if want.stack_frame:
            assert (k.spill_stores, k.spill_loads, k.spill_instructions) == (None, None, None)
        else:
            assert (k.spill_stores, k.spill_loads, want.spill_stores, want.spill_loads) == (0, 0, 0, 0)
    assert any(not report[k.name].stack_frame for k in kernels)
    assert any(report[k.name].stack_frame for k in kernels)
    assert report["spill_heavy"].spill_stores > 0
    by_name = {k.name: k for k in kernels}
    assert by_name["bounded"].max_threads == 256
    assert by_name["named_barrier"].shared == 512  # 1536 in SHARED: 11.8 reserved the 1 KB too


def test_unknown_arch_keeps_shared_as_listed() -> None:
    usages = parse_resource_usage(read("kernels_sm90_cubin.res.txt"))
    # sm_130: an arch no table row has (sm_110 was one until CUDA 13's archs joined the table).
    elves = parse_elf_dump(read("kernels_sm90_cubin.elf.txt").replace("sm=90,", "sm=130,"))
    bounded = next(k for k in combine_listings(usages, elves) if k.name == "bounded")
    assert (bounded.arch, bounded.shared, bounded.reserved_shared) == ("sm_130", 2048, None)


def test_malformed_listings_are_errors() -> None:
    with pytest.raises(ParseError, match="'k' has no resource line"):
        parse_resource_usage("Resource usage:\n Function k:\n")
    with pytest.raises(ParseError, match="has no REG"):
        parse_resource_usage(" Function k:\n  STACK:0 SHARED:0 LOCAL:0\n")
    with pytest.raises(ParseError, match="no ELF header"):
        parse_elf_dump(".section .symtab\n")
    usages = parse_resource_usage(read("libkernels_so.res.txt"))
    with pytest.raises(ParseError, match="no counterpart"):
        combine_listings(usages, parse_elf_dump(read("kernels_sm90_cubin.elf.txt")))


def test_cuobjdump_13_0_listing_recorded_on_a_gpu_machine() -> None:
    """cuobjdump 13.0 (the H200 machine's toolkit) prints the symbol table in another layout; the kernels of
    a linked ELF still come out, with the figures the listing gives (spills: ptxas 13.0 marks none)."""
    usage = parse_resource_usage((DATA / "app_fatbin_13.0.resource-usage.txt").read_text())
    elves = parse_elf_dump((DATA / "app_fatbin_13.0.elf.txt").read_text())
    kernels = {(k.name, k.arch): k for k in combine_listings(usage, elves)}
    assert sorted(kernels) == [
        ("_Z9transposeILi32EEvPKfPfi", "sm_80"),
        ("_Z9transposeILi32EEvPKfPfi", "sm_90"),
        ("scale", "sm_80"),
        ("scale", "sm_90"),
    ]
    assert kernels[("_Z9transposeILi32EEvPKfPfi", "sm_90")].registers == 12
    assert (
        kernels[("_Z9transposeILi32EEvPKfPfi", "sm_90")].shared == 32 * 33 * 4
    )  # 5248 minus the 1 KiB reserve
    assert kernels[("scale", "sm_80")].registers == 8


def test_setmaxnreg_roles_are_read_from_a_binarys_sass(
    tmp_path: Path, cuobjdump: Path, pytester: pytest.Pytester
) -> None:
    """A binary carries no PTX: its ELF marks a kernel that kept its roles (EIATTR_REG_RECONFIG), and the SASS
    of that kernel alone is read for the targets (USETMAXREG). roles.cu built by NVRTC + ptxas for sm_90a:
    `roles` keeps them, `dropped` (no launch bounds) lost them to C7508."""
    roles_cu = Path(__file__).parents[1] / "kernels" / "roles.cu"
    compiled = compile_kernel(roles_cu, "roles", "sm_90a", CompileOptions(), discover())
    path = tmp_path / "roles.cubin"
    path.write_bytes(compiled.cubin)
    kernels = {k.name: k for k in read_binary(path)}
    assert kernels["roles"].setmaxnreg == (("inc", 232), ("dec", 40))
    assert kernels["dropped"].setmaxnreg == ()
    assert kernels["tooMany"].setmaxnreg == ()
    # As a budget: "required" holds for the kernel that kept them and fails the one that lost them.
    shutil.copy(path, pytester.path / "roles.cubin")
    pytester.makepyfile(
        test_b="""
import pytest

@pytest.mark.regbudget(binary="roles.cubin", kernel="roles", setmaxnreg={"inc": 232, "dec": 40})
def test_kept():
    pass

@pytest.mark.regbudget(binary="roles.cubin", kernel="dropped", setmaxnreg="required")
def test_lost():
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-arch=sm_90a", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*test_kept*PASSED*", "*setmaxnreg required, but the kernel has no setmaxnreg*"]
    )


# cuobjdump 13.5's listings of a cubin whose kernel `k\nyz` was renamed in its ELF (a hand-made binary): the
# name is printed as it is, across two lines (the symbol table's columns narrowed).
SPLIT_USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function plain:
  REG:8 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:536 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function k
yz:
  REG:8 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:536 TEXTURE:0 SURFACE:0 SAMPLER:0
"""
SPLIT_SYMBOLS = """
64bit elf: type=2, abi=7, sm=90, toolkit=129, flags = 0x5a055a
.section .symtab
  Num  Value  Size  Type  Bind  Vis  Other  Ndx  Name
  0  0  0  NOTYPE  LOCAL  DEFAULT  -  0  (null)
  0x7  0  0x180  FUNC  GLOBAL  DEFAULT  ENTRY  0xa  plain
  0x8  0  0x180  FUNC  GLOBAL  DEFAULT  ENTRY  0xb  k
yz
"""


def test_a_name_cut_by_a_line_break_is_read_whole_and_escaped() -> None:
    assert [u.name for u in parse_resource_usage(SPLIT_USAGE)] == ["plain", "k\\nyz"]
    (cut,) = parse_elf_dump(SPLIT_SYMBOLS)
    assert cut.unread_symbols == 1  # the line "yz": tools/cuobjdump.py then reads the names from the ELF
    text, escaped = escape_names(SPLIT_SYMBOLS, ["plain", "k\nyz"])
    assert escaped == {"k\\nyz"}
    (whole,) = parse_elf_dump(text)
    assert (whole.entries, whole.unread_symbols) == (("plain", "k\\nyz"), 0)
