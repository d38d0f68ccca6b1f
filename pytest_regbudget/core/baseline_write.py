"""How an update writes the baseline file among other processes: the lock they all take (where it lives,
how long a waiter waits, whom it names when it gives up), where a path from the repository may lead
(`confine`), the refusal of a file made read-only, what a failed write says, and the file's bytes as text and
back (UTF-8 only). baseline.py's `update` writes through these.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

from ..util.files import read_regular, ready_lock, replace_in
from .errors import BaselineError


def lock_path(path: Path, lock_dir: Path) -> Path:
    """The lock of baseline `path`: in `lock_dir` (the compile cache), keyed by the baseline's absolute
    path. Not beside the baseline, where it would be an untracked file in the user's repository, and not in
    a shared temp dir under a name anyone can guess."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return lock_dir / "locks" / f"baseline-{digest}.lock"


@contextlib.contextmanager
def locked(path: Path, lock_dir: Path, timeout: float) -> Iterator[None]:
    """An exclusive lock shared by every pytest process that writes `path`, waited for at most `timeout`
    seconds. The holder writes its pid beside the lock (`<lock>.pid`), so a waiter that gives up can say
    whom it waited for: a lock file's own content is not reliable on every platform."""
    lock_file = lock_path(path, lock_dir)
    pid_file = lock_file.with_name(lock_file.name + ".pid")
    import filelock  # only an update locks: a plain run does not pay for importing it

    try:
        ready_lock(lock_dir, lock_file)
        lock = filelock.FileLock(str(lock_file), timeout=timeout)
        lock.acquire()
    except filelock.Timeout:
        raise BaselineError(
            f"baseline {path} is being updated by {_holder(pid_file)}; gave up after waiting {timeout:g} s "
            f"for its lock {lock_file}. Fix: let that run finish (or stop it), then update again"
        ) from None
    except OSError as exc:
        raise BaselineError(
            f"cannot lock baseline {path}: {lock_file}: {exc.strerror or exc}. Fix: make "
            f"{lock_file.parent} writable, or set REGBUDGET_CACHE_DIR to a writable directory"
        ) from None
    try:
        with contextlib.suppress(OSError):  # the pid only makes a waiter's message better
            replace_in(lock_dir, pid_file, f"{os.getpid()} {socket.gethostname()}\n")
        yield
    finally:
        # Before the release: the next holder's pid must not be deleted by this one.
        with contextlib.suppress(OSError):
            pid_file.unlink()
        lock.release()


def _holder(pid_file: Path) -> str:
    try:
        pid, _, host = read_regular(pid_file).decode("utf-8", "replace").strip().partition(" ")
    except OSError:
        return "another process (pid unknown)"
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"another process (pid {pid}{where})"


def confine(
    path: Path, rootdir: Path, *, chosen: bool = False, option: str = "--regbudget-baseline="
) -> None:
    """Refuse (BaselineError) to update the baseline at `path` where it leads out of the project: the rootdir,
    or the git work tree that holds it, once every link is followed (the file's own, a directory's on the
    way, a dangling one's target).

    A path that comes from the repository (an ini file's `regbudget_baseline`, the default name, a committed
    link) is the data of whoever wrote the repository: a pull request must not make a later update write
    ~/.bashrc. One the user typed (`chosen`: --regbudget-baseline, `regbudget merge --update`, spelt
    `option` in the fix) may lead anywhere, as typed; but where it is typed inside the project, a link it
    meets there is the repository's, so its target must stay inside too. Run before anything is made (no
    lock, no folder, no temporary file)."""
    homes = [Path(os.path.realpath(rootdir))]
    top = work_tree(homes[0])
    if top is not None:
        homes.append(top)
    typed = Path(os.path.abspath(path))
    if chosen and not any(_below(typed, h) for h in (*homes, Path(os.path.abspath(rootdir)))):
        return
    target = Path(os.path.realpath(path))
    if any(_below(target, h) for h in homes):
        return
    where = " or ".join(str(h) for h in homes)
    raise BaselineError(
        f"baseline {path} leads to {target}, outside the project ({where}): nothing written. A link or an "
        "ini setting in the repository may not lead an update out of it. Fix: point it inside the project, "
        f"or name the file yourself: {option}{target}"
    )


def work_tree(folder: Path) -> Path | None:
    """The git work tree that holds `folder` (a real path): the nearest directory with a `.git` (a
    directory, or a worktree's or submodule's file), found without running git."""
    for here in (folder, *folder.parents):
        if os.path.lexists(here / ".git"):
            return here
    return None


def _below(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_writable(path: Path) -> None:
    """Refuse to replace a file the user made read-only: os.replace would ignore its mode (and root
    ignores every mode), so the check is ours."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if not mode & 0o222 or not os.access(path, os.W_OK):
        raise BaselineError(
            f"baseline {path} is read-only (mode {stat.S_IMODE(mode):o}). Fix: chmod u+w {path} to let "
            "--regbudget-update write it, or run without --regbudget-update"
        )


def encoded(path: Path, text: str) -> bytes:
    """The file's bytes (UTF-8, as TOML is); BaselineError naming the line where `text` holds what UTF-8
    cannot: a lone surrogate, which a file name's bytes that are not UTF-8 leave in a test id."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        shown = text.splitlines()[line - 1].strip().encode("utf-8", "surrogateescape")
        raise BaselineError(
            f"cannot write baseline {path}: line {line} ({str(shown)[2:-1]}) is not UTF-8, which TOML must "
            "be (a file name's bytes?); the file is as it was. Fix: rename the file"
        ) from None


def write_failure(path: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space on the disk that holds {path.parent}"
    elif exc.errno == errno.EFBIG:
        fix = "raise the file size limit (ulimit -f)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = f"make {path.parent} writable (chmod u+w {path.parent}), or set --regbudget-baseline elsewhere"
    else:
        fix = f"check that {path.parent} is a writable directory"
    return f"cannot write baseline {path}: {reason}; the file is as it was. Fix: {fix}"
