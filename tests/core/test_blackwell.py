"""Tensor memory and clusters from recorded PTX: tcgen05.alloc column counts, .reqnctapercluster, and the
verdicts on them (core/blackwell.py through checks.check), the marker keys, the record and the summary cell.

tests/data/blackwell/12.9_sm_100a.{ptx,txt} are NVRTC 12.9.86's PTX and ptxas 12.9.86's `-v` report of
tests/kernels/blackwell.cu for sm_100a (TMEM_COLS 512), recorded as the plugin builds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from pytest_regbudget.core.blackwell import TmemUse, tmem_use
from pytest_regbudget.core.checks import check
from pytest_regbudget.core.errors import MarkerError
from pytest_regbudget.core.gpu_facts import DriverView, GpuFacts
from pytest_regbudget.core.kernel_report import KernelReport
from pytest_regbudget.core.limits import Launch, Limits
from pytest_regbudget.core.ptx import TmemAlloc, ptx_outline, ptx_tmem
from pytest_regbudget.core.ptxas import parse_ptx_directives, read
from pytest_regbudget.project.markers import parse_marker
from pytest_regbudget.report.record import to_record
from pytest_regbudget.report.terminal import occupancy_cell, summary_lines

DATA = Path(__file__).parents[1] / "data" / "blackwell"
PTX = (DATA / "12.9_sm_100a.ptx").read_text()
LOG = (DATA / "12.9_sm_100a.txt").read_text()
RESOURCES = read(LOG, PTX)
TMEM = ptx_tmem(PTX)
ARCH = "sm_100a"


def judged(kernel: str, **limits: Any) -> KernelReport:
    """checks.check of a recorded kernel, with its TMEM as the plugin reads it."""
    return check(
        f"t.py::test_{kernel}",
        kernel,
        ARCH,
        "blackwell.cu",
        RESOURCES[kernel],
        Limits(**limits),
        tmem=TMEM.get(kernel),
    )


# -- reading tcgen05.alloc -------------------------------------------------------------------------------
def test_columns_are_read_from_an_immediate_a_register_and_summed() -> None:
    assert {k: (v.allocs, v.columns) for k, v in TMEM.items() if v.columns is not None} == {
        "tmem_imm": (1, 512),  # tcgen05.alloc... [%r3], 512;
        "tmem_reg": (1, 512),  # mov.b32 %r3, 512; ... [%r2], %r3;
        "tmem_twice": (2, 192),  # 128 + 64
        "tmem_pair": (1, 256),  # cta_group::2: 256 in each block of the pair
    }
    # Kernels without tcgen05.alloc are not listed: no TMEM, not an unknown count.
    assert "clustered" not in TMEM
    assert "unclustered" not in TMEM


def test_a_count_the_ptx_does_not_fix_is_unknown_never_guessed() -> None:
    runtime, call = TMEM["tmem_runtime"], TMEM["tmem_call"]
    assert (runtime.columns, call.columns) == (None, None)
    assert runtime.unread == (
        "tcgen05.alloc takes its column count from %r3, which the PTX does not set from one constant"
    )
    assert call.unread == (
        "it calls _Z20allocate_out_of_linePj, which runs tcgen05.alloc, and a call's count is not summed"
    )


@pytest.mark.parametrize("ptx_file", sorted(Path(__file__).parents[1].rglob("*.ptx")), ids=lambda p: p.name)
def test_the_outline_keeps_what_the_tmem_and_cluster_readers_read(ptx_file: Path) -> None:
    """A cache hit reads the outline: TMEM and clusters must read the same from it as from the PTX."""
    ptx = ptx_file.read_text(errors="replace")
    outline = ptx_outline(ptx)
    assert dict(ptx_tmem(outline)) == dict(ptx_tmem(ptx))
    assert parse_ptx_directives(outline) == parse_ptx_directives(ptx)


def _entry(body: str, name: str = "k", extra: str = "") -> str:
    return f"{extra}.visible .entry {name}(.param .u32 {name}_param_0)\n{{\n{body}\n}}\n"


ALLOC = "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], {};"


@pytest.mark.parametrize(
    ("body", "columns"),
    [
        (ALLOC.format("0x100"), 256),  # PTX integers follow C
        (ALLOC.format("128U"), 128),
        (f"mov.u32 %r4, 64;\nmov.b32 %r5, %r4;\n{ALLOC.format('%r5')}", 64),  # through a copy
        (f"@%p1 mov.b32 %r4, 32;\n{ALLOC.format('%r4')}", 32),  # one def, under a predicate
        (f"mov.b32 %r4, 64;\n$L__BB0_1:\nadd.s32 %r4, %r4, 64;\n{ALLOC.format('%r4')}", None),  # set twice
        (f"ld.param.u32 %r4, [k_param_0];\n{ALLOC.format('%r4')}", None),  # a parameter
        (f"{{ .reg .b32 t; mov.b32 t, 256; }}\n{ALLOC.format('%r9')}", None),  # never set
        (f"{ALLOC.format('512')}\n{ALLOC.format('512')}", 1024),  # summed: more than an SM has
    ],
)
def test_operand_forms(body: str, columns: int | None) -> None:
    ptx = _entry(body)
    assert ptx_tmem(ptx)["k"].columns == columns
    assert dict(ptx_tmem(ptx_outline(ptx))) == dict(ptx_tmem(ptx))


def test_an_indirect_call_hides_the_count_when_some_function_allocates() -> None:
    func = ".func alloc_it()\n{\n" + ALLOC.format("512") + "\nret;\n}\n"
    ptx = _entry("call.uni (retval0), %rd4, (param0), prototype_0;", extra=func)
    assert ptx_tmem(ptx)["k"].columns is None
    assert dict(ptx_tmem(ptx_outline(ptx))) == dict(ptx_tmem(ptx))
    # Without an allocating function, an indirect call allocates nothing.
    assert "k" not in ptx_tmem(_entry("call.uni (retval0), %rd4, (param0), prototype_0;"))


def test_cluster_dims_come_from_reqnctapercluster() -> None:
    assert RESOURCES["clustered"].cluster_dims == (2, 1, 1)
    assert RESOURCES["tmem_pair"].cluster_dims == (2, 1, 1)
    assert RESOURCES["unclustered"].cluster_dims is None
    # Missing dimensions are 1, as for .maxntid.
    ptx = ".visible .entry k()\n.explicitcluster\n.reqnctapercluster 4\n{\nret;\n}\n"
    assert parse_ptx_directives(ptx)["k"].reqnctapercluster == (4, 1, 1)


# -- TMEM verdicts -------------------------------------------------------------------------------------
ONE_BLOCK = (
    "512 TMEM columns per block into 512 per SM -> 1 block holds its tensor memory at a time; the next "
    "waits in tcgen05.alloc"
)


@pytest.mark.parametrize("kernel", ["tmem_imm", "tmem_reg"])
def test_512_columns_fail_two_blocks_per_sm_with_the_arithmetic(kernel: str) -> None:
    report = judged(kernel, launch=Launch(256, 2))
    assert report.violations == [
        f"launch=(256, 2): {ONE_BLOCK}. Fix: at most 256 TMEM columns per block for 2 blocks per SM, or "
        "launch=(256, 1)"
    ]
    # The header's count stays as it is, for the driver's to be compared with.
    assert report.occupancy is not None
    assert report.occupancy.active_blocks == 8
    assert report.tmem == TmemUse("ptx", 512, 1)
    assert judged(kernel, launch=Launch(256, 1)).violations == []


def test_two_allocations_are_one_blocks_columns() -> None:
    # 192 columns: 2 blocks hold theirs at once, so 3 per SM wait.
    assert judged("tmem_twice", launch=Launch(256, 2)).violations == []
    (text,) = judged("tmem_twice", launch=Launch(128, 3)).violations
    assert text.startswith(
        "launch=(128, 3): 192 TMEM columns per block into 512 per SM -> 2 blocks hold their tensor memory "
        "at once; block 3 waits in tcgen05.alloc. Fix: at most 128 TMEM columns per block for 3 blocks per SM"
    )


def test_min_occupancy_is_judged_on_the_blocks_that_hold_their_tmem() -> None:
    (text,) = judged("tmem_imm", launch=Launch(256), min_occupancy=0.25).violations
    assert text.startswith("occupancy 12.5% at 256 threads < min_occupancy 25.0% (8 blocks x 8 warps")
    assert text.endswith(f"; TMEM-bound: {ONE_BLOCK})")
    assert judged("tmem_imm", launch=Launch(256), min_occupancy=0.125).violations == []


def test_min_occupancy_on_a_gpu_runner_takes_the_smaller_of_the_driver_and_tmem() -> None:
    gpu = GpuFacts("NVIDIA B200", "sm_100", DriverView(12, 0, 4, 1024), driver_blocks=8)
    report = check(
        "t.py::t",
        "tmem_imm",
        ARCH,
        "blackwell.cu",
        RESOURCES["tmem_imm"],
        Limits(launch=Launch(256), min_occupancy=0.5),
        gpu=gpu,
        tmem=TMEM["tmem_imm"],
    )
    assert report.violations == [
        "occupancy 12.5% at 256 threads < min_occupancy 50.0% (as the driver of NVIDIA B200 grants it; "
        f"TMEM-bound: {ONE_BLOCK})"
    ]


def test_tmem_cols_is_a_ceiling_on_the_ptxs_count() -> None:
    (text,) = judged("tmem_imm", tmem_cols=256).violations
    assert text == (
        "TMEM columns 512 per block > tmem_cols 256 (the sum of its tcgen05.alloc). Fix: allocate fewer "
        "columns, or raise tmem_cols"
    )
    assert judged("tmem_imm", tmem_cols=512).violations == []


def test_an_unknown_count_is_said_and_not_judged_until_stated() -> None:
    report = judged("tmem_runtime", launch=Launch(256, 2))
    assert report.violations == []
    assert report.tmem == TmemUse("unknown", None, 1, TMEM["tmem_runtime"].unread)
    assert report.diagnosis == [
        "TMEM columns per block unknown: tcgen05.alloc takes its column count from %r3, which the PTX does "
        "not set from one constant; launch=(256, 2) is judged without TMEM. State the count with tmem_cols=N "
        "on the marker (a power of 2 from 32 to 512) to have the launch judged with it"
    ]
    stated = judged("tmem_runtime", launch=Launch(256, 2), tmem_cols=512)
    assert stated.tmem is not None
    assert stated.tmem.source == "stated"
    (text,) = stated.violations
    assert "512 TMEM columns per block into 512 per SM (stated with tmem_cols: the PTX's count cannot" in text
    assert judged("tmem_runtime", launch=Launch(256, 2), tmem_cols=256).violations == []


def test_more_columns_than_an_sm_has_wait_forever() -> None:
    use = tmem_use(TmemAlloc(allocs=2, columns=1024), None)
    assert use is not None
    assert use.blocks == 0
    assert use.arithmetic() == (
        "1024 TMEM columns per block into 512 per SM -> no block holds all of them: its last tcgen05.alloc "
        "waits forever unless it frees columns before it"
    )


def test_kernels_without_tmem_are_untouched() -> None:
    report = judged("clustered", launch=Launch(256, 8), min_occupancy=1.0)
    assert (report.violations, report.tmem) == ([], None)


# -- cluster verdicts ----------------------------------------------------------------------------------
def test_a_stated_cluster_that_contradicts_the_compiled_one_fails_whatever_the_level() -> None:
    report = check(
        "t.py::t",
        "clustered",
        ARCH,
        "blackwell.cu",
        RESOURCES["clustered"],
        Limits(cluster=(4, 1, 1)),
        "warn",
    )
    assert report.violations == [
        "cluster=(4, 1, 1) contradicts the kernel's compiled __cluster_dims__(2, 1, 1) "
        "(.reqnctapercluster 2, 1, 1): a launch that sets another cluster shape fails. Fix: drop cluster= "
        "(the compiled dims are used), or change __cluster_dims__"
    ]
    assert report.outcome == "failed"
    assert report.cluster == (2, 1, 1)
    assert judged("clustered", cluster=(2, 1, 1)).violations == []


def test_the_cluster_is_the_compiled_one_else_the_stated_one() -> None:
    assert judged("clustered").cluster == (2, 1, 1)
    assert judged("unclustered").cluster is None
    assert judged("unclustered", cluster=(4, 2, 1)).cluster == (4, 2, 1)


def test_a_cluster_on_an_arch_without_clusters_and_a_floor_without_a_cluster_are_errors() -> None:
    res = replace(RESOURCES["unclustered"], arch="sm_80")
    report = check("t.py::t", "unclustered", "sm_80", "b.cu", res, Limits(cluster=(2, 1, 1)))
    assert report.violations == [
        "cluster=(2, 1, 1) on sm_80: thread block clusters need compute capability 9.0 or newer. Fix: limit "
        'the cluster to those archs, cluster={"sm_90": (2, 1, 1)}'
    ]
    (text,) = judged("unclustered", launch=Launch(128), min_active_clusters=4).violations
    assert text.startswith("min_active_clusters=4, but the kernel runs with no cluster")


def test_a_cluster_over_eight_blocks_names_the_non_portable_attribute() -> None:
    (note,) = judged("unclustered", cluster=(16, 1, 1)).diagnosis
    assert note.startswith("a cluster of 16x1x1 = 16 blocks is over the portable 8: set ")
    assert "cudaFuncAttributeNonPortableClusterSizeAllowed to 1" in note
    assert judged("unclustered", cluster=(8, 1, 1)).diagnosis == []


def _on_gpu(clusters: int | None, error: str | None = None, **limits: Any) -> list[str]:
    gpu = GpuFacts(
        "NVIDIA H200",
        "sm_90",
        DriverView(10, 0, 0, 1024),
        driver_blocks=8,
        driver_active_clusters=clusters,
        cluster_error=error,
    )
    res = replace(RESOURCES["clustered"], arch="sm_90")
    return check("t.py::t", "clustered", "sm_90", "b.cu", res, Limits(**limits), gpu=gpu).violations


def test_no_active_cluster_fails_with_the_arithmetic() -> None:
    (text,) = _on_gpu(0, launch=Launch(256))
    assert text.startswith(
        "the driver of NVIDIA H200 fits 0 clusters of 2x1x1 = 2 blocks of 256 threads and 0 bytes of shared "
        "memory (cuOccupancyMaxActiveClusters): a cluster's 2 blocks must be resident at once on the SMs of "
        "one GPC; one SM holds 8 of these blocks (8 blocks x 8 warps"
    )
    assert text.endswith(
        "so the launch cannot run. Fix: a smaller cluster, or blocks with fewer registers, "
        "threads or shared memory"
    )


def test_min_active_clusters_is_judged_on_the_driver() -> None:
    (text,) = _on_gpu(66, launch=Launch(256), min_active_clusters=100)
    assert text.startswith(
        "active clusters 66 < min_active_clusters 100: the driver of NVIDIA H200 fits 66 clusters of 2x1x1 ="
    )
    assert _on_gpu(66, launch=Launch(256), min_active_clusters=66) == []
    (refused,) = _on_gpu(
        None, "cuOccupancyMaxActiveClusters failed: CUDA_ERROR_INVALID_CLUSTER_SIZE", launch=Launch(256)
    )
    assert refused.startswith("the driver of NVIDIA H200 counts no clusters of 2x1x1")
    assert refused.endswith(
        "CUDA_ERROR_INVALID_CLUSTER_SIZE; one SM holds 8 of these blocks (8 blocks x 8 warps = "
        "64 of 64 warps per SM (100%) on sm_90, limited by warps)"
    )


# -- the marker keys -----------------------------------------------------------------------------------
def test_marker_keys_are_checked_with_the_valid_values_named() -> None:
    base = Path("/proj/tests")
    budget = parse_marker((), {"tmem_cols": 256, "cluster": 2, "min_active_clusters": 4, "launch": 128}, base)
    assert (budget.default.tmem_cols, budget.default.cluster, budget.default.min_active_clusters) == (
        256,
        (2, 1, 1),
        4,
    )
    assert parse_marker((), {"cluster": [2, 2]}, base).default.cluster == (2, 2, 1)
    with pytest.raises(
        MarkerError,
        match=r"tmem_cols=300: expected TMEM columns per block, a power of 2 from "
        r"32 to 512",
    ):
        parse_marker((), {"tmem_cols": 300}, base)
    with pytest.raises(MarkerError, match=r"cluster='2': expected the blocks of a cluster as \(x, y, z\)"):
        parse_marker((), {"cluster": "2"}, base)
    with pytest.raises(MarkerError, match=r"cluster=\(0, 1, 1\)"):
        parse_marker((), {"cluster": (0, 1, 1)}, base)
    with pytest.raises(MarkerError, match="min_active_clusters needs a block size"):
        parse_marker((), {"min_active_clusters": 4}, base)


# -- the record and the summary ------------------------------------------------------------------------
def test_record_fields() -> None:
    rec = to_record(judged("tmem_imm", launch=Launch(256, 1)))
    assert (rec["tmem_cols"], rec["tmem_blocks"], rec["tmem_source"]) == (512, 1, "ptx")
    assert (rec["cluster_dims"], rec["cluster"], rec["active_blocks"]) == (None, None, 8)
    rec = to_record(judged("tmem_pair", launch=Launch(256)))
    assert (rec["tmem_cols"], rec["tmem_blocks"], rec["cluster_dims"]) == (256, 2, (2, 1, 1))
    rec = to_record(judged("unclustered", cluster=(4, 1, 1)))
    assert (rec["tmem_cols"], rec["tmem_source"], rec["cluster_dims"], rec["cluster"]) == (
        None,
        None,
        None,
        (4, 1, 1),
    )


def test_the_summary_shows_tmem_bound_occupancy_and_the_cluster() -> None:
    bound = to_record(judged("tmem_imm", launch=Launch(256, 1)))
    assert occupancy_cell(bound) == "12% @256 TMEM"
    unknown = to_record(judged("tmem_runtime", launch=Launch(256)))
    assert occupancy_cell(unknown) == "100% @256 TMEM?"
    plain = to_record(judged("clustered", launch=Launch(256)))
    assert occupancy_cell(plain) == "100% @256"
    header, _, *rows = summary_lines([plain, to_record(judged("unclustered", cluster=(16, 1, 1)))])
    assert "  cluster  " in header
    assert any("  2x1x1  " in row for row in rows)
    assert any("  16x1x1 non-portable  " in row for row in rows)
    # No cluster anywhere: no column.
    assert "cluster" not in summary_lines([bound])[0]
