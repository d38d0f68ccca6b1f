"""A PyTorch CUDA extension adopted from its own build (issue 45): the build.ninja torch writes, in each of
torch 2.x's shapes, read through `build_ninja`; and its setup.py run through `torch_extension` where torch is
installed.

The files torch writes name the checkout and the venv, so each is written from a template (the text torch
2.14 wrote for tests/data/torch_ext, its paths made placeholders) into the project, as torch would write it
there; torch's headers stand in a venv's site-packages outside the project (the kernels include none of
them, so they build where torch is absent). Each kernel's numbers equal nvcc run by /bin/sh with the file's
own command (its arch flags replaced by `-cubin -arch=sm_80`); the baseline names no path of the checkout or
the venv; and a second checkout at another path, with its own venv and build.ninja, passes
`--regbudget-strict` with no build-settings change.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers.toolchain import nvcc_or_skip

from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.tools.torch_build import torch_version

FIXTURE = Path(__file__).parents[1] / "data" / "torch_ext"
SHAPES = {
    "setup": "build/temp.linux-x86_64-cpython-311",  # BuildExtension's build_temp
    "load": "build/torch_load",  # load(build_directory=...)
    "old": "build/temp.linux-x86_64-cpython-310",  # torch 2.0's --generate-dependencies-with-compile
}
PYPROJECT = """
[tool.regbudget]
arch = ["sm_80"]

[[tool.regbudget.kernels]]
build_ninja = "{glob}"
spills = 0
"""


@pytest.fixture(scope="module")
def nvcc() -> Path:
    return nvcc_or_skip()


def venv(parent: Path) -> Path:
    """A venv's torch package, as far as these kernels need it: its header folders."""
    torch = parent / "lib" / "python3.11" / "site-packages" / "torch"
    (torch / "include" / "torch" / "csrc" / "api" / "include").mkdir(parents=True)
    return torch


def checkout(root: Path, shape: str, torch: Path, nvcc: Path) -> Path:
    """The extension at `root`, with the build.ninja torch would write there; returns the file."""
    for item in FIXTURE.iterdir():
        if item.name != "ninja":
            (shutil.copytree if item.is_dir() else shutil.copy)(item, root / item.name)
    build = root / SHAPES[shape]
    build.mkdir(parents=True)
    values = {
        "@ROOT@": str(root),
        "@BUILD@": str(build),
        "@TORCH@": str(torch),
        "@CUDA_HOME@": str(nvcc.parent.parent),
        "@PYTHON_INCLUDE@": sysconfig.get_paths()["include"],
        "@PREFIX_INCLUDE@": str(Path(sys.prefix) / "include"),
    }
    text = (FIXTURE / "ninja" / f"{shape}.ninja.in").read_text()
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    (build / "build.ninja").write_text(text)
    (root / "pyproject.toml").write_text(
        PYPROJECT.format(glob=f"{SHAPES[shape].rsplit('/', 1)[0]}/*/build.ninja")
    )
    return build / "build.ninja"


def by_hand(ninja_file: Path, source: Path, nvcc: Path, tmp: Path) -> dict[str, tuple[int, int]]:
    """Each kernel's registers and spill stores from the file's own cuda_compile command, run by /bin/sh as
    ninja would run it, with what selects the output and the arch replaced by `-cubin -arch=sm_80`."""
    text = ninja_file.read_text()
    variables = dict(re.findall(r"^(\w+) = (.*)$", text, re.MULTILINE))
    command = re.search(r"rule cuda_compile\n(?:  .*\n)*?  command = (.*)\n", text + "\n")
    assert command is not None
    line = command.group(1)
    for dependency in ("-MD -MF $out.d", "--generate-dependencies-with-compile --dependency-output $out.d"):
        line = line.replace(dependency, "")
    out = tmp / f"{source.stem}.cubin"
    line = line.replace("-c $in -o $out", f"-cubin -arch=sm_80 -Xptxas -v {source} -o {out}")
    for name in ("cuda_post_cflags", "cuda_cflags", "nvcc"):
        line = line.replace(f"${name}", variables.get(name, ""))
    line = line.replace(variables["nvcc"], str(nvcc), 1)  # the run's nvcc, not the file's
    line = re.sub(r"(?<=\s)(-gencode=\S+|--threads \d+|-c)(?=\s|$)", "", line)
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=False)
    assert done.returncode == 0, line + "\n" + done.stderr
    return {
        e: (r.registers, r.spill_stores) for e, r in parse_ptxas_output(done.stdout + done.stderr).items()
    }


def measured(report: Path) -> dict[str, tuple[int, int]]:
    """The sm_80 records: on a GPU runner the report also holds the builds for the GPU's own arch, which
    the GPU checks load."""
    return {
        r["entry"]: (r["registers"], r["spill_stores"])
        for r in json.loads(report.read_text())["kernels"]
        if r["arch"] == "sm_80"
    }


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_torch_build_ninja_is_read_as_torch_wrote_it(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, nvcc: Path, shape: str
) -> None:
    root = pytester.path / "checkout-a"
    root.mkdir()
    venv_a = tmp_path_factory.mktemp("venv-a")
    ninja_file = checkout(root, shape, venv(venv_a), nvcc)
    pytester.chdir()
    report = root / "report.json"
    result = pytester.runpytest(
        str(root),
        "--rootdir",
        str(root),
        "-p",
        "no:cacheprovider",
        "--regbudget-update",
        f"--regbudget-json={report}",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    found = measured(report)
    expected: dict[str, tuple[int, int]] = {}
    for source in ("softmax", "scale"):
        expected.update(by_hand(ninja_file, root / "csrc" / f"{source}.cu", nvcc, pytester.path))
    assert found == expected
    assert len(found) == 3
    # The baseline holds no absolute path: torch's headers are `{torch}/...`, CUDA's `{nvidia}/...` (the nvcc
    # wheel stands for CUDA_HOME), the project's relative, the interpreter's own `{python-include}`.
    baseline = (root / "regbudget-baseline.toml").read_text()
    for path in (str(root), str(venv_a), "site-packages", ".."):
        assert path not in baseline, path
    assert not re.search(r'"(-I|-L|--?[\w-]+=)?/', baseline), baseline
    assert '"{torch}/include"' in baseline or '"-I{torch}/include"' in baseline
    assert "{python-include}" in baseline
    assert '"-Iinclude"' in baseline

    # A second checkout at another path, with its own venv and build.ninja, agrees with the first one's
    # baseline under --regbudget-strict: nothing new, nothing stale, no build setting changed.
    other = pytester.path / "elsewhere" / "checkout-b"
    other.mkdir(parents=True)
    checkout(other, shape, venv(tmp_path_factory.mktemp("venv-b")), nvcc)
    shutil.copy(root / "regbudget-baseline.toml", other / "regbudget-baseline.toml")
    again = pytester.runpytest(
        str(other), "--rootdir", str(other), "-p", "no:cacheprovider", "--regbudget-strict"
    )
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()
    assert "build settings changed" not in again.stdout.str()
    # Every entry enforced: 3 here, 6 on a GPU runner, whose GPU checks also build for the GPU's own arch.
    enforced = re.search(r"(\d+) of (\d+) baseline entries enforced", again.stdout.str())
    assert enforced is not None, again.stdout.str()
    assert enforced[1] == enforced[2] in ("3", "6"), enforced[0]


def test_a_build_ninja_kernel_over_its_budget_fails_the_run(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, nvcc: Path
) -> None:
    """A kernel that reaches the check through build_ninja is held to its table's budgets: row_softmax's
    registers (32 on sm_80, above) over max_regs = 8 fail the run and name the kernel, the arch and both
    numbers."""
    root = pytester.path / "checkout"
    root.mkdir()
    checkout(root, "setup", venv(tmp_path_factory.mktemp("venv")), nvcc)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "max_regs = 8\n")
    pytester.chdir()
    result = pytester.runpytest(str(root), "--rootdir", str(root), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*row_softmax<256>*[[]sm_80[]]: registers 32 > max_regs 8*"])


def test_a_missing_build_ninja_names_the_file_and_how_to_write_it(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(PYPROJECT.format(glob="build/temp.*/build.ninja"))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*build_ninja*'build/temp.*/build.ninja' matches no file*python setup.py build_ext*torch_extension*"]
    )


TORCH_PYPROJECT = """
[tool.regbudget]
arch = ["sm_80"]

[[tool.regbudget.kernels]]
torch_extension = "setup.py"
setup_env = {DEMO_FAST_MATH = "0"}
"""


@pytest.mark.skipif(
    torch_version() is None, reason="torch is not installed: pip install torch (CPU is enough)"
)
def test_torch_extension_runs_setup_py_and_measures_what_its_build_ninja_gives(
    pytester: pytest.Pytester, nvcc: Path
) -> None:
    root = pytester.path
    for item in FIXTURE.iterdir():
        if item.name != "ninja":
            (shutil.copytree if item.is_dir() else shutil.copy)(item, root / item.name)
    (root / "pyproject.toml").write_text(TORCH_PYPROJECT)
    report = root / "captured.json"
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-update", f"--regbudget-json={report}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    captured = measured(report)
    baseline = (root / "regbudget-baseline.toml").read_text()
    assert "--use_fast_math" not in baseline  # setup_env reached setup.py
    assert "-DTORCH_EXTENSION_NAME=_C" in baseline
    assert str(root) not in baseline

    # The same extension built by `python setup.py build_ext` (stopped before ninja) into build/, and read
    # through build_ninja: the same numbers.
    (root / "pyproject.toml").write_text(PYPROJECT.format(glob="build/temp.*/build.ninja"))
    env = {"DEMO_FAST_MATH": "0", "CUDA_HOME": str(nvcc.parent.parent), "TORCH_CUDA_ARCH_LIST": "8.0"}
    stop = (
        "import runpy, sys, torch.utils.cpp_extension as c; "
        "c._run_ninja_build = lambda *a, **k: sys.exit(0); sys.argv = ['setup.py', 'build_ext']; "
        "runpy.run_path('setup.py', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", stop], cwd=root, env={**os.environ, **env}, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = root / "read.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={report}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert measured(report) == captured


@pytest.mark.skipif(
    torch_version() is None, reason="torch is not installed: pip install torch (CPU is enough)"
)
def test_an_extension_setup_py_does_not_build_is_named_with_those_it_does(pytester: pytest.Pytester) -> None:
    for item in FIXTURE.iterdir():
        if item.name != "ninja":
            (shutil.copytree if item.is_dir() else shutil.copy)(item, pytester.path / item.name)
    (pytester.path / "pyproject.toml").write_text(TORCH_PYPROJECT + 'extensions = ["regbudget_demo._D"]\n')
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*key 'extensions': 'regbudget_demo._D' is not an extension of setup.py (its ext_modules: *_C)"]
    )


@pytest.mark.skipif(
    torch_version() is None, reason="torch is not installed: pip install torch (CPU is enough)"
)
def test_no_cache_keeps_no_capture_of_setup_py(pytester: pytest.Pytester, nvcc: Path) -> None:
    """--regbudget-no-cache covers setup.py's capture too: it runs setup.py and keeps nothing of it."""
    for item in FIXTURE.iterdir():
        if item.name != "ninja":
            (shutil.copytree if item.is_dir() else shutil.copy)(item, pytester.path / item.name)
    (pytester.path / "pyproject.toml").write_text(TORCH_PYPROJECT)
    kept = Path(os.environ["REGBUDGET_CACHE_DIR"]) / "torch-extensions"
    shutil.rmtree(kept, ignore_errors=True)
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-no-cache")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert not kept.exists()
    result = pytester.runpytest("-p", "no:cacheprovider")  # and with the cache, the capture is kept
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert [p.suffix for p in kept.iterdir()] == [".json"]
