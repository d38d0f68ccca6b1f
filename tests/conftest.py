from __future__ import annotations

from pathlib import Path

import pytest

KERNELS = Path(__file__).parent / "kernels"


@pytest.fixture
def kernels() -> Path:
    """The directory of the CUDA sources the tests compile."""
    return KERNELS
