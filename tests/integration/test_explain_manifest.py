"""`regbudget explain` inside a manifest project builds a kernel as the plugin does: the table that covers the
file gives the compiler, include dirs, defines and options. Its numbers equal the plugin's, its suggested
marker passes as a test when pasted into tests/, and a file named without a kernel lists its kernels. Real
nvcc and NVRTC from the wheels."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.runs import bad_input, regbudget

KERNELS = Path(__file__).parent.parent / "kernels"

MANIFEST = """\
arch = ["sm_90"]
[[kernels]]
source = ["src/*.cu"]
compiler = "nvcc"
include_dirs = ["include"]
defines = ["NACC=24"]
options = ["-std=c++17"]
spills = 0
"""


@pytest.fixture
def project(pytester: pytest.Pytester, nvcc_found: None) -> Path:
    root = pytester.path
    (root / "include").mkdir()
    # The header only the table's include dir finds; it decides the kernel's width from the table's define.
    (root / "include" / "width.h").write_text("#define WIDE (NACC > 16)\n")
    (root / "src").mkdir()
    body = (KERNELS / "hungry.cu").read_text().replace('extern "C" ', "")
    (root / "src" / "poly.cu").write_text(
        '#include "width.h"\n#if !WIDE\n#error NACC did not reach the build\n#endif\n'
        + body
        + "\n__global__ void helper(float* y) { y[threadIdx.x] = 0; }\n"
    )
    (root / "regbudget.toml").write_text(MANIFEST)
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


def test_explain_builds_a_manifest_kernel_as_the_plugin_does(
    pytester: pytest.Pytester, project: Path
) -> None:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--regbudget-json=r.json")
    result.assert_outcomes(passed=2)
    records = json.loads((project / "r.json").read_text())["kernels"]
    plugin = next(r for r in records if r["kernel"] == "poly_eval")
    assert plugin["compiler"] == "nvcc"

    done = regbudget("explain", "src/poly.cu::poly_eval", "--arch", "sm_90", "--bounds", "none", cwd=project)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("src/poly.cu: built as regbudget.toml, [[kernels]] table 1 builds it (")
    assert "compiler nvcc" in lines[0]
    assert "-DNACC=24" in lines[0]
    assert "-std=c++17" in lines[0]
    row = next(line.split() for line in lines if line.startswith("as written"))
    regs, spills, stack = int(row[3]), row[4], int(row[5])
    assert (regs, spills, stack) == (
        plugin["registers"],
        f"{plugin['spill_stores']}/{plugin['spill_loads']}",
        plugin["stack_frame"],
    )
    # The table's budget (spills = 0) holds, as in the pytest run above.
    assert lines[lines.index("poly_eval [sm_90]: ok") - 1].startswith("verdict, as pytest gives it")
    marker = lines[-1]
    assert marker.startswith(
        '@pytest.mark.regbudget(source="../src/poly.cu", kernel="poly_eval", compiler="nvcc"'
    )
    assert "defines=['NACC=24'], include_dirs=['../include'], options=['-std=c++17']" in marker
    assert f"max_regs={regs}," in marker

    # Pasted into tests/ (where --tests-dir says the test goes), it builds the same kernel and passes.
    (project / "tests").mkdir()
    (project / "tests" / "test_pasted.py").write_text(
        f"import pytest\n\n{marker}\ndef test_pasted():\n    pass\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests", "--regbudget-json=p.json")
    result.assert_outcomes(passed=1)
    (pasted,) = json.loads((project / "p.json").read_text())["kernels"]
    assert (pasted["registers"], pasted["compiler"]) == (regs, "nvcc")

    # Outside the project (no manifest above), the same file builds with NVRTC and no include dir: the error
    # is the compiler's own, whole.
    alone = project.parent / "alone"
    alone.mkdir()
    (alone / "poly.cu").write_text((project / "src" / "poly.cu").read_text())
    failed = regbudget("explain", "poly.cu::poly_eval", "--arch", "sm_90", cwd=alone)
    assert failed.returncode == 2
    assert 'cannot open source file "width.h"' in failed.stderr


def test_explain_of_a_file_lists_its_kernels(project: Path) -> None:
    done = regbudget("explain", "src/poly.cu", "--arch", "sm_90", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "src/poly.cu holds 2 kernel(s) on sm_90:" in done.stdout
    listed = re.findall(r"^  (\S+)$", done.stdout, re.MULTILINE)
    assert listed == ["helper", "poly_eval"]
    assert "explain one: regbudget explain 'src/poly.cu::helper'" in done.stdout
    # A broken manifest is one line naming it, not a build with the wrong settings.
    (project / "regbudget.toml").write_text(MANIFEST.replace('compiler = "nvcc"', 'compiler = "nvcx"'))
    bad_input(regbudget("explain", "src/poly.cu::poly_eval", cwd=project), r"regbudget manifest: .*nvcx")
