"""Faults that must end in one clear error, not a traceback or a hang: sources and baselines that are not
UTF-8, broken or hanging tools (small shell scripts standing in for a broken ptxas, never for its numbers),
timeouts that must kill a whole process group, a held or unwritable baseline."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.data import SAMPLE_ENTRY as ENTRY

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.errors import BaselineError, CompileError, ToolchainError
from pytest_regbudget.tools import compiler, running
from pytest_regbudget.tools import ptxas as assembler
from pytest_regbudget.tools import toolkit as toolchain
from pytest_regbudget.tools.toolkit import Toolkit
from pytest_regbudget.util.files import atomic_write

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the fake tools are shell scripts")

KEY: bl.Key = ("kernels/k.cu", "k", bl.NO_VARIANT, "sm_90", "12.9")
OTHER: bl.Key = ("kernels/other.cu", "k", bl.NO_VARIANT, "sm_90", "12.9")
VERSION = 'echo "Cuda compilation tools, release 12.9, V12.9.86"'


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def fake_toolkit(ptxas: Path) -> Toolkit:
    return Toolkit(origin="fake", ptxas=ptxas, nvrtc=ptxas, nvrtc_version="12.9", ptxas_version="12.9.86")


def fake_home(tmp_path: Path, ptxas_body: str) -> Path:
    """A CUDA home as toolchain.toolkit_from_home reads it: bin/ptxas and lib/libnvrtc.so.* (not loaded)."""
    home = tmp_path / "cuda"
    script(home / "bin" / "ptxas", ptxas_body)
    (home / "lib").mkdir()
    (home / "lib" / "libnvrtc.so.12").write_bytes(b"")
    (home / "lib" / "libnvrtc-builtins.so.12.9").write_bytes(b"")
    return home


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie (a container's pid 1 may never reap an orphan)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def assert_gone(pid: int) -> None:
    """The wrapper's child is gone within 5 s; if not, kill it (the test failed, it must not leak)."""
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):  # pragma: no cover - the failure these tests exist for
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the wrapper's child {pid} outlived its parent's kill")


# -- input that is not UTF-8 ----------------------------------------------------------------------


@pytest.mark.parametrize("comment", [b"// \xa9 2019 (Latin-1)", b"// it\x92s Windows-1252", b"// caf\xe9"])
def test_a_source_that_is_not_utf8_compiles_and_is_keyed_by_its_bytes(tmp_path: Path, comment: bytes) -> None:
    """nvcc and NVRTC read bytes: a comment saved as Latin-1 is no reason to refuse the file. NVRTC gets the
    file's own bytes, and the cache key is theirs (another byte in the comment is another key)."""
    from pytest_regbudget.cache.keys import cache_key
    from pytest_regbudget.cache.store import compile_kernel
    from pytest_regbudget.core.text import readable, source_bytes
    from pytest_regbudget.tools.options import CompileOptions

    data = b"// ok\n" + comment + b'\nextern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
    source = tmp_path / "k.cu"
    source.write_bytes(data)
    text = compiler.read_source(source)
    assert source_bytes(text) == data
    assert "\ufffd" in readable(text)
    toolkit = toolchain.discover(None)
    built = compile_kernel(source, "k", "sm_90", CompileOptions(), toolkit)
    assert built.facts.resources.registers > 0
    key = cache_key(source, text, (), "sm_90", CompileOptions(), toolkit)
    other = source_bytes(text).replace(comment[-1:], b"\xbf")
    source.write_bytes(other)
    assert cache_key(source, compiler.read_source(source), (), "sm_90", CompileOptions(), toolkit) != key


def test_a_compile_error_in_a_latin1_file_quotes_its_line(tmp_path: Path) -> None:
    from pytest_regbudget.cache.store import compile_kernel
    from pytest_regbudget.tools.options import CompileOptions

    source = tmp_path / "k.cu"
    source.write_bytes(b'extern "C" __global__ void k(float* x) { x[0] = caf\xe9; }\n')
    with pytest.raises(CompileError) as info:
        compile_kernel(source, "k", "sm_90", CompileOptions(), toolchain.discover(None))
    message = str(info.value)
    assert "k.cu(1): error" in message
    message.encode("utf-8")  # printable: NVRTC's log is decoded with replacement


def test_utf8_bom_is_dropped_for_nvrtc(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_bytes(b'\xef\xbb\xbfextern "C" __global__ void k() {}\n')
    assert compiler.read_source(source) == 'extern "C" __global__ void k() {}\n'


@pytest.mark.parametrize(
    ("encoding", "name"),
    [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32"), ("utf-16-le", "UTF-16")],
)
def test_wide_baseline_is_refused_and_kept(tmp_path: Path, encoding: str, name: str) -> None:
    path = tmp_path / "b.toml"
    text = bl.dumps(bl.Baseline({KEY: ENTRY}))
    # utf-16 and utf-32 write a byte order mark; utf-16-be gets one by hand; utf-16-le has none.
    data = (b"\xfe\xff" if encoding == "utf-16-be" else b"") + text.encode(encoding)
    path.write_bytes(data)
    with pytest.raises(BaselineError, match=rf"baseline .*b\.toml is {name}; .*save it as UTF-8"):
        bl.load(path)
    with pytest.raises(BaselineError, match=rf"is {name}"):
        bl.update(path, {OTHER: ENTRY}, set(), lock_dir=tmp_path / "cache")
    assert path.read_bytes() == data


def test_latin1_baseline_names_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_bytes(b"# caf\xe9\nversion = 3\n")
    with pytest.raises(BaselineError, match=r"b\.toml, line 1: byte 0xE9 .* is not UTF-8"):
        bl.load(path)


def test_utf8_bom_baseline_loads_and_an_update_drops_the_bom(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_bytes(b"\xef\xbb\xbf" + bl.dumps(bl.Baseline({KEY: ENTRY})).encode())
    assert bl.load(path) == bl.Baseline({KEY: ENTRY})
    bl.update(path, {KEY: ENTRY}, set(), lock_dir=tmp_path / "cache")
    assert path.read_bytes() == bl.dumps(bl.Baseline({KEY: ENTRY})).encode()


def test_tool_output_that_is_not_utf8_is_decoded_with_replacement(tmp_path: Path) -> None:
    tool = script(tmp_path / "ptxas", r"printf 'ptxas fatal : /k\351.ptx\n' >&2; exit 1" + "\n")
    assert assembler.run_compiler([str(tool)], 10, "ptxas") == (1, "ptxas fatal : /k\ufffd.ptx\n")


# -- toolchain faults -----------------------------------------------------------------------------


def test_ptxas_that_hangs_on_version_is_a_toolchain_error(tmp_path: Path) -> None:
    ptxas = script(tmp_path / "ptxas", "exec sleep 1000\n")
    start = time.monotonic()
    with pytest.raises(ToolchainError, match=rf"{ptxas} --version did not answer within 1 s \(killed\)"):
        toolchain.ptxas_version(ptxas, 1.0)
    assert time.monotonic() - start < 10


def test_hanging_ptxas_in_an_explicit_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = fake_home(tmp_path, "exec sleep 1000\n")
    monkeypatch.setattr(toolchain, "VERSION_TIMEOUT", 1.0)
    with pytest.raises(ToolchainError, match=r"bin/ptxas --version did not answer within 1 s"):
        toolchain.discover(str(home), env={})


def test_ptxas_that_is_not_executable(tmp_path: Path) -> None:
    home = fake_home(tmp_path, VERSION + "\n")
    ptxas = home / "bin" / "ptxas"
    ptxas.chmod(0o644)
    if os.access(ptxas, os.X_OK):  # pragma: no cover - a file system that ignores modes
        pytest.skip("this file system ignores the executable bit")
    with pytest.raises(ToolchainError, match=rf"cannot run {ptxas}: .*not executable.*chmod \+x {ptxas}"):
        toolchain.discover(str(home), env={})
    with pytest.raises(CompileError, match=rf"ptxas 12.9.86 on k \[sm_90\]: cannot run {ptxas}: .*chmod \+x"):
        assembler.run_ptxas(".version 8.8\n", "sm_90", (), fake_toolkit(ptxas), 10, "k [sm_90]")


def test_ptxas_that_exits_0_without_a_cubin(tmp_path: Path) -> None:
    ptxas = script(tmp_path / "ptxas", "echo 'ptxas info    : 0 bytes gmem'\nexit 0\n")
    with pytest.raises(CompileError) as info:
        assembler.run_ptxas(".version 8.8\n", "sm_90", (), fake_toolkit(ptxas), 10, "k [sm_90]")
    message = str(info.value)
    assert f"ptxas 12.9.86 ({ptxas}) exited 0 but wrote no cubin for k [sm_90] for sm_90" in message
    assert "0 bytes gmem" in message


# -- timeouts -------------------------------------------------------------------------------------


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    wrapper = script(tmp_path / "ptxas", f"sleep 1000 &\necho $! > {pid_file}\nwait\n")
    start = time.monotonic()
    with pytest.raises(CompileError, match=r"did not finish within 1 s \(killed with its child processes\)"):
        assembler.run_compiler([str(wrapper)], 1.0, "ptxas 12.9.86 on k [sm_90]")
    assert time.monotonic() - start < 10
    assert_gone(int(pid_file.read_text()))


def test_an_interrupted_run_can_kill_the_tools_of_every_thread(tmp_path: Path) -> None:
    """Ctrl-C does not reach a tool in a session of its own: kill what the compile threads run."""
    pid_file = tmp_path / "grandchild.pid"
    wrapper = script(tmp_path / "ptxas", f"sleep 1000 &\necho $! > {pid_file}\nwait\n")
    results: list[tuple[int, str]] = []
    worker = threading.Thread(target=lambda: results.append(running.run_tool([str(wrapper)], 300)))
    worker.start()
    deadline = time.monotonic() + 10
    # Wait for the worker to register its process too: under load the wrapper can write its pid before the
    # thread that started it has run again, and a kill before that finds nothing to kill.
    while not pid_file.exists() or not pid_file.read_text().strip() or not running._running:
        assert time.monotonic() < deadline, "the wrapper did not start"
        time.sleep(0.02)
    running.kill_running_tools()
    worker.join(10)
    assert not worker.is_alive()
    assert results[0][0] == -signal.SIGKILL
    assert_gone(int(pid_file.read_text()))


# -- the baseline lock ----------------------------------------------------------------------------


@pytest.fixture
def held_lock(tmp_path: Path) -> Iterator[tuple[Path, Path, int]]:
    """(baseline, lock dir, holder pid): another process holds the baseline's lock until the test ends."""
    path, lock_dir = tmp_path / "repo" / "b.toml", tmp_path / "cache"
    path.parent.mkdir()
    atomic_write(path, bl.dumps(bl.Baseline({KEY: ENTRY})))
    code = (
        "import sys, time; from pathlib import Path; from pytest_regbudget.core import baseline as bl\n"
        "with bl._locked(Path(sys.argv[1]), Path(sys.argv[2]), 10):\n"
        "    print('held', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(path), str(lock_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        yield path, lock_dir, holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_held_lock_times_out_naming_the_holder(held_lock: tuple[Path, Path, int]) -> None:
    path, lock_dir, pid = held_lock
    before = path.read_bytes()
    start = time.monotonic()
    with pytest.raises(BaselineError) as info:
        bl.update(path, {OTHER: ENTRY}, set(), lock_dir=lock_dir, lock_timeout=0.5)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert f"baseline {path} is being updated by another process (pid {pid})" in message
    assert "gave up after waiting 0.5 s" in message
    assert "let that run finish" in message
    assert path.read_bytes() == before


def test_lock_lives_in_the_cache_dir_and_leaves_nothing_beside_the_baseline(tmp_path: Path) -> None:
    path, lock_dir = tmp_path / "repo" / "b.toml", tmp_path / "cache"
    bl.update(path, {KEY: ENTRY}, set(), lock_dir=lock_dir)
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.toml"]
    lock = bl.lock_path(path, lock_dir)
    assert lock.parent == lock_dir / "locks"
    assert not lock.with_name(lock.name + ".pid").exists()
    bl.update(path, {KEY: ENTRY}, set(), lock_dir=lock_dir)  # and it can be taken again


def test_default_lock_dir_is_the_compile_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "repo" / "b.toml"
    bl.update(path, {KEY: ENTRY}, set())
    assert (tmp_path / "cache" / "locks").is_dir()
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.toml"]


# -- baseline write failures ----------------------------------------------------------------------


def test_read_only_baseline_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    atomic_write(path, bl.dumps(bl.Baseline({KEY: ENTRY})))
    path.chmod(0o444)
    before = path.read_bytes()
    with pytest.raises(BaselineError, match=rf"baseline {path} is read-only \(mode 444\)\. Fix: chmod u\+w"):
        bl.update(path, {OTHER: ENTRY}, set(), lock_dir=tmp_path / "cache")
    assert path.read_bytes() == before
    assert path.stat().st_mode & 0o777 == 0o444
    # Nothing to change: nothing to refuse.
    assert bl.update(path, {KEY: ENTRY}, set(), lock_dir=tmp_path / "cache").unchanged == 1


@pytest.mark.parametrize("version", [1, 2])
def test_a_development_format_is_refused_in_one_line_and_never_rewritten(
    tmp_path: Path, version: int
) -> None:
    """Versions 1 and 2 were written before any release: not read, and an update leaves the file alone."""
    path = tmp_path / "b.toml"
    text = bl.dumps(bl.Baseline({KEY: ENTRY})).replace("version = 3", f"version = {version}")
    if version == 1:  # version 1 wrote no version line
        text = text.replace("version = 1\n", "")
    path.write_text(text)
    message = (
        rf"b\.toml: baseline format version {version}, written by a development version of pytest-regbudget "
        r"before 0\.1\.0; this one reads version 3 only\. Fix: delete the file and record it anew with "
        r"pytest --regbudget-update"
    )
    with pytest.raises(BaselineError, match=message):
        bl.load(path)
    with pytest.raises(BaselineError, match=message):
        bl.update(path, {KEY: ENTRY}, set(), lock_dir=tmp_path / "cache")
    assert path.read_text() == text


def test_an_empty_file_is_an_empty_baseline(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("")
    assert bl.load(path) == bl.Baseline()
    assert bl.update(path, {KEY: ENTRY}, set(), lock_dir=tmp_path / "cache").added == 1
    assert bl.load(path) == bl.Baseline({KEY: ENTRY})


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a directory without write permission")
def test_unwritable_directory(tmp_path: Path) -> None:  # pragma: no cover - CI runs as a normal user
    directory = tmp_path / "repo"
    path = directory / "b.toml"
    atomic_write(path, bl.dumps(bl.Baseline({KEY: ENTRY})))
    directory.chmod(0o555)
    try:
        with pytest.raises(BaselineError, match=rf"cannot write baseline {path}: Permission denied"):
            bl.update(path, {OTHER: ENTRY}, set(), lock_dir=tmp_path / "cache")
    finally:
        directory.chmod(0o755)
    assert bl.load(path) == bl.Baseline({KEY: ENTRY})


def test_unwritable_directory_as_any_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same as the user would see it, for a run as root (which may write anywhere)."""
    path = tmp_path / "repo" / "b.toml"
    atomic_write(path, bl.dumps(bl.Baseline({KEY: ENTRY})))

    def denied(*args: Any, **kwargs: Any) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, "Permission denied", str(path.parent))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(BaselineError) as info:
        bl.update(path, {OTHER: ENTRY}, set(), lock_dir=tmp_path / "cache")
    assert str(info.value) == (
        f"cannot write baseline {path}: Permission denied; the file is as it was. Fix: make {path.parent} "
        f"writable (chmod u+w {path.parent}), or set --regbudget-baseline elsewhere"
    )
    assert bl.load(path) == bl.Baseline({KEY: ENTRY})


def test_full_disk_keeps_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "repo" / "b.toml"
    atomic_write(path, bl.dumps(bl.Baseline({KEY: ENTRY})))
    before = path.read_bytes()
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd: int, *args: Any, **kwargs: Any) -> None:
            self.fh = real_fdopen(fd, *args, **kwargs)

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdopen", Full)
    with pytest.raises(BaselineError, match=r"No space left on device; the file is as it was\. Fix: free"):
        bl.update(path, {OTHER: ENTRY}, set(), lock_dir=tmp_path / "cache")
    assert path.read_bytes() == before
    assert _leftovers(path.parent) == ["b.toml"]


# SIGKILL during updates: tests/core/test_baseline_durability.py.


def test_file_size_limit_keeps_the_file(tmp_path: Path) -> None:
    """A real write failure from the kernel (EFBIG under RLIMIT_FSIZE), in a child process."""
    path = tmp_path / "repo" / "b.toml"
    atomic_write(path, bl.dumps(bl.Baseline({KEY: ENTRY})))
    before = path.read_bytes()
    code = textwrap.dedent(
        f"""
        import resource, signal, sys
        from pathlib import Path
        from pytest_regbudget.core import baseline as bl
        from pytest_regbudget.core.errors import BaselineError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before)}, {len(before)}))
        entry = bl.load(Path(sys.argv[1])).entries[{KEY!r}]
        fresh = {{("kernels/k%d.cu" % i, "k", "-", "sm_90"): entry for i in range(50)}}
        try:
            bl.update(Path(sys.argv[1]), fresh, set(), lock_dir=Path(sys.argv[2]))
        except BaselineError as exc:
            print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"cannot write baseline {path}: File too large; the file is as it was" in out
    assert "ulimit -f" in out
    assert path.read_bytes() == before
    assert _leftovers(path.parent) == ["b.toml"]
