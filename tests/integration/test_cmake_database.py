"""A CMake project adopted through its compile_commands.json, with no flag written by hand (issue 39): CMake
writes the database when it is here (with the nvcc wheel as its CUDA compiler), else the checked-in copy of
what it wrote is read. Each kernel's numbers equal a hand `nvcc -cubin -Xptxas -v` of the same flags, and a
per-file flag (`-maxrregcount=32`) changes them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.toolchain import nvcc_or_skip

from pytest_regbudget.core.ptxas import parse_ptxas_output

FIXTURE = Path(__file__).parents[1] / "data" / "cmake_project"
PYPROJECT = """
[tool.regbudget]
arch = ["sm_90"]

[[tool.regbudget.kernels]]
compile_commands = "build/compile_commands.json"
compiler = "nvcc"
"""


@pytest.fixture(scope="module")
def nvcc() -> Path:
    return nvcc_or_skip()


def database(root: Path, nvcc: Path, origin: str) -> None:
    """The database: CMake's, written now, or the checked-in copy of what it wrote."""
    if origin == "cmake":
        if not (shutil.which("cmake") and shutil.which("ninja")):
            pytest.skip("CMake with Ninja is not installed: the checked-in case reads what it wrote")
        done = subprocess.run(
            ["cmake", "-G", "Ninja", "-S", str(root), "-B", str(root / "build"),
             "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", f"-DCMAKE_CUDA_COMPILER={nvcc}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return
    (root / "build").mkdir(exist_ok=True)
    text = (FIXTURE / "compile_commands.json").read_text().replace("@ROOT@", str(root))
    (root / "build" / "compile_commands.json").write_text(text)


def by_hand(nvcc: Path, root: Path, name: str, *flags: str) -> tuple[int, int]:
    """ptxas's registers and spill stores for `name`.cu built by hand with CMake's flags (as CMakeLists.txt
    sets them)."""
    out = root / f"{name}.cubin"
    cmd = [str(nvcc), "-cubin", "-arch=sm_90", "-Xptxas", "-v", "-DSCALE=2", f"-I{root / 'include'}",
           "-std=c++17", "-rdc=true", *flags, str(root / f"{name}.cu"), "-o", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    (report,) = parse_ptxas_output(done.stdout + done.stderr).values()
    return report.registers, report.spill_stores


@pytest.mark.parametrize("origin", ["cmake", "checked-in"])
def test_a_cmake_project_is_adopted_through_its_database(
    pytester: pytest.Pytester, nvcc: Path, origin: str
) -> None:
    root = pytester.path
    for item in FIXTURE.iterdir():
        if item.name != "compile_commands.json":
            (shutil.copytree if item.is_dir() else shutil.copy)(item, root / item.name)
    database(root, nvcc, origin)
    (root / "pyproject.toml").write_text(PYPROJECT)
    out = root / "report.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={out}")
    assert result.ret == pytest.ExitCode.OK, (origin, result.stdout.str())
    records = {r["source"].rsplit("/", 1)[-1]: r for r in json.loads(out.read_text())["kernels"]}
    assert set(records) == {"a.cu", "b.cu"}, origin
    assert (records["a.cu"]["registers"], records["a.cu"]["spill_stores"]) == by_hand(nvcc, root, "a")
    capped = by_hand(nvcc, root, "b", "-maxrregcount=32")
    assert (records["b.cu"]["registers"], records["b.cu"]["spill_stores"]) == capped
    assert capped[0] == 32
    assert by_hand(nvcc, root, "b")[0] > 32  # the database's per-file flag is what made it 32
    # The flags are build settings, recorded and not keyed.
    assert records["b.cu"]["key"][2] == "-"
