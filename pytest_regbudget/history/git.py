"""The versions of one file on the current branch: one `git log` (renames followed) for the commits and the
blob each left, one `git cat-file --batch` for the blobs not read before. A process per commit would cost a
second per 100 commits before any parsing.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
from calendar import monthrange
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

from msgspec import Struct

from ..core import baseline as bl
from ..core.errors import BaselineError, RegbudgetError
from ..core.trend import Commit, Sample, Version, samples_of
from ..util.files import read_document, write_document

# `fetch-depth: 0` is what actions/checkout needs for the whole history (its default is 1 commit).
SHALLOW_FIX = (
    "the history stops where the clone does: fetch the rest with `git fetch --unshallow`, or in GitHub "
    "Actions give actions/checkout `fetch-depth: 0`"
)
_NULL_BLOB = "0" * 40
_RECORD, _FIELD = "\x1e", "\x1f"


class GitError(RegbudgetError):
    """git is missing, the directory is no repository, or git refused; the message says which."""


class Versions(Struct, frozen=True):
    versions: tuple[Version, ...]  # oldest first
    shallow: bool  # the clone is shallow: the first version listed may not be the file's first
    path: str  # the file's path in the repository today
    # The last version before a --since range, the one its first row compares with: a kernel that existed
    # before the range is not "added" in it.
    base: Version | None = None


def _git(root: Path, args: Sequence[str], timeout: float = 120.0) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH): history is read out of git") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} did not finish within {timeout:g} s") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise GitError(f"git {' '.join(args[:2])} failed: {message}")
    return done.stdout.decode(errors="replace")


def repository_of(path: Path) -> tuple[Path, str]:
    """(the work tree's root, `path` relative to it in git's spelling). GitError outside a repository."""
    folder = path.parent if not path.is_dir() else path
    if not folder.is_dir():
        raise GitError(f"{path}: no such directory")
    try:
        top = _git(folder, ["rev-parse", "--show-toplevel"]).strip()
    except GitError as exc:
        raise GitError(f"{path} is not in a git repository ({exc})") from None
    root = Path(top)
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        raise GitError(f"{path} is outside the repository at {root}") from None
    return root, relative.as_posix()


def _revision(root: Path, text: str) -> str | None:
    """The commit `text` names (a hash, a tag, HEAD~10, `:/message`), None where it names none. Looked up
    whole, then peeled to its commit: `:/message^{commit}` would search for a message ending in `^{commit}`.
    After --end-of-options, so that a value such as `--all` is a name, never an option of git's."""
    try:
        found = _git(root, ["rev-parse", "--verify", "--quiet", "--end-of-options", text]).strip()
        return _git(root, ["rev-parse", "--verify", "--quiet", f"{found}^{{commit}}"]).strip() or None
    except GitError:
        return None


def _selected(root: Path, since: str | None, until: str | None) -> set[str] | None:
    """The branch's commits in the range --since/--until give (each a revision or a date, `_date`), or None
    for all. Selected apart from the file's log, which always starts at HEAD: a renamed file has its old
    name before the rename, and `git log --follow` only sees the rename if it walks through it."""
    if since is None and until is None:
        return None
    args = ["rev-list", "--first-parent"]
    start, end = None, "HEAD"
    for flag, value, age in (("since", since, "max-age"), ("until", until, "min-age")):
        if value is None:
            continue
        commit = _revision(root, value)
        if commit is None:
            # A time in seconds, not the text: git reads a date it does not know as some other date.
            args.append(f"--{age}={_date(flag, value)}")
        elif flag == "since":
            start = commit
        else:
            end = commit
    listed = _git(root, [*args, f"{start}..{end}" if start else end])
    return set(listed.split())


_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_AGO = re.compile(r"(\d{1,6})[\s.]+(second|minute|hour|day|week|month|year)s?(?:[\s.]+ago)?", re.IGNORECASE)
DATE_FORMS = '2026-01-31, 2026-01-31T12:00:00+02:00, "2 weeks ago", yesterday'


def _date(flag: str, value: str, now: datetime | None = None) -> int:
    """`value` as seconds since 1970: an ISO 8601 date or time (local time where it names no zone, as git
    reads one), "N units ago" (seconds to years; `2.weeks.ago` as git spells it), `yesterday` or `now`.
    GitError for anything else: git takes any text it cannot parse as some date (`v9.9`, a tag that does not
    exist, is September 9th; `2100-01-01`, past its last year, is today), and the range would be wrong with
    no word said."""
    now = now or datetime.now().astimezone()
    text = value.strip()
    match = _AGO.fullmatch(text)
    if text.lower() in ("now", "yesterday"):
        stamp = now.timestamp() - (86400 if text.lower() == "yesterday" else 0)
    elif match and match[2].lower() in _UNITS:
        stamp = now.timestamp() - int(match[1]) * _UNITS[match[2].lower()]
    elif match:
        stamp = _months_before(now, int(match[1]) * (12 if match[2].lower() == "year" else 1)).timestamp()
    else:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise GitError(
                f"--{flag} {value!r} is neither a revision of this repository nor a date (a commit, a tag, "
                f"HEAD~10, :/message; {DATE_FORMS})"
            ) from None
        # Before 1970 is 1970 (git has no earlier time); a naive time of year 1 has no local time to take.
        stamp = 0 if when.year < 1970 else (when if when.tzinfo else when.astimezone()).timestamp()
    return max(0, int(stamp))


def _months_before(now: datetime, months: int) -> datetime:
    """The same day and time `months` months earlier (the month's last day where it is shorter)."""
    index = now.year * 12 + now.month - 1 - months
    year, month = max(1, index // 12), index % 12 + 1
    return now.replace(year=year, month=month, day=min(now.day, monthrange(year, month)[1]))


def _commits(root: Path, relative: str, limit: int | None = None) -> list[tuple[Commit, str]]:
    """(commit, blob it left the file as) per commit that changed the file, oldest first; the blob is the
    null one where the commit deleted it."""
    fmt = f"{_RECORD}%H{_FIELD}%cI{_FIELD}%s"
    out = _git(
        root,
        [
            "log",
            "--first-parent",  # the branch's own story: a merged pull request is one step
            "--diff-merges=first-parent",
            "--follow",
            "--raw",
            "--no-abbrev",
            f"--format={fmt}",
            *([f"--max-count={limit}"] if limit else []),
            "HEAD",
            "--",
            relative,
        ],
    )
    found = []
    for record in out.split(_RECORD)[1:]:
        head, _, raw = record.partition("\n")
        sha, date, subject = ([*head.split(_FIELD), "", ""])[:3]
        blob = None
        for line in raw.splitlines():
            # :100644 100644 OLD NEW M<TAB>path (R100<TAB>old<TAB>new for a rename)
            if line.startswith(":"):
                fields = line[1:].split("\t", 1)[0].split()
                if len(fields) >= 4:
                    blob = fields[3]
        if blob is not None:
            found.append((Commit(sha, date, subject), blob))
    found.reverse()
    return found


def _blobs(root: Path, wanted: Sequence[str]) -> Iterator[tuple[str, bytes | None]]:
    """(blob, its bytes or None when git has none) for each of `wanted`, through one `git cat-file --batch`;
    a thread feeds the names while the contents are read, so neither pipe fills up."""
    if not wanted:
        return
    proc = subprocess.Popen(
        ["git", "-C", str(root), "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None

    def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write("".join(f"{b}\n" for b in wanted).encode())
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        for blob in wanted:
            header = proc.stdout.readline().decode().split()
            if len(header) != 3 or header[1] != "blob":
                yield blob, None  # "<name> missing" (a shallow clone's boundary) or not a blob
                continue
            size = int(header[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)  # the newline after the contents
            yield blob, data
    finally:
        writer.join()
        proc.stdout.close()
        proc.wait()


# The version of the parsed blobs kept in the cache: a change of _Parsed or of what is read changes it.
_CACHE_FORMAT = 2


class _Parsed(Struct, frozen=True):
    """A blob's samples, or why it could not be read: kept under the blob's name in the cache."""

    samples: tuple[Sample, ...] | None
    error: str | None


def _parse(data: bytes, where: str) -> _Parsed:
    """A whole version, parsed and validated as the plugin reads the file."""
    try:
        text = data.decode("utf-8")
        return _Parsed(samples_of(bl.parse(text, Path(where))), None)
    except UnicodeDecodeError as exc:
        return _Parsed(None, f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start})")
    except BaselineError as exc:
        return _Parsed(None, str(exc))


class BlockParser:
    """Versions parsed an entry at a time, each entry's text once: consecutive versions of a baseline differ
    in a few entries, and a file of 1,200 entries costs 0.2 s to parse whole, 200 versions 40 s.

    The plugin writes each entry as its table and the tables under it (`occupancy`, `gpu`): a block is a
    `[kernels....]` header with the lines up to the next header that is not under it. A version is the
    samples of its blocks, each block parsed (with the version line, so that the file's own checks run) once.
    Whatever this split cannot vouch for (a header repeated, an array of tables, a block that does not parse)
    is parsed whole instead, so that an unreadable file is reported with the parser's own message."""

    def __init__(self) -> None:
        self._blocks: dict[bytes, tuple[Sample, ...]] = {}

    def __call__(self, data: bytes, where: str) -> _Parsed:
        split = _blocks_of(data)
        if split is None:
            return _parse(data, where)
        preamble, blocks = split
        head = _parse(preamble, where)
        if head.samples is None or head.samples:
            return _parse(data, where)  # a bad version line, or entries the split did not see
        version = b"version = %d\n" % bl.FORMAT_VERSION
        out: list[Sample] = []
        for block in blocks:
            known = self._blocks.get(block)
            if known is None:
                parsed = _parse(version + block, where)
                if parsed.samples is None:
                    return _parse(data, where)
                known = self._blocks[block] = parsed.samples
            out.extend(known)
        return _Parsed(tuple(out), None)


def _blocks_of(data: bytes) -> tuple[bytes, list[bytes]] | None:
    """(the text before the first entry, each entry's block); None where the layout is not the writer's."""
    if data.startswith(b"\xef\xbb\xbf") or b"\r" in data:
        return None
    lines = data.split(b"\n")
    preamble: list[bytes] = []
    blocks: list[list[bytes]] = []
    mains: set[bytes] = set()
    current: bytes | None = None
    for line in lines:
        if line.startswith(b"[["):
            return None
        if line.startswith(b"[kernels."):
            header = line.rstrip()
            if not header.endswith(b"]"):
                return None
            name = header[1:-1]
            if current is None or not name.startswith(current + b"."):
                if name in mains:
                    return None  # a table defined twice: the whole file's parser says so
                mains.add(name)
                current = name
                blocks.append([])
        elif line.startswith(b"[") and current is not None:
            return None  # another top-level table after the entries
        (blocks[-1] if blocks else preamble).append(line)
    return b"\n".join(preamble) + b"\n", [b"\n".join(b) + b"\n" for b in blocks]


def versions(
    path: Path,
    *,
    since: str | None = None,
    until: str | None = None,
    cache_dir: Path | None = None,
    limit: int | None = None,
) -> Versions:
    """Every version of the baseline file at `path` that the branch's commits left (renames followed),
    oldest first, each parsed once per blob: a blob read before is taken from `cache_dir`. `limit`: only the
    last so many commits (the HTML report's charts; a long history is not read to draw 50 points)."""
    root, relative = repository_of(path)
    shallow = _git(root, ["rev-parse", "--is-shallow-repository"]).strip() == "true"
    everything = _commits(root, relative, limit)
    selected = _selected(root, since, until)
    commits = everything if selected is None else [c for c in everything if c[0].sha in selected]
    before = everything[: everything.index(commits[0])] if commits else []
    commits = before[-1:] + commits  # the base, read with the range's versions
    folder = None if cache_dir is None else cache_dir / "history"
    parsed: dict[str, _Parsed] = {_NULL_BLOB: _Parsed((), None)}
    if folder is not None:
        for _, blob in commits:
            if blob not in parsed:
                with contextlib.suppress(OSError, ValueError):
                    parsed[blob] = read_document(str(folder / f"{blob}.json"), _Parsed, _CACHE_FORMAT)
    wanted = list(dict.fromkeys(b for _, b in commits if b not in parsed))
    parse = BlockParser()
    for blob, data in _blobs(root, wanted):
        # Not the file's name: a blob is cached once, and the file may have had another name at that commit.
        where = f"blob {blob[:10]}"
        if data is None:
            parsed[blob] = _Parsed(None, f"{where}: git has no such object (a shallow clone's boundary?)")
            continue
        parsed[blob] = parse(data, where)
        if folder is not None:
            with contextlib.suppress(OSError):
                write_document(str(folder / f"{blob}.json"), parsed[blob], _CACHE_FORMAT, root=folder.parent)
    out = [
        Version(commit, parsed[blob].samples, _short_error(parsed[blob].error)) for commit, blob in commits
    ]
    base = out.pop(0) if before else None
    return Versions(tuple(out), shallow, relative, base)


def _short_error(error: str | None) -> str | None:
    return None if error is None else error.splitlines()[0]
