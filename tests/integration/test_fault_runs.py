"""Faults end to end: each test fails (or the run stops) with one clear line, the summary table is printed,
and the baseline is as it was. NVRTC is the real one from the wheels; where ptxas must misbehave, a small
script in a CUDA home of its own wraps the real ptxas (for its version) and stands in only for the fault."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.projects import fake_home
from helpers.runs import run_json

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.dirs import default_cache_dir
from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.nvcc import find_nvcc

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the fake tools are shell scripts")

KERNEL = b'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'
BASELINE = "regbudget-baseline.toml"
TABLE = ["*- regbudget -*", "test*kernel*arch*regs*verdict"]


def marked_tests(pytester: pytest.Pytester, *sources: str, extra: str = "") -> None:
    """One test per source, named after it: test_<stem>."""
    body = "".join(
        f"""
@pytest.mark.regbudget(source={src!r}, kernel="k"{extra})
def test_{Path(src).stem}():
    pass
"""
        for src in sources
    )
    pytester.makepyfile(test_k="import pytest\n" + body)


def assert_clean_failure(result: pytest.RunResult) -> None:
    """No traceback of ours and no INTERNALERROR, and the summary table is there."""
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert "Traceback" not in out
    result.stdout.fnmatch_lines(TABLE)


# A fault stands in for builds only: discovery's probes (--version, and --help for the --gpu-name list) are
# answered by the real ptxas, as a wrapper that passes them on would.
VERSION_THEN = 'case "$1" in --version|--help) exec "$REAL" "$1" ;; esac\n'


# -- input that is not UTF-8 ----------------------------------------------------------------------


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_latin1_source_compiles_as_its_bytes_and_stays_in_every_report(
    pytester: pytest.Pytester, cache: bool
) -> None:
    """nvcc and NVRTC read bytes: a Latin-1 comment in the .cu file is compiled as it is, cached or not, and
    gives the numbers of the same kernel without it."""
    (pytester.path / "latin.cu").write_bytes(b"// caf\xe9\n" + KERNEL)
    (pytester.path / "bom.cu").write_bytes(b"\xef\xbb\xbf// cafe\n" + KERNEL)
    marked_tests(pytester, "latin.cu", "bom.cu")
    markdown = pytester.path / "summary.md"
    args = [f"--regbudget-markdown={markdown}", *([] if cache else ["--regbudget-no-cache"])]
    for _ in range(2):  # cold, then warm
        result, records = run_json(pytester, *args)
        result.assert_outcomes(passed=2)
        assert_clean_failure(result)
        by_id = {r["nodeid"]: r for r in records}
        latin, bom = by_id["test_k.py::test_latin[sm_90]"], by_id["test_k.py::test_bom[sm_90]"]
        assert (latin["outcome"], bom["outcome"]) == ("passed", "passed")
        assert latin["registers"] == bom["registers"]
        assert latin["line"] == bom["line"] == 2
        assert "2 new" in markdown.read_text()


def test_latin1_header_is_compiled_as_bytes(pytester: pytest.Pytester) -> None:
    """NVRTC reads headers itself, as bytes: a Latin-1 comment there is no problem, cached or not."""
    (pytester.path / "cfg.h").write_bytes(b"// caf\xe9\n#define V 2.0f\n")
    (pytester.path / "inc.cu").write_bytes(b'#include "cfg.h"\n' + KERNEL.replace(b"1.0f", b"V"))
    marked_tests(pytester, "inc.cu")
    for args in ((), ("--regbudget-no-cache",)):
        pytester.runpytest("-p", "no:cacheprovider", *args).assert_outcomes(passed=1)


LATIN1_NAME = os.fsdecode(b"k\xe9.cu")  # a file name that is not UTF-8 (Python keeps the byte as a surrogate)


def test_latin1_file_name_compiles(pytester: pytest.Pytester) -> None:
    (pytester.path / LATIN1_NAME).write_bytes(KERNEL)
    pytester.makepyfile(
        test_k=f"""
import os, pytest
@pytest.mark.regbudget(source=os.fsdecode({os.fsencode(LATIN1_NAME)!r}), kernel="k")
def test_k():
    pass
"""
    )
    result, records = run_json(pytester)
    result.assert_outcomes(passed=1)
    assert [r["registers"] for r in records] == [8]


def test_nvcc_error_about_a_latin1_file_name(pytester: pytest.Pytester) -> None:
    """nvcc's log names the file with its raw bytes: the log is decoded leniently, not a traceback."""
    try:
        find_nvcc(toolchain.discover())
    except CompileError as exc:
        pytest.skip(str(exc))
    (pytester.path / LATIN1_NAME).write_bytes(KERNEL.replace(b"1.0f;", b"1.0f"))
    pytester.makepyfile(
        test_k=f"""
import os, pytest
@pytest.mark.regbudget(source=os.fsdecode({os.fsencode(LATIN1_NAME)!r}), kernel="k", compiler="nvcc")
def test_k():
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*nvcc * could not compile *.cu for sm_90:*", '*.cu(1): error: expected a ";"']
    )
    assert_clean_failure(result)


def test_utf16_baseline_stops_the_run_and_is_kept(pytester: pytest.Pytester) -> None:
    marked_tests(pytester, "k.cu")
    (pytester.path / "k.cu").write_bytes(KERNEL)
    pytester.runpytest("-p", "no:cacheprovider", "--regbudget-update").assert_outcomes(passed=1)
    wide = (pytester.path / BASELINE).read_text().encode("utf-16")
    (pytester.path / BASELINE).write_bytes(wide)
    for args in ((), ("--regbudget-update",)):
        result = pytester.runpytest("-p", "no:cacheprovider", *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*baseline {pytester.path / BASELINE} is UTF-16; *save it as UTF-8*"])
        assert (pytester.path / BASELINE).read_bytes() == wide


# -- toolchain faults and timeouts ----------------------------------------------------------------


def test_ptxas_that_hangs_on_version(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_home(tmp_path, "exec sleep 1000\n")
    monkeypatch.setattr(toolchain, "VERSION_TIMEOUT", 1.0)
    (pytester.path / "k.cu").write_bytes(KERNEL)
    marked_tests(pytester, "k.cu")
    start = time.monotonic()
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-cuda-home={home}")
    assert time.monotonic() - start < 30
    # An explicit toolkit that does not work: one usage error at startup, before any test.
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bin/ptxas --version did not answer within 1 s*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_ptxas_that_is_not_executable(pytester: pytest.Pytester, tmp_path: Path) -> None:
    home = fake_home(tmp_path, 'exec "$REAL" "$@"\n')
    (home / "bin" / "ptxas").chmod(0o644)
    (pytester.path / "k.cu").write_bytes(KERNEL)
    marked_tests(pytester, "k.cu")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-cuda-home={home}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*cannot run *bin/ptxas: Permission denied (it is not executable). Fix: chmod +x*"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_ptxas_that_writes_no_cubin(pytester: pytest.Pytester, tmp_path: Path) -> None:
    home = fake_home(tmp_path, VERSION_THEN + "echo 'ptxas info    : nothing'\nexit 0\n")
    (pytester.path / "k.cu").write_bytes(KERNEL)
    marked_tests(pytester, "k.cu")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--regbudget-no-cache", f"--regbudget-cuda-home={home}"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*ptxas 12.9.* (*bin/ptxas) exited 0 but wrote no cubin for k [[]sm_90[]] for sm_90*"]
    )
    assert_clean_failure(result)


def test_ptxas_timeout_kills_the_wrappers_children(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    home = fake_home(tmp_path, VERSION_THEN + f"sleep 1000 &\necho $! > {pid_file}\nwait\n")
    (pytester.path / "k.cu").write_bytes(KERNEL)
    marked_tests(pytester, "k.cu")
    pytester.makeini("[pytest]\nregbudget_ptxas_timeout = 1\n")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--regbudget-no-cache", f"--regbudget-cuda-home={home}"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*did not finish within 1 s (killed with its child processes). Fix: raise the limit in your ini "
            "file, e.g. regbudget_ptxas_timeout = 2 (pytest.ini, *"
        ]
    )
    assert_clean_failure(result)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(grandchild):  # pragma: no cover - the failure this test exists for
        os.kill(grandchild, signal.SIGKILL)
        pytest.fail(f"ptxas's child {grandchild} outlived the timeout")


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "-inf", "x"])
@pytest.mark.parametrize(("key", "default"), [("ptxas", "300"), ("nvcc", "1800")])
def test_timeouts_must_be_finite_and_positive(
    pytester: pytest.Pytester, value: str, key: str, default: str
) -> None:
    pytester.makeini(f"[pytest]\nregbudget_{key}_timeout = {value}\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*regbudget_{key}_timeout = '{value}': expected a finite number of seconds > 0, e.g. {default}*"]
    )


# -- the baseline lock and write failures ---------------------------------------------------------


@pytest.fixture
def updated(pytester: pytest.Pytester) -> Path:
    """A project with a written baseline, whose kernel has since changed (so an update must write)."""
    source = pytester.path / "k.cu"
    source.write_bytes(KERNEL)
    marked_tests(pytester, "k.cu")
    pytester.runpytest("-p", "no:cacheprovider", "--regbudget-update").assert_outcomes(passed=1)
    source.write_bytes(KERNEL.replace(b"x[0] = 1.0f;", b"x[0] = 1.0f; x[1] = x[2] * x[3];"))
    return pytester.path / BASELINE


def test_update_gives_up_on_a_held_lock_naming_the_holder(
    pytester: pytest.Pytester, updated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = updated.read_bytes()
    code = (
        "import sys, time; from pathlib import Path; from pytest_regbudget.core import baseline as bl\n"
        "with bl._locked(Path(sys.argv[1]), Path(sys.argv[2]), 10):\n"
        "    print('held', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(updated), str(default_cache_dir())],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        monkeypatch.setattr(bl, "LOCK_TIMEOUT", 1.0)
        result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-update")
    finally:
        holder.kill()
        holder.wait()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [
            f"baseline NOT updated: baseline {updated} is being updated by another process "
            f"(pid {holder.pid}); gave up after waiting 1 s *Fix: let that run finish*"
        ]
    )
    assert_clean_failure(result)
    assert updated.read_bytes() == before
    assert sorted(p.name for p in pytester.path.iterdir() if "lock" in p.name) == []


def test_update_refuses_a_read_only_baseline(pytester: pytest.Pytester, updated: Path) -> None:
    before = updated.read_bytes()
    updated.chmod(0o444)
    result = pytester.runpytest("-p", "no:cacheprovider", "--regbudget-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [f"baseline NOT updated: baseline {updated} is read-only (mode 444). Fix: chmod u+w {updated}*"]
    )
    assert_clean_failure(result)
    assert updated.read_bytes() == before
    assert updated.stat().st_mode & 0o777 == 0o444
