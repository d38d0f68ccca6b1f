"""`regbudget merge` and `compare` against hostile input, and the baseline path against special files: each
case is one line on stderr with exit status 2 (or a usage error in pytest), the baseline byte for byte as it
was, and no traceback. A merge of shards equals the serial updates byte for byte, across toolkits too.
Real reports of real NVRTC builds, edited as an adversary would (table-driven: each edit is a row)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.data import KERNELS
from helpers.projects import copy_kernels, fake_home
from helpers.runs import bad_input, regbudget, run_pytest
from test_cli import BASELINE, TESTS

from pytest_regbudget.core.errors import ToolchainError
from pytest_regbudget.tools import nvrtc

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with a baseline, and a report of one shard of it (-k test_a), made once for the table."""
    root = tmp_path_factory.mktemp("project")
    copy_kernels(root, "hungry.cu")
    (root / "test_k.py").write_text(TESTS.format(a=8, b=16))
    run = ["-p", "no:cacheprovider", "--regbudget-arch=sm_90", "-q"]
    run_pytest(root, *run, "--regbudget-update").check_returncode()
    run_pytest(root, *run, "-k", "test_a", f"--regbudget-json={root / 'shard.json'}").check_returncode()
    return root


def record(doc: Doc) -> dict[str, Any]:
    first: dict[str, Any] = doc["kernels"][0]
    return first


def setter(field: str, value: object) -> Callable[[Doc], object]:
    return lambda doc: record(doc).__setitem__(field, value)


# Each row: an edit of the shard's JSON, and what the one-line error says.
EDITS: dict[str, tuple[Callable[[Doc], object], str]] = {
    "registers-a-string": (setter("registers", "lots"), r"kernels\[0\] .*Expected `int \| null`, got `str`"),
    "registers-negative": (setter("registers", -7), r"kernels\[0\] .*Expected `int` >= 0"),
    "registers-huge-float": (
        setter("registers", 1e300),
        r"kernels\[0\] .*Expected `int \| null`, got `float`",
    ),
    "registers-a-bool": (setter("registers", True), r"kernels\[0\] .*Expected `int \| null`, got `bool`"),
    "ptxas-version-a-number": (
        setter("ptxas_version", 12),
        r"Expected `str`, got `int` - at `\$.ptxas_version`",
    ),
    "key-of-two-items": (setter("key", ["a", "b"]), r"Expected `array` of length >= 5"),
    "record-not-an-object": (lambda d: d["kernels"].__setitem__(0, 5), r"kernels\[0\]: Expected `object`"),
    "no-nodeid": (lambda d: record(d).pop("nodeid"), r"kernels\[0\]: Object missing required field `nodeid`"),
    "no-key": (lambda d: record(d).pop("key"), r"Object missing required field `key`"),
    "scope-run-not-an-object": (lambda d: d["scope"].__setitem__("run", 5), r"scope: Expected `object`"),
    "scope-built-pair-short": (
        lambda d: d["scope"].__setitem__("built", [["nvrtc"]]),
        r"scope: .*length >= 2",
    ),
    "unknown-arch": (
        lambda d: (setter("arch", "sm_999")(d), record(d)["key"].__setitem__(3, "sm_999")),
        r"kernels\[0\] .*sm_999",
    ),
    "key-of-another-arch": (lambda d: record(d)["key"].__setitem__(3, "sm_80"), r"is not of its arch sm_90"),
}


@pytest.mark.parametrize("name", EDITS)
def test_a_damaged_shard_is_one_line_and_writes_nothing(shard: Path, tmp_path: Path, name: str) -> None:
    edit, message = EDITS[name]
    doc = json.loads((shard / "shard.json").read_text())
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    baseline = tmp_path / BASELINE
    baseline.write_bytes((shard / BASELINE).read_bytes())
    merged = tmp_path / "merged.json"
    bad_input(regbudget("merge", str(bad), "-o", str(merged), "--update", str(baseline)), message)
    assert baseline.read_bytes() == (shard / BASELINE).read_bytes()
    assert not merged.exists()
    bad_input(regbudget("compare", str(shard / "shard.json"), str(bad)), message)


def test_overlapping_shards_that_disagree_are_an_error(shard: Path, tmp_path: Path) -> None:
    doc = json.loads((shard / "shard.json").read_text())
    record(doc)["registers"] += 2
    record(doc)["measured"]["registers"] += 2  # consistent with itself: another run of the same test
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    baseline = tmp_path / BASELINE
    baseline.write_bytes((shard / BASELINE).read_bytes())
    for order in ([shard / "shard.json", other], [other, shard / "shard.json"]):
        done = regbudget("merge", *map(str, order), "--update", str(baseline))
        bad_input(done, r"shards disagree: .*test_a.* poly_eval \[sm_90\] measured .* in .* and .* in ")
    assert baseline.read_bytes() == (shard / BASELINE).read_bytes()
    # Overlapping shards that agree merge as one: the bytes of the serial update of that shard's selection.
    copy = tmp_path / "copy"
    shutil.copytree(shard, copy)
    report = str(copy / "shard.json")
    done = regbudget("merge", report, report, "--update", BASELINE, "--rootdir", str(copy), cwd=copy)
    assert done.returncode == 0, done.stderr
    merged = (copy / BASELINE).read_bytes()
    (copy / BASELINE).write_bytes((shard / BASELINE).read_bytes())
    assert pytest_run(copy, "-k", "test_a", "--regbudget-update").returncode == 0
    assert (copy / BASELINE).read_bytes() == merged


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("DIR", r"-o .*: cannot write it: .*directory.*; give a file path"),
        ("/proc/nope/x.json", r"-o /proc/nope"),
    ],
)
def test_merge_output_that_cannot_be_written_is_one_line(
    shard: Path, tmp_path: Path, output: str, message: str
) -> None:
    target = str(tmp_path) if output == "DIR" else output
    bad_input(regbudget("merge", str(shard / "shard.json"), "-o", target), message)


def test_merge_update_of_a_missing_baseline(shard: Path, tmp_path: Path) -> None:
    missing_dir = tmp_path / "no" / "such" / BASELINE
    bad_input(regbudget("merge", str(shard / "shard.json"), "--update", str(missing_dir)), r"no directory")
    assert not (tmp_path / "no").exists()
    new = tmp_path / BASELINE
    done = regbudget("merge", str(shard / "shard.json"), "--update", str(new))
    assert done.returncode == 0, done.stderr
    assert f"baseline {new} does not exist: creating it" in done.stdout
    assert new.exists()


@pytest.mark.parametrize("tolerance", ["nan", "inf", "-1"])
def test_compare_fail_on_a_tolerance_that_never_fails_is_refused(shard: Path, tolerance: str) -> None:
    report = str(shard / "shard.json")
    bad_input(regbudget("compare", report, report, "--fail-on", f"registers:{tolerance}"), r"number >= 0")


# -- the baseline path -----------------------------------------------------------------------------------
def test_a_baseline_that_is_a_fifo_is_refused_not_replaced(shard: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    baseline = tmp_path / BASELINE
    baseline.write_bytes((shard / BASELINE).read_bytes())
    bad_input(
        regbudget("merge", str(shard / "shard.json"), "--update", str(fifo)), r"is a FIFO, not a regular file"
    )
    assert fifo.is_fifo()


def test_a_symlinked_baseline_is_written_through(shard: Path, tmp_path: Path) -> None:
    real = tmp_path / "store" / BASELINE
    real.parent.mkdir()
    real.write_text("")  # empty: every entry is added
    link = tmp_path / BASELINE
    link.symlink_to(real)
    done = regbudget("merge", str(shard / "shard.json"), "--update", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink()
    assert "poly_eval" in real.read_text()


# -- data loss ---------------------------------------------------------------------------------------------
def pytest_run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pytest(root, "-p", "no:cacheprovider", "-q", "--regbudget-arch=sm_90", *args)


def entries(baseline: bytes, release: str) -> int:
    return len(re.findall(rf'^\[kernels\..*"{re.escape(release)}"\]$'.encode(), baseline, re.MULTILINE))


def test_shards_of_two_toolkits_merge_as_the_serial_updates(tmp_path: Path) -> None:
    """A cu12 shard that deselected test_a and a cu13 shard of every test: test_a's 12.9 entry stays, as it
    does when the two updates run one after the other."""
    copy_kernels(tmp_path, "hungry.cu")
    (tmp_path / "test_k.py").write_text(TESTS.format(a=8, b=16))
    assert pytest_run(tmp_path, "--regbudget-toolkit=cu12,cu13", "--regbudget-update").returncode == 0
    seed = (tmp_path / BASELINE).read_bytes()
    assert entries(seed, "12.9") == entries(seed, "13.5") == 3
    cu12 = ("--regbudget-toolkit=cu12", "-k", "not test_a")
    cu13 = ("--regbudget-toolkit=cu13",)
    assert pytest_run(tmp_path, *cu12, "--regbudget-update").returncode == 0
    assert pytest_run(tmp_path, *cu13, "--regbudget-update").returncode == 0
    serial = (tmp_path / BASELINE).read_bytes()
    assert entries(serial, "12.9") == 3
    (tmp_path / BASELINE).write_bytes(seed)
    for name, args in (("cu12.json", cu12), ("cu13.json", cu13)):
        assert pytest_run(tmp_path, *args, f"--regbudget-json={tmp_path / name}").returncode == 0
    done = regbudget("merge", "cu12.json", "cu13.json", "--update", BASELINE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "0 stale" in done.stdout
    assert (tmp_path / BASELINE).read_bytes() == serial


def test_another_rootdir_removes_nothing_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    copy_kernels(tmp_path, "hungry.cu")
    (tmp_path / "tests" / "test_k.py").write_text(
        TESTS.format(a=8, b=16).replace('"hungry.cu"', '"../hungry.cu"')
    )
    assert pytest_run(tmp_path, "--regbudget-update").returncode == 0
    seed = (tmp_path / BASELINE).read_bytes()
    # The same baseline, with the rootdir one level down: every key's path would look gone.
    done = pytest_run(
        tmp_path,
        "--rootdir=tests",
        f"--regbudget-baseline={BASELINE}",
        "--regbudget-update",
        "tests/test_k.py",
    )
    assert done.returncode == 0, done.stdout
    assert "none of the 2 files the baseline names exists under the rootdir" in done.stdout
    assert (tmp_path / BASELINE).read_bytes().count(b"[kernels.") >= seed.count(b"[kernels.")
    # And a merge told another rootdir.
    report = tmp_path / "r.json"
    assert pytest_run(tmp_path, "-k", "test_a", f"--regbudget-json={report}").returncode == 0
    (tmp_path / BASELINE).write_bytes(seed)
    done = regbudget(
        "merge", str(report), "--update", BASELINE, "--rootdir", str(tmp_path / "tests"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "0 stale" in done.stdout
    assert "none of the 2 files the baseline names exists" in done.stdout


# -- unclear messages, made clear ------------------------------------------------------------------------
@pytest.mark.parametrize("bounds", ["0", "1x0", "99999999", "256x-1"])
def test_explain_refuses_launch_bounds_no_kernel_can_have(bounds: str) -> None:
    done = regbudget("explain", "hungry.cu::poly_eval", "--bounds", bounds, cwd=KERNELS)
    bad_input(done, rf"--bounds '{re.escape(bounds)}': expected .* 1 <= THREADS <= 1024 and BLOCKS >= 1")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"version = true\n", r"version = True, expected a whole number"),
        (
            b"version = 3\n\x00[kernels]\n",
            r"line 2: a NUL byte \(byte offset 12\), which TOML does not allow",
        ),
    ],
    ids=["version-true", "nul-byte"],
)
def test_a_baseline_with_a_bad_version_or_a_nul_byte_says_so(
    tmp_path: Path, content: bytes, message: str
) -> None:
    bad = tmp_path / BASELINE
    bad.write_bytes(content)
    done = regbudget("baseline", "check", str(bad))
    assert done.returncode == 2, done
    assert re.search(message, done.stderr), done.stderr
    assert "UTF-16" not in done.stderr


@pytest.mark.parametrize("value", ["", ",,"])
def test_an_arch_option_that_names_no_arch_is_a_usage_error(tmp_path: Path, value: str) -> None:
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    done = run_pytest(tmp_path, "-p", "no:cacheprovider", f"--regbudget-arch={value}", timeout=120)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"--regbudget-arch={value} names no arch. Fix: e.g. --regbudget-arch=sm_80,sm_90" in done.stderr


def test_a_manifest_that_is_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "regbudget.toml").mkdir()
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    done = pytest_run(tmp_path)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "regbudget.toml is not a file (a directory?)" in done.stderr


# -- tracebacks and hangs, made one line ----------------------------------------------------------------
def test_help_and_version_expand_no_manifest_glob(tmp_path: Path) -> None:
    # Expanded, this glob walks the whole file system; --help and --version must not even look.
    (tmp_path / "regbudget.toml").write_text('[[kernels]]\nsource = ["/**/*.cuh"]\n')
    for option in ("--help", "--version"):
        done = run_pytest(tmp_path, option, timeout=60)
        assert done.returncode == 0, done.stderr
    refused = pytest_run(tmp_path)
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR
    assert "'/**/*.cuh' is outside the rootdir" in refused.stderr


def test_a_nul_byte_in_a_markers_path_is_a_setup_error_of_that_test(tmp_path: Path) -> None:
    (tmp_path / "test_n.py").write_text(
        "import pytest\n"
        '@pytest.mark.regbudget(source="k\\x00.cu", kernel="k")\n'
        "def test_nul():\n    pass\n\n"
        "def test_other():\n    pass\n"
    )
    done = pytest_run(tmp_path, "-rE")
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert "1 passed, 1 error" in done.stdout
    assert "source='k\\x00.cu': a NUL byte (\\x00) cannot be in a kernel name, a path or a compiler flag" in (
        done.stdout
    )


def test_a_damaged_nvrtc_library_is_one_error_at_start_up(tmp_path: Path) -> None:
    home = fake_home(tmp_path, 'exec "$REAL" "$@"\n')
    for lib in (home / "lib").glob("libnvrtc.so*"):
        lib.unlink()
        lib.write_bytes(b"")  # an interrupted download
    (tmp_path / "p").mkdir()
    marker = f'@pytest.mark.regbudget(source="{KERNELS / "hungry.cu"}", kernel="poly_eval")\n'
    tests = "".join(f"{marker}def test_{i}():\n    pass\n" for i in range(2))
    (tmp_path / "p" / "test_k.py").write_text("import pytest\n" + tests)
    done = pytest_run(tmp_path / "p", f"--regbudget-cuda-home={home}", "--regbudget-no-cache")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "is not a shared library" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_nvrtc_library_that_cannot_be_loaded_is_one_remembered_error(tmp_path: Path) -> None:
    """Removed or damaged while the run goes on: every later build gets the same one-line ToolchainError."""
    broken = tmp_path / "libnvrtc.so.12"
    broken.write_bytes(b"\x7fELF" + b"\0" * 12)  # an ELF header and nothing else: loading fails
    for _ in range(2):
        with pytest.raises(ToolchainError, match=r"the NVRTC library .* cannot be loaded: .*Fix: reinstall"):
            nvrtc._nvrtc(broken)


def test_pytest_refuses_a_baseline_path_that_is_a_fifo(tmp_path: Path) -> None:
    """A private FIFO stands for /dev/null and such: never read (that hangs), never replaced."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    copy_kernels(tmp_path, "hungry.cu")
    (tmp_path / "test_k.py").write_text(TESTS.format(a=8, b=16))
    done = pytest_run(tmp_path, f"--regbudget-baseline={fifo}", "--regbudget-update")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "is a FIFO, not a regular file" in done.stderr
    assert fifo.is_fifo()
