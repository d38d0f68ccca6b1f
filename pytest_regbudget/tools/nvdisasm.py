"""Running nvdisasm over a measured cubin: finding it, and turning its listing into `SassReport`s, read
once per cubin and kept.

The parsing is sass.py's (pure); this module is the part that needs a toolkit and a subprocess. A cubin is
disassembled whole, once: every kernel of its unit is parsed from that one listing, kept for the run (in
memory) and, with a cache directory, on disk under `sass/`, keyed by the cubin's SHA-256 and nvdisasm's
(its contents, remembered by its stat): a warm run, or the next kernel of the unit, runs no nvdisasm.
Why whole rather than one function at a time (`nvdisasm -fun`): docs/speed.md, "The SASS of a unit".

The live registers come from a second listing, `nvdisasm -c -plr -lrm count`, run beside the first: with
-plr nvdisasm ignores -g and -gi (it says so), so one run cannot give both the lines and the life ranges.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import subprocess
import tempfile
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..core.errors import SassError
from ..core.liveness import PeakLive
from ..core.sass import parse_sass_functions, without_spills
from ..core.sass_report import SassReport, StatedTrips
from ..util.files import file_sha256, read_document, settled, sha256_hex, write_document
from .running import run_tool, start_failure
from .toolkit import Toolkit, find_tool

SASS_FIX = "pip install 'pytest-regbudget[sass]' (the nvidia-cuda-nvdisasm wheel)"

# The documents' own version: a change of SassReport or of how a listing is read changes it (2: Blackwell's
# branches with a predicate operand, loops named by their compare, `unread`; 3: `peak_live`).
_FORMAT = 3
_FOLDER = "sass"
# Listings read in this process, by (cubin digest, nvdisasm digest): a unit's kernels are judged one by one.
_KEPT = 64
_read: OrderedDict[tuple[str, str], dict[str, SassReport]] = OrderedDict()
_lock = threading.Lock()
# (nvdisasm's digest, the cubin's ELF OS/ABI byte) that gave no life ranges: nvdisasm 13 prints none for a
# CUDA 12 cubin for sm_90 or older ("Cannot print life ranges as flow analysis is disabled"), so such pairs
# are not asked again.
_NO_LIFE_RANGES: set[tuple[str, int]] = set()
_OSABI = 7  # e_ident[EI_OSABI]: 0x33 in CUDA 12's cubins up to sm_90, 0x41 in CUDA 13's and Blackwell's


def find_nvdisasm(toolkit: Toolkit | None) -> Path | None:
    """The toolkit's own nvdisasm, else the CUDA 13 wheel's (the `sass` extra), else PATH's."""
    if toolkit is not None and toolkit.nvdisasm is not None:
        return toolkit.nvdisasm
    return find_tool("nvdisasm", None, "cuda_nvdisasm")


def read_sass(
    nvdisasm: Path,
    cubin: bytes,
    function: str,
    *,
    spills: bool = True,
    cache_dir: Path | None = None,
    timeout: float = 120.0,
    trips: StatedTrips = None,
) -> SassReport:
    """The SASS facts of `function` in `cubin`: from this run's or the cache directory's reading of the
    cubin, else from one `nvdisasm -c -gi` over it (and one `-plr`: `_listings`), which every function of
    it is then read from. `spills`: whether ptxas counted spill bytes (see parse_sass). SassError if
    nvdisasm fails or the cubin has no such function. `trips`: a `loop_trips` budget's counts, which the
    estimate weighs loops by (a reading with them is kept apart from one without)."""
    folder = None if cache_dir is None else cache_dir / _FOLDER
    tool = _tool_digest(nvdisasm, folder)
    stated = "" if trips is None else f"|trips={trips!r}"
    key = (_cubin_digest(cubin), tool + stated)
    with _lock:
        functions = _read.get(key)
        if functions is None:
            functions = _load(key, folder)
            if functions is None:
                functions = parse_sass_functions(*_listings(nvdisasm, tool, cubin, timeout), trips=trips)
                _store(key, folder, functions)
            _read[key] = functions
            while len(_read) > _KEPT:
                _read.popitem(last=False)
        else:
            _read.move_to_end(key)
    found = functions.get(function)
    if found is None:
        raise SassError(f"nvdisasm output has no function {function!r} (it has: {', '.join(functions)})")
    return found if spills else without_spills(found)


def read_peak(
    nvdisasm: Path, cubin: bytes, function: str, *, cache_dir: Path | None = None, timeout: float = 120.0
) -> PeakLive | None:
    """The peak of live registers of `function` (read_sass's), for a kernel whose SASS is not read otherwise
    (a failing register budget, `regbudget explain`); None where nvdisasm gives no life ranges of such a
    cubin (asked once a process), or fails."""
    folder = None if cache_dir is None else cache_dir / _FOLDER
    if (_tool_digest(nvdisasm, folder), _abi(cubin)) in _NO_LIFE_RANGES:
        return None  # not worth a listing of the code alone
    try:
        return read_sass(nvdisasm, cubin, function, cache_dir=cache_dir, timeout=timeout).peak_live
    except SassError:
        return None  # the peak only adds to a message: a listing that cannot be read takes nothing from it


def _abi(cubin: bytes) -> int:
    return cubin[_OSABI] if len(cubin) > _OSABI else -1


def _listings(nvdisasm: Path, tool: str, cubin: bytes, timeout: float) -> tuple[str, str | None]:
    """`nvdisasm -c -gi` (code only, with line info and inlining) over the whole cubin, and `-c -plr -lrm
    count` (the live registers at each instruction), run side by side: two runs cost about one's wall time.
    The life ranges are None where nvdisasm gives none (a CUDA 12 cubin for sm_90 under nvdisasm 13) or
    fails: they only add the peak, and the code's listing stands without them."""
    with tempfile.TemporaryDirectory(prefix="regbudget-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        pair = (tool, _abi(cubin))
        with ThreadPoolExecutor(1) as pool:
            ranges = (
                None
                if pair in _NO_LIFE_RANGES
                else pool.submit(_run, nvdisasm, ["-plr", "-lrm", "count"], path, timeout)
            )
            # -gi: line info with each inlined helper's call site, so loops are named by the kernel's lines.
            code = _run(nvdisasm, ["-gi"], path, timeout)
            try:
                life = None if ranges is None else ranges.result()
            except SassError:
                life = None
    if ranges is not None and life is None:
        _NO_LIFE_RANGES.add(pair)
    return code, life


def _run(nvdisasm: Path, flags: list[str], path: Path, timeout: float) -> str:
    """`nvdisasm -c FLAGS` over the cubin at `path`: its listing, or SassError."""
    try:
        returncode, output = run_tool([str(nvdisasm), "-c", *flags, str(path)], timeout)
    except subprocess.TimeoutExpired:
        raise SassError(f"nvdisasm did not finish within {timeout:g} s") from None
    except OSError as exc:
        raise SassError(f"cannot run nvdisasm: {start_failure(exc, nvdisasm)}") from None
    if returncode != 0:
        raise SassError(f"nvdisasm ({nvdisasm}) failed (exit {returncode}): {output.strip()}")
    return output


def _document(key: tuple[str, str], folder: Path) -> str:
    return str(folder / f"sass-{sha256_hex(f'{_FORMAT}|{key[0]}|{key[1]}'.encode())}.json")


def _load(key: tuple[str, str], folder: Path | None) -> dict[str, SassReport] | None:
    """The cubin's functions as a run kept them; None where none was kept (or it is damaged)."""
    if folder is None:
        return None
    try:
        return read_document(_document(key, folder), dict[str, SassReport], _FORMAT)
    except (OSError, ValueError):
        return None


def _store(key: tuple[str, str], folder: Path | None, functions: dict[str, SassReport]) -> None:
    if folder is not None:
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs a rerun of nvdisasm
            write_document(_document(key, folder), functions, _FORMAT, root=folder.parent)


# The digest of the last cubins read: a unit's kernels come one after another with the same bytes object.
_digests: OrderedDict[int, tuple[bytes, str]] = OrderedDict()


def _cubin_digest(cubin: bytes) -> str:
    with _lock:
        found = _digests.get(id(cubin))
        if found is not None and found[0] is cubin:
            return found[1]
    digest = hashlib.sha256(cubin).hexdigest()
    with _lock:
        _digests[id(cubin)] = (cubin, digest)
        while len(_digests) > 8:
            _digests.popitem(last=False)
    return digest


def _tool_digest(tool: Path, folder: Path | None) -> str:
    """nvdisasm's identity: its contents' SHA-256 (not its path or times: a reinstalled wheel is the same
    nvdisasm), remembered by its stat in the process and in the cache directory."""
    try:
        st = tool.stat()
    except OSError as exc:
        raise SassError(f"cannot run nvdisasm: {start_failure(exc, tool)}") from None
    if not settled(st):
        return file_sha256(tool)  # changed within a timestamp tick: not remembered by this stat
    return _remembered_digest((str(tool.resolve()), *_stat_stamp(st)), folder)


def _stat_stamp(st: os.stat_result) -> tuple[int, ...]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


@functools.lru_cache(maxsize=16)
def _remembered_digest(stamp: tuple[str | int, ...], folder: Path | None) -> str:
    if folder is None:
        return file_sha256(Path(str(stamp[0])))
    doc = str(folder / f"tool-{sha256_hex(json.dumps(stamp).encode())}.json")
    with contextlib.suppress(OSError, ValueError):
        return read_document(doc, str, _FORMAT)
    digest = file_sha256(Path(str(stamp[0])))
    with contextlib.suppress(OSError):
        write_document(doc, digest, _FORMAT, root=folder.parent)
    return digest
