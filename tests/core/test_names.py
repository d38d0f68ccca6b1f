"""Kernel names: demangling with cxxfilt (libstdc++'s demangler), readable names, normalizing, matching,
patterns and the candidate list of a "not found" error. Mangled names are real nvcc/NVRTC entries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_regbudget.core import names
from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.tools.compiler import kernel_line
from pytest_regbudget.tools.nvcc import missing_header_hint, wheel_include_dirs

MATMUL16 = "_Z13MatrixMulCUDAILi16EEvPfS0_S0_ii"
MATMUL32 = "_Z13MatrixMulCUDAILi32EEvPfS0_S0_ii"
REDUCE = "_Z7reduce6IfLj256ELb1EEvPT_S1_j"
KERNEL2 = "_ZN7cutlass7Kernel2I3FooEEvNT_6ParamsE"
FN_POINTER = "_Z5applyIPFviEEvT_"  # apply<void (*)(int)>(void (*)(int))
OVERLOAD_INT, OVERLOAD_FLOAT = "_Z1kPi", "_Z1kPf"
ANONYMOUS = "_ZN12_GLOBAL__N_14anonEv"
CHAR_ARG, SHORT_ARG, ULONG_ARG = "_Z3fooIcLc65EEvv", "_Z3fooIsLs3EEvv", "_Z3fooImLm5EEvv"
ENTRIES = [
    MATMUL16,
    MATMUL32,
    REDUCE,
    KERNEL2,
    "scale",
    FN_POINTER,
    OVERLOAD_INT,
    OVERLOAD_FLOAT,
    ANONYMOUS,
    CHAR_ARG,
    SHORT_ARG,
    ULONG_ARG,
]


@pytest.mark.parametrize(
    ("entry", "full", "readable"),
    [
        (MATMUL32, "void MatrixMulCUDA<32>(float*, float*, float*, int, int)", "MatrixMulCUDA<32>"),
        (
            REDUCE,
            "void reduce6<float, 256u, true>(float*, float*, unsigned int)",
            "reduce6<float, 256, true>",
        ),
        (KERNEL2, "void cutlass::Kernel2<Foo>(Foo::Params)", "cutlass::Kernel2<Foo>"),
        (FN_POINTER, "void apply<void (*)(int)>(void (*)(int))", "apply<void (*)(int)>"),
        ("_Z3barIXadL_Z4funcvEEEvv", "void bar<&(func())>()", "bar<&(func())>"),
        (OVERLOAD_FLOAT, "k(float*)", "k"),
        (ANONYMOUS, "(anonymous namespace)::anon()", "(anonymous namespace)::anon"),
        (CHAR_ARG, "void foo<char, (char)65>()", "foo<char, 65>"),
        ("scale", "scale", "scale"),  # extern "C": not mangled
        ("_Znotmangled", "_Znotmangled", "_Znotmangled"),  # the demangler rejects it: kept as it is
    ],
)
def test_demangle_and_readable(entry: str, full: str, readable: str) -> None:
    assert names.demangle(entry) == full
    assert names.readable(entry) == readable


def test_demangle_agrees_with_gnu_cxxfilt() -> None:
    cxxfilt = subprocess.run(
        ["c++filt"], input="\n".join(ENTRIES), capture_output=True, text=True, check=False
    )
    if cxxfilt.returncode != 0:
        pytest.skip("no c++filt (binutils) to compare with")
    assert [names.demangle(e) for e in ENTRIES] == cxxfilt.stdout.splitlines()


def test_signature_and_display_names_tell_overloads_apart() -> None:
    assert names.signature(MATMUL32) == "MatrixMulCUDA<32>(float*, float*, float*, int, int)"
    shown = names.display_names(ENTRIES)
    assert shown[OVERLOAD_INT] == "k(int*)"
    assert shown[OVERLOAD_FLOAT] == "k(float*)"
    assert shown[MATMUL16] == "MatrixMulCUDA<16>"
    # one kernel listed twice (two ELFs of one arch in a fatbin) is not an overload set
    assert names.display_names([MATMUL16, MATMUL16]) == {MATMUL16: "MatrixMulCUDA<16>"}


@pytest.mark.parametrize(
    ("written", "normalized"),
    [
        # whitespace: gone, but one space between identifier characters stays
        ("reduce6< float , 256 , true >", "reduce6<float,256,true>"),
        ("Kernel<Foo<int> >", "Kernel<Foo<int>>"),
        ("k<unsigned   int>", "k<unsigned int>"),
        ("  scale\t", "scale"),
        # integer literal suffixes
        ("k<256u>", "k<256>"),
        ("k<256U>", "k<256>"),
        ("k<256ul>", "k<256>"),
        ("k<256ull>", "k<256>"),
        ("k<256LL>", "k<256>"),
        ("k<256l, -3u>", "k<256,-3>"),
        ("k<Foo3u>", "k<Foo3u>"),  # an identifier, not a literal
        # casts in front of literal template arguments
        ("k<(int)32>", "k<32>"),
        ("foo<char, (char)65>", "foo<char,65>"),
        ("k<(unsigned char)3, Foo<(Mode)1>>", "k<3,Foo<1>>"),
        ("k<(Foo)x>", "k<(Foo)x>"),  # not a literal: left alone
        # a leading ::
        ("::cutlass::Kernel2<Foo>", "cutlass::Kernel2<Foo>"),
        # not normalized
        ("k<const float*>", "k<const float*>"),
        ("k<true>", "k<true>"),
    ],
)
def test_normalize(written: str, normalized: str) -> None:
    assert names.normalize(written) == normalized


@pytest.mark.parametrize(
    ("requested", "entry"),
    [
        (MATMUL32, MATMUL32),  # the entry itself
        ("scale", "scale"),
        ("MatrixMulCUDA<32>", MATMUL32),
        ("MatrixMulCUDA < 16 >", MATMUL16),
        ("reduce6<float, 256, true>", REDUCE),
        ("reduce6<float,256U,true>", REDUCE),
        ("cutlass::Kernel2<Foo>", KERNEL2),
        ("::cutlass::Kernel2<Foo>", KERNEL2),
        ("Kernel2<Foo>", KERNEL2),  # its namespace may be left out
        ("apply<void(*)(int)>", FN_POINTER),
        ("k(float *)", OVERLOAD_FLOAT),  # an overload, by its parameter list
        ("k(int*)", OVERLOAD_INT),
        ("anon", ANONYMOUS),
        ("foo<char, 65>", CHAR_ARG),
        ("foo<char,(char)65>", CHAR_ARG),
        ("foo<short, 3>", SHORT_ARG),
        ("foo<unsigned long, 5>", ULONG_ARG),
        # no match
        ("MatrixMulCUDA", None),  # template arguments count
        ("MatrixMulCUDA<64>", None),
        ("k", None),  # two overloads: ambiguous
        ("other::Kernel2<Foo>", None),
        ("reduce6<float, 256, 1>", None),  # true is not 1
    ],
)
def test_match(requested: str, entry: str | None) -> None:
    assert names.match(requested, ENTRIES) == entry


def test_match_prefers_the_qualified_name() -> None:
    both = ["_ZN1a1kEv", "_Z1kv"]  # a::k() and k()
    assert names.match("k", both) == "_Z1kv"
    assert names.match("a::k", both) == "_ZN1a1kEv"
    assert names.match("k", ["_ZN1a1kEv", "_ZN1b1kEv"]) is None  # one name in two namespaces


def test_select_patterns() -> None:
    assert names.select(["*"], ENTRIES) == ENTRIES
    assert names.select(["MatrixMul*"], ENTRIES) == [MATMUL16, MATMUL32]
    assert names.select(["MatrixMulCUDA<3?>"], ENTRIES) == [MATMUL32]
    assert names.select(["reduce*<float, *>", "scale"], ENTRIES) == [REDUCE, "scale"]
    assert names.select(["Kernel2<*>"], ENTRIES) == [KERNEL2]  # without its namespace
    assert names.select(["cutlass::*"], ENTRIES) == [KERNEL2]
    assert names.select(["other::*"], ENTRIES) == []
    assert names.select(["MatrixMulCUDA<16>", "MatrixMul*"], ENTRIES) == [MATMUL16, MATMUL32]  # each once
    assert names.select(["nothing*", "missing"], ENTRIES) == []


def test_candidates_are_few_readable_and_nearest_first() -> None:
    listing = names.candidates("MatrixMulCUDA<64>", ENTRIES)
    assert listing.startswith("MatrixMulCUDA<16>, MatrixMulCUDA<32>, ")
    assert listing.endswith(" and 2 more")
    assert sum(name in listing for name in names.display_names(ENTRIES).values()) == 10
    assert "_Z" not in listing
    assert names.candidates("x", ["scale"]) == "scale"
    assert names.candidates("x", []) == "no kernels"
    assert names.candidates("MatrixMulCUDA < 64 >", ENTRIES, limit=2) == (
        "MatrixMulCUDA<16>, MatrixMulCUDA<32> and 10 more"
    )
    # a mangled request is compared by its readable name
    assert names.candidates("_Z13MatrixMulCUDAILi64EEvPfS0_S0_ii", ENTRIES, limit=2) == (
        "MatrixMulCUDA<16>, MatrixMulCUDA<32> and 10 more"
    )


def test_candidates_of_a_large_module_stay_short() -> None:
    """215 instances (reduction_kernel.cu's count) list 10 names and a count, not 7,160 characters."""
    entries = [f"_Z7reduce{k}IfLj{2**b}ELb{p}EEvPT_S1_j" for k in range(7) for b in range(16) for p in (0, 1)]
    entries = entries[:215]
    listing = names.candidates("reduce6<float, 256, true>", entries)
    assert listing.startswith("reduce6<float, 256, true>, ")
    assert listing.endswith(" and 205 more")
    assert len(listing) < 400


def test_shown_is_the_readable_name_whatever_the_spelling() -> None:
    assert names.shown("reduce6<float,256u,true>", REDUCE) == "reduce6<float, 256, true>"
    assert names.shown(MATMUL32, MATMUL32) == "MatrixMulCUDA<32>"
    assert names.shown("Kernel2<Foo>", KERNEL2) == "cutlass::Kernel2<Foo>"
    assert names.shown("k(float *)", OVERLOAD_FLOAT) == "k(float*)"
    assert names.shown("scale", "scale") == "scale"
    # A name that does not name the entry (a Python function's, for its front end's entry) stays.
    assert names.shown("axpy", "_ZN6cudapy8__main__4axpyB2v1E5ArrayIfLi1E1C7mutable7alignedE") == "axpy"


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("gemm<128, 64>", "gemm"),
        ("MatrixMulCUDA < 16 >", "MatrixMulCUDA"),
        ("ns::gemm<128, 64>", "gemm"),
        (MATMUL32, "MatrixMulCUDA"),
        (KERNEL2, "Kernel2"),
        (ANONYMOUS, "anon"),
        ("k(float*)", "k"),
        ("apply<void (*)(int)>", "apply"),
        ("scale", "scale"),
    ],
)
def test_base_name(name: str, base: str) -> None:
    assert names.base_name(name) == base


def test_kernel_line_finds_templates_by_their_readable_names() -> None:
    source = (Path(__file__).parent.parent / "kernels" / "templates.cu").read_text()
    lines = source.splitlines()
    matmul = lines.index("__global__ void MatrixMulCUDA(float* C, float* A, float* B, int wA, int wB) {") + 1
    kernel2 = lines.index("__global__ void Kernel2(Params p, float* out) {") + 1
    assert kernel_line(source, "MatrixMulCUDA<32>") == matmul
    assert kernel_line(source, MATMUL16) == matmul
    assert kernel_line(source, "lib::Kernel2<lib::Foo>") == kernel2
    assert kernel_line(source, "reduce6<float, 256u, true>") is not None
    assert kernel_line(source, "(anonymous namespace)::nowhere") is None


def test_names_is_pure_and_demangles_lazily() -> None:
    """Importing names loads no pytest, CuPy or NVRTC; cxxfilt (and libstdc++) only for a mangled name."""
    code = (
        "import sys; from pytest_regbudget.core import names; "
        "assert 'pytest' not in sys.modules and 'cupy' not in sys.modules and 'cxxfilt' not in sys.modules; "
        "assert names.readable('scale') == 'scale' and 'cxxfilt' not in sys.modules; "
        f"assert names.readable('{MATMUL32}') == 'MatrixMulCUDA<32>' and 'cxxfilt' in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_wheel_include_dirs_reach_other_site_dirs(tmp_path: Path) -> None:
    venv, user = tmp_path / "venv" / "nvidia", tmp_path / "user" / "nvidia"
    nvcc = venv / "cu13" / "bin" / "nvcc"
    for d in (nvcc.parent, venv / "cu13" / "include" / "cccl", user / "cu13" / "include" / "cccl"):
        d.mkdir(parents=True)
    # nvcc's own tree is on its include path through nvcc.profile; another site dir's is not.
    assert wheel_include_dirs(nvcc, [venv, user]) == (
        user / "cu13" / "include",
        user / "cu13" / "include" / "cccl",
    )
    assert wheel_include_dirs(nvcc, [venv]) == ()
    assert wheel_include_dirs(Path("/usr/local/cuda/bin/nvcc"), [venv, user]) == ()


@pytest.mark.parametrize(
    ("log", "hint"),
    [
        (
            "x.cu:1:10: fatal error: nv/target: No such file or directory",
            'pip install "pytest-regbudget[nvcc]"',
        ),
        ("fatal error: cub/cub.cuh: No such file or directory", "nvidia-cuda-cccl"),
        ("fatal error: cuda_profiler_api.h: No such file or directory", "nvidia-cuda-profiler-api"),
        ("fatal error: cublas_v2.h: No such file or directory", "pip install nvidia-cublas"),
        ("nvcc fatal   : Don't know what to do with 'k.cuh'", 'options=["-x", "cu"]'),
        ("x.cu(3): error: expected a ;", ""),
    ],
)
def test_nvcc_error_hints(log: str, hint: str) -> None:
    assert hint in missing_header_hint(log)
    if not hint:
        assert missing_header_hint(log) == ""


CUTLASS = (Path(__file__).parents[1] / "data" / "names" / "cutlass-sm90-kernel-names.txt").read_text().split()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="pycxxfilt, LLVM's demangler, needs Python 3.11")
def test_cutlass_names_libstdcxx_refuses_demangle_through_llvms() -> None:
    import cxxfilt

    assert len(CUTLASS) == 3
    assert all(len(n) > 1024 for n in CUTLASS)
    for name in CUTLASS:  # the reason for the fallback: libstdc++ refuses every one
        with pytest.raises(cxxfilt.InvalidName):
            cxxfilt.demangle(name)
    shown = [names.readable(n) for n in CUTLASS]
    assert shown[0].startswith(
        "ws_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    )
    assert all(
        s.startswith("cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<") for s in shown[1:]
    )
    assert "KernelTmaWarpSpecializedPingpong" in shown[1]
    assert "KernelTmaWarpSpecializedCooperative" in shown[2]
    assert ">>" not in "".join(shown)  # GNU's spacing, as cxxfilt prints every other name
    assert names.select(["cutlass::device_kernel<*"], CUTLASS) == CUTLASS[1:]
    assert names.select(["ws_kernel<*"], CUTLASS) == CUTLASS[:1]


def test_a_name_no_demangler_takes_comes_back_as_it_is() -> None:
    for entry in ("_Z7reduce", "_Znotmangled", "_Z3fooILi1EEvv$10"):
        assert names.demangle(entry) == entry
    assert names.demangle("scale") == "scale"


def test_llvm_output_takes_gnus_spacing_but_for_operators() -> None:
    gnu = names._gnu_spacing
    assert gnu("void Kernel<Foo<Bar<int>>>()") == "void Kernel<Foo<Bar<int> > >()"
    assert gnu("S<int>::operator>>(int)") == "S<int>::operator>>(int)"


@pytest.mark.parametrize(
    ("demangled", "stable"),
    [
        # nvcc's path hash of a `static` function's file-local namespace, as a template argument
        ("apply<&_INTERNAL_e7bc940b_4_k_cu_73f58c4c::twice>", "apply<&twice>"),
        # an anonymous namespace the demangler did not recognise
        ("_GLOBAL__N__95bb1a45_7_sum_cu_3f6a1c2b::k<1>", "(anonymous namespace)::k<1>"),
        # CUB's versioned, per-arch namespace (CCCL 2.5+, one arch or several), and older CUB's and Thrust's
        ("cub::_V_300500_SM_800::detail::EmptyKernel<void>", "cub::detail::EmptyKernel<void>"),
        ("cub::_V_300500_SM_800_SM_900::detail::EmptyKernel<void>", "cub::detail::EmptyKernel<void>"),
        ("cub::CUB_200200_SM_800_NS::DeviceReduceKernel<float>", "cub::DeviceReduceKernel<float>"),
        (
            "thrust::THRUST_200200_SM_900_NS::cuda_cub::core::_kernel_agent<int>",
            "thrust::cuda_cub::core::_kernel_agent<int>",
        ),
        # libcu++'s ABI namespace in any of its namespaces, but not an identifier that starts with __
        (
            "k<cuda::std::__4::plus<void>, (cuda::execution::__4::determinism::__determinism_t)1>",
            "k<cuda::std::plus<void>, 1>",
        ),
        ("MatrixMulCUDA<32>", "MatrixMulCUDA<32>"),
        # one spelling of a literal template argument: c++filt's suffixes and casts go
        ("reduce6<float, 256u, true>", "reduce6<float, 256, true>"),
        ("mul_mat_vec_q<(ggml_type)10, 8>", "mul_mat_vec_q<10, 8>"),
        ("k<(unsigned char)3, 5ul>", "k<3, 5>"),
    ],
)
def test_stable_names_leave_out_path_hashes_and_library_versions(demangled: str, stable: str) -> None:
    assert names.stable(demangled) == stable


def test_kernels_of_one_build_that_read_alike_are_an_error_naming_both() -> None:
    one = "_Z5applyIXadL_ZN34_INTERNAL_e7bc940b_4_k_cu_73f58c4c5twiceEfEEEvPf"
    other = "_Z5applyIXadL_ZN34_INTERNAL_6128e6a5_4_k_cu_73f58c4c5twiceEfEEEvPf"
    assert names.display_names([one]) == {one: "apply<&twice>"}
    with pytest.raises(
        CompileError, match=rf"two kernels read as 'apply<&twice>\(float\*\)' .*: {one} and {other}"
    ):
        names.display_names([one, other])


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("_Z6scaledILi4EEvPf", "_Z6scaledILi4EEvPf"),
        ("k yz", "k\\x20yz"),
        ("k\nyz", "k\\nyz"),
        ("k\r\nyz", "k\\nyz"),  # every line break as \n: cuobjdump's text is read line by line
        ("k\x1eyz", "k\\nyz"),
        ("k\x1b[2Jz", "k\\x1b[2Jz"),
        ("k\tz", "k\\tz"),
    ],
)
def test_a_symbol_with_a_space_or_a_control_character_is_kept_escaped(raw: str, kept: str) -> None:
    assert names.escaped_symbol(raw) == kept
