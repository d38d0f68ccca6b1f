"""core/baseline_schema.py: the baseline check that pre-commit's hook runs with the standard library alone
gives `regbudget baseline check`'s output and exit status, byte for byte, on good and bad files; importing it
loads no module from outside the standard library and the package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.runs import regbudget

ROOT = Path(__file__).parents[2]
HOOK = ROOT / "hooks" / "baseline_check.py"
EXAMPLE = (ROOT / "example_project" / "regbudget-baseline.toml").read_text()

LOADED = """
import json, sys
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
import pytest_regbudget.core.baseline_schema
new = set(sys.modules) - before
print(json.dumps(sorted(m for m in new if m.split(".")[0] not in sys.stdlib_module_names)))
"""


def test_the_check_imports_the_standard_library_and_the_package_only() -> None:
    # -S: no site-packages at all, so a third-party import would fail here, not only be listed.
    done = subprocess.run(
        [sys.executable, "-S", "-c", LOADED, str(ROOT)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert loaded, "nothing of the package was imported"
    assert [m for m in loaded if not m.startswith("pytest_regbudget")] == []
    assert "pytest_regbudget.core.baseline" not in loaded  # the msgspec records stay out


BAD = {
    "good": EXAMPLE,
    "registers": EXAMPLE.replace("registers = 10", 'registers = "x"', 1),
    "arch": EXAMPLE.replace("saxpy.-.sm_90.", "saxpy.-.sm_99."),
    "toml": EXAMPLE.replace("registers = 10", "registers = = 10", 1),
    "version": EXAMPLE.replace("version = 3", "version = 9", 1),
    "occupancy": EXAMPLE.replace('"1024 threads" = 1.0', '"1024 threads" = 2.0', 1),
    "spelled": EXAMPLE
    + EXAMPLE[EXAMPLE.index("[kernels.") :].split("\n\n[", 1)[0].replace("saxpy.-", '"saxpy ".-', 1),
}


@pytest.mark.parametrize("case", list(BAD))
def test_the_hook_says_what_the_command_says(case: str, tmp_path: Path) -> None:
    baseline = tmp_path / "regbudget-baseline.toml"
    baseline.write_text(BAD[case])
    command = regbudget("baseline", "check", baseline.name, cwd=tmp_path)
    # The hook's interpreter without site-packages: the standard library alone (Python >= 3.11 reads TOML;
    # 3.10 needs tomli from its site-packages).
    isolated = ["-S"] if sys.version_info >= (3, 11) else []
    hook = subprocess.run(
        [sys.executable, *isolated, str(HOOK), baseline.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (hook.returncode, hook.stdout, hook.stderr) == (command.returncode, command.stdout, command.stderr)
    expected = {"good": 0, "arch": 1, "spelled": 1}.get(case, 2)
    assert command.returncode == expected, command.stderr
    if case == "registers":
        assert "registers = 'x', expected a whole number >= 0" in hook.stderr
        assert '[kernels."<nvrtc>tests/saxpy.cu"."saxpy"."-"."sm_80"."12.9"]' in hook.stderr
    if case == "arch":
        assert "1 entry for arch 'sm_99'" in hook.stderr
