"""How an NVIDIA tool (ptxas, nvcc, nvdisasm, cuobjdump) is run, and what slow probes answered.

`run_tool` runs one under a timeout, in a process group of its own that is killed whole (on a timeout, or
by `kill_running_tools` when the session is interrupted); `start_failure` says why one could not be
started. `ToolMemo` keeps the answers of slow probes (a toolkit's discovery, `nvcc --version`) in one small
file, trusted while the files they were made from keep their stat, so that a warm run starts no process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..util.files import parse_nested, read_regular, replace_in

# Tool runs in progress, in any thread: kill_running_tools stops them when the run is interrupted.
_running: set[subprocess.Popen[bytes]] = set()
_running_lock = threading.Lock()
_POSIX = os.name == "posix"
# Tool runs started by each thread: the compile pool tells a build that ran a compiler from a cache hit.
_started = threading.local()


def runs_in_this_thread() -> int:
    """How many tools this thread has started so far (see `run_tool`)."""
    count: int = getattr(_started, "count", 0)
    return count


def run_tool(cmd: Sequence[str], timeout: float) -> tuple[int, str]:
    """(exit code, stdout + stderr) of a tool run that must finish within `timeout` seconds.

    The tool runs in a session of its own, so that on a timeout (or Ctrl-C) the whole process group is
    killed: a wrapper script's children, or nvcc's cicc and ptxas, would otherwise live on and keep the
    pipes open. Output is decoded leniently: a path or message in another encoding must not crash the run.
    Raises subprocess.TimeoutExpired after the kill, and OSError when the tool cannot be started.
    """
    _started.count = runs_in_this_thread() + 1
    with subprocess.Popen(
        list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=_POSIX
    ) as proc:
        with _running_lock:
            _running.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            _kill_group(proc)
            # A grandchild that left the group (setsid) may still hold the pipes: close them rather than
            # read them to the end, and reap the child.
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()
            raise
        finally:
            with _running_lock:
                _running.discard(proc)
    return proc.returncode, (out + err).decode(errors="replace")


def kill_running_tools() -> None:
    """Kill every tool run in progress, with its children, in every thread (each run then returns its
    exit status, a signal). For an interrupted session: a tool in a session of its own does not get the
    terminal's Ctrl-C, and a compile thread would wait for it to finish."""
    with _running_lock:
        running = list(_running)
    for proc in running:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if _POSIX:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            pass  # the group is gone already; the child may still need its own signal
    proc.kill()


def start_failure(exc: OSError, tool: Path | str) -> str:
    """Why a tool could not be started, with the fix."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, PermissionError):
        return f"{reason} (it is not executable). Fix: chmod +x {tool}, or reinstall the toolkit"
    if isinstance(exc, FileNotFoundError):
        return f"{reason}. Fix: reinstall the toolkit"
    return f"{reason}. Fix: check that {tool} is a program for this machine, or reinstall the toolkit"


def _stat_of(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


class ToolMemo:
    """Answers of slow probes (a toolkit's discovery, `nvcc --version`) kept in one small file, trusted
    while every file and directory they were made from has the stat it had (size, times, inode). The file
    lives in the compile cache; a damaged one only means probing again. Without a path: memory only."""

    def __init__(self, path: Path | None, root: Path | None = None) -> None:
        self.path = path
        self.root = root  # the cache directory that holds `path` (else its own folder), see replace_in
        self._records: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def _all(self) -> dict[str, Any]:
        if self._records is None:
            self._records = {}
            if self.path is not None:
                with contextlib.suppress(OSError, ValueError):
                    doc = parse_nested(json.loads, read_regular(self.path).decode("utf-8"))
                    if (
                        isinstance(doc, dict)
                        and doc.get("format") == 1
                        and isinstance(doc.get("probes"), dict)
                    ):
                        self._records = doc["probes"]
        return self._records

    def get(self, key: str) -> Any:
        """The answer stored for `key`, if everything it depends on is as it was; else None."""
        with self._lock:
            record = self._all().get(key)
        if not isinstance(record, dict) or not isinstance(record.get("inputs"), list):
            return None
        for entry in record["inputs"]:
            if not (isinstance(entry, list) and len(entry) == 2 and _stat_of(Path(entry[0])) == entry[1]):
                return None
        return record.get("value")

    def put(self, key: str, value: object, inputs: Sequence[Path]) -> None:
        """Remember `value` while `inputs` keep their stat (a missing one: while it is missing)."""
        record = {"value": value, "inputs": [[str(p), _stat_of(p)] for p in inputs]}
        with self._lock:
            records = self._all()
            records[key] = record
            text = json.dumps({"format": 1, "probes": records})
        if self.path is None:
            return
        # Written whole and renamed into place; a read-only cache only means probing again next run.
        with contextlib.suppress(OSError):
            replace_in(self.root or self.path.parent, self.path, text)

    def version(self, tool: Path, probe: Callable[[], str]) -> str:
        """`probe()` (a tool's --version), remembered while the tool's file is unchanged."""
        key = json.dumps(["version", str(tool)])
        known = self.get(key)
        if isinstance(known, str):
            return known
        answer = probe()
        self.put(key, answer, [tool])
        return answer

    def names(self, kind: str, tool: Path, probe: Callable[[], list[str]]) -> list[str]:
        """`probe()` (a list a tool prints, e.g. `nvcc --list-gpu-code`), remembered while the tool's file is
        unchanged. An empty answer (the tool could not say) is not remembered: the next run asks again."""
        key = json.dumps([kind, str(tool)])
        known = self.get(key)
        if isinstance(known, list) and known and all(isinstance(n, str) for n in known):
            return known
        answer = probe()
        if answer:
            self.put(key, answer, [tool])
        return answer
