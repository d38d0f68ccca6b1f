from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_regbudget.gpu import Device, GpuUnavailable, device

KERNELS = Path(__file__).parent / "kernels"


@pytest.fixture
def kernels() -> Path:
    """The directory of the CUDA sources the tests compile."""
    return KERNELS


@pytest.fixture(scope="session")
def gpu_device() -> Device:
    """The CUDA device, or a skip that says why there is none (a skip is not a pass)."""
    try:
        return device()
    except GpuUnavailable as exc:
        pytest.skip(f"no GPU: {exc}")


def run_json(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[dict[str, Any]]]:
    """Run pytest in `pytester` with a JSON report; return the result and the report's kernel records."""
    out = pytester.path / "report.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={out}", *args)
    records = json.loads(out.read_text())["kernels"] if out.exists() else []
    out.unlink(missing_ok=True)
    return result, records
