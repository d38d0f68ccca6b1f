"""cache/baselines.py keeps a baseline's parsed entries in the cache: a rerun reads them back instead of
parsing the TOML. It must never return entries of other text, never hide a broken file, and never cost a
run more than the parse when its document is damaged or cannot be written."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
from helpers.data import SAMPLE_ENTRY
from msgspec.structs import replace

from pytest_regbudget.cache import baselines
from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.errors import BaselineError

KEY = ("kernels/a.cu", "k", "", "sm_90", "12.9")


def write(path: Path, registers: int) -> bl.Baseline:
    baseline = bl.Baseline(
        {KEY: replace(SAMPLE_ENTRY, registers=registers)},
        {("kernels/b.cu", "", "sm_90", "12.9"): bl.BrokenBuild("error: x")},
    )
    path.write_text(bl.dumps(baseline), encoding="utf-8")
    return baseline


def parse_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str, path: Path) -> bl.Baseline:
        raise AssertionError("parsed: the cached entries were not read")

    monkeypatch.setattr(bl, "parse", refuse)


def documents(cache: Path) -> list[Path]:
    return sorted((cache / "baselines").glob("*.json"))


def test_a_rerun_reads_the_parsed_entries_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, cache = tmp_path / "regbudget-baseline.toml", tmp_path / "cache"
    written = write(path, 72)
    assert baselines.load(path, cache) == written == bl.load(path)
    parse_refused(monkeypatch)
    assert baselines.load(path, cache) == written


def test_an_edited_file_is_parsed_anew_and_replaces_its_document(tmp_path: Path) -> None:
    path, cache = tmp_path / "regbudget-baseline.toml", tmp_path / "cache"
    write(path, 72)
    baselines.load(path, cache)
    # Same size, same mtime: only the text tells the two apart.
    stat = path.stat()
    edited = write(path, 73)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert baselines.load(path, cache) == edited
    assert len(documents(cache)) == 1  # one document per baseline path: the folder does not grow


def test_a_broken_file_is_refused_whatever_the_cache_holds(tmp_path: Path) -> None:
    path, cache = tmp_path / "regbudget-baseline.toml", tmp_path / "cache"
    write(path, 72)
    baselines.load(path, cache)
    path.write_text("version = [\n", encoding="utf-8")
    with pytest.raises(BaselineError, match="is not valid TOML"):
        baselines.load(path, cache)


@pytest.mark.parametrize(
    "damage",
    [b"", b"{not json", b'{"format": 1, "sha256": "0", "payload": {}}', b"\x00" * 64],
    ids=["empty", "cut", "wrong checksum", "binary"],
)
def test_a_damaged_document_is_parsed_anew_and_rewritten(tmp_path: Path, damage: bytes) -> None:
    path, cache = tmp_path / "regbudget-baseline.toml", tmp_path / "cache"
    written = write(path, 72)
    baselines.load(path, cache)
    [document] = documents(cache)
    document.write_bytes(damage)
    assert baselines.load(path, cache) == written
    assert document.read_bytes() != damage


def test_a_cache_that_cannot_be_written_costs_only_the_parse(tmp_path: Path) -> None:
    path = tmp_path / "regbudget-baseline.toml"
    written = write(path, 72)
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")
    assert baselines.load(path, blocked) == written


def test_no_file_is_an_empty_baseline_and_writes_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert baselines.load(tmp_path / "missing.toml", cache) == bl.Baseline()
    assert not cache.exists()


def test_an_entry_that_json_cannot_hold_is_parsed_every_time(tmp_path: Path) -> None:
    # TOML has dates, JSON has none: read back, the entry would hold a string where the file has a date.
    path, cache = tmp_path / "regbudget-baseline.toml", tmp_path / "cache"
    entry = replace(SAMPLE_ENTRY, extra={"measured_on": datetime.date(2026, 12, 5)})
    path.write_text(bl.dumps(bl.Baseline({KEY: entry})), encoding="utf-8")
    parsed = bl.load(path)
    assert parsed.entries[KEY].extra == {"measured_on": datetime.date(2026, 12, 5)}
    assert baselines.load(path, cache) == parsed
    assert baselines.load(path, cache) == parsed
    assert documents(cache) == []
