"""The PTX a fatbin holds: `cuobjdump --list-ptx` as cuobjdump 13.5 prints it, and which PTX a kernel's SASS
for an arch comes from (the TMEM columns of a binary are read from it)."""

from __future__ import annotations

import pytest

from pytest_regbudget.core.fatbin import parse_ptx_list, ptx_arch_for

# cuobjdump 13.5 --list-ptx of a fatbin built with -gencode arch=compute_100a,code=[sm_100a,compute_100a] and
# arch=compute_90,code=compute_90, from two translation units.
LISTED = """PTX file    1: bw.1.sm_100a.ptx
PTX file    2: bw.2.sm_90.ptx
PTX file    3: other.3.sm_100a.ptx
"""


def test_ptx_files_are_listed_by_the_arch_their_names_end_with() -> None:
    assert parse_ptx_list(LISTED) == {
        "sm_100a": ["bw.1.sm_100a.ptx", "other.3.sm_100a.ptx"],
        "sm_90": ["bw.2.sm_90.ptx"],
    }
    # A file without PTX: cuobjdump says so on stderr only.
    assert parse_ptx_list("") == {}


@pytest.mark.parametrize(
    ("arch", "held", "chosen"),
    [
        ("sm_100a", ["sm_90", "sm_100a", "sm_100f"], "sm_100a"),
        ("sm_100a", ["sm_90", "sm_100f"], "sm_100f"),
        ("sm_103a", ["sm_100f", "sm_100a"], "sm_100f"),  # a family PTX serves the family's later chips
        ("sm_103a", ["sm_100a"], None),  # an `a` PTX builds its own chip only
        ("sm_100a", ["sm_90a", "sm_90"], None),
        ("sm_100a", [], None),
    ],
)
def test_the_ptx_a_kernels_sass_comes_from(arch: str, held: list[str], chosen: str | None) -> None:
    assert ptx_arch_for(arch, held) == chosen
