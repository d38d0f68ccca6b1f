"""Hopper diagnostics on kernels of our own, with the real NVRTC and ptxas of the wheels: warpgroup roles
(setmaxnreg) reported and budgeted, the C7508 drop attributed to its kernel (ptxas -e) and failed under
`setmaxnreg="required"`, ptxas messages as budgets and in the baseline's ratchet."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers.data import KERNELS
from helpers.projects import copy_kernels

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.tools.nvcc import find_nvcc
from pytest_regbudget.tools.nvrtc import compile_ptx
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.ptxas import run_ptxas
from pytest_regbudget.tools.toolkit import discover

TESTS = """
import pytest

@pytest.mark.regbudget(
    source="roles.cu", kernel="roles", setmaxnreg={"inc": 232, "dec": 40}, ptxas_warnings=0
)
def test_roles():
    pass

@pytest.mark.regbudget(source="roles.cu", kernel="dropped", setmaxnreg="required")
def test_dropped():
    pass

@pytest.mark.regbudget(
    source="roles.cu", kernel="roles", setmaxnreg={"inc": 240, "dec": 40}, defines={"VARIANT": 1}
)
def test_wrong_targets():
    pass

@pytest.mark.regbudget(
    source="roles.cu", kernel="roles", setmaxnreg_threads={"inc": 256, "dec": 128}, defines={"VARIANT": 2}
)
def test_roles_fit():
    pass

@pytest.mark.regbudget(
    source="roles.cu", kernel="roles", setmaxnreg_threads={"inc": 384, "dec": 128}, defines={"VARIANT": 3}
)
def test_roles_overflow():
    pass

@pytest.mark.regbudget(source="mincta.cu", kernel="tooMany", ptxas_warnings=0)
def test_mincta():
    pass

@pytest.mark.regbudget(
    source="mincta.cu",
    kernel="tooMany",
    ptxas_warnings=["*minnctapersm will be ignored*"],
    defines={"VARIANT": 1},
)
def test_mincta_allowed():
    pass
"""


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, dict[str, Any]]]:
    out = pytester.path / "r.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--regbudget-json={out}", *args)
    # On a GPU machine a test also records the build it loads there (sm_90 for an sm_75 test): not its own.
    kernels = json.loads(out.read_text())["kernels"]
    records = {r["nodeid"].split("::")[-1]: r for r in kernels if f"[{r['arch']}" in r["nodeid"]}
    return result, records


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_kernels(pytester.path, "roles.cu", "mincta.cu")
    pytester.makepyfile(test_k=TESTS)
    return pytester


def test_roles_drops_and_messages_on_sm_90a_and_sm_75(project: pytest.Pytester) -> None:
    result, recs = run(
        project, "--regbudget-arch=sm_90a,sm_100a", "-k", "roles or dropped or wrong"
    )  # roles_fit, roles_overflow too
    toolkit = discover()
    entry = compile_kernel(project.path / "roles.cu", "roles", "sm_90a", CompileOptions(), toolkit)
    roles = recs["test_roles[sm_90a]"]
    # The entry count is ptxas's own (a separate build's), the roles are the PTX's targets, by direction.
    assert roles["registers"] == entry.resources.registers
    assert sorted(map(tuple, roles["setmaxnreg"])) == [("dec", 40), ("inc", 232)]
    assert roles["ptxas_messages"] == []
    assert roles["outcome"] == "passed"
    # sm_100a's PTX sets the roles in the other order (dec 40 first): matched by direction, not by order.
    blackwell = recs["test_roles[sm_100a]"]
    assert [tuple(r) for r in blackwell["setmaxnreg"]] == [("dec", 40), ("inc", 232)]
    assert blackwell["outcome"] == "passed"
    assert recs["test_dropped[sm_100a]"]["outcome"] == "failed"
    result.stdout.fnmatch_lines([f"test_roles *roles *sm_90a *{roles['registers']} (inc 232, dec 40)*ok*"])
    # The module-level C7508 belongs to `dropped` alone (ptxas -e tells): it has no __launch_bounds__.
    module = compile_ptx(
        (project.path / "roles.cu").read_text(), "roles.cu", "sm_90a", CompileOptions(), toolkit
    )
    log, _ = run_ptxas(module.ptx, "sm_90a", (), toolkit)
    assert "(C7508)" in log
    assert not re.search(r"C7508.*roles|roles.*C7508", log)
    dropped = recs["test_dropped[sm_90a]"]
    assert [m[:7] for m in dropped["ptxas_messages"]] == ["(C7508)"]
    # The JSON says the roles were dropped, not only that the PTX asks for them.
    assert (dropped["setmaxnreg"] != [], dropped["setmaxnreg_dropped"]) == (True, True)
    assert recs["test_roles[sm_90a]"]["setmaxnreg_dropped"] is False
    assert dropped["outcome"] == "failed"
    assert any("setmaxnreg required, but ptxas dropped them: (C7508)" in v for v in dropped["violations"])
    result.stdout.fnmatch_lines(["*(inc 232, dec 40: ignored by ptxas)*FAILED, 1 ptxas msg*"])
    # 168 x 384 = 64,512 registers at entry hold 232 x 256 + 40 x 128 = 64,512 exactly (cutlass#1676's shape);
    # with one more consumer warpgroup the block no longer launches and the roles no longer fit.
    assert recs["test_roles_fit[sm_90a]"]["outcome"] == "passed"
    overflow = recs["test_roles_overflow[sm_90a]"]["violations"]
    assert any(
        "168 registers at entry x 512 threads = 86,016 > 65,536 registers per block" in v for v in overflow
    )
    assert any(
        "setmaxnreg roles need 40 x 128 (dec) + 232 x 384 (inc) = 94,208 registers" in v for v in overflow
    )
    wrong = recs["test_wrong_targets[sm_90a]"]
    assert any(
        "setmaxnreg targets inc 232, dec 40, expected dec 40, inc 240" in v for v in wrong["violations"]
    )

    result, recs = run(project, "--regbudget-arch=sm_75", "-k", "mincta")
    assert recs["test_mincta[sm_75]"]["outcome"] == "failed"
    assert recs["test_mincta[sm_75]"]["ptxas_messages"] == [
        "Value of threads per SM for entry tooMany is out of range. .minnctapersm will be ignored"
    ]
    assert recs["test_mincta_allowed[sm_75]"]["outcome"] == "passed"


def test_a_new_ptxas_message_fails_the_ratchet(project: pytest.Pytester) -> None:
    marker = '@pytest.mark.regbudget(source="mincta.cu", kernel="tooMany")'
    project.makepyfile(test_k=f"import pytest\n\n{marker}\ndef test_m():\n    pass\n")
    (project.path / "mincta.cu").write_text(
        (KERNELS / "mincta.cu").read_text().replace("(1024, 2)", "(1024)")
    )
    run(project, "--regbudget-arch=sm_75", "--regbudget-update")
    assert "ptxas_messages" not in (project.path / "regbudget-baseline.toml").read_text()
    # A code change brings the message: the ratchet fails on it, and an update records it.
    (project.path / "mincta.cu").write_text((KERNELS / "mincta.cu").read_text())
    _result, recs = run(project, "--regbudget-arch=sm_75")
    assert recs["test_m[sm_75]"]["outcome"] == "failed"
    assert any("new ptxas message(s) since the baseline" in v for v in recs["test_m[sm_75]"]["violations"])
    run(project, "--regbudget-arch=sm_75", "--regbudget-update")
    assert "ptxas_messages = [" in (project.path / "regbudget-baseline.toml").read_text()
    _, recs = run(project, "--regbudget-arch=sm_75")
    assert recs["test_m[sm_75]"]["outcome"] == "passed"


NVCC_TESTS = """
import pytest

@pytest.mark.regbudget(source="roles.cu", kernel="roles", compiler="nvcc", setmaxnreg="required")
def test_roles():
    pass

@pytest.mark.regbudget(source="roles.cu", kernel="dropped", compiler="nvcc", setmaxnreg="required")
def test_dropped():
    pass
"""


def test_nvcc_builds_attribute_the_dropped_roles_to_their_kernel(pytester: pytest.Pytester) -> None:
    """nvcc's ptxas prints C7508 once for the file: `ptxas -e` over the kept PTX places it on `dropped` (no
    __launch_bounds__), not on `roles`, whose roles are kept (CUTLASS and FlashAttention-3 ship such
    files)."""
    try:
        find_nvcc(None)
    except Exception as exc:  # CompileError: no nvcc wheel or toolkit here
        pytest.skip(f"no nvcc: {exc}")
    copy_kernels(pytester.path, "roles.cu")
    pytester.makepyfile(test_k=NVCC_TESTS)
    result, recs = run(pytester, "--regbudget-arch=sm_90a")
    result.assert_outcomes(passed=1, failed=1)
    roles, dropped = recs["test_roles[sm_90a]"], recs["test_dropped[sm_90a]"]
    assert roles["compiler"] == "nvcc"
    assert (roles["outcome"], roles["ptxas_messages"], roles["setmaxnreg_dropped"]) == ("passed", [], False)
    assert [m[:7] for m in dropped["ptxas_messages"]] == ["(C7508)"]
    assert dropped["setmaxnreg_dropped"] is True
    assert any("setmaxnreg required, but ptxas dropped them: (C7508)" in v for v in dropped["violations"])
