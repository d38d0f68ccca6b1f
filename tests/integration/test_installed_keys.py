"""Kernels of installed code in the baseline (issue 45): a package with a CUDA kernel, installed with
`pip install --target` at two different paths, under two checkouts of one project at two other paths. Each
writes the same baseline, byte for byte, keyed by the kernel's import path and recording the package and its
version; each passes `--regbudget-strict` against the other's file; an update that runs another test file
keeps the package's entry, and one whose test is gone removes it; an upgrade is reported and still compared.
`include_dirs` names the package's headers as `{kpkg}/include` (a marker, a manifest table) and as
`$KPKG_INC`. Real pip, NVRTC and ptxas from the wheels; no network (the wheel is written here)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import tomli
from helpers.projects import write_tree
from helpers.runs import run_pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths in the expected keys"),
]

ARCH = "--regbudget-arch=sm_90"
Installs = dict[str, tuple[Path, dict[str, str]]]  # checkout name -> (its project, its environment)
PARAMS = "#define KPKG_UNROLL 8\n"
SCALE = """#include "kpkg_params.h"
extern "C" __global__ void kpkg_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < KPKG_UNROLL; ++k) acc += x[(i + k * 97) % n] * a;
    if (i < n) x[i] = acc;
}
"""
OWN = """#include "kpkg_params.h"
extern "C" __global__ void own_sum(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < KPKG_UNROLL; ++k) s += x[(i + k) % n];
    if (i < n) y[i] = s;
}
"""
PROJECT = {
    "pytest.ini": "[pytest]\n",
    "kernels/own.cu": OWN,
    "kernels/listed.cu": OWN.replace("own_sum", "listed_sum"),
    # A manifest table: the package's headers by name, wherever this venv installed it.
    "regbudget.toml": '[[kernels]]\nsource = ["kernels/listed.cu"]\ninclude_dirs = ["{kpkg}/include"]\n',
    # The installed package's kernel, wherever this environment installed it.
    "tests/test_pkg.py": """import pytest


@pytest.mark.regbudget(source="{kpkg}/kernels/scale.cu", kernel="kpkg_scale", include_dirs=["{kpkg}/include"],
                       max_regs=64)
def test_pkg():
    pass
""",
    "tests/test_own.py": """import pytest


@pytest.mark.regbudget(source="../kernels/own.cu", kernel="own_sum", include_dirs=["$KPKG_INC"])
def test_own():
    pass
""",
}


def wheel(tmp: Path, version: str) -> Path:
    """A wheel of the package `kpkg` (a kernel and its header as package data), written by hand."""
    metadata = f"Metadata-Version: 2.1\nName: kpkg\nVersion: {version}\n"
    files = {
        "kpkg/__init__.py": b"",
        "kpkg/kernels/scale.cu": SCALE.encode(),
        "kpkg/include/kpkg_params.h": PARAMS.encode(),
        f"kpkg-{version}.dist-info/METADATA": metadata.encode(),
        f"kpkg-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
        f"kpkg-{version}.dist-info/top_level.txt": b"kpkg\n",
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in files.items()
    ]
    files[f"kpkg-{version}.dist-info/RECORD"] = (
        "\n".join([*record, f"kpkg-{version}.dist-info/RECORD,,"]) + "\n"
    ).encode()
    path = tmp / f"kpkg-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def pip_install(whl: Path, target: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-deps",
            "--upgrade",
            "--target",
            str(target),
            str(whl),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def env_for(target: Path, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH", "")) if p)
    env["REGBUDGET_CACHE_DIR"] = str(cache)
    env["KPKG_INC"] = str(target / "kpkg" / "include")
    return env


def run(
    project: Path, env: dict[str, str], *args: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    report = project / "report.json"
    done = run_pytest(project, "-p", "no:cacheprovider", ARCH, f"--regbudget-json={report}", *args, env=env)
    records = json.loads(report.read_text())["kernels"] if report.exists() else []
    report.unlink(missing_ok=True)
    return done, records


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> Installs:
    """Two checkouts, each with kpkg 0.3.1 installed at a path of its own and a cache of its own."""
    tmp = tmp_path_factory.mktemp("installed")
    whl = wheel(tmp, "0.3.1")
    out: Installs = {}
    for name, target in (("a", tmp / "envA" / "site"), ("b", tmp / "ci" / "tool" / "cache" / "envB" / "t")):
        pip_install(whl, target)
        project = tmp / f"checkout-{name}" / "proj"
        write_tree(project, PROJECT)
        out[name] = (project, env_for(target, tmp / f"cache-{name}"))
    return out


def test_two_installs_write_the_same_baseline_and_enforce_each_other(installs: Installs) -> None:
    baselines = {}
    for name, (project, env) in installs.items():
        done, records = run(project, env, "--regbudget-update")
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(records) == 3, done.stdout
        baselines[name] = (project / "regbudget-baseline.toml").read_bytes()
    assert baselines["a"] == baselines["b"]
    doc = tomli.loads(baselines["a"].decode())
    sources = sorted(doc["kernels"])
    assert sources == ["kernels/listed.cu", "kernels/own.cu", "kpkg/kernels/scale.cu"]
    assert not [s for s in sources if "site-packages" in s or ".." in s or s.startswith("/")]
    pkg = doc["kernels"]["kpkg/kernels/scale.cu"]["kpkg_scale"]["-"]["sm_90"]
    (release,) = pkg
    assert pkg[release]["package"] == "kpkg 0.3.1"
    assert pkg[release]["build_settings"] == ["-I{kpkg}/include"]
    own = doc["kernels"]["kernels/own.cu"]["own_sum"]["-"]["sm_90"][release]
    assert "package" not in own
    assert own["build_settings"] == ["-I{kpkg}/include"]  # $KPKG_INC, inside the install
    listed = doc["kernels"]["kernels/listed.cu"]["listed_sum"]["-"]["sm_90"][release]
    assert listed["build_settings"] == ["-I{kpkg}/include"]  # the manifest's {kpkg}/include
    # Each checkout against the other's file, strict: every kernel held to an entry, nothing changed.
    for name, other in (("a", "b"), ("b", "a")):
        project, env = installs[name]
        (project / "regbudget-baseline.toml").write_bytes(baselines[other])
        done, records = run(project, env, "--regbudget-strict")
        assert done.returncode == 0, done.stdout + done.stderr
        assert {r["baseline_status"] for r in records} == {"compared"}, records
        assert not [r for r in records if r["settings_change"]], records
        assert "build settings changed" not in done.stdout


def test_an_update_of_another_test_file_keeps_the_package_entry(installs: Installs) -> None:
    project, env = installs["a"]
    done, _ = run(project, env, "--regbudget-update")
    assert done.returncode == 0, done.stdout
    before = (project / "regbudget-baseline.toml").read_text()
    done, records = run(project, env, "--regbudget-update", "tests/test_own.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["kernel"] for r in records] == ["own_sum"]
    after = (project / "regbudget-baseline.toml").read_text()
    assert after == before  # the package's entry is kept, not taken for a deleted file
    assert "kpkg/kernels/scale.cu" in after
    # Its test gone: judged by its tests, the entry is stale and removed.
    (project / "tests" / "test_pkg.py").unlink()
    try:
        done, _ = run(project, env, "--regbudget-update")
        assert done.returncode == 0, done.stdout
        assert "kpkg/kernels/scale.cu" not in (project / "regbudget-baseline.toml").read_text()
    finally:
        (project / "tests" / "test_pkg.py").write_text(PROJECT["tests/test_pkg.py"])


def test_an_upgrade_is_reported_and_still_compared(installs: Installs, tmp_path: Path) -> None:
    project, env = installs["b"]
    done, _ = run(project, env, "--regbudget-update")
    assert done.returncode == 0, done.stdout
    target = Path(env["PYTHONPATH"].split(os.pathsep)[0])
    upgraded = tmp_path / "upgraded"
    shutil.copytree(target, upgraded)
    pip_install(wheel(tmp_path, "0.3.2"), upgraded)
    env = {**env, "PYTHONPATH": env["PYTHONPATH"].replace(str(target), str(upgraded), 1)}
    env["KPKG_INC"] = str(upgraded / "kpkg" / "include")
    done, records = run(project, env, "--regbudget-strict")
    assert done.returncode == 0, done.stdout + done.stderr
    pkg = next(r for r in records if r["kernel"] == "kpkg_scale")
    assert pkg["baseline_status"] == "compared"
    assert pkg["settings_change"] == "package kpkg 0.3.1 -> 0.3.2"
    assert pkg["measured"]["package"] == "kpkg 0.3.2"
    assert "build settings changed for 1 entry: package kpkg 0.3.1 -> 0.3.2" in done.stdout


def test_an_unset_variable_in_include_dirs_is_named(installs: Installs) -> None:
    project, env = installs["a"]
    env = {k: v for k, v in env.items() if k != "KPKG_INC"}
    before = (project / "regbudget-baseline.toml").read_bytes()
    done, _ = run(project, env, "--regbudget-update", "tests/test_own.py")
    assert done.returncode != 0
    assert (
        "include_dirs: '$KPKG_INC' names the environment variable KPKG_INC, which is not set" in done.stdout
    )
    assert "export KPKG_INC=" in done.stdout
    assert (project / "regbudget-baseline.toml").read_bytes() == before


def test_an_installed_kernel_over_its_budget_fails_the_run_naming_it(
    installs: Installs, tmp_path: Path
) -> None:
    """A budget on a package's kernel is checked as any other: the run fails, naming the kernel, the arch,
    its registers and the budget, and the JSON record keys it by the package's import path."""
    _, env = installs["a"]
    project = tmp_path / "tight"
    tight = PROJECT["tests/test_pkg.py"].replace("max_regs=64", "max_regs=4")
    write_tree(project, {"pytest.ini": "[pytest]\n", "tests/test_pkg.py": tight})
    done, records = run(project, env)
    assert done.returncode == 1, done.stdout + done.stderr
    (record,) = records
    assert record["kernel"] == "kpkg_scale"
    assert record["key"][:4] == ["kpkg/kernels/scale.cu", "kpkg_scale", "-", "sm_90"]
    assert record["measured"]["package"] == "kpkg 0.3.1"
    assert record["registers"] > 4
    assert f"kpkg_scale [sm_90]: registers {record['registers']} > max_regs 4" in done.stdout
    assert "1 failed" in done.stdout


FIXTURE_TEST = """import pytest


@pytest.mark.regbudget(max_regs=64)
def test_fixture(regbudget):
    with pytest.raises(ValueError, match="source: .*no_such_pkg"):
        regbudget.compile("{no_such_pkg}/k.cu", "k")
    report = regbudget.compile("{kpkg}/kernels/scale.cu", "kpkg_scale", include_dirs=["{kpkg}/include"])
    assert report.registers > 0
"""


def test_the_fixture_names_an_installed_kernel_as_the_marker_does(installs: Installs, tmp_path: Path) -> None:
    """regbudget.compile("{package}/...") finds the installed file, and its entry is keyed as the marker's."""
    _, env = installs["a"]
    project = tmp_path / "fixture"
    write_tree(project, {"pytest.ini": "[pytest]\n", "tests/test_fix.py": FIXTURE_TEST})
    done, records = run(project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = records
    assert record["key"][:2] == ["kpkg/kernels/scale.cu", "kpkg_scale"]
    assert record["measured"]["package"] == "kpkg 0.3.1"
