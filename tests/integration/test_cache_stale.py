"""No stale cache hit, whatever form an #include takes: edit what the kernel includes, and the cached run
must report what a --regbudget-no-cache run reports. Real NVRTC + ptxas (CUDA 12.9 wheels) and real nvcc
(CUDA 13 wheel)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.data import ACC_KERNEL
from helpers.projects import fake_home, write_tree
from helpers.runs import run_json

from pytest_regbudget.cache.fingerprint import FORMAT
from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.tools.nvcc import find_nvcc

# The size N comes from wherever a case puts it; N=2 and N=9 give different register counts, and the same
# header size, so that an edit within one timestamp tick cannot hide behind an unchanged size.
BODY = ACC_KERNEL
SMALL, BIG = "#define N 2\n", "#define N 9\n"
ARCH = "--regbudget-arch=sm_90"


@dataclass
class Case:
    files: dict[str, str]  # path -> text, before the edit
    edit: dict[str, str]  # path -> text written by the edit (a new file or a changed one)
    marker: str = ""  # extra regbudget marker arguments
    source: str = "kernels/acc.cu"
    cacheable: bool = True
    extra: dict[str, str] = field(default_factory=dict)


def include(line: str) -> str:
    return line + "\n" + BODY


# Forms whose header edit both compilers must notice the same way.
BOTH_COMPILERS = {
    "has-include-added-later": Case(
        {
            "kernels/acc.cu": include(
                '#if __has_include("size.h")\n#include "size.h"\n#else\n#define N 2\n#endif'
            )
        },
        {"kernels/size.h": BIG},
    ),
    "shadowing-header-in-an-earlier-include-dir": Case(
        {"kernels/acc.cu": include('#include "params.h"'), "inc1/other.h": "", "inc2/params.h": SMALL},
        {"inc1/params.h": BIG},
        marker='include_dirs=["inc1", "inc2"]',
    ),
    "has-include-through-dot-dot": Case(
        {
            "kernels/acc.cu": include(
                '#if __has_include("../ext/big.h")\n#include "../ext/big.h"\n#else\n#define N 2\n#endif'
            ),
            "ext/other.h": "",
        },
        {"ext/big.h": BIG},
    ),
    "shadowing-header-beside-the-source": Case(
        {"kernels/acc.cu": include('#include "params.h"'), "inc/params.h": SMALL},
        {"kernels/params.h": BIG},
        marker='include_dirs=["inc"]',
    ),
}

NVRTC_CASES = {
    # A C++14 digit separator is not a character literal: read as one, the quote would pair with the one
    # in the string and hide the #include.
    "digit-separator": Case(
        {
            "kernels/acc.cu": include(
                "static constexpr int a = 1'0; static constexpr const char* s = \"'/*\";\n"
                '#include "../ext/cfg.h"\nstatic constexpr const char* t = "*/";'
            ),
            "ext/cfg.h": SMALL,
        },
        {"ext/cfg.h": BIG},
    ),
    "commented": Case(
        {"kernels/acc.cu": include('#include /* the size */ "params.h"'), "kernels/params.h": SMALL},
        {"kernels/params.h": BIG},
    ),
    "line-continuation": Case(
        {"kernels/acc.cu": include('#include \\\n    "params.h"'), "kernels/params.h": SMALL},
        {"kernels/params.h": BIG},
    ),
    "angled-through-include-dirs": Case(
        {"kernels/acc.cu": include("#include <params.h>"), "inc/params.h": SMALL},
        {"inc/params.h": BIG},
        marker='include_dirs=["inc"]',
    ),
    "pre-include": Case(
        {"kernels/acc.cu": BODY, "inc/params.h": SMALL},
        {"inc/params.h": BIG},
        marker='include_dirs=["inc"], options=["--pre-include=params.h"]',
    ),
    "pre-include-separate-argument": Case(
        {"kernels/acc.cu": BODY, "inc/params.h": SMALL},
        {"inc/params.h": BIG},
        marker='include_dirs=["inc"], options=["-include", "params.h"]',
    ),
    "nested": Case(
        {
            "kernels/acc.cu": include('#include "params.h"'),
            "inc/params.h": '#include "sub/size.h"\n',
            "inc/sub/size.h": SMALL,
        },
        {"inc/sub/size.h": BIG},
        marker='include_dirs=["inc"]',
    ),
    **BOTH_COMPILERS,
    "dot-dot-outside-every-tree": Case(
        {"kernels/acc.cu": include('#include "../common/params.h"'), "common/params.h": SMALL},
        {"common/params.h": BIG},
    ),
    "hidden-directory": Case(
        {"kernels/acc.cu": include('#include ".gen/params.h"'), "kernels/.gen/params.h": SMALL},
        {"kernels/.gen/params.h": BIG},
    ),
    "macro-not-cached": Case(
        {
            "kernels/acc.cu": include('#define CFG "../common/cfg.h"\n#include CFG'),
            "common/cfg.h": SMALL,
        },
        {"common/cfg.h": BIG},
        cacheable=False,
    ),
    "macro-with-depends": Case(
        {
            "kernels/acc.cu": include('#define CFG "../common/cfg.h"\n#include CFG'),
            "common/cfg.h": SMALL,
        },
        {"common/cfg.h": BIG},
        marker='depends=["common/*.h"]',
    ),
}

NVCC_CASES = {
    "macro": Case(
        {
            "kernels/acc.cu": include('#define CFG "../common/cfg.h"\n#include CFG'),
            "common/cfg.h": SMALL,
        },
        {"common/cfg.h": BIG},
    ),
    "commented-and-continued": Case(
        {
            "kernels/acc.cu": include('#include /* c */ \\\n "params.h"'),
            "kernels/params.h": SMALL,
        },
        {"kernels/params.h": BIG},
    ),
    "pre-include": Case(
        {"kernels/acc.cu": BODY, "inc/params.h": SMALL},
        {"inc/params.h": BIG},
        marker='include_dirs=["inc"], options=["-include", "params.h"]',
    ),
    **BOTH_COMPILERS,
    "nested-outside-the-user-dirs": Case(
        {
            "kernels/acc.cu": include('#include "../common/params.h"'),
            "common/params.h": '#if __has_include("size.h")\n#include "size.h"\n#else\n#define N 2\n#endif\n',
        },
        {"common/size.h": BIG},
    ),
}


def project(pytester: pytest.Pytester, case: Case, compiler: str = "nvrtc") -> None:
    write_tree(pytester.path, case.files)
    extra = f", {case.marker}" if case.marker else ""
    pytester.makepyfile(
        test_k=f"""
import pytest

@pytest.mark.regbudget(source="{case.source}", kernel="acc", compiler="{compiler}"{extra})
def test_acc():
    pass
"""
    )


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(path))
    return path


@pytest.fixture(scope="module")
def nvcc_available() -> None:
    try:
        find_nvcc(None)
    except CompileError as exc:
        pytest.skip(f"no nvcc: {exc}")


def edit_and_compare(pytester: pytest.Pytester, case: Case) -> pytest.RunResult:
    """Build cached, build again (a hit), edit, build cached and afresh: the two must agree, and differ
    from before the edit."""
    result, (before,) = run_json(pytester, ARCH)
    result.assert_outcomes(passed=1)
    result, (again,) = run_json(pytester, ARCH)
    if case.cacheable:
        result.stdout.fnmatch_lines(["compile cache *: 1 hits, 0 misses*"])
    else:
        result.stdout.fnmatch_lines(["compile cache *: 0 hits, 0 misses, 1 not cached (*"])
    assert again["registers"] == before["registers"]
    write_tree(pytester.path, case.edit)
    cached_result, (cached,) = run_json(pytester, ARCH)
    cached_result.assert_outcomes(passed=1)
    _, (fresh,) = run_json(pytester, ARCH, "--regbudget-no-cache")
    assert cached["registers"] == fresh["registers"] != before["registers"]
    assert cached == fresh
    return cached_result


@pytest.mark.parametrize("name", NVRTC_CASES)
def test_nvrtc_edit_is_never_a_stale_hit(pytester: pytest.Pytester, cache_dir: Path, name: str) -> None:
    case = NVRTC_CASES[name]
    project(pytester, case)
    result = edit_and_compare(pytester, case)
    if case.cacheable:
        result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses*"])


def test_macro_include_is_named_in_the_summary(pytester: pytest.Pytester, cache_dir: Path) -> None:
    project(pytester, NVRTC_CASES["macro-not-cached"])
    result, _ = run_json(pytester, ARCH)
    result.stdout.fnmatch_lines(
        [
            "compile cache *: 0 hits, 0 misses, 1 not cached (kernels/acc.cu: #include CFG goes through a "
            "macro, which the cache cannot follow; name the files it can reach with depends=) *"
        ]
    )
    assert not list(cache_dir.rglob("*.json"))


@pytest.mark.parametrize("name", NVCC_CASES)
def test_nvcc_edit_is_never_a_stale_hit(
    pytester: pytest.Pytester, cache_dir: Path, nvcc_available: None, name: str
) -> None:
    case = NVCC_CASES[name]
    project(pytester, case, compiler="nvcc")
    result = edit_and_compare(pytester, case)
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses*"])
    # The dependency record now lists both builds: going back to the old header is a hit again.
    write_tree(pytester.path, case.files)
    for name in case.edit.keys() - case.files.keys():
        (pytester.path / name).unlink()
    result, _ = run_json(pytester, ARCH)
    result.stdout.fnmatch_lines(["compile cache *: 1 hits, 0 misses*"])


CODE_STRING_TEST = """
import pytest

CODE = r'''
#include /* the size */ \\
    "params.h"
{body}
'''

@pytest.mark.regbudget()
def test_string(regbudget):
    regbudget.compile_source(CODE, "acc", name="acc.cu", include_dirs=["inc"])
"""


def test_code_string_header_edit(pytester: pytest.Pytester, cache_dir: Path) -> None:
    case = Case({"inc/params.h": SMALL}, {"inc/params.h": BIG})
    write_tree(pytester.path, case.files)
    pytester.makepyfile(test_k=CODE_STRING_TEST.replace("{body}", BODY))
    result = edit_and_compare(pytester, case)
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses*"])


def test_depends_in_the_fixture(pytester: pytest.Pytester, cache_dir: Path) -> None:
    case = Case(
        {"kernels/acc.cu": include('#define CFG "../common/cfg.h"\n#include CFG'), "common/cfg.h": SMALL},
        {"common/cfg.h": BIG},
    )
    write_tree(pytester.path, case.files)
    pytester.makepyfile(
        test_k="""
import pytest

@pytest.mark.regbudget()
def test_fixture(regbudget):
    regbudget.compile("kernels/acc.cu", "acc", depends=["common"])
"""
    )
    edit_and_compare(pytester, case)


def test_cache_dir_that_is_a_file_is_one_note(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("I am a file\n")
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(not_a_dir / "sub"))
    project(pytester, NVRTC_CASES["commented"])
    result, records = run_json(pytester, ARCH)
    result.assert_outcomes(passed=1)
    assert records[0]["registers"] > 0
    result.stdout.fnmatch_lines(
        [f"compile cache {not_a_dir / 'sub'}: {not_a_dir} is not a directory: caching off*"]
    )
    result.stdout.no_fnmatch_line("*corrupt*")
    assert not_a_dir.read_text() == "I am a file\n"


def test_corrupt_nvcc_dependency_record_is_rebuilt_not_trusted(
    pytester: pytest.Pytester, cache_dir: Path, nvcc_available: None
) -> None:
    project(pytester, NVCC_CASES["pre-include"], compiler="nvcc")
    _, (good,) = run_json(pytester, ARCH)
    (record,) = (cache_dir / f"v{FORMAT}" / "records").rglob("*.json")
    record.write_text(record.read_text().replace("params.h", "other.h"))  # the checksum no longer holds
    result, (rebuilt,) = run_json(pytester, ARCH)
    result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses, 1 corrupt entries rebuilt*"])
    assert rebuilt == good
    result, _ = run_json(pytester, ARCH)
    result.stdout.fnmatch_lines(["compile cache *: 1 hits, 0 misses*"])


# -- what else changes a build: the compiler's environment and the compilers themselves ------------------
DEFAULT_N = include("#ifndef N\n#define N 2\n#endif")


@pytest.mark.parametrize("variable", ["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"])
def test_nvcc_environment_flags_are_in_the_key(
    pytester: pytest.Pytester,
    cache_dir: Path,
    nvcc_available: None,
    variable: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project(pytester, Case({"kernels/acc.cu": DEFAULT_N}, {}), compiler="nvcc")
    _, (before,) = run_json(pytester, ARCH)
    monkeypatch.setenv(variable, "-DN=9")
    cached_result, (cached,) = run_json(pytester, ARCH)
    cached_result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses*"])
    _, (fresh,) = run_json(pytester, ARCH, "--regbudget-no-cache")
    assert cached["registers"] == fresh["registers"] != before["registers"]


def test_a_ptxas_rewritten_in_place_is_another_ptxas(
    pytester: pytest.Pytester, cache_dir: Path, tmp_path: Path
) -> None:
    """A wrapper script that keeps its path and its version string but changes what it does."""
    home = fake_home(tmp_path, 'exec "$REAL" "$@"\n')
    project(pytester, Case({"kernels/acc.cu": include("#define N 9")}, {}))
    args = (ARCH, f"--regbudget-cuda-home={home}")
    _, (before,) = run_json(pytester, *args)
    assert run_json(pytester, *args)[0].stdout.str().count("1 hits, 0 misses") == 1
    wrapper = home / "bin" / "ptxas"
    wrapper.write_text(wrapper.read_text().replace('exec "$REAL" "$@"', 'exec "$REAL" -maxrregcount=16 "$@"'))
    cached_result, (cached,) = run_json(pytester, *args)
    cached_result.stdout.fnmatch_lines(["compile cache *: 0 hits, 1 misses*"])
    _, (fresh,) = run_json(pytester, *args, "--regbudget-no-cache")
    assert cached["registers"] == fresh["registers"] != before["registers"]


@pytest.mark.parametrize("depends", ['"../ext/cfg.hh"', '"../ext/*.hh"'])
def test_depends_that_names_nothing_is_an_error_naming_it(pytester: pytest.Pytester, depends: str) -> None:
    case = Case(
        {"kernels/acc.cu": include('#define CFG "../ext/cfg.h"\n#include CFG'), "ext/cfg.h": SMALL},
        {},
        marker=f"depends=[{depends}]",
    )
    project(pytester, case)
    result, records = run_json(pytester, ARCH)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"*depends: '{depends.strip(chr(34))}' * (relative to {pytester.path}); fix the path*"]
    )
    assert records == []
