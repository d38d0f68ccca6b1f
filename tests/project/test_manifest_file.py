"""The kernel manifest without pytest or a toolkit: reading, every bad-input error, refinement, ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_regbudget.core import names
from pytest_regbudget.core.errors import ManifestError, MarkerError
from pytest_regbudget.project import manifest
from pytest_regbudget.project import manifest as mf
from pytest_regbudget.project.kernel_tables import NO_VARIANT, variant_id
from pytest_regbudget.util.files import read_regular

MANGLED_32 = "_Z13MatrixMulCUDAILi32EEvPfS0_S0_ii"
MANGLED_16 = "_Z13MatrixMulCUDAILi16EEvPfS0_S0_ii"
REDUCE = "_Z7reduce6IfLj256ELb1EEvPKT_PS0_j"  # reduce6<float, 256, true> (c++filt: 256u)
ENTRIES = [MANGLED_16, MANGLED_32, REDUCE, "plain_scale"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for name in ("kernels/a.cu", "kernels/b.cu", "kernels/sub/c.cu", "build/lib/libk.so"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    return tmp_path


def write(root: Path, text: str, name: str = "regbudget.toml") -> mf.Manifest:
    (root / name).write_text(text)
    loaded = mf.load(root)
    assert loaded is not None
    return loaded


def error(root: Path, text: str, name: str = "regbudget.toml") -> str:
    (root / name).write_text(text)
    with pytest.raises(ManifestError) as info:
        mf.load(root)
    return str(info.value)


def test_no_manifest_is_none(root: Path) -> None:
    assert mf.load(root) is None
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\nregbudget_arch = 'sm_90'\n")
    assert mf.load(root) is None


def test_find_says_where_a_manifest_may_be_without_the_manifest_module(root: Path) -> None:
    assert manifest.find(root) is None
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    assert manifest.find(root) is None  # a pyproject that never says regbudget holds no manifest
    (root / "pyproject.toml").unlink()
    (root / "pyproject.toml").mkdir()
    assert manifest.find(root) is None
    (root / "regbudget.toml").write_text("")
    assert manifest.find(root) == manifest.Found(root / "regbudget.toml", None, None)


def test_load_parses_the_pyproject_text_find_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = '[tool.regbudget]\n[[tool.regbudget.kernels]]\nsource = ["kernels/a.cu"]\n'
    (root / "pyproject.toml").write_text(text)
    found = manifest.find(root)
    assert found == manifest.Found(None, root / "pyproject.toml", text)
    reads: list[Path] = []

    def counted(path: Path) -> bytes:
        reads.append(path)
        return read_regular(path)

    monkeypatch.setattr(mf, "read_regular", counted)
    loaded = mf.load(root)
    assert loaded is not None
    assert [loaded.relative(f) for f in loaded.files()] == ["kernels/a.cu"]
    assert reads == [root / "pyproject.toml"]  # read once, by find


def test_an_unreadable_pyproject_is_the_manifests_error(root: Path) -> None:
    (root / "pyproject.toml").write_bytes(b"[tool.regbudget]\nname = '\xff'\n")
    found = manifest.find(root)
    # find cannot tell whether it holds a manifest, so manifest.load reads it and says why it cannot.
    assert found == manifest.Found(None, root / "pyproject.toml", None)
    with pytest.raises(ManifestError, match=r"cannot read .*pyproject\.toml"):
        mf.load(root)


def test_pyproject_and_standalone_read_the_same(root: Path) -> None:
    body = 'arch = ["sm_80", "sm_90"]\n[[{p}kernels]]\nsource = ["kernels/**/*.cu"]\nspills = 0\n'
    standalone = write(root, body.format(p=""))
    (root / "regbudget.toml").unlink()
    pyproject = write(root, "[tool.regbudget]\n" + body.format(p="tool.regbudget."), "pyproject.toml")
    for m in (standalone, pyproject):
        assert m.archs == ("sm_80", "sm_90")
        assert [m.relative(f) for f in m.files()] == ["kernels/a.cu", "kernels/b.cu", "kernels/sub/c.cu"]
        (table,) = m.tables
        assert table.patterns == ("*",)
        assert table.keys == {"spills": 0}
    assert pyproject.label == "pyproject.toml [tool.regbudget]"


def test_both_places_is_an_error(root: Path) -> None:
    (root / "pyproject.toml").write_text('[tool.regbudget]\narch = "sm_90"\n')
    message = error(root, 'arch = "sm_90"\n')
    assert "keep the manifest in one of them" in message


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            '[[kernels]]\nsource = "kernels/a.cu"\nmax_reg = 64\n',
            ["regbudget.toml, [[kernels]] table 1, key 'max_reg': unknown key (did you mean 'max_regs'?)"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\n[[kernels]]\nsource = "kernels/a.cu"\nkernel = "k"\n',
            ["table 2, key 'kernel': unknown key (did you mean 'kernels'?)"],
        ),
        ("kernel = []\n", ["regbudget.toml: unknown key 'kernel' (did you mean 'kernels'?)"]),
        (
            '[[kernels]]\nsource = ["kernels/*.cu", "kernels/nope/*.cu"]\n',
            ["table 1, key 'source': 'kernels/nope/*.cu' matches no file (globs are relative to the rootdir"],
        ),
        (
            '[[kernels]]\nbinary = "build/*.so"\n',
            ["key 'binary': 'build/*.so' matches no file"],
        ),
        (
            "[[kernels]]\nspills = 0\n",
            ["table 1: source (globs of CUDA files to compile), binary", "compile_commands"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\nbinary = "build/**/*.so"\n',
            ["give one of them, not both"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\nmax_regs = "64"\n',
            ["table 1, key 'max_regs': max_regs='64': expected 1..255 registers per thread; got a string"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\nmin_occupancy = 50\n',
            ["key 'min_occupancy': min_occupancy=50: expected a fraction in (0, 1]; for 50% write 0.5"],
        ),
        ('[[kernels]]\nsource = "kernels/a.cu"\nlaunch = [0]\n', ["key 'launch': launch=[0]: expected"]),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\ncompiler = "nvc"\n',
            ["key 'compiler': compiler='nvc': expected one of 'nvrtc', 'nvcc'"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\noptions = ["-arch=sm_80"]\n',
            ["key 'options': options: '-arch=sm_80' sets the target arch"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\ntolerance = {register = 4}\n',
            ["key 'tolerance': tolerance: unknown metric 'register' (did you mean 'registers'?)"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\nkernels = []\n',
            ["key 'kernels': []: expected a list of kernel names"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\nvariants = []\n',
            ["key 'variants': []: expected a non-empty list of define sets"],
        ),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\nvariants = [{NACC = 8}, ["-DNACC=16"]]\n',
            ["key 'variants': variant 2: defines: '-DNACC=16' does not start with a macro name"],
        ),
        (
            '[[kernels]]\nbinary = "build/**/*.so"\ncompiler = "nvcc"\n',
            ["key 'compiler': a binary is read as it is built"],
        ),
        ('arch = ["sm_90", "SM80"]\n', ["regbudget.toml: arch: unknown arch 'SM80'"]),
        (
            '[[kernels]]\nsource = "kernels/a.cu"\ncompiler = "nvrtc"\n'
            '[[kernels]]\nsource = "kernels/*.cu"\ncompiler = "nvcc"\n',
            [
                "table 2, key 'compiler': kernels/a.cu is compiled by 'nvrtc' in table 1 and by 'nvcc' here",
                "give its tables one compiler",
            ],
        ),
        ("[kernels]\nsource = 'x'\n", ["kernels must be an array of tables: write each as [[kernels]]"]),
        ("[[kernels]\n", ["regbudget.toml: not valid TOML"]),
        ('[[kernels]]\nsource = "../*.cu"\n', []),
    ],
)
def test_bad_manifest_is_one_error_naming_file_table_and_key(
    root: Path, text: str, needles: list[str]
) -> None:
    if not needles:  # a glob that leaves the rootdir
        (root.parent / "outside.cu").write_text("")
        needles = ["'../*.cu' is outside the rootdir", "the manifest's globs are relative to the rootdir"]
    message = error(root, text)
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(
    "text",
    [
        '[[kernels]]\nsource = ["/**/*.cuh"]\n',
        '[[kernels]]\nsource = "~/k.cu"\n',
        '[[kernels]]\nsource = "kernels/a.cu"\ndepends = ["/usr/**"]\n',
        '[[kernels]]\nsource = "kernels/a.cu"\ndepends = ["kernels/../../x.h"]\n',
    ],
    ids=["absolute-source", "home-source", "absolute-depends", "escaping-depends"],
)
def test_a_glob_outside_the_rootdir_is_refused_before_it_is_expanded(root: Path, text: str) -> None:
    # Expanded, "/**/*.cuh" walks the file system and "/usr/**" hashes /usr: the check comes first.
    assert "is outside the rootdir" in error(root, text)


def test_globs_do_not_descend_through_directory_links_but_take_linked_files(root: Path) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "far.cu").write_text('extern "C" __global__ void far(float* x) {}\n')
    (root / "kernels" / "up").symlink_to(root.parent)  # a loop back above the rootdir
    (root / "kernels" / "far.cu").symlink_to(outside / "far.cu")
    m = write(root, '[[kernels]]\nsource = ["**/*.cu"]\n')
    files = {f.relative_to(root).as_posix() for f in m.files()}
    assert "kernels/far.cu" in files
    assert not any("up/" in f for f in files)


def test_pyproject_error_names_the_prefixed_table(root: Path) -> None:
    message = error(
        root,
        '[tool.regbudget]\n[[tool.regbudget.kernels]]\nsource = "kernels/a.cu"\nspill = 0\n',
        "pyproject.toml",
    )
    assert message.startswith("pyproject.toml, [[tool.regbudget.kernels]] table 1, key 'spill': unknown key")
    assert "(did you mean 'spills'?)" in message


def test_min_occupancy_may_take_its_launch_from_another_table(root: Path) -> None:
    m = write(
        root,
        '[[kernels]]\nsource = "kernels/a.cu"\nlaunch = [256]\n'
        '[[kernels]]\nsource = "kernels/a.cu"\nkernels = ["k"]\nmin_occupancy = 0.5\n',
    )
    (kernel,) = m.kernels(root / "kernels" / "a.cu", None)[0]
    budget = kernel.budget(root / "kernels" / "a.cu", root, NO_VARIANT)
    assert budget.default.min_occupancy == 0.5
    assert budget.default.launch is not None
    assert budget.default.launch.threads == 256
    # Without any launch, the merged keys are the marker's error.
    alone = write(root, '[[kernels]]\nsource = "kernels/a.cu"\nkernels = ["k"]\nmin_occupancy = 0.5\n')
    (kernel,) = alone.kernels(root / "kernels" / "a.cu", None)[0]
    with pytest.raises(MarkerError, match="min_occupancy needs a block size"):
        kernel.budget(root / "kernels" / "a.cu", root, NO_VARIANT)


def test_later_tables_refine_the_kernels_they_select(root: Path) -> None:
    m = write(
        root,
        '[[kernels]]\nsource = ["kernels/*.cu"]\ncompiler = "nvcc"\nspills = 0\nmax_regs = 64\n'
        '[[kernels]]\nsource = "kernels/a.cu"\nkernels = ["MatrixMulCUDA<32>"]\n'
        "max_regs = 40\nlaunch = [1024]\n"
        '[[kernels]]\nsource = "kernels/a.cu"\nkernels = ["reduce6<float, 256, true>", "plain_*"]\n'
        "variants = [{NACC = 8}, {NACC = 16}]\n",
    )
    a = root / "kernels" / "a.cu"
    kernels, unmatched = m.kernels(a, ENTRIES)
    assert unmatched == []
    by_name = {k.name: k for k in kernels}
    assert list(by_name) == [
        "MatrixMulCUDA<16>",
        "MatrixMulCUDA<32>",
        "reduce6<float, 256, true>",
        "plain_scale",
    ]
    assert [t.index for t in by_name["MatrixMulCUDA<32>"].tables] == [1, 2]
    assert by_name["MatrixMulCUDA<32>"].keys() == {
        "compiler": "nvcc",
        "spills": 0,
        "max_regs": 40,
        "launch": [1024],
    }
    assert by_name["MatrixMulCUDA<16>"].keys()["max_regs"] == 64
    assert by_name["MatrixMulCUDA<32>"].entry == MANGLED_32
    assert [v.defines for v in by_name["reduce6<float, 256, true>"].variants()] == [
        (("NACC", "8"),),
        (("NACC", "16"),),
    ]
    assert by_name["MatrixMulCUDA<16>"].variants() == [NO_VARIANT]
    budget = by_name["MatrixMulCUDA<32>"].budget(a, root, NO_VARIANT)
    assert (budget.kernel, budget.compiler, budget.source) == ("MatrixMulCUDA<32>", "nvcc", a)
    assert budget.default.max_regs == 40
    assert budget.default.caps["spills"] == 0
    # b.cu is selected by the first table alone.
    assert [t.index for t in m.tables_of(root / "kernels" / "b.cu")] == [1]


def test_a_variant_adds_to_the_tables_defines(root: Path) -> None:
    m = write(
        root,
        '[[kernels]]\nsource = "kernels/a.cu"\nkernels = ["k"]\ndefines = {NACC = 4, DEBUG = 1}\n'
        'variants = [{NACC = 8}, ["TILE=16"]]\n',
    )
    a = root / "kernels" / "a.cu"
    ((kernel,), _) = m.kernels(a, None)
    first, second = (kernel.budget(a, root, v).options for v in kernel.variants())
    # What the compilers get: the table's defines, a variant's value replacing one of the same name.
    assert first.all_defines() == (("NACC", "8"), ("DEBUG", "1"))
    assert second.all_defines() == (("NACC", "4"), ("DEBUG", "1"), ("TILE", "16"))
    # What the key names: the variant's defines alone; the table's are build settings.
    assert (first.variant(), second.variant()) == ("NACC=8", "TILE=16")
    assert (first.settings(), second.settings()) == (("-DDEBUG=1",), ("-DNACC=4", "-DDEBUG=1"))


def test_patterns_warn_naming_the_kernels_there_are(root: Path) -> None:
    m = write(root, '[[kernels]]\nsource = "kernels/a.cu"\nkernels = ["MatrixMul*<64>", "plain_scale"]\n')
    kernels, unmatched = m.kernels(root / "kernels" / "a.cu", ENTRIES)
    assert [k.name for k in kernels] == ["plain_scale"]
    (message,) = unmatched
    assert (
        "regbudget.toml, [[kernels]] table 1: kernels pattern 'MatrixMul*<64>' matches no kernel" in message
    )
    assert "MatrixMulCUDA<16>, MatrixMulCUDA<32>" in message
    # NVRTC found nothing: say that templates need names.
    kernels, unmatched = m.kernels(root / "kernels" / "a.cu", [])
    assert "NVRTC lists only extern" in unmatched[0]


def test_a_name_no_listing_found_is_its_own_kernel_and_patterns_refine_it(root: Path) -> None:
    m = write(
        root,
        '[[kernels]]\nsource = "kernels/a.cu"\nkernels = ["softmax<256>", "softmax< 512 >"]\n'
        '[[kernels]]\nsource = "kernels/a.cu"\nkernels = ["softmax<512u>", "*"]\nspills = 0\n',
    )
    kernels, unmatched = m.kernels(root / "kernels" / "a.cu", [])
    assert unmatched == []
    assert [(k.name, k.entry, [t.index for t in k.tables]) for k in kernels] == [
        ("softmax<256>", None, [1, 2]),
        ("softmax< 512 >", None, [1, 2]),
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("MatrixMulCUDA<32>", "MatrixMulCUDA<32>"),
        ("reduce6<float, 256, true>", "reduce6<float,256,true>"),
        ("cutlass::Kernel2<cutlass::Foo>", "cutlass.Kernel2<cutlass.Foo>"),
        ("k<unsigned int>", "k<unsigned_int>"),
        ("k(float*)", "k(float*)"),
        ("k<int [4]>", "k<int(4)>"),
        ("poly_eval", "poly_eval"),
    ],
)
def test_kernel_ids_have_no_node_id_separator_or_bracket(name: str, expected: str) -> None:
    assert mf.kernel_id(name) == expected


def test_variant_ids_are_k_words() -> None:
    assert variant_id((("NACC", "8"), ("DEBUG", None))) == "NACC_8-DEBUG"
    assert variant_id((("BOUNDS", "__launch_bounds__(512)"),)) == "BOUNDS___launch_bounds___512"
    assert variant_id((("T", "unsigned int"),)) == "T_unsigned_int"


def test_arch_conflict_with_the_ini(root: Path) -> None:
    m = write(root, 'arch = "sm_80,sm_90"\n')
    assert mf.arch_conflict(m, ["sm_80,sm_90"]) is None
    assert mf.arch_conflict(m, []) is None
    message = mf.arch_conflict(m, ["sm_90"])
    assert message is not None
    assert "arch = ['sm_80', 'sm_90'] and ini regbudget_arch = sm_90 disagree" in message


def test_an_items_id_is_its_reported_name_without_spaces_and_with_dots() -> None:
    # ggml's mul_mat_vec_q<(ggml_type)10, 8>, as c++filt prints it: the report and the key say
    # mul_mat_vec_q<10, 8>, and the id the same name, as pytest can hold it.
    shown = names.stable("ggml::mul_mat_vec_q<(ggml_type)10, 8>")
    assert shown == "ggml::mul_mat_vec_q<10, 8>"
    assert mf.kernel_id(shown) == shown.replace("::", ".").replace(" ", "") == "ggml.mul_mat_vec_q<10,8>"


# -- issue 39: exclude, one set of compile keys per file, variant tables, compile_commands ---------------
def test_exclude_takes_files_out_with_their_reasons(root: Path) -> None:
    m = write(
        root,
        '[[kernels]]\nsource = ["kernels/**/*.cu"]\n'
        'exclude = ["kernels/sub/*.cu", { glob = "kernels/b.cu", reason = "#included by a.cu" }, '
        '"none/*.cu"]\n',
    )
    assert m.files() == [root / "kernels" / "a.cu"]
    assert m.excluded() == [("kernels/sub/c.cu", ""), ("kernels/b.cu", "#included by a.cu")]
    # A file another table names is that table's: not excluded.
    m = write(
        root,
        '[[kernels]]\nsource = ["kernels/*.cu"]\nexclude = "kernels/b.cu"\n'
        '[[kernels]]\nsource = ["kernels/b.cu"]\n',
    )
    assert m.files() == [root / "kernels" / "a.cu", root / "kernels" / "b.cu"]
    assert m.excluded() == []


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("3", "expected a glob relative to the rootdir"),
        ('[{ glob = "kernels/b.cu", why = "x" }]', 'expected { glob = "...", reason = "..." }'),
        ('["../elsewhere/*.cu"]', "is outside the rootdir"),
    ],
)
def test_a_bad_exclude_is_one_error_naming_table_and_key(root: Path, value: str, needle: str) -> None:
    message = error(root, f'[[kernels]]\nsource = ["kernels/*.cu"]\nexclude = {value}\n')
    assert "table 1, key 'exclude'" in message
    assert needle in message


def test_a_file_is_built_with_the_compile_keys_of_every_table_that_names_it(root: Path) -> None:
    m = write(
        root,
        '[[kernels]]\nsource = ["kernels/*.cu"]\noptions = "-std=c++17 -O3"\nspills = 0\n'
        '[[kernels]]\nsource = ["kernels/b.cu"]\nkernels = ["other"]\ninclude_dirs = ["inc"]\n'
        "max_regs = 40\n",
    )
    b = root / "kernels" / "b.cu"
    assert m.file_keys(b) == {"options": "-std=c++17 -O3", "include_dirs": ["inc"]}
    kernel = next(k for k in m.kernels(b, ["k"])[0] if k.name == "k")
    budget = kernel.budget(b, root, NO_VARIANT)
    # The kernel the narrow table does not select is built with its include dirs, but not held to its budget.
    assert budget.options == m.build_budget(b, NO_VARIANT).options
    assert budget.options.include_dirs == (str(root / "inc"),)
    assert budget.default.max_regs is None
    assert m.file_keys(root / "kernels" / "a.cu") == {"options": "-std=c++17 -O3"}


def test_a_variant_table_has_its_own_budgets_and_a_bad_key_is_named(root: Path) -> None:
    m = write(
        root,
        '[[kernels]]\nsource = "kernels/a.cu"\nlaunch = [256]\nmax_regs = 64\n'
        "variants = [{ defines = {BM = 128}, dynamic_smem = 65536, max_regs = 128 }, {BM = 64}]\n",
    )
    a = root / "kernels" / "a.cu"
    (kernel,) = m.kernels(a, ["k"])[0]
    wide, narrow = kernel.variants()
    assert (wide.id, narrow.id) == ("BM_128", "BM_64")
    assert (
        kernel.budget(a, root, wide).default.max_regs,
        kernel.budget(a, root, narrow).default.max_regs,
    ) == (
        128,
        64,
    )
    assert kernel.budget(a, root, wide).default.dynamic_smem == 65536
    assert m.build_budget(a, wide).options.variant() == "BM=128"
    message = error(
        root, '[[kernels]]\nsource = "kernels/a.cu"\nvariants = [{ defines = {BM = 1}, source = "x" }]\n'
    )
    assert "key 'variants': variant 1: key 'source' cannot differ per variant" in message


def test_a_flat_variant_with_a_budget_key_is_refused_with_the_table_form(root: Path) -> None:
    # Written flat, the budget key would be a define (-Ddynamic_smem=512) and the budget the table's.
    message = error(
        root, '[[kernels]]\nsource = "kernels/a.cu"\nvariants = [{BM = 128, dynamic_smem = 512}]\n'
    )
    assert message.startswith(
        "regbudget.toml, [[kernels]] table 1, key 'variants': variant 1: 'dynamic_smem'"
    )
    assert "-Ddynamic_smem=512" in message
    assert "{ defines = { BM = 128 }, dynamic_smem = 512 }" in message
    message = error(
        root, '[[kernels]]\nsource = "kernels/a.cu"\nvariants = [{BM = 64}, ["BM=32", "max_regs=64"]]\n'
    )
    assert "variant 2: 'max_regs' is a budget key" in message
    # The table form holds both; a define named like a budget key goes under defines.
    m = write(
        root,
        '[[kernels]]\nsource = "kernels/a.cu"\nlaunch = [256]\n'
        "variants = [{ defines = { BM = 128 }, dynamic_smem = 512 }, { defines = { stack = 1 } }]\n",
    )
    a = root / "kernels" / "a.cu"
    (kernel,) = m.kernels(a, ["k"])[0]
    table, macro = kernel.variants()
    assert kernel.budget(a, root, table).default.dynamic_smem == 512
    assert m.build_budget(a, table).options.variant() == "BM=128"
    assert m.build_budget(a, macro).options.variant() == "stack=1"


def test_compile_commands_gives_files_and_flags_and_its_errors_name_it(root: Path) -> None:
    entry = {
        "directory": str(root / "build"),
        "command": f"nvcc -DSCALE=2 -I{root / 'inc'} -std=c++17 -rdc=true -c {root}/kernels/b.cu -o b.o",
        "file": str(root / "kernels" / "b.cu"),
    }
    (root / "build" / "cc.json").write_text(json.dumps([entry]))
    m = write(root, '[[kernels]]\ncompile_commands = "build/cc.json"\ncompiler = "nvcc"\n')
    b = root / "kernels" / "b.cu"
    assert m.files() == [b]
    keys = m.file_keys(b)
    assert (keys["defines"], keys["include_dirs"]) == (["SCALE=2"], [str(root / "inc")])
    assert keys["options"] == ["-std=c++17", "-rdc=true"]
    message = error(root, '[[kernels]]\nsource = "kernels/a.cu"\ncompile_commands = "build/cc.json"\n')
    assert "'build/cc.json' has no entry for kernels/a.cu" in message
    message = error(root, '[[kernels]]\ncompile_commands = "build/none.json"\n')
    assert "table 1, key 'compile_commands'" in message
    assert "none.json" in message
