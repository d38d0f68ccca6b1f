"""An update never loses an entry it could not see: collection errors, import-time skips, Ctrl-C, -x,
xdist limited to one file, --collect-only, --lf. Each case runs the real plugin against a real baseline."""

from __future__ import annotations

import os
import signal
import sys
import time

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import pytest
from helpers.data import KERNELS
from helpers.runs import start_pytest

HUNGRY = KERNELS / "hungry.cu"
BASELINE = "regbudget-baseline.toml"


def module(*names: str, header: str = "") -> str:
    """A test module with one marked test per name, each compiling the hungry kernel (NACC 4) as a variant
    of its own (a TAG define naming the test), so that each test has an entry of its own."""
    body = "".join(
        f"""
@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", defines={{"NACC": 4, "TAG": "{name}"}})
def test_{name}():
    pass
"""
        for name in names
    )
    return "import pytest\n" + header + body


def keys(pytester: pytest.Pytester) -> list[str]:
    """The tests the baseline's entries list, sorted (entries nest source, kernel, variant, arch, release)."""
    doc = tomllib.loads((pytester.path / BASELINE).read_text())
    return sorted(
        test
        for per_kernel in doc["kernels"].values()
        for per_variant in per_kernel.values()
        for per_arch in per_variant.values()
        for per_release in per_arch.values()
        for entry in per_release.values()
        for test in entry["tests"]
    )


def seed(pytester: pytest.Pytester, files: dict[str, tuple[str, ...]]) -> bytes:
    """Write the modules, record a baseline of all of them, and return its bytes."""
    (pytester.path / "hungry.cu").write_text(HUNGRY.read_text())
    for name, tests in files.items():
        pytester.makepyfile(**{name: module(*tests)})
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-update")
    result.assert_outcomes(passed=sum(len(t) for t in files.values()))
    return (pytester.path / BASELINE).read_bytes()


def update(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--regbudget-update", *args)


def test_collection_error_in_one_file_removes_nothing(pytester: pytest.Pytester) -> None:
    before = seed(pytester, {"test_a": ("a1", "a2"), "test_b": ("b1",)})
    pytester.makepyfile(test_b="import pytest\ndef test_b1(:\n")  # a syntax error
    result = update(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*run interrupted (1 error during collection): no baseline entry was removed",
            "3 entries kept: the run was interrupted (1 error during collection)",
        ]
    )
    assert (pytester.path / BASELINE).read_bytes() == before


def test_continue_on_collection_errors_keeps_the_broken_files_entries(pytester: pytest.Pytester) -> None:
    seed(pytester, {"test_a": ("a1", "a2"), "test_b": ("b1",)})
    pytester.makepyfile(test_b="raise ImportError('no module named cupy')\n")
    pytester.makepyfile(test_a=module("a1"))  # test_a2 is gone for real
    result = update(pytester, "--continue-on-collection-errors")
    result.stdout.fnmatch_lines(["1 entry kept: test_b.py was not collected (error)", "*1 stale (removed)"])
    assert keys(pytester) == ["test_a.py::test_a1[sm_90]", "test_b.py::test_b1[sm_90]"]


def test_module_that_skips_itself_at_import_keeps_its_entries(pytester: pytest.Pytester) -> None:
    seed(pytester, {"test_a": ("a1",), "test_gpu": ("g1", "g2")})
    gated = module("g1", "g2", header='cupy = pytest.importorskip("no_such_cupy_module")\n')
    pytester.makepyfile(test_gpu=gated)
    result = update(pytester)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["2 entries kept: test_gpu.py was skipped at collection (could not import 'no_such_cupy_module'*"]
    )
    assert keys(pytester) == [
        "test_a.py::test_a1[sm_90]",
        "test_gpu.py::test_g1[sm_90]",
        "test_gpu.py::test_g2[sm_90]",
    ]


def test_ctrl_c_during_collection_keeps_the_whole_baseline(pytester: pytest.Pytester) -> None:
    before = seed(pytester, {"test_a": ("a1", "a2"), "test_z": ("z1",)})
    flag = pytester.path / "collecting"
    # test_z is collected after test_a: it says it is being collected, then waits for the signal.
    pytester.makepyfile(
        test_z=f"import pathlib, time\npathlib.Path({str(flag)!r}).touch()\ntime.sleep(60)\n" + module("z1")
    )
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = start_pytest(pytester.path, "-p", "no:cacheprovider", "--regbudget-update", env=env)
    deadline = time.monotonic() + 120
    while not flag.exists():
        assert proc.poll() is None, proc.communicate()[0].decode()
        assert time.monotonic() < deadline, "collection never reached test_z"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "no baseline entry was removed" in out, out
    assert (pytester.path / BASELINE).read_bytes() == before


def test_stop_on_first_failure_removes_nothing_but_keeps_what_it_measured(pytester: pytest.Pytester) -> None:
    seed(pytester, {"test_a": ("a1", "a2", "a3")})
    # a1 now fails its budget, a2 is gone, a3 never runs: -x stops after a1.
    pytester.makepyfile(
        test_a=module("a3").replace(
            "import pytest\n",
            "import pytest\n"
            "@pytest.mark.regbudget(source='hungry.cu', kernel='poly_eval', "
            "defines={'NACC': 4, 'TAG': 'a1'}, max_regs=1)\ndef test_a1():\n    pass\n",
        )
    )
    result = update(pytester, "-x")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*run interrupted (stopping after 1 failures*): no baseline entry was removed"]
    )
    assert keys(pytester) == [
        "test_a.py::test_a1[sm_90]",
        "test_a.py::test_a2[sm_90]",
        "test_a.py::test_a3[sm_90]",
    ]
    # The one kernel it measured is written: an absolute budget does not stop an update.
    result.stdout.fnmatch_lines(["*0 added, 0 updated, 1 unchanged, 0 stale"])


def test_xdist_update_of_one_file_keeps_every_other_file(pytester: pytest.Pytester) -> None:
    before = seed(pytester, {"test_a": ("a1", "a2"), "test_b": ("b1",), "test_c": ("c1",)})
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--regbudget-update", "test_b.py"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["3 entries kept: not in this run's paths*", "*0 added, 0 updated, 1 unchanged, 0 stale"]
    )
    assert (pytester.path / BASELINE).read_bytes() == before
    # The same rule under xdist as serially: a test removed from the file named is stale and goes.
    pytester.makepyfile(test_a=module("a1"))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--regbudget-update", "test_a.py"
    )
    result.stdout.fnmatch_lines(["*0 added, 0 updated, 1 unchanged, 1 stale (removed)"])
    assert keys(pytester) == [
        "test_a.py::test_a1[sm_90]",
        "test_b.py::test_b1[sm_90]",
        "test_c.py::test_c1[sm_90]",
    ]


def test_xdist_collection_error_removes_nothing(pytester: pytest.Pytester) -> None:
    before = seed(pytester, {"test_a": ("a1",), "test_b": ("b1",)})
    pytester.makepyfile(test_b="import pytest\nraise RuntimeError('broken import')\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--regbudget-update")
    assert result.ret != pytest.ExitCode.OK
    assert (pytester.path / BASELINE).read_bytes() == before


def test_deleted_test_file_is_gone_even_outside_the_runs_paths(pytester: pytest.Pytester) -> None:
    seed(pytester, {"test_a": ("a1",), "test_old": ("o1", "o2")})
    (pytester.path / "test_old.py").unlink()
    result = update(pytester, "test_a.py")
    result.stdout.fnmatch_lines(["*0 added, 0 updated, 1 unchanged, 2 stale (removed)"])
    assert keys(pytester) == ["test_a.py::test_a1[sm_90]"]


def test_skipped_test_keeps_its_entry(pytester: pytest.Pytester) -> None:
    seed(pytester, {"test_a": ("a1", "a2")})
    pytester.makepyfile(
        test_a=module("a1", "a2").replace("def test_a2", "@pytest.mark.skip('later')\ndef test_a2")
    )
    result = update(pytester)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["1 entry kept: test skipped", "*0 stale"])
    assert len(keys(pytester)) == 2


def test_kernel_source_gone_makes_its_entry_stale(pytester: pytest.Pytester) -> None:
    local = pytester.path / "k.cu"
    local.write_text(HUNGRY.read_text())
    pytester.makepyfile(
        test_a=f"""
import pytest
@pytest.mark.regbudget(source={str(local)!r}, kernel="poly_eval", defines={{"NACC": 4}})
def test_a1():
    pass
"""
    )
    update(pytester).assert_outcomes(passed=1)
    local.unlink()
    result = update(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cannot read CUDA source*", "*1 stale (removed)"])
    assert keys(pytester) == []


def test_collect_only_and_last_failed_remove_nothing(pytester: pytest.Pytester) -> None:
    before = seed(pytester, {"test_a": ("a1",), "test_b": ("b1",)})
    pytester.makepyfile(test_b=module("b2"))  # b1 is gone, but neither run may say so
    result = update(pytester, "--collect-only")
    result.stdout.fnmatch_lines(["*run interrupted (--collect-only runs no test)*"])
    assert (pytester.path / BASELINE).read_bytes() == before
    result = pytester.runpytest("--regbudget-update", "--lf")
    assert "test_b.py::test_b1[sm_90]" in keys(pytester)
    result.stdout.fnmatch_lines(["*kept: --lf collects only part of the suite"])


def test_entry_for_an_unknown_arch_is_named_and_kept(pytester: pytest.Pytester) -> None:
    seed(pytester, {"test_a": ("a1",)})
    path = pytester.path / BASELINE
    text = path.read_text()
    entry = text[text.index('[kernels."') :]
    path.write_text(text + entry.replace('.sm_90."12.9"]\n', '.sm_999."12.9"]\n', 1))
    result = update(pytester)
    result.stdout.fnmatch_lines(
        [
            "baseline regbudget-baseline.toml: 1 entry for arch 'sm_999' (e.g. hungry.cu poly_eval "
            "(NACC=4,TAG=a1) [[]sm_999, CUDA 12.9[]]) are never checked*"
        ]
    )
    assert "sm_999" in path.read_text()


def test_fixture_options_follow_the_markers_rules(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_f=f"""
import pytest
@pytest.mark.regbudget(max_regs=255)
def test_split(regbudget):
    report = regbudget.compile({str(HUNGRY)!r}, "poly_eval", defines={{"NACC": 4}}, options="-lineinfo -DX=1")
    assert report.registers is not None

@pytest.mark.regbudget(max_regs=255)
def test_tuple_define(regbudget):
    regbudget.compile({str(HUNGRY)!r}, "poly_eval", defines=[("NACC", 4)])
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ValueError: defines*"])
