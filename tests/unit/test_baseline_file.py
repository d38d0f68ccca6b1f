"""baseline.py on its own: format, validation, merge arithmetic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SAMPLE_ENTRY

from pytest_regbudget import baseline as bl
from pytest_regbudget.errors import BaselineError

ENTRY = replace(SAMPLE_ENTRY, occupancy=0.5, occupancy_at="256 threads")


def test_round_trip_is_exact_and_sorted(tmp_path: Path) -> None:
    entries = {
        ("t.py::b[sm_90]", "k", "sm_90"): ENTRY,
        ("t.py::a[sm_90]", "gemm<128, 64>", "sm_90"): ENTRY,
        ("t.py::a[sm_80]", "k", "sm_80"): bl.Entry(
            **{**ENTRY.__dict__, "occupancy": None, "occupancy_at": None}
        ),
    }
    text = bl.dumps(entries)
    assert text.startswith(bl.HEADER)
    assert bl.parse(text, tmp_path / "x.toml") == entries
    headers = [line for line in text.splitlines() if line.startswith("[")]
    assert headers == [
        '[kernels."t.py::a[sm_80]".k.sm_80]',
        '[kernels."t.py::a[sm_90]"."gemm<128, 64>".sm_90]',
        '[kernels."t.py::b[sm_90]".k.sm_90]',
    ]
    assert bl.dumps(dict(reversed(list(entries.items())))) == text


def test_entry_keys_in_fixed_order() -> None:
    keys = [
        line.split(" = ")[0] for line in bl.dumps({("n", "k", "sm_90"): ENTRY}).splitlines() if " = " in line
    ]
    assert keys == ["version", *bl.INT_FIELDS, "occupancy", "occupancy_at", "ptxas", "nvrtc", "options_hash"]


def test_unknown_fields_survive_a_round_trip(tmp_path: Path) -> None:
    text = bl.dumps({("n", "k", "sm_90"): ENTRY}).replace(
        'options_hash = "abc"', 'options_hash = "abc"\ngpu_ms = 0.89'
    )
    (entry,) = bl.parse(text, tmp_path / "x").values()
    assert entry.extra == {"gpu_ms": 0.89}
    assert "gpu_ms = 0.89" in bl.dumps({("n", "k", "sm_90"): entry})


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert bl.load(tmp_path / "none.toml") == {}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("registers = ", "is not valid TOML"),
        ("version = 2\n", "version = 2; this pytest-regbudget reads version 1"),
        ("kernels = 3\n", "'kernels' must be a table"),
        ("extra = 1\n", "unknown top-level key 'extra'"),
        ('[kernels."n".k.sm_90]\nregisters = -1\n', '[kernels."n"."k".sm_90]: registers = -1'),
        ('[kernels."n".k]\nsm_90 = 3\n', '[kernels."n"."k".sm_90]: expected a table of numbers'),
    ],
)
def test_bad_files_name_file_and_place(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "b.toml"
    with pytest.raises(BaselineError) as info:
        bl.parse(text, path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)


def test_update_counts_and_preserves_other_entries(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    keep, change, same, gone = (
        ("n1", "k", "sm_90"),
        ("n2", "k", "sm_90"),
        ("n3", "k", "sm_90"),
        ("n4", "k", "sm_90"),
    )
    path.write_text(bl.dumps({keep: ENTRY, change: ENTRY, same: ENTRY, gone: ENTRY}))
    worse = bl.Entry(**{**ENTRY.__dict__, "registers": 80})
    counts = bl.update(path, {change: worse, same: ENTRY, ("n5", "k", "sm_90"): ENTRY}, remove={gone})
    assert str(counts) == "1 added, 1 updated, 1 unchanged, 1 stale (removed)"
    after = bl.load(path)
    assert set(after) == {keep, change, same, ("n5", "k", "sm_90")}
    assert after[change].registers == 80
    assert list(tmp_path.iterdir()) == [path]  # no temp files left behind


def test_update_keeps_fields_it_does_not_measure(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    key = ("n", "k", "sm_90")
    path.write_text(bl.dumps({key: bl.Entry(**{**ENTRY.__dict__, "extra": {"gpu_ms": 1.5}})}))
    bl.update(path, {key: ENTRY}, set())
    assert bl.load(path)[key].extra == {"gpu_ms": 1.5}


def test_update_of_corrupt_file_raises_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("not = [toml")
    with pytest.raises(BaselineError):
        bl.update(path, {("n", "k", "sm_90"): ENTRY}, set())
    assert path.read_text() == "not = [toml"


def test_unchanged_update_does_not_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    bl.update(path, {("n", "k", "sm_90"): ENTRY}, set())
    stamp = path.stat().st_mtime_ns
    bl.update(path, {("n", "k", "sm_90"): ENTRY}, set())
    assert path.stat().st_mtime_ns == stamp


def test_options_hash_is_stable_and_sensitive() -> None:
    assert bl.options_hash((("N", "4"),), [], (), ()) == bl.options_hash((("N", "4"),), [], (), ())
    assert bl.options_hash((("N", "4"),), [], (), ()) != bl.options_hash((("N", "8"),), [], (), ())


def test_written_files_are_not_private(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    bl.update(path, {("n", "k", "sm_90"): ENTRY}, set())
    assert path.stat().st_mode & 0o044 == 0o044  # readable by group and others, like any committed file
    path.chmod(0o640)
    bl.update(path, {("n", "k", "sm_90"): bl.Entry(**{**ENTRY.__dict__, "registers": 1})}, set())
    assert path.stat().st_mode & 0o777 == 0o640
