"""The compilation database reader (project/compile_commands.py) on recorded and written databases: CMake's
command strings, Bear's argument lists, what is kept, dropped and ignored, and every error. No toolkit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_regbudget.core.errors import ManifestError
from pytest_regbudget.project import compile_commands as cdb
from pytest_regbudget.project.compile_commands import CompileEntry

CMAKE_PROJECT = Path(__file__).parent.parent / "data" / "cmake_project"

# As CMake 3.25's Ninja generator writes an entry (its Makefiles give nvcc the -I in an --options-file), and
# a C++ entry of the same build; @ROOT@ is the rootdir.
CMAKE_DATABASE = r"""[
{
  "directory": "@ROOT@/build",
  "command": "/opt/cuda/bin/nvcc -forward-unknown-to-host-compiler -DFOO -DBAR=2 -I/abs/inc -Irel/inc -isystem /opt/cutlass/include --generate-code=arch=compute_90,code=[compute_90,sm_90] -std=c++17 -x cu -rdc=true -c @ROOT@/src/k.cu -o CMakeFiles/k.dir/src/k.cu.o",
  "file": "@ROOT@/src/k.cu"
},
{
  "directory": "@ROOT@/build",
  "command": "/usr/bin/c++ -DFOO -I/abs/inc -O2 -o CMakeFiles/host.dir/src/host.cpp.o -c @ROOT@/src/host.cpp",
  "file": "@ROOT@/src/host.cpp"
}
]"""  # noqa: E501

# As Bear 3 writes an entry of a build through ccache: "arguments", a relative "file", and "output".
BEAR_DATABASE = r"""[
  {
    "arguments": [
      "/usr/bin/ccache", "/opt/cuda/bin/nvcc", "-MD", "-MF", "k.d", "-arch=sm_80", "-O3", "-Xptxas", "-v",
      "-Xcompiler", "-fPIC", "-ccbin", "/usr/bin/g++", "-maxrregcount", "64", "--expt-relaxed-constexpr",
      "-lineinfo", "-c", "-o", "k.o", "src/k.cu"
    ],
    "directory": "@ROOT@",
    "file": "src/k.cu",
    "output": "@ROOT@/k.o"
  }
]"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "build").mkdir()
    return tmp_path


def write(root: Path, text: str, name: str = "compile_commands.json") -> Path:
    path = root / name
    path.write_text(text.replace("@ROOT@", str(root)))
    return path


def entries(root: Path, database: list[dict[str, object]]) -> dict[Path, list[CompileEntry]]:
    return cdb.load(write(root, json.dumps(database)), root)


def only(root: Path, database: list[dict[str, object]]) -> CompileEntry:
    (found,) = entries(root, database).values()
    (entry,) = found
    return entry


def command(root: Path, text: str, file: str = "src/k.cu") -> dict[str, object]:
    return {"directory": str(root), "command": text, "file": file}


def test_cmake_command_string(root: Path) -> None:
    found = cdb.load(write(root, CMAKE_DATABASE), root)
    assert found == {
        root / "src" / "k.cu": [
            CompileEntry(
                file=root / "src" / "k.cu",
                defines=("FOO", "BAR=2"),
                include_dirs=("/abs/inc", str(root / "build" / "rel" / "inc"), "/opt/cutlass/include"),
                options=("-forward-unknown-to-host-compiler", "-std=c++17", "-x", "cu", "-rdc=true"),
                index=0,
            )
        ]
    }


def test_bear_arguments_through_ccache(root: Path) -> None:
    found = cdb.load(write(root, BEAR_DATABASE), root)
    assert found == {
        root / "src" / "k.cu": [
            CompileEntry(
                file=root / "src" / "k.cu",
                defines=(),
                include_dirs=(),
                options=(
                    "-O3",
                    "-Xptxas",
                    "-v",
                    "-Xcompiler",
                    "-fPIC",
                    "-ccbin",
                    "/usr/bin/g++",
                    "-maxrregcount",
                    "64",
                    "--expt-relaxed-constexpr",
                    "-lineinfo",
                ),
                index=0,
            )
        ]
    }


@pytest.mark.parametrize("launcher", ["ccache", "/usr/lib/ccache/ccache", "sccache", "/opt/bin/distcc"])
def test_a_launcher_and_its_compiler_are_dropped(root: Path, launcher: str) -> None:
    entry = only(root, [command(root, f"{launcher} /opt/cuda/bin/nvcc -O3 -c src/k.cu")])
    assert entry.options == ("-O3",)


def test_without_a_launcher_only_the_compiler_is_dropped(root: Path) -> None:
    entry = only(root, [command(root, "nvcc -O3 -c src/k.cu")])
    assert entry.options == ("-O3",)


@pytest.mark.parametrize(
    "flags",
    [
        "-c",
        "--compile",
        "-o k.o",
        "-ok.o",
        "--output-file k.o",
        "--output-file=k.o",
        "-odir out",
        "-M",
        "-MM",
        "-MD",
        "-MMD",
        "-MP",
        "-MF k.d",
        "-MFk.d",
        "-MT k.o",
        "-MQ k.o",
        "-MJ k.json",
        "--generate-dependencies",
        "--generate-dependencies-with-compile",
        "--generate-nonsystem-dependencies-with-compile",
        "--dependency-output k.d",
        "--dependency-output=k.d",
        "-arch sm_80",
        "-arch=sm_80",
        "--gpu-architecture sm_90a",
        "--gpu-architecture=sm_90a",
        "-gencode arch=compute_80,code=sm_80",
        "-gencode=arch=compute_80,code=sm_80",
        "--generate-code arch=compute_90,code=[compute_90,sm_90]",
        "--generate-code=arch=compute_90,code=[compute_90,sm_90]",
        "-code sm_80",
        "-code=sm_80",
        "--gpu-code sm_80",
        "--gpu-code=sm_80",
        "--cuda-gpu-arch=sm_80",
        "--offload-arch=sm_90",
    ],
)
def test_what_the_plugin_supplies_is_dropped(root: Path, flags: str) -> None:
    entry = only(root, [command(root, f"nvcc -O3 {flags} -lineinfo src/k.cu")])
    assert entry.options == ("-O3", "-lineinfo")


@pytest.mark.parametrize(
    ("flags", "kept"),
    [
        ("-std=c++17", ("-std=c++17",)),
        ("--std c++17", ("--std", "c++17")),
        ("-rdc=true", ("-rdc=true",)),
        ("--relocatable-device-code=true", ("--relocatable-device-code=true",)),
        ("-rdc true", ("-rdc", "true")),
        ("-dc", ("-dc",)),
        ("-maxrregcount 64", ("-maxrregcount", "64")),
        ("-maxrregcount=64", ("-maxrregcount=64",)),
        ("-Xptxas -O1", ("-Xptxas", "-O1")),
        ("-Xptxas=-O1,-v", ("-Xptxas=-O1,-v",)),
        ("-Xcompiler -fPIC", ("-Xcompiler", "-fPIC")),
        ("--compiler-options -Wall", ("--compiler-options", "-Wall")),
        ("-Xcudafe --diag_suppress=177", ("-Xcudafe", "--diag_suppress=177")),
        ("-Xnvlink -v", ("-Xnvlink", "-v")),
        ("-ccbin g++-12", ("-ccbin", "g++-12")),
        ("--compiler-bindir /usr/bin", ("--compiler-bindir", "/usr/bin")),
        ("-x cu", ("-x", "cu")),
        ("-U NDEBUG", ("-U", "NDEBUG")),
        ("-UNDEBUG", ("-UNDEBUG",)),
        ("-include cuda_fp16.h", ("-include", "cuda_fp16.h")),
        (
            "--expt-relaxed-constexpr --expt-extended-lambda",
            ("--expt-relaxed-constexpr", "--expt-extended-lambda"),
        ),
        ("-G -lineinfo --use_fast_math", ("-G", "-lineinfo", "--use_fast_math")),
        ("-objtemp", ("-objtemp",)),
    ],
)
def test_other_flags_are_kept_with_their_values(root: Path, flags: str, kept: tuple[str, ...]) -> None:
    entry = only(root, [command(root, f"nvcc {flags} -c src/k.cu -o k.o")])
    assert entry.options == kept
    assert (entry.defines, entry.include_dirs) == ((), ())


def test_a_flag_s_value_that_looks_like_a_dropped_flag_is_its_value(root: Path) -> None:
    entry = only(root, [command(root, "nvcc -Xcompiler -c -Xptxas -o -Xcompiler -MD src/k.cu")])
    assert entry.options == ("-Xcompiler", "-c", "-Xptxas", "-o", "-Xcompiler", "-MD")


def test_defines_in_every_spelling_in_command_order(root: Path) -> None:
    entry = only(
        root,
        [command(root, "nvcc -D A -DB=1 --define-macro=C --define-macro D=x -O3 -DF=a=b src/k.cu")],
    )
    assert entry.defines == ("A", "B=1", "C", "D=x", "F=a=b")
    assert entry.options == ("-O3",)


def test_include_dirs_in_every_spelling_made_absolute(root: Path) -> None:
    entry = only(
        root,
        [
            {
                "directory": str(root / "build"),
                "arguments": [
                    "nvcc",
                    "-I",
                    "/a",
                    "-Ib",
                    "--include-path=../c",
                    "--include-path",
                    "/d",
                    "-isystem",
                    "e",
                    "-isystem/f",
                    "--system-include",
                    "/g",
                    "--system-include=h",
                    "../src/k.cu",
                ],
                "file": "../src/k.cu",
            }
        ],
    )
    build = root / "build"
    assert entry.include_dirs == (
        "/a",
        str(build / "b"),
        str(root / "c"),
        "/d",
        str(build / "e"),
        "/f",
        "/g",
        str(build / "h"),
    )
    assert (entry.defines, entry.options, entry.file) == ((), (), root / "src" / "k.cu")


def test_quoted_words_keep_their_spaces(root: Path) -> None:
    entry = only(
        root,
        [command(root, r"""nvcc -DMSG="a b" '-DQ=c d' -DNAME=\"x\" -Xcompiler "-Wall -Wextra" src/k.cu""")],
    )
    assert entry.defines == ("MSG=a b", "Q=c d", 'NAME="x"')
    assert entry.options == ("-Xcompiler", "-Wall -Wextra")


def test_relative_paths_of_path_flags_become_absolute_where_they_exist(root: Path) -> None:
    (root / "build" / "pre.h").write_text("")
    (root / "build" / "bin").mkdir()
    text = (
        "nvcc -include pre.h -include cuda_fp16.h --pre-include=pre.h -ccbin bin -ccbin g++ "
        "--options-file CMakeFiles/k.dir/includes_CUDA.rsp --options-file=/abs/x.rsp -c ../src/k.cu"
    )
    entry = only(root, [{"directory": str(root / "build"), "command": text, "file": "../src/k.cu"}])
    build = root / "build"
    assert entry.options == (
        "-include",
        str(build / "pre.h"),
        "-include",
        "cuda_fp16.h",
        f"--pre-include={build / 'pre.h'}",
        "-ccbin",
        str(build / "bin"),
        "-ccbin",
        "g++",
        "--options-file",
        str(build / "CMakeFiles" / "k.dir" / "includes_CUDA.rsp"),
        "--options-file=/abs/x.rsp",
    )


def test_non_cuda_entries_are_ignored_and_x_cu_makes_cuda(root: Path) -> None:
    found = entries(
        root,
        [
            command(root, "g++ -O2 -c src/host.cpp", "src/host.cpp"),
            command(root, "nvcc -x cu -O1 -c src/k.cpp", "src/k.cpp"),
            command(root, "clang++ -x cuda --cuda-gpu-arch=sm_80 -O2 -c src/c.cc", "src/c.cc"),
            command(root, "nvcc -x cu -c src/a.cpp -x c++ src/b.cpp", "src/b.cpp"),
            command(root, "nvcc -O3 -c src/k.cu", "src/k.cu"),
        ],
    )
    assert found == {
        root / "src" / "k.cpp": [CompileEntry(root / "src" / "k.cpp", (), (), ("-x", "cu", "-O1"), 1)],
        root / "src" / "c.cc": [CompileEntry(root / "src" / "c.cc", (), (), ("-x", "cuda", "-O2"), 2)],
        root / "src" / "k.cu": [CompileEntry(root / "src" / "k.cu", (), (), ("-O3",), 4)],
    }


@pytest.mark.parametrize(
    ("argv", "file", "cuda"),
    [
        (["nvcc", "-c", "k.cu"], "k.cu", True),
        (["nvcc", "-x", "c++", "-c", "k.cu"], "k.cu", True),  # the name decides first
        (["nvcc", "-x", "cu", "-c", "k.cpp"], "k.cpp", True),
        (["nvcc", "-x=cu", "-c", "k.cpp"], "k.cpp", True),
        (["nvcc", "--x", "cu", "-c", "k.cpp"], "k.cpp", True),
        (["clang++", "-x", "cuda", "-c", "k.cpp"], "k.cpp", True),
        (["clang++", "-xcuda", "-c", "k.cpp"], "k.cpp", True),
        (["ccache", "nvcc", "-x", "cu", "k.cpp"], "k.cpp", True),
        (["g++", "-c", "k.cpp"], "k.cpp", False),
        (["nvcc", "-c", "k.cpp", "-x", "cu"], "k.cpp", False),  # -x after the file is not its language
        (["nvcc", "-x", "cu", "-x", "c++", "k.cpp"], "k.cpp", False),
        (["nvcc", "-Xcompiler", "-x", "cu", "k.cpp"], "k.cpp", False),  # -x is -Xcompiler's value
        (["nvcc", "-c", "k.cuh"], "k.cuh", False),
    ],
)
def test_is_cuda(argv: list[str], file: str, cuda: bool) -> None:
    assert cdb.is_cuda(argv, file) is cuda


def test_entries_outside_the_rootdir_are_ignored(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    found = entries(
        root,
        [
            command(root, f"nvcc -c {elsewhere}/x.cu", f"{elsewhere}/x.cu"),
            command(root, "nvcc -c ../outside.cu", "../outside.cu"),
            command(root, "nvcc -O2 -c src/k.cu"),
        ],
    )
    assert found == {root / "src" / "k.cu": [CompileEntry(root / "src" / "k.cu", (), (), ("-O2",), 2)]}


def test_a_file_reached_through_a_link_is_keyed_by_its_real_path(root: Path) -> None:
    (root / "src" / "k.cu").write_text("")
    (root / "linked").symlink_to(root / "src")
    entry = only(root, [command(root, "nvcc -c linked/k.cu", "linked/k.cu")])
    assert entry.file == root / "src" / "k.cu"
    assert entry.options == ()


def test_a_file_listed_twice_keeps_each_distinct_entry(root: Path) -> None:
    found = entries(
        root,
        [
            command(root, "nvcc -DN=8 -O3 -c src/k.cu -o k8.o"),
            command(root, "nvcc -O2 -c src/other.cu", "src/other.cu"),
            command(root, "nvcc -DN=16 -O3 -c src/k.cu -o k16.o"),
            command(root, "nvcc -DN=8 -O3 -c src/k.cu -o again.o"),  # the first one's flags: one entry
        ],
    )
    k, other = root / "src" / "k.cu", root / "src" / "other.cu"
    assert found == {
        k: [CompileEntry(k, ("N=8",), (), ("-O3",), 0), CompileEntry(k, ("N=16",), (), ("-O3",), 2)],
        other: [CompileEntry(other, (), (), ("-O2",), 1)],
    }
    assert list(found) == [k, other]


def test_arguments_win_over_command(root: Path) -> None:
    entry = only(
        root,
        [
            {
                "directory": str(root),
                "arguments": ["nvcc", "-O1", "src/k.cu"],
                "command": "nvcc -O3",
                "file": "src/k.cu",
            }
        ],
    )
    assert entry.options == ("-O1",)


def test_no_cuda_entry_is_an_empty_database(root: Path) -> None:
    assert entries(root, []) == {}
    assert entries(root, [command(root, "g++ -c a.cpp", "a.cpp")]) == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not JSON"),
        ('{"directory": "/", "file": "k.cu", "command": "nvcc"}', "holds an object, not a list of entries"),
        ('"compile_commands"', "holds a string, not a list of entries"),
        ("null", "holds null, not a list of entries"),
        ("[3]", "entry [0] is a number, not an object"),
        (
            '[{"directory": "/", "file": "k.cu"}]',
            "entry [0] (k.cu) has neither a list of strings 'arguments' nor a string 'command'",
        ),
        ('[{"directory": "/", "file": "k.cu", "arguments": "nvcc -c k.cu"}]', "entry [0] (k.cu) has neither"),
        ('[{"directory": "/", "file": "k.cu", "arguments": [1, 2]}]', "entry [0] (k.cu) has neither"),
        ('[{"directory": "/", "file": "k.cu", "command": 3}]', "entry [0] (k.cu) has neither"),
        (
            '[{"directory": "/", "file": "k.cu", "command": "nvcc \'k.cu"}]',
            "entry [0]: its command cannot be split into words",
        ),
        (
            '[{"directory": "/", "file": "k.cu", "command": "nvcc k.cu"}, {"file": "k", "command": "n"}]',
            "entry [1] has no string 'directory'",
        ),
        ('[{"directory": "/", "command": "nvcc k.cu"}]', "entry [0] has no string 'file'"),
        ('[{"command": "nvcc k.cu"}]', "entry [0] has no string 'directory' or 'file'"),
        ('[["nvcc", "k.cu"]]', "entry [0] is a list, not an object"),
    ],
)
def test_a_bad_database_is_one_error_naming_it(root: Path, text: str, message: str) -> None:
    path = write(root, text)
    with pytest.raises(ManifestError) as info:
        cdb.load(path, root)
    assert str(info.value).startswith(f"compilation database {path}")
    assert message in str(info.value)


def test_a_missing_database_says_how_to_make_one(root: Path) -> None:
    path = root / "build" / "compile_commands.json"
    with pytest.raises(ManifestError) as info:
        cdb.load(path, root)
    assert str(info.value) == (
        f"compilation database {path} does not exist: write it with cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "
        "(in the build folder) or bear -- make, or fix the path"
    )


def test_an_unreadable_database_names_it(root: Path) -> None:
    path = root / "compile_commands.json"
    path.mkdir()
    with pytest.raises(ManifestError, match=r"compilation database .*compile_commands\.json cannot be read"):
        cdb.load(path, root)


def test_the_checked_in_cmake_project(tmp_path: Path) -> None:
    """The database real CMake wrote for tests/data/cmake_project (README.md there says how)."""
    project = tmp_path / "project"
    shutil.copytree(CMAKE_PROJECT, project)
    path = project / "compile_commands.json"
    path.write_text(path.read_text().replace("@ROOT@", str(project)))
    found = cdb.load(path, tmp_path)
    a, b = project / "a.cu", project / "b.cu"
    common = ("-forward-unknown-to-host-compiler", "-std=c++17")
    assert found == {
        a: [
            CompileEntry(a, ("SCALE=2",), (str(project / "include"),), (*common, "-x", "cu", "-rdc=true"), 0)
        ],
        b: [
            CompileEntry(
                b,
                ("SCALE=2",),
                (str(project / "include"),),
                (*common, "-maxrregcount=32", "-x", "cu", "-rdc=true"),
                1,
            )
        ],
    }
