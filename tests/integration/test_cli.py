"""The `regbudget` command, run as users run it (a subprocess of `python -m pytest_regbudget`), on real
compiles: explain against separate NVRTC + ptxas builds, compare and merge of real --regbudget-json reports
(a sharded update writes the serial update's file byte for byte), baseline check, and bad input (one line on
stderr, exit status 2)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from helpers.runs import bad_input, regbudget

from pytest_regbudget.cache.store import compile_kernel
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import discover

KERNELS = Path(__file__).parent.parent / "kernels"
BASELINE = "regbudget-baseline.toml"


# --- the command itself ------------------------------------------------------------------------------------
def test_bare_command_prints_help_and_version_is_pyprojects() -> None:
    bare = regbudget()
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.startswith("usage: regbudget")
    for command in ("explain", "compare", "merge", "baseline"):
        assert f"    {command} " in bare.stdout
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "pytest_regbudget._version.__version__"
    }
    from pytest_regbudget import __version__

    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    version = regbudget("--version")
    assert version.returncode == 0
    assert version.stdout == f"regbudget {__version__}\n"


# --- explain ----------------------------------------------------------------------------------------------
BOUNDS = {
    "as written": None,
    "(256)": "__launch_bounds__(256)",
    "(1024)": "__launch_bounds__(1024)",
    "(256, 4)": "__launch_bounds__(256, 4)",
    "(1024, 2)": "__launch_bounds__(1024, 2)",
}


def test_explain_equals_separate_ptxas_runs_of_each_variant(tmp_path: Path) -> None:
    done = regbudget("explain", "hungry.cu::poly_eval", "--arch", "sm_80,sm_90", cwd=KERNELS)
    assert done.returncode == 0, done.stderr
    rows = {}
    for line in done.stdout.splitlines():
        m = re.match(r"(as written|\([\d, ]+\))\s+(sm_\d+)\s+(\d+)\s+(\d+)/(\d+)\s+(\d+)\s+(\d+)", line)
        if m:
            rows[m.group(1), m.group(2)] = tuple(int(g) for g in m.groups()[2:6])
    assert len(rows) == 10, done.stdout
    toolkit = discover()
    for (bounds, arch), shown in rows.items():
        # The kernel file's own BOUNDS macro puts the attribute where explain puts it.
        define = BOUNDS[bounds]
        options = CompileOptions.make(defines={"BOUNDS": define} if define else None)
        r = compile_kernel(KERNELS / "hungry.cu", "poly_eval", arch, options, toolkit).resources
        assert shown == (r.registers, r.spill_stores, r.spill_loads, r.stack_frame), (bounds, arch)
    # For a test in tests/ (--tests-dir's default), beside this folder.
    assert '@pytest.mark.regbudget(source="../hungry.cu", kernel="poly_eval", max_regs=' in done.stdout


def test_explain_bad_input_is_one_line_and_status_2(tmp_path: Path) -> None:
    bad_input(regbudget("explain", "missing.cu::k", cwd=tmp_path), r"expected SOURCE::KERNEL")
    bad_input(regbudget("explain", "hungry.cu::no_such", cwd=KERNELS), r"no_such")
    bad_input(
        regbudget("explain", "hungry.cu::poly_eval", "--bounds", "lots", cwd=KERNELS), r"--bounds 'lots'"
    )


# --- reports: compare, merge ------------------------------------------------------------------------------
TESTS = """
import pytest

@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", defines={{"NACC": {a}}}, launch=(256,))
def test_a():
    pass

@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", defines={{"NACC": {b}}}, launch=(256,))
def test_b():
    pass

@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", defines={{"NACC": 4}})
def test_c():
    pass
"""


def project(pytester: pytest.Pytester, a: int = 8, b: int = 16) -> None:
    (pytester.path / "hungry.cu").write_text((KERNELS / "hungry.cu").read_text())
    pytester.makepyfile(test_k=TESTS.format(a=a, b=b))


def report(pytester: pytest.Pytester, name: str, *args: str) -> Path:
    out = pytester.path / name
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--regbudget-json={out}", *args)
    assert out.exists(), result.stdout.str()
    return out


def test_compare_lists_changed_kernels_and_fails_on_request(pytester: pytest.Pytester) -> None:
    project(pytester)
    a = report(pytester, "a.json", "--regbudget-arch=sm_90")
    # The source changes: more accumulators, more registers (the same kernels, keys and variants).
    (pytester.path / "hungry.cu").write_text(
        (KERNELS / "hungry.cu").read_text().replace("acc[k] * acc[(k + 1) % NACC]", "acc[k] * acc[k] * v[k]")
    )
    b = report(pytester, "b.json", "--regbudget-arch=sm_90")
    records = {
        name: {r["kernel"] + r["key"][2]: r for r in json.loads(p.read_text())["kernels"]}
        for name, p in (("a", a), ("b", b))
    }
    changed = {k for k in records["a"] if records["a"][k]["registers"] != records["b"][k]["registers"]}
    done = regbudget("compare", str(a), str(b))
    assert done.returncode == 0, done.stderr
    assert f"a.json -> b.json: {len(changed)} of 3 kernel build(s) differ" in done.stdout
    for key in changed:
        before, after = records["a"][key]["registers"], records["b"][key]["registers"]
        assert f"registers {before} -> {after}" in done.stdout
    markdown = regbudget("compare", str(a), str(b), "--markdown")
    assert "| kernel | arch | metric | `a.json` | `b.json` |" in markdown.stdout
    worse = any(records["b"][k]["registers"] > records["a"][k]["registers"] for k in changed)
    failing = regbudget("compare", str(a), str(b), "--fail-on", "registers")
    assert failing.returncode == (1 if worse else 0)
    assert regbudget("compare", str(a), str(b), "--fail-on", "registers:999").returncode == 0
    # Bad input.
    bad_input(regbudget("compare", str(a), str(pytester.path / "none.json")), r"none\.json: no such file")
    old = pytester.path / "old.json"
    old.write_text(json.dumps({"kernels": []}))
    bad_input(regbudget("compare", str(a), str(old)), r"old\.json: report version 1 .*reads versions 2 and 3")
    # Version 2 (0.1.0, no provenance) is read as it is.
    v2 = json.loads(a.read_text())
    del v2["provenance"]
    (pytester.path / "v2.json").write_text(json.dumps({**v2, "version": 2}))
    assert regbudget("compare", str(pytester.path / "v2.json"), str(b)).returncode == 0
    bad_input(
        regbudget("compare", str(a), str(b), "--fail-on", "regs"),
        r"--fail-on 'regs': unknown metric \(did you mean 'registers'\?\); use registers, spills",
    )
    # The metric is checked before any file is read: a misspelling is named even when a report is missing.
    bad_input(regbudget("compare", "gone.json", str(b), "--fail-on", "spils"), r"did you mean 'spills'")


def test_sharded_update_merged_equals_a_serial_update_byte_for_byte(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.makepyfile(test_gone=TESTS.format(a=8, b=16).replace("def test_", "def test_gone_"))
    # An old baseline with entries of tests that will be gone, to be removed by both kinds of update.
    first = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--regbudget-arch=sm_80,sm_90", "--regbudget-update"
    )
    first.assert_outcomes(passed=12)
    (pytester.path / "test_gone.py").unlink()
    project(pytester, a=12, b=16)  # one kernel variant changes: a new entry, an old one goes stale
    seed = (pytester.path / BASELINE).read_bytes()
    serial = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--regbudget-arch=sm_80,sm_90", "--regbudget-update"
    )
    serial.assert_outcomes(passed=6)
    want = (pytester.path / BASELINE).read_bytes()
    assert want != seed
    # The same run as three shards, each a -k selection, then one merge.
    (pytester.path / BASELINE).write_bytes(seed)
    shards = [
        report(pytester, f"shard{i}.json", "--regbudget-arch=sm_80,sm_90", "-k", name)
        for i, name in enumerate(("test_a", "test_b", "test_c"))
    ]
    assert (pytester.path / BASELINE).read_bytes() == seed  # the shards update nothing
    done = regbudget(
        "merge",
        *map(str, shards),
        "-o",
        str(pytester.path / "merged.json"),
        "--update",
        BASELINE,
        cwd=pytester.path,
    )
    assert done.returncode == 0, done.stderr
    assert (pytester.path / BASELINE).read_bytes() == want
    merged = json.loads((pytester.path / "merged.json").read_text())
    assert len(merged["kernels"]) == 6
    assert merged["scope"]["merged"] == ["shard0.json", "shard1.json", "shard2.json"]


def test_merge_refuses_shards_that_disagree(pytester: pytest.Pytester) -> None:
    project(pytester)
    one = report(pytester, "one.json", "--regbudget-arch=sm_90", "-k", "test_a")
    doc: dict[str, Any] = json.loads(one.read_text())
    doc["kernels"][0]["registers"] += 8
    doc["kernels"][0]["nodeid"] = doc["kernels"][0]["nodeid"].replace("test_a", "test_a2")
    two = pytester.path / "two.json"
    two.write_text(json.dumps(doc))
    # A record whose numbers are not its measured entry's is an edited report, whichever it is.
    done = regbudget("merge", str(one), str(two), "--update", str(pytester.path / BASELINE))
    bad_input(
        done, r"test_a2.*\[sm_90\]: the record says .* \(\d+, 0, 0, 0, 0\), its measured entry otherwise"
    )
    # Both edited alike: another measurement of the same kernel, which the shards disagree on.
    doc["kernels"][0]["measured"]["registers"] += 8
    doc["kernels"][0]["measured"]["tests"] = [doc["kernels"][0]["nodeid"]]
    two.write_text(json.dumps(doc))
    done = regbudget("merge", str(one), str(two), "--update", str(pytester.path / BASELINE))
    bad_input(done, r"shards disagree: .*poly_eval.* \(in one\.json, two\.json\)")
    assert not (pytester.path / BASELINE).exists()
    bad_input(regbudget("merge", str(pytester.path / "nothing.json")), r"nothing\.json: no such file")


# --- baseline check ---------------------------------------------------------------------------------------
def test_baseline_check(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--regbudget-update").assert_outcomes(passed=3)
    good = pytester.path / BASELINE
    done = regbudget("baseline", "check", str(good))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{good}: ok (3 entries)"
    text = good.read_text()
    unknown = pytester.path / "unknown.toml"
    unknown.write_text(text.replace("sm_90", "sm_99"))
    done = regbudget("baseline", "check", str(unknown))
    assert done.returncode == 1
    assert "3 entries for arch 'sm_99'" in done.stderr
    spelled = pytester.path / "spelled.toml"
    first_table = text[text.index("[kernels.") :]
    spelled.write_text(
        text + "\n" + first_table.replace("poly_eval", '"poly_eval "', 1).split("\n\n[", 1)[0] + "\n"
    )
    done = regbudget("baseline", "check", str(spelled))
    assert done.returncode == 1, done.stderr
    assert "one kernel spelled two ways" in done.stderr
    broken = pytester.path / "broken.toml"
    broken.write_text(text.replace("registers = ", "registers = = ", 1))
    bad_input(regbudget("baseline", "check", str(broken)), r"broken\.toml")


def test_every_subcommand_has_help() -> None:
    for args in (
        [],
        ["explain"],
        ["compare"],
        ["merge"],
        ["history"],
        ["blame"],
        ["baseline"],
        ["baseline", "check"],
    ):
        done = regbudget(*args, "--help")
        assert done.returncode == 0, (args, done.stderr)
        assert "usage: regbudget" in done.stdout


def test_each_subcommand_is_a_module_registered_by_name() -> None:
    from pytest_regbudget.cli import commands

    assert list(commands.COMMANDS) == ["explain", "compare", "merge", "history", "blame", "baseline"]
    for name, command in commands.COMMANDS.items():
        assert command.run.__module__ == f"pytest_regbudget.cli.commands.{name}"
    listed = re.findall(r"^    (\w+) ", regbudget().stdout, re.MULTILINE)
    assert listed == list(commands.COMMANDS)
    # `python -m pytest_regbudget.cli` is the command too (in a process of its own: under pytest the package
    # is a plugin whose modules pytest's assertion rewriter finds, and runpy cannot run those).
    done = regbudget(module="pytest_regbudget.cli")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: regbudget")


def test_explain_builds_with_include_dirs_and_options_and_its_marker_says_so(
    pytester: pytest.Pytester,
) -> None:
    """-I and --options join -D; a compile error shows the compiler's whole log; the suggested marker carries
    the build (and the compiler): pasted into a test beside the sources, it builds the same kernel."""
    (pytester.path / "inc").mkdir()
    (pytester.path / "inc" / "cfg.h").write_text("#define NACC 8\n")
    (pytester.path / "k.cu").write_text('#include "cfg.h"\n' + (KERNELS / "hungry.cu").read_text())
    failed = regbudget("explain", "k.cu::poly_eval", "--arch", "sm_90", cwd=pytester.path)
    assert failed.returncode == 2
    assert 'cannot open source file "cfg.h"' in failed.stderr
    done = regbudget(
        "explain",
        "k.cu::poly_eval",
        "--arch",
        "sm_90",
        "-I",
        "inc",
        "--options=-std=c++17",
        cwd=pytester.path,
    )
    assert done.returncode == 0, done.stderr
    marker = done.stdout.strip().splitlines()[-1]
    # Relative to tests/ (--tests-dir's default), where the test goes: markers resolve paths from their file.
    assert marker.startswith('@pytest.mark.regbudget(source="../k.cu", kernel="poly_eval"')
    assert "include_dirs=['../inc'], options=['-std=c++17']" in marker
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_pasted.py").write_text(
        f"import pytest\n\n{marker}\ndef test_pasted():\n    pass\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--regbudget-arch=sm_90")
    result.assert_outcomes(passed=1)
    # --tests-dir names another directory; --bounds is checked before anything is built.
    done = regbudget(
        "explain", "k.cu::poly_eval", "--arch", "sm_90", "-I", "inc", "--tests-dir", ".", cwd=pytester.path
    )
    assert 'source="k.cu"' in done.stdout.strip().splitlines()[-1]
    bad_input(
        regbudget("explain", "k.cu::poly_eval", "--bounds", "256x0", cwd=pytester.path), r"--bounds '256x0'"
    )
    bad_input(
        regbudget("explain", "k.cu::poly_eval", "--bounds", "2048", cwd=pytester.path), r"--bounds '2048'"
    )
