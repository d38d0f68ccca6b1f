"""Other block sizes of the row-wise softmax template in kernels/softmax.cu (softmax<256> is in the manifest
in pyproject.toml)."""

from __future__ import annotations

import pytest

from pytest_regbudget import RegbudgetFixture


@pytest.mark.parametrize("block", [128, 512, 1024])
@pytest.mark.regbudget(max_regs=32, spills=0)
def test_softmax_blocks(regbudget: RegbudgetFixture, block: int) -> None:
    """Other block sizes of the same template, compiled through the fixture: a name expression per size."""
    report = regbudget.compile("../kernels/softmax.cu", f"softmax<{block}>")
    # One float of scratch per warp.
    assert report.shared_mem == block // 32 * 4
