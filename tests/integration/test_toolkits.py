"""Toolchain upgrades as a reviewed diff: two toolkits in one run (the CUDA 12 and CUDA 13 wheels, both
installed by the test extras), baseline entries per release, strict mode, and bad toolkit names. Real NVRTC
and ptxas of both releases; the comparison is checked against separate builds with each toolkit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from helpers.data import KERNELS
from helpers.projects import copy_kernels, write

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.core import baseline as bl
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import Toolkit, discover

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXAMPLE = Path(__file__).parent.parent.parent / "example_project" / "kernels"
BASELINE = "regbudget-baseline.toml"

# hungry.cu at two sizes, and the example project's jacobi5 stencil (a 2-D block of 32 x 32), which the two
# releases give different register counts on sm_90 (whatever they are, the test compares them with builds of
# its own).
POLY = """
@pytest.mark.regbudget(source="kernels/hungry.cu", kernel="poly_eval", defines={"NACC": 24}, launch=(256,))
def test_poly():
    pass
"""
JACOBI = """
@pytest.mark.regbudget(source="kernels/stencil.cu", kernel="jacobi5", launch=(256,))
def test_jacobi():
    pass
"""
NVCC = """
@pytest.mark.regbudget(source="kernels/hungry.cu", kernel="poly_eval", compiler="nvcc", defines={"NACC": 8})
def test_poly_nvcc():
    pass
"""


# A CUDA 13.0 toolkit as a user's system install without NVRTC: nvcc, ptxas, NVVM, the CRT, the runtime
# headers and CCCL of 13.0, from their wheels, laid out as one CUDA home (bin/, nvvm/, include/).
CUDA_13_0 = ["nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime", "nvidia-cuda-cccl"]
SPIN = """
@pytest.mark.regbudget(source="kernels/timing.cu", kernel="spin", compiler="nvcc", launch=(256,))
def test_spin_nvcc():
    pass
"""


@pytest.fixture(scope="session")
def cuda_13_0_home() -> Path:
    """The 13.0 wheels downloaded once into a cache that outlives the run (REGBUDGET_TEST_DOWNLOADS, else
    ~/.cache/pytest-regbudget-tests), unpacked into a CUDA home, under a lock for xdist's workers. A
    download that fails fails the test: CI reaches PyPI, as it does to install the test extras."""
    cache = Path(
        os.environ.get("REGBUDGET_TEST_DOWNLOADS", Path.home() / ".cache" / "pytest-regbudget-tests")
    )
    home = cache / "cuda-13.0-nvcc-home"
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache / "cuda-13.0.lock")):
        if (home / "bin" / "nvcc").is_file():
            return home
        wheels = cache / "cuda-13.0-wheels"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                str(wheels),
            ]
            + [f"{name}==13.0.*" for name in CUDA_13_0],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"cannot download the CUDA 13.0 wheels:\n{done.stdout}{done.stderr}"
        unpacked = cache / "cuda-13.0-unpacking"
        shutil.rmtree(unpacked, ignore_errors=True)
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(unpacked)
        root = unpacked / "nvidia" / "cu13"
        for tool in [*(root / "bin").iterdir(), *(root / "nvvm" / "bin").iterdir()]:
            tool.chmod(0o755)  # zip keeps no mode bits
        shutil.rmtree(home, ignore_errors=True)
        root.rename(home)
        shutil.rmtree(unpacked, ignore_errors=True)
    return home


def module_of(*bodies: str) -> str:
    return "import pytest\n" + "".join(bodies)


@pytest.fixture(scope="module")
def toolkits() -> dict[str, Toolkit]:
    """Both wheel toolkits; the test extras install both (a missing one fails here, it is not a skip)."""
    return {name: discover(named=name) for name in ("cu12", "cu13")}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_kernels(pytester.path, "hungry.cu", into="kernels")
    write(pytester.path, "kernels/stencil.cu", (EXAMPLE / "stencil.cu").read_text())
    pytester.makepyfile(test_k=module_of(POLY, JACOBI, NVCC))
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "report.json"
    out.unlink(missing_ok=True)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", f"--regbudget-json={out}", *args)
    return result, json.loads(out.read_text()) if out.exists() else {}


def registers(tk: Toolkit, source: Path, kernel: str, arch: str, **defines: object) -> int:
    options = CompileOptions.make(defines=defines)
    return compile_kernel(source, kernel, arch, options, tk).resources.registers


@pytest.mark.slow  # Triton's compile and ours, or every kernel with two toolkits: 20 s or more
def test_two_toolkits_build_every_kernel_with_both_and_compare_them(
    project: pytest.Pytester, toolkits: dict[str, Toolkit]
) -> None:
    releases = {name: tk.release for name, tk in toolkits.items()}
    old, new = releases["cu12"], releases["cu13"]
    assert old != new
    result, report = run(
        project, "--regbudget-arch=sm_80,sm_90", "--regbudget-toolkit=cu12,cu13", "--regbudget-update"
    )
    # Every NVRTC kernel once per (arch, toolkit); the nvcc kernel only with cu13: the CUDA 12 wheel has none.
    result.assert_outcomes(passed=4 + 4 + 2, skipped=2)
    ids = {r["nodeid"].split("::")[-1] for r in report["kernels"]}
    for arch in ("sm_80", "sm_90"):
        for release in (old, new):
            assert f"test_poly[{arch}-{release}]" in ids
            assert f"test_jacobi[{arch}-{release}]" in ids
        assert f"test_poly_nvcc[{arch}-{new}]" in ids
    result.stdout.fnmatch_lines(
        ['*SKIPPED*compiler="nvcc" is not built with toolkit cu12*holds only ptxas*'], consecutive=False
    )
    # Each record says which release and compiler made it; its registers are that toolkit's own.
    for rec in report["kernels"]:
        name = rec["nodeid"].split("::")[-1]
        release = name.rsplit("-", 1)[1].rstrip("]")
        assert rec["release"] == release
        assert rec["compiler"] == ("nvcc" if "nvcc" in name else "nvrtc")
    source = project.path / "kernels"
    expected = {
        (kernel, arch): (
            registers(toolkits["cu12"], source / file, kernel, arch, **defines),
            registers(toolkits["cu13"], source / file, kernel, arch, **defines),
        )
        for kernel, file, defines in (("poly_eval", "hungry.cu", {"NACC": 24}), ("jacobi5", "stencil.cu", {}))
        for arch in ("sm_80", "sm_90")
    }
    # The comparison lists exactly the kernels whose registers differ between the separate builds.
    (comparison,) = report["toolkit_comparison"]
    assert (comparison["old"], comparison["new"], comparison["compared"]) == (old, new, 4)
    listed = {
        (d["kernel"], d["arch"]): {c["metric"]: (c["old"], c["new"]) for c in d["changes"]}
        for d in comparison["differences"]
    }
    differing = {k: v for k, v in expected.items() if v[0] != v[1]}
    assert {k: v.get("registers") for k, v in listed.items() if "registers" in v} == differing
    assert differing, "the two releases are expected to differ on at least one of these kernels"
    result.stdout.fnmatch_lines(
        ["toolkits compared (registers, spills, stack, occupancy, launchable):", f"*{old} -> {new}: *"]
    )
    for (kernel, arch), (a, b) in differing.items():
        result.stdout.fnmatch_lines([f"*kernels/*.cu {kernel}*[[]{arch}[]]: registers {a} -> {b}*"])
    # One baseline file holds the entries of both releases, each with its own numbers.
    entries = bl.load(project.path / BASELINE).entries
    for (kernel, arch), (a, b) in expected.items():
        file, variant = (
            ("kernels/hungry.cu", "NACC=24") if kernel == "poly_eval" else ("kernels/stencil.cu", "-")
        )
        assert entries[(file, kernel, variant, arch, old)].registers == a
        assert entries[(file, kernel, variant, arch, new)].registers == b
        assert entries[(file, kernel, variant, arch, new)].compiler == "nvrtc"
    assert entries[("kernels/hungry.cu", "poly_eval", "NACC=8", "sm_90", new)].compiler == "nvcc"
    assert f"\nversion = {bl.FORMAT_VERSION}\n" in (project.path / BASELINE).read_text()


def test_strict_passes_when_every_kernel_is_enforced_and_fails_on_a_release_without_entries(
    project: pytest.Pytester, toolkits: dict[str, Toolkit]
) -> None:
    old, new = toolkits["cu12"].release, toolkits["cu13"].release
    project.makepyfile(test_k=module_of(POLY, JACOBI))
    result, _ = run(project, "--regbudget-toolkit=cu12", "--regbudget-update")
    result.assert_outcomes(passed=2)
    before = (project.path / BASELINE).read_bytes()
    result, _ = run(project, "--regbudget-toolkit=cu12", "--regbudget-strict")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"2 of 2 baseline entries enforced (CUDA {old})"])
    # The same kernels with the next release: no entries of its own, so strict fails each, saying why.
    result, report = run(project, "--regbudget-toolkit=cu13", "--regbudget-strict")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            f"*strict: not enforced, the baseline has no CUDA {new} entry for it (only {old}); record it "
            "with pytest --regbudget-update*"
        ]
    )
    result.stdout.fnmatch_lines(
        [f"0 of 2 baseline entries enforced (CUDA {new}); not enforced: 2 no entry for CUDA {new} yet*"]
    )
    assert {r["baseline_status"] for r in report["kernels"]} == {"new-release"}
    assert {tuple(r["other_releases"]) for r in report["kernels"]} == {(old,)}
    # Without strict it is a status, not a failure and not a warning.
    result, _ = run(project, "--regbudget-toolkit=cu13", "-W", "error::UserWarning")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*new for {new} (entries: {old})*"])
    assert (project.path / BASELINE).read_bytes() == before
    # An update with the new release adds its entries and leaves every entry of the old one as it was.
    result, _ = run(project, "--regbudget-toolkit=cu13", "--regbudget-update")
    result.stdout.fnmatch_lines(
        [f"*2 entries kept: nvrtc {old} was not built (this run built: nvrtc {new})*", "*2 added, 0 updated*"]
    )
    old_tables = tomllib.loads(before.decode())["kernels"]
    now_tables = tomllib.loads((project.path / BASELINE).read_text())["kernels"]
    for file, per_kernel in old_tables.items():
        for kernel, per_variant in per_kernel.items():
            for variant, per_arch in per_variant.items():
                for arch, per_release in per_arch.items():
                    assert now_tables[file][kernel][variant][arch][old] == per_release[old]
                    assert set(now_tables[file][kernel][variant][arch]) == {old, new}
    result, _ = run(project, "--regbudget-toolkit=cu13", "--regbudget-strict")
    result.assert_outcomes(passed=2)


def test_an_older_arch_than_a_release_builds_is_skipped_with_the_reason(project: pytest.Pytester) -> None:
    project.makepyfile(test_k=module_of(POLY))
    result, report = run(project, "--regbudget-arch=sm_70", "--regbudget-toolkit=cu12,cu13")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*SKIPPED*toolkit cu13 (CUDA 13.*) does not build sm_70: its oldest target is sm_75*"]
    )
    assert [r["release"] for r in report["kernels"]] == [discover(named="cu12").release]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--regbudget-toolkit=cu14"], "*toolkit 'cu14' has neither NVRTC and ptxas nor nvcc and ptxas:*"),
        (["--regbudget-toolkit=cu12,{empty}"], "*toolkit '{empty}' has neither NVRTC and ptxas nor nvcc*"),
        (["--regbudget-cuda-home={empty}"], "*found no CUDA toolkit with both NVRTC and ptxas*"),
        (["--regbudget-nvcc={empty}/nvcc"], "*--regbudget-nvcc={empty}/nvcc: no such file*"),
        (["--regbudget-toolkit=cu12,{cu12home}"], "*are both CUDA 12.*share one baseline entry per kernel*"),
    ],
)
def test_a_bad_toolkit_is_one_usage_error_at_startup(
    project: pytest.Pytester, tmp_path: Path, toolkits: dict[str, Toolkit], args: list[str], message: str
) -> None:
    empty = tmp_path / "no-toolkit"
    empty.mkdir()
    # The CUDA 12 wheels' tree as a toolkit home: bin/ptxas, lib/libnvrtc, the same release as cu12.
    cu12home = tmp_path / "cu12home"
    (cu12home / "bin").mkdir(parents=True)
    (cu12home / "bin" / "ptxas").symlink_to(toolkits["cu12"].ptxas)
    (cu12home / "lib").mkdir()
    (cu12home / "lib" / toolkits["cu12"].require_nvrtc().name).symlink_to(toolkits["cu12"].require_nvrtc())
    for lib in toolkits["cu12"].require_nvrtc().parent.glob("libnvrtc-builtins*"):
        (cu12home / "lib" / lib.name).symlink_to(lib)
    filled = [a.format(empty=empty, cu12home=cu12home) for a in args]
    before = sorted(p.name for p in project.path.iterdir())
    result = project.runpytest("-p", "no:cacheprovider", *filled)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message.format(empty=empty)])
    assert "test_k.py" not in result.stdout.str()  # no test ran, so nothing failed per test
    assert sorted(p.name for p in project.path.iterdir()) == before  # nothing written


def test_a_pinned_nvcc_builds_the_nvcc_kernels_and_is_named(
    project: pytest.Pytester, toolkits: dict[str, Toolkit]
) -> None:
    nvcc = toolkits["cu13"].ptxas.parent / "nvcc"
    project.makepyfile(test_k=module_of(NVCC))
    result, report = run(project, "--regbudget-toolkit=cu12", f"--regbudget-nvcc={nvcc}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"nvcc {toolkits['cu13'].ptxas_version} ({nvcc}, from --regbudget-nvcc) built 1 kernel(s)*"]
    )
    assert [r["compiler"] for r in report["kernels"]] == ["nvcc"]


def test_one_kernel_variant_measured_by_nvrtc_and_nvcc_is_a_conflict(project: pytest.Pytester) -> None:
    """NVRTC and nvcc of one release may give one file different registers, and they would share an entry:
    the second says so (even when the numbers happen to agree), and an update refuses to write."""
    same = NVCC.replace("test_poly_nvcc", "test_same").replace(', compiler="nvcc"', "")
    project.makepyfile(test_k=module_of(NVCC, same))
    result, _ = run(project, "--regbudget-toolkit=cu13", "--regbudget-update")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*measured this kernel variant with nvcc, this test with nvrtc: they share*"]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR or result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*baseline NOT updated: kernels measured differently by two tests*"])
    assert not (project.path / BASELINE).exists()


def test_switching_between_one_toolkit_and_several_rewrites_no_entry(project: pytest.Pytester) -> None:
    """Entries list their tests without the release a run of several toolkits adds to the item ids, so the
    upgrade's diff is the new release's entries alone, and switching back rewrites nothing."""
    project.makepyfile(test_k=module_of(POLY, JACOBI))
    result, _ = run(project, "--regbudget-toolkit=cu12", "--regbudget-update")
    result.stdout.fnmatch_lines(["*updated: 2 added, 0 updated, 0 unchanged*"])
    result, _ = run(project, "--regbudget-toolkit=cu12,cu13", "--regbudget-update")
    result.stdout.fnmatch_lines(["*updated: 2 added, 0 updated, 2 unchanged*"])
    text = (project.path / BASELINE).read_text()
    assert "test_poly[sm_90]" in text
    assert "sm_90-12.9]" not in text
    assert "sm_90-13.5]" not in text
    result, _ = run(project, "--regbudget-toolkit=cu13", "--regbudget-update")
    result.stdout.fnmatch_lines(["*updated: 0 added, 0 updated, 2 unchanged, 0 stale*"])
    assert (project.path / BASELINE).read_text() == text


def test_a_system_toolkit_with_nvcc_but_no_nvrtc_compares_nvcc_kernels(
    project: pytest.Pytester,
    toolkits: dict[str, Toolkit],
    cuda_13_0_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--regbudget-toolkit=cu13,system where the system CUDA (CUDA_HOME) is a 13.0 install with nvcc and no
    NVRTC: nvcc kernels build with both nvccs, each labelled with the release that built it, NVRTC kernels
    are skipped under system with the reason, and the comparison shows 13.0 -> 13.5 for the nvcc kernels."""
    assert not list((cuda_13_0_home / "lib").glob("libnvrtc*"))
    (project.path / "kernels" / "timing.cu").write_text((KERNELS / "timing.cu").read_text())
    project.makepyfile(test_k=module_of(POLY, NVCC, SPIN))
    monkeypatch.setenv("CUDA_HOME", str(cuda_13_0_home))
    new = toolkits["cu13"].release
    result, report = run(
        project, "--regbudget-arch=sm_90", "--regbudget-toolkit=cu13,system", "--regbudget-update"
    )
    # poly (NVRTC): cu13 only; poly_nvcc and spin_nvcc: with both.
    result.assert_outcomes(passed=1 + 2 + 2, skipped=1)
    result.stdout.fnmatch_lines(
        ['*SKIPPED*has no NVRTC: it builds only compiler="nvcc" kernels*'], consecutive=False
    )
    releases = {r["nodeid"].split("::")[-1]: r["release"] for r in report["kernels"]}
    assert releases == {
        f"test_poly[sm_90-{new}]": new,
        f"test_poly_nvcc[sm_90-{new}]": new,
        "test_poly_nvcc[sm_90-13.0]": "13.0",
        f"test_spin_nvcc[sm_90-{new}]": new,
        "test_spin_nvcc[sm_90-13.0]": "13.0",
    }
    for rec in report["kernels"]:
        if rec["compiler"] == "nvcc":  # built by the nvcc of its label's release
            assert rec["nvrtc_version"].startswith(f"nvcc {rec['release']}.")
    # spin's registers differ between nvcc 13.0 and 13.5 (whatever they are: checked against the builds).
    by_release = {r["release"]: r["registers"] for r in report["kernels"] if "spin" in r["nodeid"]}
    assert by_release["13.0"] != by_release[new]
    (comparison,) = report["toolkit_comparison"]
    assert (comparison["old"], comparison["new"]) == ("13.0", new)
    listed = {
        d["kernel"]: {c["metric"]: (c["old"], c["new"]) for c in d["changes"]}
        for d in comparison["differences"]
    }
    assert listed["spin"]["registers"] == (by_release["13.0"], by_release[new])
    result.stdout.fnmatch_lines(
        [f"*13.0 -> {new}: *", f"*spin*[[]sm_90[]]: registers {by_release['13.0']} -> {by_release[new]}*"]
    )


def test_a_pinned_nvcc_is_not_labelled_with_each_toolkits_release(
    project: pytest.Pytester, toolkits: dict[str, Toolkit], cuda_13_0_home: Path
) -> None:
    """With --regbudget-nvcc, nvcc kernels are built once, by that nvcc, and labelled by it: not once per
    --regbudget-toolkit under releases that did not build them."""
    project.makepyfile(test_k=module_of(POLY, NVCC))
    nvcc = cuda_13_0_home / "bin" / "nvcc"
    result, report = run(
        project, "--regbudget-arch=sm_90", "--regbudget-toolkit=cu12,cu13", f"--regbudget-nvcc={nvcc}"
    )
    result.assert_outcomes(passed=2 + 1)
    nvcc_recs = [r for r in report["kernels"] if r["compiler"] == "nvcc"]
    assert [(r["nodeid"].split("::")[-1], r["release"]) for r in nvcc_recs] == [
        ("test_poly_nvcc[sm_90]", "13.0")
    ]
