"""Hostile names and bad markers end to end, through pytester with the real NVRTC and ptxas.

A kernel name, a test id or a compiler log must not forge a GitHub workflow command in pytest's output
or break the Markdown summary; a marker that would build the wrong thing fails its test at setup.
"""

from __future__ import annotations

import re

import pytest
from helpers.runs import run_json

SMALL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
# NVRTC quotes the failing source line in its log, indented by two spaces.
BAD = 'extern "C" __global__ void bad(float* x) {\n::error file=x.cu::forged\n}\n'

HOSTILE_TESTS = f"""
import pytest

SMALL = {SMALL!r}

@pytest.mark.regbudget(source="small.cu", kernel="k\\n::error file=x.cu::forged")
def test_hostile_kernel_name():
    pass

@pytest.mark.regbudget(source="bad.cu", kernel="bad")
def test_compile_log_quotes_a_command():
    pass

@pytest.mark.regbudget(max_regs=1)
@pytest.mark.parametrize("n", [1], ids=["a|b\\n::error::x`y"])
def test_odd_id(regbudget, n):
    regbudget.compile_source(SMALL, "k")
"""


def commands(text: str) -> list[str]:
    """The lines the GitHub runner would run: it strips leading whitespace, then looks for '::'."""
    return [line for line in text.splitlines() if line.lstrip().startswith("::")]


def test_no_forged_command_and_an_intact_markdown_table(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".cu", small=SMALL, bad=BAD)
    pytester.makepyfile(test_hostile_names_case=HOSTILE_TESTS)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    md = pytester.path / "summary.md"
    result, records = run_json(pytester, "-rA", f"--regbudget-markdown={md}")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    # The only commands are our three annotations, one per failing kernel.
    found = commands(out)
    assert len(found) == 3, found
    assert all(re.match(r"::error file=[^:]*,title=regbudget [^:]*::", line) for line in found), found
    # The names are shown, escaped, on one line.
    assert "k\\n::error file=x.cu::forged" in out
    assert "> ::error file=x.cu::forged" in out  # the compiler's quote of the source line
    assert {r["kernel"] for r in records} == {"k\n::error file=x.cu::forged", "bad", "k"}
    text = md.read_text()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    # A row per failing kernel, each of five cells: verdict, kernel, arch, file, what failed.
    assert len(rows) == 2 + 3, text
    assert all(len(re.split(r"(?<!\\)\|", row)) == 7 for row in rows), rows
    error = re.escape("| **ERROR** | `k\\n::error file=x.cu::forged` | sm_90 | ")
    assert re.search(error + r"`[^`]*` \| did not compile: `", text)
    assert commands(text) == []


BAD_MARKERS = """
import pytest

@pytest.mark.regbudget(source="small.cu", kernel="k", defines=[("N", 4)])
def test_tuple_define():
    pass

@pytest.mark.regbudget(source="small.cu", kernel="k", options="-arch=sm_80")
def test_arch_option():
    pass

@pytest.mark.regbudget(source="small.cu", kernel="k", archs=[])
def test_no_archs():
    pass

@pytest.mark.regbudget(source="small.cu", kernel="k", max_regs="64")
def test_string_number():
    pass

@pytest.mark.regbudget(max_regs=64)
class TestK:
    @pytest.mark.regbudget(source="small.cu", kernel="k", spills=0)
    def test_two_markers(self):
        pass

@pytest.mark.regbudget(source="small.cu", kernel="k", options="-std=c++17 --use_fast_math", max_regs=64)
def test_options_string_is_split():
    pass
"""


def test_bad_markers_fail_their_test_at_setup_with_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makefile(".cu", small=SMALL)
    # A module name of its own: pytester runs in this process, where tests/plugin/test_markers.py is loaded.
    pytester.makepyfile(test_bad_marker_cases=BAD_MARKERS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=5, passed=1)
    out = result.stdout.str()
    for expected in [
        "test_tuple_define[sm_90]: bad regbudget marker: defines: item ('N', 4) is not a string"
        " (for ('N', 4) write 'N=4' or {'N': 4})",
        "test_arch_option[sm_90]: bad regbudget marker: options: '-arch=sm_80' sets the target arch, which"
        " the run chooses for each test: drop it, and use archs=['sm_80'] on the marker to limit this test,"
        " or --regbudget-arch=sm_80 (ini regbudget_arch) for the whole run",
        "test_no_archs[sm_90]: bad regbudget marker: archs=[] selects no arch; drop it to use every arch",
        "test_string_number[sm_90]: bad regbudget marker: max_regs='64': expected 1..255 registers per"
        " thread; got a string '64': write 64",
        "test_two_markers[sm_90]: bad regbudget marker: 2 regbudget markers apply to this test:"
        " regbudget(source='small.cu', kernel='k', spills=0) on function test_two_markers[sm_90];"
        " regbudget(max_regs=64) on class TestK. Markers are not merged",
    ]:
        assert expected in out
