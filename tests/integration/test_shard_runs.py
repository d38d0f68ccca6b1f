"""`--regbudget-shard=K/N` splits a run by build unit: after a file changed, one was removed and one added,
three shards, each updating on a cold cache of its own, build between them exactly what one serial update
builds (their misses add up, no item runs twice, none is left out), and `regbudget merge --update` of their
reports writes the serial update's baseline byte for byte, stale entries included. Path arguments build only
the files they name. Real NVRTC builds of tiny kernels."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.projects import write_tree
from helpers.runs import regbudget, run_pytest

PYPROJECT = """
[tool.pytest.ini_options]
testpaths = ["tests"]
regbudget_arch = "{archs}"
regbudget_baseline = "regbudget-baseline.toml"

[[tool.regbudget.kernels]]
source = "kernels/k*.cu"
kernels = ["*"]
spills = 0
"""


def kernel(name: str, body: str = "x[threadIdx.x] *= 2.0f;") -> str:
    return f'extern "C" __global__ void {name}(float* x) {{ {body} }}\n'


# A marker pair that shares one build (same source, kernel and options), and a marked test of another file.
MARKED = """
import pytest

MARK = pytest.mark.regbudget(source="../kernels/m.cu", kernel="mk", max_regs=64)


@MARK
def test_one():
    pass


@MARK
def test_two():
    pass


@pytest.mark.regbudget(source="../kernels/n.cu", kernel="nk", max_regs=64)
def test_other():
    pass


def test_plain():
    pass
"""
BEFORE = {
    "kernels/k1.cu": kernel("k1"),
    "kernels/k2.cu": kernel("k2"),
    "kernels/k3.cu": kernel("k3a") + kernel("k3b", "x[0] = 1.0f;"),
    "kernels/k4.cu": kernel("k4", "x[threadIdx.x] += x[threadIdx.x + 32];"),
    "kernels/m.cu": kernel("mk"),
    "kernels/n.cu": kernel("nk"),
    "tests/test_marked.py": MARKED,
}
SHARDS = ("1/3", "2/3", "3/3")


def misses(done: subprocess.CompletedProcess[str]) -> int:
    found = re.search(r"compile cache .*: (\d+) hits, (\d+) misses", done.stdout)
    assert found, done.stdout
    return int(found[2])


def env_with_cache(cache: Path) -> dict[str, str]:
    """This process's environment with a compile cache of the run's own (a cold one where it is new)."""
    return {**os.environ, "REGBUDGET_CACHE_DIR": str(cache)}


def nodeids(report: Path) -> set[str]:
    return {r["nodeid"] for r in json.loads(report.read_text())["kernels"]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The project after an update, then edited: k1.cu changed, k2.cu removed, k5.cu added, and k3.cu lost a
    kernel (its entry is stale, in a file that still exists: only the shard that owns k3.cu sees that)."""
    root = tmp_path / "project"
    write_tree(root, {"pyproject.toml": PYPROJECT.format(archs="sm_90"), **BEFORE})
    done = run_pytest(
        root, "-p", "no:cacheprovider", "-q", "--regbudget-update", env=env_with_cache(tmp_path / "c0")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / "regbudget-baseline.toml").exists()
    (root / "kernels/k1.cu").write_text(
        kernel("k1", "x[threadIdx.x] = x[threadIdx.x] * x[threadIdx.x] + 1.0f;")
    )
    (root / "kernels/k2.cu").unlink()
    (root / "kernels/k3.cu").write_text(kernel("k3a"))
    (root / "kernels/k5.cu").write_text(kernel("k5", "x[1] = 2.0f;"))
    return root


def test_shards_merge_to_the_serial_update(project: Path, tmp_path: Path) -> None:
    def update(name: str, *args: str) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
        root = shutil.copytree(project, tmp_path / name)
        report = tmp_path / f"{name}.json"
        done = run_pytest(
            root,
            "-p",
            "no:cacheprovider",
            "-q",
            "--regbudget-update",
            f"--regbudget-json={report}",
            *args,
            env=env_with_cache(tmp_path / f"cache-{name}"),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return root, report, done

    serial_root, serial_report, serial = update("serial")
    shards = [update(f"shard{i}", f"--regbudget-shard={k}") for i, k in enumerate(SHARDS, 1)]

    merged = shutil.copytree(project, tmp_path / "merged")
    done = regbudget(
        "merge",
        *(str(report) for _, report, _ in shards),
        "--update",
        str(merged / "regbudget-baseline.toml"),
        "--rootdir",
        str(merged),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    serial_baseline = (serial_root / "regbudget-baseline.toml").read_bytes()
    assert b"k3b" not in serial_baseline  # stale: a kernel gone from a file that another shard does not see
    assert b"k2.cu" not in serial_baseline  # stale: a file gone
    assert b"k5" in serial_baseline
    assert (merged / "regbudget-baseline.toml").read_bytes() == serial_baseline

    ids = [nodeids(report) for _, report, _ in shards]
    assert all(ids), ids
    assert sum(len(i) for i in ids) == len(set().union(*ids)), ids  # disjoint
    assert set().union(*ids) == nodeids(serial_report)
    # The marker pair went to one shard, with its one build.
    assert any(
        {"tests/test_marked.py::test_one[sm_90]", "tests/test_marked.py::test_two[sm_90]"} <= i for i in ids
    )
    assert sum(misses(d) for _, _, d in shards) == misses(serial)
    # A shard's own update removes no entry of a file another shard owns: k3b is stale where k3.cu ran only.
    for (root, _, _), held in zip(shards, ids, strict=True):
        owner = any(n.startswith("kernels/k3.cu::") for n in held)
        assert (b"k3b" in (root / "regbudget-baseline.toml").read_bytes()) is not owner


def test_a_missing_shard_stops_the_update(project: Path, tmp_path: Path) -> None:
    report = tmp_path / "one.json"
    env = env_with_cache(tmp_path / "cache")
    done = run_pytest(
        project,
        "-p",
        "no:cacheprovider",
        "-q",
        "--regbudget-shard=1/2",
        f"--regbudget-json={report}",
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    before = (project / "regbudget-baseline.toml").read_bytes()
    done = regbudget("merge", str(report), "--update", str(project / "regbudget-baseline.toml"))
    assert done.returncode == 2, done
    assert "shard 2/2 missing" in done.stderr
    assert (project / "regbudget-baseline.toml").read_bytes() == before
    whole = tmp_path / "whole.json"
    done = run_pytest(project, "-p", "no:cacheprovider", "-q", f"--regbudget-json={whole}", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    done = regbudget("merge", str(report), str(whole), "-o", str(tmp_path / "merged.json"))
    assert done.returncode == 2, done
    assert "not the shards of one run" in done.stderr


@pytest.mark.parametrize("value", ["0/3", "4/3", "3", "a/b", "1/0"])
def test_a_bad_shard_is_a_usage_error(tmp_path: Path, value: str) -> None:
    done = run_pytest(tmp_path, "-p", "no:cacheprovider", f"--regbudget-shard={value}")
    assert done.returncode == 4, done
    assert f"--regbudget-shard='{value}'" in done.stderr


def test_a_path_argument_builds_only_its_file(tmp_path: Path) -> None:
    root = tmp_path / "project"
    files = {f"kernels/k{i}.cu": kernel(f"k{i}") for i in (1, 2, 3)}
    write_tree(
        root, {"pyproject.toml": PYPROJECT.format(archs="sm_80,sm_90"), **files, "tests/test_x.py": ""}
    )
    done = run_pytest(
        root, "-p", "no:cacheprovider", "-q", "kernels/k1.cu", env=env_with_cache(tmp_path / "cache")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert misses(done) == 2  # k1.cu on sm_80 and sm_90; k2.cu and k3.cu build nothing


def test_named_files_split_between_shards(tmp_path: Path) -> None:
    """Files named on the command line go to their shards too: the others collect nothing of them, and do
    not count them as seen."""
    root = tmp_path / "project"
    files = {f"kernels/k{i}.cu": kernel(f"k{i}") for i in (1, 2, 3, 4)}
    write_tree(root, {"pyproject.toml": PYPROJECT.format(archs="sm_90"), **files, "tests/test_x.py": ""})
    found: list[set[str]] = []
    for k in ("1/2", "2/2"):
        report = tmp_path / f"{k[0]}.json"
        args = ("kernels/k1.cu", "kernels/k2.cu", "kernels/k3.cu", f"--regbudget-json={report}")
        done = run_pytest(root, "-p", "no:cacheprovider", "-q", f"--regbudget-shard={k}", *args)
        assert done.returncode == 0, done.stdout + done.stderr
        found.append(nodeids(report))
        seen = set(json.loads(report.read_text())["scope"]["run"]["files"])
        assert seen == {n.split("::")[0] for n in found[-1]}
    assert not found[0] & found[1]
    assert found[0] | found[1] == {f"kernels/k{i}.cu::k{i}[sm_90]" for i in (1, 2, 3)}
