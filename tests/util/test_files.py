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
    file_sha256,
    not_a_file,
    one_globstar,
    parse_nested,
    read_document,
    read_regular,
    sha256_hex,
    write_document,
)


class Point(Struct, frozen=True):
    x: int
    where: Path


def test_a_document_reads_back_what_was_written(tmp_path: Path) -> None:
    doc = str(tmp_path / "p.json")
    write_document(doc, Point(3, Path("/a/b.cu")), 7)
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
    write_document(str(doc), Point(3, Path("x")), 7)
    assert callable(damage)
    doc.write_text(damage(doc.read_text()))
    with pytest.raises(ValueError):  # noqa: PT011 - msgspec's errors and the checksum's are ValueErrors
        read_document(str(doc), Point, 7)


def test_a_document_of_another_format_is_an_error(tmp_path: Path) -> None:
    doc = str(tmp_path / "p.json")
    write_document(doc, Point(3, Path("x")), 7)
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
