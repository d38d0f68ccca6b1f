"""core/baseline.py on its own: format, validation, merge arithmetic, and refusing the development formats."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.data import SAMPLE_ENTRY
from msgspec.structs import replace

from pytest_regbudget.core import baseline as bl
from pytest_regbudget.core.errors import BaselineError

ENTRY = replace(SAMPLE_ENTRY, occupancy={"256 threads": 0.5})
K: bl.Key = ("kernels/poly.cu", "k", bl.NO_VARIANT, "sm_90", "12.9")
K8: bl.Key = ("kernels/poly.cu", "k", "NACC=8", "sm_90", "12.9")


def key(n: int) -> bl.Key:
    return (f"kernels/k{n}.cu", "k", bl.NO_VARIANT, "sm_90", "12.9")


def load_entries(path: Path) -> dict[bl.Key, bl.BaselineEntry]:
    return dict(bl.load(path).entries)


# --- the format -------------------------------------------------------------------------------------------


def test_round_trip_is_exact_and_sorted(tmp_path: Path) -> None:
    entries = {
        ("kernels/poly.cu", "k", bl.NO_VARIANT, "sm_90", "12.9"): ENTRY,
        ("kernels/gemm.cu", "gemm<128, 64>", bl.NO_VARIANT, "sm_90", "12.9"): ENTRY,
        ("kernels/poly.cu", "k", "NACC=8", "sm_80", "12.9"): replace(ENTRY, occupancy={}, tests=()),
        ("kernels/poly.cu", "k", "NACC=8", "sm_90", "12.9"): ENTRY,
    }
    text = bl.dumps(bl.Baseline(entries))
    assert text.startswith(bl.HEADER)
    assert bl.parse(text, tmp_path / "x.toml") == bl.Baseline(entries)
    headers = [line for line in text.splitlines() if line.startswith("[")]
    assert headers == [
        '[kernels."kernels/gemm.cu"."gemm<128, 64>".-.sm_90."12.9"]',
        '[kernels."kernels/gemm.cu"."gemm<128, 64>".-.sm_90."12.9".occupancy]',
        '[kernels."kernels/poly.cu".k.-.sm_90."12.9"]',
        '[kernels."kernels/poly.cu".k.-.sm_90."12.9".occupancy]',
        '[kernels."kernels/poly.cu".k."NACC=8".sm_80."12.9"]',
        '[kernels."kernels/poly.cu".k."NACC=8".sm_90."12.9"]',
        '[kernels."kernels/poly.cu".k."NACC=8".sm_90."12.9".occupancy]',
    ]
    assert bl.dumps(bl.Baseline(dict(reversed(list(entries.items()))))) == text


def test_entry_keys_in_fixed_order() -> None:
    entry = replace(
        ENTRY,
        local_instructions=24,  # every whole-number metric written, to show where each goes
        spill_stores_callees=8,
        spill_loads_callees=4,
        occupancy={"1024 threads": 0.25, "256 threads, 4096 B dynamic smem": 0.375, "256 threads": 0.5},
        tests=("t.py::b", "t.py::a"),
        gpu={"NVIDIA H200": {"time_ms": 0.5, "noise": 0.01}},
    )
    lines = bl.dumps(bl.Baseline({K: entry})).splitlines()
    keys = [line.split(" = ")[0] for line in lines if " = " in line]
    assert keys == [
        "version",
        # The callees' part of the spills right after the spills.
        *("registers", "spill_stores", "spill_loads", "spill_stores_callees", "spill_loads_callees"),
        *("stack", "smem", "const_mem", "local_instructions"),
        *bl.TEXT_FIELDS,
        "tests",
        # Launches in numeric order of their block size, then as text.
        '"256 threads"',
        '"256 threads, 4096 B dynamic smem"',
        '"1024 threads"',
        "noise",
        "time_ms",
    ]
    assert lines[lines.index("tests = [") + 1 : lines.index("tests = [") + 3] == [
        '    "t.py::a",',
        '    "t.py::b",',
    ]


def test_unknown_fields_survive_a_round_trip(tmp_path: Path) -> None:
    text = bl.dumps(bl.Baseline({K: ENTRY})).replace(
        'options_hash = "abc"', 'options_hash = "abc"\ngpu_ms = 0.89'
    )
    (entry,) = bl.parse(text, tmp_path / "x").entries.values()
    assert entry.extra == {"gpu_ms": 0.89}
    assert "gpu_ms = 0.89" in bl.dumps(bl.Baseline({K: entry}))


def test_missing_file_is_empty(tmp_path: Path) -> None:
    baseline = bl.load(tmp_path / "none.toml")
    assert baseline == bl.Baseline()
    assert len(baseline) == 0


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("registers = ", "is not valid TOML"),
        (
            "version = 4\n",
            "version = 4; this pytest-regbudget reads version 3. Fix: upgrade pytest-regbudget",
        ),
        ("version = 3\nkernels = 3\n", "[kernels] must hold tables"),
        (
            "version = 3\nextra = 1\n",
            "unknown top-level key 'extra' (expected 'broken', 'kernels', 'version')",
        ),
        ("version = 3\nlegacy = {}\n", "unknown top-level key 'legacy'"),
        # Versions 1 and 2, written before any release (a file with no version line is version 1).
        ("version = 2\nkernels = {}\n", "baseline format version 2, written by a development version"),
        ("kernels = {}\n", "baseline format version 1, written by a development version"),
        # Five levels (source, kernel, variant, arch, release), then an entry.
        ('version = 3\n[kernels."s"]\nk = 3\n', '[kernels."s"."k"] must hold tables'),
        ('version = 3\n[kernels."s".k."-"]\nsm_90 = 3\n', '[kernels."s"."k"."-"."sm_90"] must hold tables'),
        (
            'version = 3\n[kernels."s".k."-".sm_90]\n"12.9" = 3\n',
            '[kernels."s"."k"."-"."sm_90"."12.9"]: expected a table',
        ),
        (
            'version = 3\n[kernels."s".k."-".sm_90."12.9"]\nregisters = -1\n',
            '[kernels."s"."k"."-"."sm_90"."12.9"]: registers = -1',
        ),
    ],
)
def test_bad_files_name_file_and_place(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "b.toml"
    with pytest.raises(BaselineError) as info:
        bl.parse(text, path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ("occupancy = 1.5", "occupancy = 1.5, expected fractions in [0, 1] per launch"),
        (
            'occupancy = {"256 threads" = 2}',
            "occupancy = {'256 threads': 2}, expected fractions in [0, 1] per",
        ),
        ('occupancy = {"256 threads" = true}', "occupancy = {'256 threads': True}, expected fractions"),
        ('tests = "t.py::a"', "tests = 't.py::a', expected a list of test ids"),
        ("tests = [1]", "tests = [1], expected a list of test ids"),
        ('gpu = {"NVIDIA H200" = {time_ms = 0}}', 'gpu."NVIDIA H200".time_ms = 0, expected milliseconds > 0'),
        ("gpu = 3", "gpu must hold one table per device"),
        ("spill_stores_callees = -4", "spill_stores_callees = -4, expected a whole number >= 0"),
        ('spill_loads_callees = "4"', "spill_loads_callees = '4', expected a whole number >= 0"),
        ("package = 1", 'package = 1, expected a string ("name version")'),
    ],
)
def test_bad_entry_fields_name_the_field(tmp_path: Path, fields: str, needle: str) -> None:
    table = bl.dumps(bl.Baseline({K: replace(ENTRY, occupancy={}, tests=())}))
    path = tmp_path / "b.toml"
    with pytest.raises(BaselineError) as info:
        bl.parse(table + fields + "\n", path)
    assert f'{path}: [kernels."kernels/poly.cu"."k"."-"."sm_90"."12.9"]: {needle}' in str(info.value)


# --- BaselineEntry.merged -----------------------------------------------------------------------------------


def test_merged_keeps_what_the_new_measurement_did_not_measure() -> None:
    old = replace(
        ENTRY,
        registers=64,
        occupancy={"256 threads": 0.5, "512 threads": 0.25},
        tests=("t.py::old",),
        gpu={"NVIDIA H200": {"time_ms": 1.0}, "NVIDIA A100": {"time_ms": 2.0}},
        extra={"gpu_ms": 0.89, "note": "old"},
    )
    new = replace(
        ENTRY,
        registers=80,
        occupancy={"256 threads": 0.375},
        tests=("t.py::new",),
        gpu={"NVIDIA H200": {"time_ms": 1.5}},
        extra={"note": "new"},
    )
    merged = new.merged(old)
    assert merged.registers == 80
    assert merged.occupancy == {"256 threads": 0.375, "512 threads": 0.25}
    assert merged.gpu == {"NVIDIA H200": {"time_ms": 1.5}, "NVIDIA A100": {"time_ms": 2.0}}
    assert merged.extra == {"gpu_ms": 0.89, "note": "new"}
    assert merged.tests == ("t.py::new",)  # which tests still measure it is the stale rule's to say
    # A measurement on a CPU runner keeps every GPU's figures.
    assert replace(new, gpu={}).merged(old).gpu == old.gpu


# --- update -----------------------------------------------------------------------------------------------


def test_update_counts_and_preserves_other_entries(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    keep, change, same, gone = key(1), key(2), key(3), key(4)
    path.write_text(bl.dumps(bl.Baseline({keep: ENTRY, change: ENTRY, same: ENTRY, gone: ENTRY})))
    worse = replace(ENTRY, registers=80)
    counts = bl.update(path, {change: worse, same: ENTRY, key(5): ENTRY}, remove={gone, key(6)})
    assert str(counts) == "1 added, 1 updated, 1 unchanged, 1 stale (removed)"
    after = load_entries(path)
    assert set(after) == {keep, change, same, key(5)}
    assert after[change].registers == 80
    assert list(tmp_path.iterdir()) == [path]  # no temp files left behind


def test_update_keeps_what_it_does_not_measure(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    old = replace(
        ENTRY,
        occupancy={"256 threads": 0.5, "512 threads": 0.25},
        gpu={"NVIDIA H200": {"time_ms": 1.5}},
        extra={"gpu_ms": 1.5},
    )
    path.write_text(bl.dumps(bl.Baseline({K: old})))
    counts = bl.update(path, {K: replace(ENTRY, occupancy={"256 threads": 0.375})}, set())
    assert (counts.updated, counts.unchanged) == (1, 0)
    after = load_entries(path)[K]
    assert after.occupancy == {"256 threads": 0.375, "512 threads": 0.25}
    assert after.gpu == {"NVIDIA H200": {"time_ms": 1.5}}
    assert after.extra == {"gpu_ms": 1.5}
    # Measuring one of its launches again, with the same figure, changes nothing.
    assert bl.update(path, {K: replace(ENTRY, occupancy={"512 threads": 0.25})}, set()).unchanged == 1


def test_update_of_corrupt_file_raises_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("not = [toml")
    with pytest.raises(BaselineError):
        bl.update(path, {K: ENTRY}, set())
    assert path.read_text() == "not = [toml"


def test_unchanged_update_does_not_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    bl.update(path, {K: ENTRY}, set())
    stamp = path.stat().st_mtime_ns
    bl.update(path, {K: ENTRY}, set())
    assert path.stat().st_mtime_ns == stamp


def test_options_hash_is_stable_and_sensitive() -> None:
    assert bl.options_hash((("N", "4"),), [], (), ()) == bl.options_hash((("N", "4"),), [], (), ())
    assert bl.options_hash((("N", "4"),), [], (), ()) != bl.options_hash((("N", "8"),), [], (), ())


def test_written_files_are_not_private(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    bl.update(path, {K: ENTRY}, set())
    assert path.stat().st_mode & 0o044 == 0o044  # readable by group and others, like any committed file
    path.chmod(0o640)
    bl.update(path, {K: replace(ENTRY, registers=1)}, set())
    assert path.stat().st_mode & 0o777 == 0o640


def test_entry_from_table_reads_what_to_toml_writes() -> None:
    entry = replace(ENTRY, gpu={"NVIDIA H200": {"time_ms": 0.5}}, extra={"gpu_ms": 0.89})
    assert bl.entry_from_table(entry.to_toml()) == entry
    installed = replace(entry, package="liger_kernel 0.8.5")
    table = installed.to_toml()
    assert bl.entry_from_table(table) == installed
    # After the provenance fields, before the build settings; absent for the project's own kernels.
    assert list(table)[list(table).index("options_hash") + 1] == "package"
    assert "package" not in entry.to_toml()


def test_a_key_written_with_build_marks_reads_as_todays_name(tmp_path: Path) -> None:
    # A file written before names.stable: CUB's per-arch namespace and nvcc's path hash in the kernel names.
    old = {
        ("k.cu", "cub::_V_300500_SM_800::detail::EmptyKernel<void>", "-", "sm_80", "12.9"): ENTRY,
        ("k.cu", "apply<&_INTERNAL_e7bc940b_4_k_cu_73f58c4c::twice>", "-", "sm_80", "12.9"): ENTRY,
        # the same kernel recorded from another checkout: one entry, the file's first (6128e6a5 sorts first)
        ("k.cu", "apply<&_INTERNAL_6128e6a5_4_k_cu_73f58c4c::twice>", "-", "sm_80", "12.9"): replace(
            ENTRY, registers=99
        ),
    }
    path = tmp_path / "b.toml"
    path.write_text(bl.dumps(bl.Baseline(old)))
    assert bl.load(path).entries == {
        ("k.cu", "apply<&twice>", "-", "sm_80", "12.9"): replace(ENTRY, registers=99),
        ("k.cu", "cub::detail::EmptyKernel<void>", "-", "sm_80", "12.9"): ENTRY,
    }
    # The next update writes today's names, and loses no entry.
    bl.update(path, {}, set(), lock_dir=tmp_path / "locks")
    assert "_INTERNAL_" not in path.read_text()
    assert "_V_300500" not in path.read_text()
    assert len(bl.load(path).entries) == 2


def test_the_callees_part_is_written_only_where_a_callee_spills(tmp_path: Path) -> None:
    # An entry of a kernel whose callees do not spill (every entry written before they were counted) gains no
    # line, and reads back without them.
    assert "callees" not in bl.dumps(bl.Baseline({K: ENTRY}))
    spilling = replace(
        ENTRY, spill_stores=72, spill_loads=84, spill_stores_callees=72, spill_loads_callees=84
    )
    text = bl.dumps(bl.Baseline({K: spilling}))
    assert "spill_stores_callees = 72\nspill_loads_callees = 84\n" in text
    assert bl.parse(text, tmp_path / "b.toml").entries[K] == spilling
    assert bl.entry_from_table(spilling.to_toml()) == spilling
