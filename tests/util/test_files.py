"""util/files.py: the generic file helpers, on their own (the baseline's and the cache's tests hold them under
their callers' failures)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import tomli
from msgspec import Struct

from pytest_regbudget.util.files import (
    NotRegular,
    TooDeep,
    atomic_write,
    cache_folder,
    file_sha256,
    not_a_file,
    one_globstar,
    parse_nested,
    read_document,
    read_regular,
    ready_lock,
    replace_in,
    sha256_hex,
    unsafe_dir,
    write_document,
)

# Another user, for the ownership cases: made by chown, which only root may do.
STRANGER = 54321
as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="handing a folder to another user takes root"
)


class Point(Struct, frozen=True):
    x: int
    where: Path


def test_a_document_reads_back_what_was_written(tmp_path: Path) -> None:
    doc = str(tmp_path / "p.json")
    write_document(doc, Point(3, Path("/a/b.cu")), 7, root=tmp_path)
    assert read_document(doc, Point, 7) == Point(3, Path("/a/b.cu"))


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # cut short
        lambda text: text.replace('"x":3', '"x":4'),  # edited: the checksum no longer matches
        lambda text: text.replace('"x":3', '"x":"3"'),  # another shape
    ],
)
def test_a_damaged_document_is_an_error_never_a_value(tmp_path: Path, damage: object) -> None:
    doc = tmp_path / "p.json"
    write_document(str(doc), Point(3, Path("x")), 7, root=tmp_path)
    assert callable(damage)
    doc.write_text(damage(doc.read_text()))
    with pytest.raises(ValueError):  # noqa: PT011 - msgspec's errors and the checksum's are ValueErrors
        read_document(str(doc), Point, 7)


def test_a_document_of_another_format_is_an_error(tmp_path: Path) -> None:
    doc = str(tmp_path / "p.json")
    write_document(doc, Point(3, Path("x")), 7, root=tmp_path)
    with pytest.raises(ValueError, match="checksum mismatch"):
        read_document(doc, Point, 8)


def test_atomic_write_keeps_a_files_mode_and_writes_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real.toml"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.toml"
    link.symlink_to(target)
    atomic_write(link, "new")
    assert link.is_symlink()
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_atomic_write_refuses_what_is_not_a_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "FIFO" in not_a_file(fifo)
    with pytest.raises(OSError, match="FIFO"):
        atomic_write(fifo, "x")
    assert "directory" in not_a_file(tmp_path)
    assert not_a_file(tmp_path / "missing") == ""


def test_digests_of_bytes_and_of_a_file_agree(tmp_path: Path) -> None:
    data = os.urandom(3 << 20)  # more than one piece of the file's read
    (tmp_path / "blob").write_bytes(data)
    assert file_sha256(tmp_path / "blob") == sha256_hex(data)


# -- the cache's writes: links replaced, never followed (issue 44) ----------------------------------------
@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A cache directory, and a folder outside it holding a file the links below point at."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_text("keep")
    (tmp_path / "cache").mkdir()
    return tmp_path / "cache", tmp_path / "outside"


def test_replace_in_replaces_a_planted_link_instead_of_writing_through_it(planted: tuple[Path, Path]) -> None:
    cache, outside = planted
    (cache / "v7").mkdir()
    (cache / "v7" / "entry").symlink_to(outside / "victim")
    (cache / "v7" / "dangling").symlink_to(outside / "new")
    replace_in(cache, cache / "v7" / "entry", "cached")
    replace_in(cache, cache / "v7" / "dangling", b"cached")
    assert (outside / "victim").read_text() == "keep"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    for name in ("entry", "dangling"):
        assert not (cache / "v7" / name).is_symlink()
        assert (cache / "v7" / name).read_text() == "cached"
    write_document(str(cache / "v7" / "entry"), Point(1, Path("x")), 7, root=cache)
    assert read_document(str(cache / "v7" / "entry"), Point, 7) == Point(1, Path("x"))


def test_a_folder_link_below_the_cache_is_replaced_by_a_folder(planted: tuple[Path, Path]) -> None:
    cache, outside = planted
    (cache / "v7").symlink_to(outside)
    (cache / "locks").symlink_to(outside / "missing")
    replace_in(cache, cache / "v7" / "ab" / "entry", "cached")
    ready_lock(cache, cache / "locks" / "unit.lock")
    assert not (cache / "v7").is_symlink()
    assert (cache / "v7" / "ab" / "entry").read_text() == "cached"
    assert not (cache / "locks").is_symlink()
    assert (cache / "locks").is_dir()
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    (cache / "file").write_text("")
    with pytest.raises(OSError, match="is not a directory"):
        replace_in(cache, cache / "file" / "entry", "cached")


def test_the_cache_directory_itself_may_be_a_link_the_user_made(planted: tuple[Path, Path]) -> None:
    cache, outside = planted
    (outside / "real-cache").mkdir()
    link = cache / "named"  # REGBUDGET_CACHE_DIR pointing at a link: the user's to name
    link.symlink_to(outside / "real-cache")
    replace_in(link, link / "v7" / "ab" / "entry", "cached")
    assert (outside / "real-cache" / "v7" / "ab" / "entry").read_text() == "cached"


def test_ready_lock_removes_a_planted_link_and_nothing_it_points_to(planted: tuple[Path, Path]) -> None:
    cache, outside = planted
    (cache / "locks").mkdir()
    (cache / "locks" / "unit.lock").symlink_to(outside / "victim")
    ready_lock(cache, cache / "locks" / "unit.lock")
    assert not (cache / "locks" / "unit.lock").exists()
    assert (outside / "victim").read_text() == "keep"


@as_root
def test_a_folder_of_another_users_below_the_cache_stops_the_write(planted: tuple[Path, Path]) -> None:
    cache, _ = planted
    cache_folder(cache, cache / "v7")
    os.chown(cache / "v7", STRANGER, STRANGER)
    with pytest.raises(OSError, match=f"belongs to uid {STRANGER}"):
        replace_in(cache, cache / "v7" / "entry", "x")


# -- whether a directory is safe to keep a cache in, as pip decides -----------------------------------------
def test_a_private_directory_and_one_yet_to_be_made_in_tmp_are_safe(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    assert unsafe_dir(tmp_path) == ""
    assert unsafe_dir(tmp_path / "not" / "yet") == ""
    sticky = tmp_path / "shared"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)  # as /tmp: a folder above the cache may be shared with the sticky bit
    assert unsafe_dir(sticky / "cache") == ""


def test_a_directory_others_can_write_is_not_safe(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    assert unsafe_dir(cache) == f"{cache} is writable by others (mode 777). Fix: chmod go-w {cache}"
    os.chmod(cache, 0o1777)  # the sticky bit does not keep others from planting names in the cache itself
    assert "is writable by others (mode 1777)" in unsafe_dir(cache)
    os.chmod(cache, 0o700)
    os.chmod(tmp_path, 0o777)  # a folder above, without the sticky bit: our cache could be renamed away
    assert unsafe_dir(cache) == (
        f"{tmp_path} is writable by others (mode 777, no sticky bit). Fix: chmod go-w {tmp_path}"
    )
    os.chmod(tmp_path, 0o700)


def test_a_link_to_an_unsafe_directory_is_judged_by_its_target(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    (tmp_path / "open").mkdir()
    os.chmod(tmp_path / "open", 0o777)
    (tmp_path / "link").symlink_to(tmp_path / "open")
    assert "is writable by others" in unsafe_dir(tmp_path / "link")


@as_root
def test_a_directory_of_another_user_is_not_safe(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chown(cache, STRANGER, STRANGER)
    assert (
        unsafe_dir(cache)
        == f"{cache} belongs to uid {STRANGER}, not to you. Fix: use a directory of your own"
    )
    # Not there yet: judged by the folder it would be made in.
    assert "belongs to uid" in unsafe_dir(cache / "sub")


def test_only_a_regular_file_is_read_and_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_bytes(b"x = 1\n")
    (tmp_path / "link.toml").symlink_to("a.toml")
    assert read_regular(tmp_path / "link.toml") == b"x = 1\n"
    os.mkfifo(tmp_path / "fifo")  # nothing writes it: a plain open() would block here for ever
    for path, said in (
        (tmp_path / "fifo", "a FIFO, not a regular file"),
        (tmp_path, "a directory, not a regular file"),
        (Path("/dev/zero"), "a device or socket, not a regular file"),
    ):
        with pytest.raises(NotRegular) as refused:
            read_regular(path)
        assert refused.value.strerror == said
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "none")


@pytest.mark.parametrize(
    ("parse", "text"),
    [(json.loads, "[" * 100_000 + "]" * 100_000), (tomli.loads, "x = " + "[" * 500 + "]" * 500)],
)
def test_a_document_nested_past_its_parsers_depth_is_a_value_error(parse: Any, text: str) -> None:
    with pytest.raises(TooDeep, match="nested too deeply to read"):
        parse_nested(parse, text)
    assert issubclass(TooDeep, ValueError)  # caught where the parser's own errors are


def test_a_planted_deep_document_is_damaged_not_a_crash(tmp_path: Path) -> None:
    doc = tmp_path / "p.json"
    doc.write_text('{"format": 7, "sha256": "", "payload": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match="nested too deeply"):
        read_document(str(doc), Point, 7)


@pytest.mark.parametrize(
    ("pattern", "expanded"),
    [
        ("**/**/**/*.cu", "**/*.cu"),
        ("a/**/./**/b/**/c.cu", "a/**/b/**/c.cu"),
        ("./k.cu", "k.cu"),
        ("**//**/k.cu", "**/k.cu"),
        ("/abs/**/**/k.cu", "/abs/**/k.cu"),
        (".", ""),
        ("./", ""),
        ("", ""),
    ],
)
def test_a_run_of_globstars_is_expanded_once(pattern: str, expanded: str) -> None:
    assert one_globstar(pattern) == expanded
