"""A compile cache restored the way CI restores it: the checkout at another path, the cache folder at another
path, and a fresh venv whose CUDA wheel files were written anew (same bytes; new paths, times and inodes).
Every build hits, and nothing printed or written names the first checkout. Real NVRTC, ptxas and nvcc from
the wheels; no mock."""

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
from helpers.runs import run_pytest

from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.toolkit import nvidia_roots

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="the second venv is laid out as on POSIX"),
]

ARCH = "--regbudget-arch=sm_90"
POLY = """#include "params.h"
{extra}
extern "C" __global__ void {name}(const float* __restrict__ x, float* __restrict__ y, int n, int degree) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v[NACC], acc[NACC];
#pragma unroll
    for (int k = 0; k < NACC; ++k) {{
        v[k] = x[(i + k * 977) % n];
        acc[k] = 0.0f;
    }}
    for (int d = 0; d < degree; ++d) {{
#pragma unroll
        for (int k = 0; k < NACC; ++k) acc[k] = fmaf(acc[k], v[k], d + k);
    }}
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NACC; ++k) s += acc[k] * acc[(k + 1) % NACC];
    if (i < n) y[i] = {result};
}}
"""
# Not including params.h: an edit of it leaves this build alone.
PLAIN = """extern "C" __global__ void plain(float* x) {
    float t = x[threadIdx.x];
#pragma unroll
    for (int k = 0; k < N; ++k) t = t * t + 1.0f;
    x[threadIdx.x] = t;
}
"""
TESTS = """import pytest

@pytest.mark.regbudget(source="../kernels/half.cu", kernel="with_half", include_dirs=["../include"])
def test_nvrtc_with_a_toolkit_header():
    pass

@pytest.mark.regbudget(source="../kernels/plain.cu", kernel="plain", defines={"N": 4})
def test_nvrtc_with_a_define():
    pass

@pytest.mark.regbudget(source="../kernels/host.cu", kernel="by_nvcc", compiler="nvcc",
                       include_dirs=["../include"])
def test_nvcc():
    pass
"""
SUMMARY = re.compile(r"compile cache (.+): (\d+) hits, (\d+) misses")


def write_project(root: Path) -> None:
    files = {
        "pytest.ini": "[pytest]\n",
        "include/params.h": "#define NACC 8\n",
        "kernels/half.cu": POLY.format(
            name="with_half", extra="#include <cuda_fp16.h>", result="__half2float(__float2half(s))"
        ),
        "kernels/plain.cu": PLAIN,
        "kernels/host.cu": POLY.format(name="by_nvcc", extra="", result="s") + "\nint main() { return 0; }\n",
        "tests/test_k.py": TESTS,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def second_venv(where: Path) -> str:
    """A fresh venv at `where` whose `nvidia` package and the wheels' metadata are copied from this one
    (new files: new paths, mtimes and inodes, the same bytes), and that imports everything else (pytest,
    this plugin) from this venv; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (package,) = nvidia_roots()  # one `nvidia` dir here: the wheels' tree to copy
    here = package.parent
    # copy, not copy2: the bytes and modes, with new modification times, as an install writes them.
    shutil.copytree(package, site / "nvidia", copy_function=shutil.copy)
    for info in here.glob("nvidia_*.dist-info"):
        shutil.copytree(info, site / info.name, copy_function=shutil.copy)
    # copytree keeps the directories' times: give them new ones too, as an install does.
    for folder, _, _ in os.walk(site):
        os.utime(folder)
    # After this venv's own site dir: its `nvidia` (a regular package) is the one imported.
    purelib = sysconfig.get_paths()["purelib"]
    (site / "zz_first_venv.pth").write_text(f"import site; site.addsitedir({purelib!r})\n")
    return str(python)


def summary(out: str) -> tuple[str, int, int]:
    found = SUMMARY.search(out)
    assert found is not None, out[-3000:]
    return found.group(1), int(found.group(2)), int(found.group(3))


def records(report: Path) -> dict[str, dict[str, object]]:
    return {r["kernel"]: r for r in json.loads(report.read_text())["kernels"]}


def test_a_restored_cache_hits_in_a_fresh_venv_at_another_checkout_path(tmp_path: Path) -> None:
    try:
        find_nvcc(None)
    except CompileError as exc:
        pytest.skip(f"no nvcc: {exc}")
    first, cache = tmp_path / "runner-a" / "work" / "proj", tmp_path / "runner-a" / "cache"
    write_project(first)
    env = {**os.environ, "REGBUDGET_CACHE_DIR": str(cache), "GITHUB_ACTIONS": ""}
    cold = run_pytest(first, ARCH, "-p", "no:cacheprovider", "--regbudget-update", env=env, timeout=900)
    assert cold.returncode == 0, cold.stdout[-3000:]
    _, hits, built = summary(cold.stdout)
    assert (hits, built) == (0, 3)

    # Another runner: the checkout, the cache folder and the venv all at other paths.
    second, moved = tmp_path / "runner-b" / "ws" / "checkout", tmp_path / "runner-b" / "restored-cache"
    shutil.copytree(first, second)
    shutil.copytree(cache, moved)
    python = second_venv(tmp_path / "runner-b" / "venv")
    env = {**os.environ, "REGBUDGET_CACHE_DIR": str(moved), "GITHUB_ACTIONS": ""}
    env.pop("VIRTUAL_ENV", None)
    report = second / "report.json"
    warm = run_pytest(
        second,
        ARCH,
        "-p",
        "no:cacheprovider",
        "--regbudget-strict",
        f"--regbudget-json={report}",
        env=env,
        timeout=900,
        executable=python,
    )
    assert warm.returncode == 0, warm.stdout[-3000:]
    assert summary(warm.stdout) == (str(moved), 3, 0)
    # The toolkit in use is the second venv's copy (the summary names its nvcc), not the first venv's.
    assert str(tmp_path / "runner-b" / "venv" / "lib") in warm.stdout
    # Nothing names the first checkout: not the terminal, the JSON report or the baseline.
    baseline = (second / "regbudget-baseline.toml").read_text()
    for text in (warm.stdout, warm.stderr, report.read_text(), baseline):
        assert str(first) not in text
        assert str(tmp_path / "runner-a") not in text
    before = records(report)

    # The header that two of the three builds include, edited: those two miss, with the new numbers.
    (second / "include" / "params.h").write_text("#define NACC 48\n")
    edited = run_pytest(
        second, ARCH, "-p", "no:cacheprovider", f"--regbudget-json={report}", env=env, timeout=900,
        executable=python,
    )  # fmt: skip
    assert summary(edited.stdout) == (str(moved), 1, 2), edited.stdout[-3000:]
    after = records(report)
    assert after["plain"]["registers"] == before["plain"]["registers"]
    for kernel in ("with_half", "by_nvcc"):
        assert after[kernel]["registers"] > before[kernel]["registers"], kernel  # type: ignore[operator]
    assert str(first) not in edited.stdout + report.read_text()
