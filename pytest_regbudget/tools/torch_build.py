"""A PyTorch extension's own nvcc commands, from its setup.py: `setup.py build_ext` run with this interpreter,
stopped where torch's `BuildExtension` has written an extension's `build.ninja` and would run ninja
(`torch.utils.cpp_extension._run_ninja_build`). Nothing is compiled or linked; each file's text is kept.

Owns the bootstrap that runs setup.py so (`capture`), and the cache of what it captured: a checksummed
document in the compile cache directory (`torch-extensions/`), keyed by setup.py's content and folder, the
interpreter, torch's version and `setup_env`, so that a torch upgrade's flags are followed and a warm run
starts no Python. Reading the files is project/ninja.py's.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from msgspec import Struct

from ..core.errors import ManifestError
from ..util.files import file_sha256, json_digest, read_document, write_document

FORMAT = 1
TIMEOUT = 600.0  # seconds: a setup.py may import heavy modules, but compiles nothing here
CACHE_FOLDER = "torch-extensions"

# Runs in the child: torch's build stopped where it would run ninja, each build.ninja's text kept, nothing
# linked; then setup.py run as `python setup.py build_ext ...` runs it (its folder first on sys.path).
_BOOTSTRAP = r"""
import json, os, runpy, sys
out, picked = sys.argv[1], json.loads(sys.argv[2])
sys.argv = sys.argv[3:]
import torch.utils.cpp_extension as ce
captured = []
def _captured(build_directory, verbose, error_prefix, *args, **kwargs):
    with open(os.path.join(build_directory, "build.ninja"), encoding="utf-8") as fh:
        captured.append({"name": current[0], "text": fh.read(), "directory": build_directory})
def _no_link(*args, **kwargs):
    return None
ce._run_ninja_build = _captured
ce.is_ninja_available = lambda: True
current = [""]
_build_extensions = ce.BuildExtension.build_extensions
def build_extensions(self):
    names = [e.name for e in self.extensions]
    if picked:
        missing = [p for p in picked if p not in names and not any(n.rsplit(".", 1)[-1] == p for n in names)]
        if missing:
            sys.stderr.write("REGBUDGET-MISSING " + json.dumps([missing, names]) + "\n")
            sys.exit(3)
        self.extensions = [
            e for e in self.extensions if e.name in picked or e.name.rsplit(".", 1)[-1] in picked
        ]
    self.compiler.link = self.compiler.link_shared_object = _no_link
    _build_extension = self.build_extension
    def one(ext):
        current[0] = ext.name
        return _build_extension(ext)
    self.build_extension = one
    return _build_extensions(self)
ce.BuildExtension.build_extensions = build_extensions
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exc:
    if exc.code not in (None, 0):
        raise
with open(out, "w", encoding="utf-8") as fh:
    json.dump({"torch": __import__("torch").__version__, "files": captured}, fh)
"""


class Captured(Struct, frozen=True):
    name: str  # the extension (ext_modules entry) it belongs to
    text: str  # the build.ninja torch wrote for it
    directory: str  # where torch wrote it: the file's relative paths are relative to it


class Capture(Struct, frozen=True):
    torch: str
    files: tuple[Captured, ...]


def torch_version() -> str | None:
    """torch's version as installed for this interpreter (read from its metadata, without importing it:
    that takes seconds), None without torch."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def _key(
    setup_py: Path, extensions: Sequence[str], env: Mapping[str, str], torch: str, cuda_home: Path | None
) -> str:
    return json_digest(
        [
            FORMAT,
            os.path.realpath(setup_py),
            file_sha256(setup_py),
            sys.executable,
            torch,
            list(extensions),
            sorted(env.items()),
            os.environ.get("CUDA_HOME", ""),
            str(cuda_home),  # torch's CUDA_HOME where the environment sets none: in the flags it writes
            os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
        ]
    )


def capture(
    setup_py: Path,
    extensions: Sequence[str],
    env: Mapping[str, str],
    cache_dir: Path | None,
    cuda_home: Path | None,
    label: str,
) -> Capture:
    """The build.ninja torch writes for each extension of `setup_py` (those named in `extensions`, or all),
    with `env` set. From the cache where it holds them. ManifestError, naming `label`, where torch is not
    installed or setup.py fails."""
    torch = torch_version()
    if torch is None:
        raise ManifestError(
            f"{label}: torch_extension runs setup.py with torch's BuildExtension, and torch is not installed "
            f"for {sys.executable}: pip install torch (a CPU build is enough: nothing is compiled), or point "
            'build_ninja at a build.ninja written elsewhere (build_ninja = "build/temp.*/build.ninja")'
        )
    key = _key(setup_py, extensions, env, torch, cuda_home)
    path = None if cache_dir is None else cache_dir / CACHE_FOLDER / f"{key}.json"
    if path is not None:
        try:
            return read_document(str(path), Capture, FORMAT)
        except (OSError, ValueError):
            pass
    found = _run(setup_py, extensions, env, cuda_home, label)
    if path is not None and cache_dir is not None:
        # A cache that cannot be written only means that the next run captures again.
        with contextlib.suppress(OSError):
            write_document(str(path), found, FORMAT, root=cache_dir)
    return found


def _run(
    setup_py: Path, extensions: Sequence[str], env: Mapping[str, str], cuda_home: Path | None, label: str
) -> Capture:
    child = {**os.environ, **env}
    if cuda_home is not None and not child.get("CUDA_HOME") and not child.get("CUDA_PATH"):
        # A CPU machine has no CUDA_HOME for torch to find: the run's own nvcc's toolkit stands for it (its
        # include dir is the one the plugin's nvcc searches anyway).
        child["CUDA_HOME"] = str(cuda_home)
    # Without a GPU, torch would ask the driver for the archs: they are replaced by the run's own anyway.
    child.setdefault("TORCH_CUDA_ARCH_LIST", "8.0")
    with tempfile.TemporaryDirectory(prefix="regbudget-torch-") as tmp:
        out = Path(tmp) / "captured.json"
        cmd = [
            sys.executable,
            "-c",
            _BOOTSTRAP,
            str(out),
            json.dumps(list(extensions)),
            setup_py.name,
            "build_ext",
            "--build-temp",
            str(Path(tmp) / "temp"),
            "--build-lib",
            str(Path(tmp) / "lib"),
        ]
        try:
            done = subprocess.run(
                cmd,
                cwd=setup_py.parent,
                env=child,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ManifestError(f"{label}: {setup_py} build_ext took over {TIMEOUT:g} s (stopped)") from None
        log = (done.stdout + done.stderr).strip()
        missing = [line for line in done.stderr.splitlines() if line.startswith("REGBUDGET-MISSING ")]
        if missing:
            names, known = json.loads(missing[0].split(" ", 1)[1])
            raise ManifestError(
                f"{label}, key 'extensions': {', '.join(map(repr, names))} is not an extension of "
                f"{setup_py.name} (its ext_modules: {', '.join(known) or 'none'})"
            )
        if done.returncode != 0 or not out.is_file():
            tail = "\n".join(log.splitlines()[-25:])
            raise ManifestError(
                f"{label}: `{Path(sys.executable).name} {setup_py.name} build_ext` (stopped before ninja) "
                f"failed with exit status {done.returncode}:\n{tail}\nFix setup.py's build (setup_env sets "
                "its switches), or point build_ninja at a build.ninja it wrote"
            )
        data = json.loads(out.read_text(encoding="utf-8"))
    files = tuple(Captured(f["name"], f["text"], f["directory"]) for f in data["files"])
    if not files:
        raise ManifestError(
            f"{label}: {setup_py.name} build_ext wrote no build.ninja: it builds no CUDAExtension with "
            "torch's BuildExtension (cmdclass={'build_ext': BuildExtension})"
        )
    return Capture(str(data["torch"]), files)
