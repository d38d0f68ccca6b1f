"""Which test instance checks its cubin on the GPU, and which build it loads: an arch-specific build (sm_90a:
wgmma, setmaxnreg) is loaded on the sm_90 device as it is. Found on an H200, where an sm_90a-only test used to
build its kernel for sm_90 too, which a wgmma kernel does not compile for."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_regbudget.core.arch import runs_on
from pytest_regbudget.gpu.runner import GpuRunner


def test_an_arch_specific_cubin_runs_on_its_base_device() -> None:
    assert runs_on("sm_90", "sm_90")
    assert runs_on("sm_90a", "sm_90")
    assert runs_on("sm_100f", "sm_100")
    assert not runs_on("sm_90", "sm_80")
    assert not runs_on("sm_90a", "sm_100")
    assert not runs_on("sm_80", "sm_90")


@pytest.mark.parametrize(
    ("arch", "item_archs", "expected"),
    [
        ("sm_90a", ("sm_90a",), ("sm_90a", None)),  # its own build, no extra sm_90 one
        ("sm_80", ("sm_80", "sm_90a"), (None, "GPU checks run in the sm_90a instance of this test")),
        ("sm_90a", ("sm_80", "sm_90a"), ("sm_90a", None)),
        ("sm_80", ("sm_80", "sm_86"), ("sm_90", None)),  # no build runs on it: the first instance builds one
        ("sm_86", ("sm_80", "sm_86"), (None, "GPU checks run in the sm_90 instance of this test")),
        ("sm_90", ("sm_90", "sm_90a"), ("sm_90", None)),
    ],
)
def test_the_instance_that_checks_on_the_gpu(
    monkeypatch: pytest.MonkeyPatch,
    arch: str,
    item_archs: tuple[str, ...],
    expected: tuple[str | None, str | None],
) -> None:
    runner = GpuRunner("auto")
    monkeypatch.setattr(runner, "device", lambda: SimpleNamespace(arch="sm_90", name="NVIDIA H200"))
    assert runner.plan(arch, item_archs) == expected
