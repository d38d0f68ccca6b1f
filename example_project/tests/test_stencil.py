"""A 32 x 32 tile of the 2D 5-point Jacobi stencil in kernels/stencil.cu (the 32 x 8 default is in the
manifest in pyproject.toml)."""

from __future__ import annotations

import pytest

from pytest_regbudget import RegbudgetFixture


@pytest.mark.regbudget(max_regs=32, spills=0, launch=(1024, 2))
def test_jacobi5_32x32(regbudget: RegbudgetFixture) -> None:
    """A 32 x 32 tile: 1,024 threads per block, two blocks per SM. The marker's `defines` could build it too;
    through the fixture the test can also look at the numbers."""
    report = regbudget.compile("../kernels/stencil.cu", "jacobi5", defines={"TX": 32, "TY": 32})
    assert report.shared_mem == (32 + 2) * (32 + 2) * 4
