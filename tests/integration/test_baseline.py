"""The baseline file end to end: update, ratchet, tolerance, stale entries, xdist, bad files, CI reports."""

from __future__ import annotations

import pytest
from helpers.data import KERNELS
from helpers.runs import run_json, start_pytest

HUNGRY = KERNELS / "hungry.cu"
BASELINE = "regbudget-baseline.toml"
# The CUDA release of the NVRTC and ptxas wheels (nvidia-cuda-*-cu12 12.9.x): the last level of a key.
RELEASE = "12.9"


def write_tests(pytester: pytest.Pytester, nacc: dict[str, int], extra: str = "", launch: int = 128) -> None:
    """One marked test per name, each compiling its own copy of the hungry kernel (k_NAME.cu) with that
    many accumulators written into the source: changing the number is a code change, as in a pull request,
    so the kernel keeps its baseline entry (source, kernel, no defines, arch)."""
    for name, n in nacc.items():
        source = HUNGRY.read_text().replace("#define NACC 64", f"#define NACC {n}")
        (pytester.path / f"k_{name}.cu").write_text(source)
    body = "".join(
        f"""
@pytest.mark.regbudget(source="k_{name}.cu", kernel="poly_eval", launch=({launch},){extra})
def test_{name}():
    pass
"""
        for name in nacc
    )
    pytester.makepyfile(test_k="import pytest\n" + body)


def baseline_text(pytester: pytest.Pytester) -> str:
    return (pytester.path / BASELINE).read_text()


def test_update_writes_a_reviewable_file_and_rerun_passes(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8, "b": 16})
    result, records = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*baseline regbudget-baseline.toml updated: 2 added, 0 updated, 0 unchanged, 0 stale"]
    )
    text = baseline_text(pytester)
    assert text.startswith("# pytest-regbudget baseline")
    a = next(r for r in records if r["nodeid"].endswith("test_a[sm_90]"))
    assert (a["compiler"], a["release"], a["ptxas_version"].startswith(f"{RELEASE}.")) == (
        "nvrtc",
        RELEASE,
        True,
    )
    assert a["key"] == ["k_a.cu", "poly_eval", "-", "sm_90", RELEASE]
    assert "\nversion = 3\n" in text
    assert f'[kernels."k_a.cu".poly_eval.-.sm_90."{RELEASE}"]\nregisters = {a["registers"]}\n' in text
    assert f'ptxas = "{a["ptxas_version"]}"\nnvrtc = "{a["nvrtc_version"]}"\ncompiler = "nvrtc"\n' in text
    assert 'tests = [\n    "test_k.py::test_a[sm_90]",\n]' in text
    assert f'[kernels."k_a.cu".poly_eval.-.sm_90."{RELEASE}".occupancy]\n"128 threads" = ' in text
    # A second update with nothing changed rewrites nothing.
    result, _ = run_json(pytester, "--regbudget-update")
    result.stdout.fnmatch_lines(["*updated: 0 added, 0 updated, 2 unchanged, 0 stale"])
    assert baseline_text(pytester) == text
    result, records = run_json(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"2 of 2 baseline entries enforced (CUDA {RELEASE})"])
    assert {r["baseline_status"] for r in records} == {"compared"}
    assert all(r["deltas"] == [] for r in records)
    assert all(r["baseline"]["registers"] == r["registers"] for r in records)


def test_register_change_is_a_one_line_diff(pytester: pytest.Pytester) -> None:
    # The kernel's source changes, as in a pull request; the test and its options do not.
    source = pytester.path / "poly.cu"
    source.write_text(HUNGRY.read_text().replace("#define NACC 64", "#define NACC 8"))
    pytester.makepyfile(
        test_k="""
import pytest
@pytest.mark.regbudget(source="poly.cu", kernel="poly_eval", launch=(32,))
def test_a():
    pass
"""
    )
    run_json(pytester, "--regbudget-update")
    before = baseline_text(pytester).splitlines()
    source.write_text(HUNGRY.read_text().replace("#define NACC 64", "#define NACC 12"))
    run_json(pytester, "--regbudget-update")
    after = baseline_text(pytester).splitlines()
    changed = [(x, y) for x, y in zip(before, after, strict=True) if x != y]
    assert len(changed) == 1
    assert changed[0][0].startswith("registers = ")
    assert changed[0][1].startswith("registers = ")


def test_regression_fails_with_old_new_delta_and_how_to_accept(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8})
    _, (old,) = run_json(pytester, "--regbudget-update")
    write_tests(pytester, {"a": 16})
    result, (new,) = run_json(pytester)
    result.assert_outcomes(failed=1)
    assert new["registers"] > old["registers"]
    delta = new["registers"] - old["registers"]
    # The registers' line, then (its occupancy fell too) the fix both share, once, on the last of them.
    result.stdout.fnmatch_lines(
        [
            f"poly_eval [[]sm_90[]]: registers {old['registers']} -> {new['registers']} (+{delta})"
            " is worse than the baseline*",
            "poly_eval [[]sm_90[]]: * is worse than the baseline; if intended, accept it with pytest"
            " --regbudget-update and commit regbudget-baseline.toml",
        ]
    )
    # Counted in the failure's report: on CI (CI set) pytest's short summary repeats the whole message.
    report = result.stdout.str().split("short test summary info")[0]
    assert report.count("if intended, accept it") == 1
    assert {
        "metric": "registers",
        "baseline": old["registers"],
        "now": new["registers"],
        "delta": delta,
        "verdict": "worse",
    } in new["deltas"]
    result.stdout.fnmatch_lines([f"test_a *poly_eval *sm_90*regs +{delta}*FAILED*"])
    # Accepting it: the update passes and the next run is green.
    result, _ = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*0 added, 1 updated, 0 unchanged, 0 stale"])
    run_json(pytester)[0].assert_outcomes(passed=1)


def test_lower_occupancy_is_a_regression(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8}, launch=256)
    run_json(pytester, "--regbudget-update")
    write_tests(pytester, {"a": 32}, launch=256)
    result, (rec,) = run_json(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*poly_eval [[]sm_90[]]: occupancy 100.0% -> *% (-* pts) is worse than the baseline*"]
    )
    assert {d["metric"] for d in rec["deltas"] if d["verdict"] == "worse"} == {"registers", "occupancy"}


def test_improvement_is_reported_with_the_hint_to_lock_it_in(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 16})
    run_json(pytester, "--regbudget-update")
    write_tests(pytester, {"a": 8})
    result, (rec,) = run_json(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "1 kernel(s) improved on the baseline:",
            "  poly_eval [[]sm_90[]] (test_k.py::test_a[[]sm_90[]]): registers * -> * (-*)",
            "  Run pytest --regbudget-update to lock the improvements in.",
        ]
    )
    assert [d["verdict"] for d in rec["deltas"] if d["metric"] == "registers"] == ["better"]


def test_tolerance_from_marker_and_ini(pytester: pytest.Pytester) -> None:
    # One warp per block: occupancy stays at its maximum, so registers alone move.
    write_tests(pytester, {"a": 8}, launch=32)
    _, (old,) = run_json(pytester, "--regbudget-update")
    write_tests(pytester, {"a": 12}, launch=32)
    _, (new,) = run_json(pytester)
    grew = new["registers"] - old["registers"]
    assert grew > 0
    write_tests(pytester, {"a": 12}, launch=32, extra=f', tolerance={{"registers": {grew}}}')
    result, (rec,) = run_json(pytester)
    result.assert_outcomes(passed=1)
    assert [d["verdict"] for d in rec["deltas"] if d["metric"] == "registers"] == ["tolerated"]
    write_tests(pytester, {"a": 12}, launch=32, extra=f', tolerance={{"registers": {grew - 1}}}')
    result, _ = run_json(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*registers * (+{grew}) is worse than the baseline, tolerance {grew - 1};*"]
    )
    write_tests(pytester, {"a": 12}, launch=32)
    pytester.makeini(f"[pytest]\nregbudget_tolerance = registers={grew}, spills=16\n")
    run_json(pytester)[0].assert_outcomes(passed=1)


def test_bad_tolerance_is_reported(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8}, extra=', tolerance={"regs": 4}')
    result, _ = run_json(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*tolerance: unknown metric 'regs' (did you mean 'registers'?)*"])
    pytester.makeini("[pytest]\nregbudget_tolerance = registers\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*regbudget_tolerance (ini): 'registers' is not metric=amount*"])


def test_absolute_budget_still_fails_during_update_but_entry_is_refreshed(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 16}, extra=", max_regs=40")
    result, (rec,) = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(failed=1)
    assert f"registers = {rec['registers']}" in baseline_text(pytester)


def test_partial_update_keeps_what_it_did_not_run(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8, "b": 8})
    run_json(pytester, "--regbudget-update")
    write_tests(pytester, {"a": 16, "b": 16})
    result, _ = run_json(pytester, "--regbudget-update", "-k", "test_a")
    result.stdout.fnmatch_lines(
        ["1 entry kept: deselected (-k, -m or --deselect)", "*0 added, 1 updated, 0 unchanged, 0 stale"]
    )
    text = baseline_text(pytester)
    assert f'[kernels."k_b.cu".poly_eval.-.sm_90."{RELEASE}"]' in text
    result, _ = run_json(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_b*FAILED*"])


def test_stale_entries_are_listed_and_removed_only_by_a_full_update(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8, "b": 8})
    run_json(pytester, "--regbudget-update")
    write_tests(pytester, {"a": 8})
    result, _ = run_json(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "1 stale baseline entry (test or kernel gone):",
            f"  k_b.cu poly_eval [[]sm_90, CUDA {RELEASE}[]]",
            "  pytest --regbudget-update removes them.",
        ]
    )
    # Naming a test by its node id leaves the rest of its file unseen: nothing of that file is removed.
    result, _ = run_json(pytester, "--regbudget-update", "test_k.py::test_a")
    result.stdout.fnmatch_lines(["1 entry kept: not in this run's paths*"])
    assert "k_b.cu" in baseline_text(pytester)
    # With -k the whole file is collected: test_b is neither collected nor deselected, so it is gone.
    result, _ = run_json(pytester, "--regbudget-update", "-k", "test_a")
    result.stdout.fnmatch_lines(["*0 added, 0 updated, 1 unchanged, 1 stale (removed)"])
    assert "k_b.cu" not in baseline_text(pytester)


def test_kernel_gone_from_a_test_is_stale(pytester: pytest.Pytester) -> None:
    (pytester.path / "hungry.cu").write_text(HUNGRY.read_text())
    test = """
import pytest
@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", defines={"NACC": 8})
def test_a(regbudget):
    regbudget.compile("hungry.cu", "poly_eval", defines={"NACC": 4})
"""
    pytester.makepyfile(test_k=test)
    run_json(pytester, "--regbudget-update")
    # Each define set is a variant of the kernel, with an entry of its own.
    assert f'[kernels."hungry.cu".poly_eval."NACC=4".sm_90."{RELEASE}"]' in baseline_text(pytester)
    pytester.makepyfile(test_k=test.replace("    regbudget.compile(", "    pass  # regbudget.compile("))
    result, _ = run_json(pytester)
    result.stdout.fnmatch_lines(
        ["1 stale baseline entry*", f"  hungry.cu poly_eval (NACC=4) [[]sm_90, CUDA {RELEASE}[]]"]
    )


def test_update_and_run_under_xdist_lose_nothing(pytester: pytest.Pytester) -> None:
    names = {f"t{i}": 4 + i for i in range(8)}
    write_tests(pytester, names)
    result = pytester.runpytest_subprocess("-n", "2", "--regbudget-update", "--regbudget-arch=sm_80,sm_90")
    result.assert_outcomes(passed=16)
    result.stdout.fnmatch_lines(["*16 added, 0 updated, 0 unchanged, 0 stale"])
    parallel = baseline_text(pytester)
    assert parallel.count("registers = ") == 16
    (pytester.path / BASELINE).unlink()
    result = pytester.runpytest_subprocess("--regbudget-update", "--regbudget-arch=sm_80,sm_90")
    assert baseline_text(pytester) == parallel
    # A run under xdist ratchets like a serial one.
    names["t3"] = 40
    write_tests(pytester, names)
    result = pytester.runpytest_subprocess("-n", "2", "--regbudget-arch=sm_80,sm_90")
    result.assert_outcomes(passed=14, failed=2)
    result.stdout.fnmatch_lines(["*registers * -> * (+*) is worse than the baseline*"])


def test_concurrent_updates_of_different_tests_keep_both(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {f"t{i}": 4 + i for i in range(6)})
    args = ["-p", "no:cacheprovider", "--regbudget-update", "-q"]
    procs = [start_pytest(pytester.path, *args, "-k", k) for k in ("t0 or t1 or t2", "t3 or t4 or t5")]
    outputs = [p.communicate(timeout=300)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert baseline_text(pytester).count("registers = ") == 6


def test_corrupt_baseline_is_a_usage_error_and_left_untouched(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8})
    corrupt = b'version = 1\n\n[kernels."x".k.sm_90]\nregisters = 3\nregisters = 4\n'
    (pytester.path / BASELINE).write_bytes(corrupt)
    for args in ((), ("--regbudget-update",)):
        result = pytester.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*{pytester.path / BASELINE} is not valid TOML: *line 5*"])
        assert (pytester.path / BASELINE).read_bytes() == corrupt


def test_entry_of_the_wrong_shape_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8})
    run_json(pytester, "--regbudget-update")
    path = pytester.path / BASELINE
    text = path.read_text()
    bad = text.replace("spill_stores = 0", 'spill_stores = "none"', 1)
    path.write_text(bad)
    result = pytester.runpytest("--regbudget-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f'*[[]kernels."k_a.cu"."poly_eval"."-"."sm_90"."{RELEASE}"[]]: spill_stores = \'none\','
            " expected a whole number >= 0*"
        ]
    )
    assert path.read_text() == bad


def test_an_entry_of_another_patch_version_of_the_release_is_enforced(pytester: pytest.Pytester) -> None:
    # Patch versions of one release (12.9.41, 12.9.86) generate the same code: they share the entry.
    write_tests(pytester, {"a": 8})
    _, (rec,) = run_json(pytester, "--regbudget-update")
    path = pytester.path / BASELINE
    path.write_text(path.read_text().replace(f'ptxas = "{rec["ptxas_version"]}"', f'ptxas = "{RELEASE}.41"'))
    write_tests(pytester, {"a": 16})
    result, (new,) = run_json(pytester)
    result.assert_outcomes(failed=1, warnings=0)
    assert (new["baseline_status"], new["baseline"]["ptxas"]) == ("compared", f"{RELEASE}.41")
    result.stdout.fnmatch_lines(
        [
            "*registers * -> * (+*) is worse than the baseline*",
            f"1 of 1 baseline entries enforced (CUDA {RELEASE})",
        ]
    )


def release_to(text: str, release: str, ptxas: str) -> str:
    """A baseline as another CUDA release would have written it: its entries keyed and recorded by it."""
    old = f'ptxas = "{ptxas_of(text)}"'
    return text.replace(f'."{RELEASE}"', f'."{release}"').replace(old, f'ptxas = "{ptxas}"')


def ptxas_of(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("ptxas = ")).split('"')[1]


def test_a_cuda_upgrade_is_new_for_its_release_and_gets_an_entry_beside_the_old(
    pytester: pytest.Pytester,
) -> None:
    write_tests(pytester, {"a": 8})
    run_json(pytester, "--regbudget-update")
    path = pytester.path / BASELINE
    path.write_text(release_to(baseline_text(pytester), "12.8", "12.8.93"))
    # The kernel got worse, but the baseline holds CUDA 12.8's numbers only: not comparable, so not
    # enforced, and said so (no warning: an upgrade is expected, and strict mode is there to refuse it).
    write_tests(pytester, {"a": 16})
    result, (rec,) = run_json(pytester)
    result.assert_outcomes(passed=1, warnings=0)
    assert (rec["baseline_status"], rec["other_releases"], rec["baseline"], rec["deltas"]) == (
        "new-release",
        ["12.8"],
        None,
        [],
    )
    result.stdout.fnmatch_lines(
        [
            f"0 of 1 baseline entries enforced (CUDA {RELEASE}); not enforced: 1 no entry for CUDA {RELEASE} "
            "yet (--regbudget-strict fails them)",
            f"test_a *poly_eval *sm_90*new for {RELEASE} (entries: 12.8)*ok*",
        ]
    )
    assert "stale" not in result.stdout.str()  # the 12.8 entry is not this run's to judge
    # Strict mode fails it, from the option or the ini.
    result, (rec,) = run_json(pytester, "--regbudget-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*strict: not enforced, the baseline has no CUDA {RELEASE} entry for it (only 12.8); record it "
            "with pytest --regbudget-update and review the diff*"
        ]
    )
    pytester.makeini("[pytest]\nregbudget_strict = true\n")
    run_json(pytester)[0].assert_outcomes(failed=1)
    # An update records this release's numbers beside 12.8's, which it keeps: it did not build with 12.8.
    result, _ = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"1 entry kept: nvrtc 12.8 was not built (this run built: nvrtc {RELEASE})",
            "*updated: 1 added, 0 updated, 0 unchanged, 0 stale",
        ]
    )
    text = baseline_text(pytester)
    assert '[kernels."k_a.cu".poly_eval.-.sm_90."12.8"]' in text
    assert f'[kernels."k_a.cu".poly_eval.-.sm_90."{RELEASE}"]' in text
    # Now held to its own release's entry, strict mode included.
    result, (rec,) = run_json(pytester)
    result.assert_outcomes(passed=1)
    assert rec["baseline_status"] == "compared"
    result.stdout.fnmatch_lines([f"1 of 1 baseline entries enforced (CUDA {RELEASE})"])


@pytest.mark.parametrize("version", [1, 2])
def test_a_development_format_baseline_is_a_usage_error_and_left_untouched(
    pytester: pytest.Pytester, version: int
) -> None:
    """Versions 1 and 2 were written before any release: one line says so and how to record the file anew;
    neither a plain run nor an update touches it."""
    write_tests(pytester, {"a": 8})
    run_json(pytester, "--regbudget-update")
    path = pytester.path / BASELINE
    old = baseline_text(pytester).replace("version = 3", f"version = {version}").replace(f'."{RELEASE}"', "")
    path.write_text(old)
    for args in ((), ("--regbudget-update",)):
        result = pytester.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [
                f"*{path}: baseline format version {version}, written by a development version of "
                "pytest-regbudget before 0.1.0; this one reads version 3 only. Fix: delete the file and "
                "record it anew with pytest --regbudget-update"
            ]
        )
        assert path.read_text() == old


def test_baseline_path_from_option_and_ini(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8})
    pytester.runpytest("--regbudget-update", "--regbudget-baseline=custom/base.toml")
    assert (pytester.path / "custom" / "base.toml").exists()
    pytester.makeini("[pytest]\nregbudget_baseline = ci/regbudget.toml\n")
    result = pytester.runpytest("--regbudget-update")
    result.stdout.fnmatch_lines(["*baseline ci/regbudget.toml (not yet written, updating)*"])
    assert (pytester.path / "ci" / "regbudget.toml").exists()
    assert not (pytester.path / BASELINE).exists()


def test_github_step_summary_markdown_and_annotations(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tests(pytester, {"a": 8, "b": 8})
    run_json(pytester, "--regbudget-update")
    write_tests(pytester, {"a": 16, "b": 8}, extra=', level="fail"')
    summary = pytester.path / "step_summary.md"
    summary.write_text("earlier step output\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    # A push's job: the file links to its line at GITHUB_SHA, and the comment ends with the run's link.
    sha = "c0ffee" * 6 + "abcd"
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/kernels")
    monkeypatch.setenv("GITHUB_SHA", sha)
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)
    md = pytester.path / "out.md"
    result, (a, _) = run_json(pytester, f"--regbudget-markdown={md}")
    result.assert_outcomes(passed=1, failed=1)
    text = summary.read_text()
    assert text.startswith(
        "earlier step output\n### pytest-regbudget (sm_90)\n\n"
        "2 kernel checks: 1 failed, 0 warned, 1 passed; against the baseline: 1 changed (1 worse, "
        f"0 improved), 0 new, 1 unchanged\n\n2 of 2 baseline entries enforced (CUDA {RELEASE})\n\n"
        "| verdict | kernel | arch | file | changes |\n"
    )
    old = a["baseline"]["registers"]
    # One row for the failing check, its file linked at its line; the unchanged kernel is only counted.
    now = a["registers"]
    (row,) = [line for line in text.splitlines() if line.startswith("| **")]
    url = f"https://github.com/octo/kernels/blob/{sha}/k_a.cu#L{a['line']}"
    assert row.startswith(
        f"| **FAILED** | `poly_eval` | sm_90 | [`k_a.cu:{a['line']}`]({url}) | **regs {old} -> {now} "
        f"(+{now - old})"
    )
    assert text.endswith(
        "The HTML and JSON reports: [the run's artifacts](https://github.com/octo/kernels/actions/runs/4242)\n\n"
    )
    assert md.read_text() == text[len("earlier step output\n") :]
    result.stdout.fnmatch_lines(
        [
            "::error file=*k_a.cu,line=10,title=regbudget poly_eval [[]sm_90[]]::registers *"
            " is worse than the baseline*",
        ]
    )
    assert result.stdout.str().count("::error ") == 1


def test_warn_level_gives_a_warning_annotation(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tests(pytester, {"a": 16}, extra=', max_regs=8, level="warn"')
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result, _ = run_json(pytester)
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        ["::warning file=*k_a.cu,line=10,title=regbudget poly_eval [[]sm_90[]]::registers *"]
    )


def test_an_update_for_fewer_archs_keeps_the_other_archs(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8})
    run_json(pytester, "--regbudget-update", "--regbudget-arch=sm_80,sm_90")
    result, _ = run_json(pytester, "--regbudget-update", "--regbudget-arch=sm_90")
    result.stdout.fnmatch_lines(["*0 added, 0 updated, 1 unchanged, 0 stale"])
    assert f'[kernels."k_a.cu".poly_eval.-.sm_80."{RELEASE}"]' in baseline_text(pytester)


def test_renamed_test_keeps_its_kernel_enforced(pytester: pytest.Pytester) -> None:
    write_tests(pytester, {"a": 8})
    run_json(pytester, "--regbudget-update")
    test = (pytester.path / "test_k.py").read_text()
    (pytester.path / "test_k.py").write_text(test.replace("def test_a():", "def test_renamed():"))
    (pytester.path / "k_a.cu").write_text(HUNGRY.read_text().replace("#define NACC 64", "#define NACC 16"))
    result, (rec,) = run_json(pytester)
    result.assert_outcomes(failed=1)
    assert rec["baseline_status"] == "compared"
    result.stdout.fnmatch_lines(["*registers * -> * is worse than the baseline*"])
    # The update moves the entry to the new test name; the old one is gone from the file.
    run_json(pytester, "--regbudget-update")
    text = baseline_text(pytester)
    assert "test_renamed[sm_90]" in text
    assert "test_a[sm_90]" not in text


def test_two_tests_share_one_entry_and_must_agree(pytester: pytest.Pytester) -> None:
    (pytester.path / "hungry.cu").write_text(HUNGRY.read_text())
    pytester.makepyfile(
        test_k="""
import pytest
@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", defines={"NACC": 8}, launch=(128,))
def test_one():
    pass
@pytest.mark.regbudget(source="hungry.cu", kernel="poly_eval", defines={"NACC": 8}, launch=(256,))
def test_two():
    pass
"""
    )
    result, _ = run_json(pytester, "--regbudget-update")
    result.stdout.fnmatch_lines(["*1 added, 0 updated*"])
    text = baseline_text(pytester)
    assert text.count(f'[kernels."hungry.cu".poly_eval."NACC=8".sm_90."{RELEASE}"]') == 1
    assert '"128 threads" = ' in text
    assert '"256 threads" = ' in text
    assert "test_k.py::test_one[sm_90]" in text
    assert "test_k.py::test_two[sm_90]" in text
    # The same variant built two ways cannot share an entry: the second test says so, naming the first.
    test = (pytester.path / "test_k.py").read_text()
    (pytester.path / "test_k.py").write_text(
        test.replace("launch=(256,))", 'launch=(256,), ptxas_options=["-maxrregcount=24"])')
    )
    result, _ = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_k.py::test_one[[]sm_90[]] measured this kernel variant with registers*they share one "
            "baseline entry*",
            "baseline NOT updated: kernels measured differently by two tests:",
        ]
    )
    assert baseline_text(pytester) == text


def test_a_hand_edit_after_an_update_is_read_not_the_parse_the_update_kept(pytester: pytest.Pytester) -> None:
    """An update keeps the parse of the file it wrote (cache/baselines.py); an edit made after it is the
    file's now, and the next run judges by it, never by the kept parse."""
    write_tests(pytester, {"a": 8})
    result, records = run_json(pytester, "--regbudget-update")
    result.assert_outcomes(passed=1)
    registers = records[0]["registers"]
    text = baseline_text(pytester)
    assert f"\nregisters = {registers}\n" in text
    (pytester.path / BASELINE).write_text(text.replace(f"\nregisters = {registers}\n", "\nregisters = 4\n"))
    result, records = run_json(pytester, "--regbudget-strict")
    result.assert_outcomes(failed=1)
    (delta,) = [d for d in records[0]["deltas"] if d["metric"] == "registers"]
    assert (delta["baseline"], delta["now"], delta["verdict"]) == (4, registers, "worse")
