"""A Triton kernel measured as a launch builds it (issue 45): `compile_triton(fn, args=...)` gives the
numbers of `triton.compile` with the specialization a launch makes (written out here by hand, as the issue's
table gives it: an aligned pointer and an int divisible by 16 get divisibility 16, 1 and None become
constexprs), read back from Triton's own cubin with cuobjdump; autotune configs and heuristics; num_warps as a
build setting whose regression fails; a baseline written before the change still enforced and moved; two
files with the same kernel text two kernels. Real Triton and its ptxas, sm_80 and sm_90, no GPU."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers.runs import regbudget, run_json

from pytest_regbudget.tools.cuobjdump import read_binary

pytest.importorskip("triton", reason="triton is in the test extra; it did not import here")

# The forward kernel of Triton's layer-norm tutorial, an RMS norm and an autotuned kernel with a heuristic,
# and their stand-in arguments, shared with benchmarks/triton_launch_check.py.
KERNELS = (Path(__file__).parent.parent / "data" / "triton" / "launch_kernels.py").read_text()

LAUNCH_TESTS = """
import pytest
from kernels_py import layer_norm, rms_norm, LN_4096, LN_4004, RMS

@pytest.mark.regbudget()
def test_ln_4096(regbudget):
    regbudget.compile_triton(layer_norm, args=LN_4096, constexprs={"BLOCK_SIZE": 4096}, num_warps=8)

@pytest.mark.regbudget()
def test_ln_4004(regbudget):
    regbudget.compile_triton(layer_norm, args=LN_4004, constexprs={"BLOCK_SIZE": 4096}, num_warps=8)

@pytest.mark.regbudget()
def test_rms(regbudget):
    regbudget.compile_triton(rms_norm, args=RMS, constexprs={"BLOCK": 4096}, num_warps=8)

HINTED = dict(X="*fp16:16", Y="*fp16:16", W="*fp16:16", B="*fp16:16", Mean="*fp32:16", Rstd="*fp32:16",
              stride="i32:16", N="i32:16", eps="fp32")

@pytest.mark.regbudget()
def test_ln_hinted(regbudget):
    regbudget.compile_triton(layer_norm, signature=HINTED, constexprs={"BLOCK_SIZE": 4096}, num_warps=8)

@pytest.mark.regbudget()
def test_ln_plain(regbudget):
    plain = {k: v.partition(":")[0] for k, v in HINTED.items()}
    regbudget.compile_triton(layer_norm, signature=plain, constexprs={"BLOCK_SIZE": 4096}, num_warps=8)
"""

D16 = [["tt.divisibility", 16]]
LN_HINTED = {
    "X": "*fp16:16",
    "Y": "*fp16:16",
    "W": "*fp16:16",
    "B": "*fp16:16",
    "Mean": "*fp32:16",
    "Rstd": "*fp32:16",
    "stride": "i32:16",
    "N": "i32:16",
    "eps": "fp32",
    "BLOCK_SIZE": "constexpr 4096",
}
# What a launch compiles, by hand: the table (4096 -> ('i32', 'D'), 4004 -> ('i32', ''), 1 and None
# -> constexpr), in the AOT syntax of the report's triton_signature.
EXPECTED = {
    "test_ln_4096": ("layer_norm", LN_HINTED),
    "test_ln_4004": ("layer_norm", {**LN_HINTED, "stride": "i32", "N": "i32"}),
    "test_rms": (
        "rms_norm",
        {
            "Y": "*fp16:16",
            "X": "*fp16:16",
            "W": "*fp16:16",
            "R": "constexpr None",
            "stride": "i32:16",
            "stride_w": "constexpr 1",
            "N": "i32:16",
            "eps": "fp32",
            "BLOCK": "constexpr 4096",
        },
    ),
    "test_ln_hinted": ("layer_norm", LN_HINTED),
    "test_ln_plain": ("layer_norm", {k: v.partition(":")[0] for k, v in LN_HINTED.items()}),
}


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tritons_own(
    fn: Any, aot: dict[str, str], cc: int, options: dict[str, Any], tmp: Path
) -> tuple[int, int, int, int]:
    """(registers, spill stores, spill loads, stack) of Triton's own cubin for `aot` (parameter -> AOT type),
    compiled here as a program would, and read back with cuobjdump."""
    triton: Any = importlib.import_module("triton")
    tc: Any = importlib.import_module("triton.compiler")
    target = importlib.import_module("triton.backends.compiler").GPUTarget("cuda", cc, 32)
    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], Any] = {}
    for i, (name, ty) in enumerate(aot.items()):
        if ty.startswith("constexpr "):
            signature[name] = "constexpr"
            constexprs[(i,)] = ast.literal_eval(ty.removeprefix("constexpr "))
            continue
        base, _, hint = ty.partition(":")
        signature[name] = base
        if hint == "16":
            attrs[(i,)] = D16
    source = tc.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(source, target=target, options=options)
    path = tmp / f"{fn.__name__}_{cc}_{len(list(tmp.iterdir()))}.cubin"
    path.write_bytes(bytes(compiled.asm["cubin"]))
    (own,) = [k for k in read_binary(path) if k.name == fn.__name__]
    return own.registers, own.spill_stores or 0, own.spill_loads or 0, own.stack


def numbers(rec: dict[str, Any]) -> tuple[int, int, int, int]:
    return rec["registers"], rec["spill_stores"], rec["spill_loads"], rec["stack_frame"]


@pytest.mark.slow  # eight Triton compiles of ours and eight of Triton's: about 20 s
def test_launch_fidelity(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(kernels_py=KERNELS, test_launch=LAUNCH_TESTS)
    result, records = run_json(pytester, "--regbudget-arch=sm_80,sm_90", "--regbudget-gpu=off")
    result.assert_outcomes(passed=10)
    module = load(pytester.path / "kernels_py.py")
    by_test = {(r["nodeid"].split("::")[1].split("[")[0], r["arch"]): r for r in records}
    assert len(by_test) == 10
    for (test, arch), rec in sorted(by_test.items()):
        kernel, aot = EXPECTED[test]
        assert rec["kernel"] == kernel
        assert rec["triton_signature"] == aot, (test, arch)
        assert list(rec["triton_signature"]) == list(aot)  # in parameter order
        cc = int(arch.removeprefix("sm_"))
        own = tritons_own(getattr(module, kernel), aot, cc, {"num_warps": 8, "num_stages": 3}, tmp_path)
        assert numbers(rec) == own, (test, arch)
        assert rec["launch"] == [256]
    for arch in ("sm_80", "sm_90"):
        # The AOT hints name the launch's specialization: the same build, the same entry.
        assert numbers(by_test["test_ln_hinted", arch]) == numbers(by_test["test_ln_4096", arch])
        assert by_test["test_ln_hinted", arch]["key"] == by_test["test_ln_4096", arch]["key"]
        # The finding, on this Triton: the specialization changes the kernel's registers.
        assert by_test["test_ln_plain", arch]["registers"] != by_test["test_ln_4096", arch]["registers"]


AUTOTUNE_TESTS = """
import pytest
from kernels_py import scale_rows, h

@pytest.mark.regbudget()
def test_configs(regbudget):
    reports = regbudget.compile_triton_configs(scale_rows, args=(h, h, 4096, 2.0))
    assert len(reports) == 4
"""


@pytest.mark.slow  # four configs, built by us and by Triton, on two archs: about 15 s
def test_autotune_configs_each_measured(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # the table's kernel column shows whole names
    pytester.makepyfile(kernels_py=KERNELS, test_tune=AUTOTUNE_TESTS)
    result, records = run_json(pytester, "--regbudget-arch=sm_80,sm_90", "--regbudget-gpu=off", "-rA")
    result.assert_outcomes(passed=2)
    module = load(pytester.path / "kernels_py.py")
    configs = module.scale_rows.configs
    assert len(records) == 8
    seen = set()
    for rec in records:
        config = next(c for c in configs if str(c) == rec["triton_config"])
        seen.add((str(config), rec["arch"]))
        block = config.kwargs["BLOCK"]
        # The heuristic, evaluated from the args as Heuristics.run does: 4096 rows divide every BLOCK here.
        aot = {
            "X": "*fp16:16",
            "Y": "*fp16:16",
            "N": "i32:16",
            "scale": "fp32",
            "BLOCK": f"constexpr {block}",
            "EVEN": "constexpr True",
        }
        assert rec["triton_signature"] == aot
        label = f"scale_rows (BLOCK: {block}, num_warps: {config.num_warps}, num_stages: {config.num_stages})"
        assert rec["kernel"] == label
        assert rec["key"][1] == "scale_rows"
        assert f"config={config}" in rec["key"][2]
        cc = int(rec["arch"].removeprefix("sm_"))
        options = {"num_warps": config.num_warps, "num_stages": config.num_stages, "num_ctas": 1}
        own = tritons_own(module.scale_rows.fn.fn, aot, cc, options, tmp_path)
        assert numbers(rec) == own, (rec["triton_config"], rec["arch"])
        assert rec["launch"] == [config.num_warps * 32]
    assert len(seen) == 8
    # The summary names each config, not "#2".
    text = result.stdout.str()
    assert "scale_rows #2" not in text
    for config in configs:
        assert f"scale_rows (BLOCK: {config.kwargs['BLOCK']}, num_warps: {config.num_warps}, " in text


BAD_CONFIG_TEST = """
import pytest
import triton
from kernels_py import scale_rows, h

@pytest.mark.regbudget()
def test_bad(regbudget):
    regbudget.compile_triton(scale_rows, args=(h, h, 4096, 2.0), config=triton.Config({"BLOCK": 100}))

@pytest.mark.regbudget()
def test_untuned(regbudget):
    regbudget.compile_triton(scale_rows, args=(h, h, 4096, 2.0))
"""


def test_autotuned_errors_name_the_jit_function(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(kernels_py=KERNELS, test_bad=BAD_CONFIG_TEST)
    result, records = run_json(pytester, "--regbudget-arch=sm_80", "--regbudget-gpu=off")
    result.assert_outcomes(failed=2)
    # A build error's row names the @triton.jit function, not the wrapper object.
    (rec,) = records
    assert rec["kernel"] == "scale_rows"
    assert "scale_rows" in (rec["error"] or "")
    text = result.stdout.str()
    assert "<triton.runtime" not in text
    # Without a config, the tuned constexprs are missing: the error names both ways to give one.
    assert re.search(r"tuned constexprs BLOCK come from a config", text), text
    assert "compile_triton_configs(scale_rows" in text
    assert "config=cfg" in text


META_TESTS = """
from pathlib import Path
import pytest
from kernels_py import layer_norm, LN_4096

SIG = dict(X="*fp16", Y="*fp16", W="*fp16", B="*fp16", Mean="*fp32", Rstd="*fp32", stride="i32", N="i32",
           eps="fp32")

@pytest.mark.regbudget()
def test_ln(regbudget):
    warps = int((Path(__file__).parent / "warps.txt").read_text())
    regbudget.compile_triton(layer_norm, args=LN_4096, constexprs={"BLOCK_SIZE": 4096}, num_warps=warps)
"""


def triton_entries(baseline: Path) -> list[str]:
    """The header of each kernel's entry in the baseline file."""
    found = re.findall(r'^\[kernels\."kernels_py\.py"\.layer_norm\.(.*)\]$', baseline.read_text(), re.M)
    return [f for f in found if not f.endswith(".occupancy")]


@pytest.mark.slow  # five runs with two Triton compiles each: about 15 s
def test_num_warps_regression_fails_against_the_entry(pytester: pytest.Pytester) -> None:
    """num_warps is a build setting, not part of the key: 8 -> 2 warps is compared with the 8-warp entry and
    fails on its registers; the settings change is named; an update keeps one entry per arch."""
    pytester.makepyfile(kernels_py=KERNELS, test_meta=META_TESTS)
    warps = pytester.path / "warps.txt"
    baseline = pytester.path / "regbudget-baseline.toml"
    archs = "--regbudget-arch=sm_80,sm_90"
    warps.write_text("8")
    result, recorded = run_json(pytester, archs, "--regbudget-update")
    result.assert_outcomes(passed=2)
    assert len(triton_entries(baseline)) == 2
    warps.write_text("2")
    result, records = run_json(pytester, archs, "-rA")
    assert result.ret == 1
    result.assert_outcomes(failed=2)
    before = {r["arch"]: r["registers"] for r in recorded}
    for rec in records:
        assert rec["baseline_status"] == "compared", rec
        (delta,) = [d for d in rec["deltas"] if d["metric"] == "registers"]
        assert (delta["baseline"], delta["now"], delta["verdict"]) == (
            before[rec["arch"]],
            rec["registers"],
            "worse",
        )
        assert rec["settings_change"] == "num_warps 8 -> 2"
        assert rec["launch"] == [64]
    result.stdout.fnmatch_lines(["build settings changed for 2 entries: num_warps 8 -> 2 *"])
    warps.write_text("8")
    result, records = run_json(pytester, archs, "--regbudget-strict")
    result.assert_outcomes(passed=2)
    assert all(r["settings_change"] is None and r["baseline_status"] == "compared" for r in records)
    # Recording the 2-warp build replaces each arch's entry, under the same key: nothing new, nothing stale.
    warps.write_text("2")
    result, _ = run_json(pytester, archs, "--regbudget-update")
    result.assert_outcomes(passed=2)
    entries = triton_entries(baseline)
    assert len(entries) == 2
    assert sorted(re.findall(r'"\.(sm_\d+)\."', " ".join(entries))) == ["sm_80", "sm_90"]
    assert baseline.read_text().count('"num_warps=2"') == 2
    assert "num_warps=8" not in baseline.read_text()
    result, _ = run_json(pytester, archs, "--regbudget-strict")
    result.assert_outcomes(passed=2)


OLD_TESTS = """
import pytest
from kernels_py import layer_norm

SIG = dict(X="*fp16", Y="*fp16", W="*fp16", B="*fp16", Mean="*fp32", Rstd="*fp32", stride="i32", N="i32",
           eps="fp32")

@pytest.mark.regbudget()
def test_old(regbudget):
    regbudget.compile_triton(layer_norm, signature=SIG, constexprs={"BLOCK_SIZE": 4096}, num_warps=8)
"""

OLD_SIG = {
    "X": "*fp16",
    "Y": "*fp16",
    "W": "*fp16",
    "B": "*fp16",
    "Mean": "*fp32",
    "Rstd": "*fp32",
    "stride": "i32",
    "N": "i32",
    "eps": "fp32",
}


@pytest.mark.slow  # four runs: about 8 s
def test_baseline_written_before_the_change_is_enforced_and_moved(pytester: pytest.Pytester) -> None:
    """An entry keyed as pytest-regbudget keyed Triton kernels before (num_warps and num_stages in the
    variant, no build settings) is found and enforced under --regbudget-strict, and an update moves it to the
    new key: nothing is new or stale because of the format."""
    pytester.makepyfile(kernels_py=KERNELS, test_old=OLD_TESTS)
    baseline = pytester.path / "regbudget-baseline.toml"
    result, _ = run_json(pytester, "--regbudget-arch=sm_80", "--regbudget-update")
    result.assert_outcomes(passed=1)
    (new_variant,) = triton_entries(baseline)
    new_variant = new_variant.split('"')[1]
    # The same numbers, as the previous version wrote them: its variant and its options digest.
    old_settings = (
        f"triton signature={sorted(OLD_SIG.items())}",
        "constexprs=[('BLOCK_SIZE', 4096)]",
        "num_warps=8",
        "num_stages=3",
    )
    old_variant = ",".join(old_settings)
    text = baseline.read_text().replace(f'"{new_variant}"', f'"{old_variant}"')
    text = re.sub(r"build_settings = \[\n(.*\n)*?\]\n", "", text)
    text = re.sub(r'options_hash = "[0-9a-f]+"', 'options_hash = "0123456789ab"', text)
    baseline.write_text(text)
    result, records = run_json(pytester, "--regbudget-arch=sm_80", "--regbudget-strict", "-rA")
    result.assert_outcomes(passed=1)
    (rec,) = records
    assert rec["baseline_status"] == "compared"
    assert rec["found_under"][2] == old_variant
    assert rec["key"][2] == new_variant
    out = result.stdout.str()
    assert not re.search(r"\b[1-9]\d* (new|stale)\b", out), out
    assert "1 of 1 baseline entries enforced" in out
    result.stdout.fnmatch_lines(["*1 entry read under the key an older pytest-regbudget gave them*"])
    # Enforced: the old entry's registers, one fewer, fail the build.
    regs = rec["registers"]
    baseline.write_text(text.replace(f"registers = {regs}\n", f"registers = {regs - 1}\n", 1))
    result, _ = run_json(pytester, "--regbudget-arch=sm_80", "--regbudget-strict")
    result.assert_outcomes(failed=1)
    baseline.write_text(text)
    result, _ = run_json(pytester, "--regbudget-arch=sm_80", "--regbudget-update")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "0 stale, 1 re-keyed" in out
    assert not re.search(r"\b[1-9]\d* (new|stale)\b", out), out
    assert [e.split('"')[1] for e in triton_entries(baseline)] == [new_variant]
    assert old_variant not in baseline.read_text()


SAME_TEXT = """
import triton
import triton.language as tl

@triton.jit
def scale(X, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + i, tl.load(X + i, mask=i < N) * 2, mask=i < N)
"""

SAME_TEXT_TESTS = """
import pytest
import triton.language as tl
from triton.runtime.jit import MockTensor
import norm_{which} as module

@pytest.mark.regbudget()
def test_{which}(regbudget):
    regbudget.compile_triton(module.scale, args=(MockTensor(tl.float32), 4096), constexprs={{"BLOCK": 256}})
"""


def test_same_kernel_text_in_two_files_is_two_kernels(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Triton's cache key hashes the function's text and first line, not its file: a build cached for
    norm_a.py never names norm_b.py's kernel, whose file and line come from its own function."""
    monkeypatch.setenv("REGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    pytester.makepyfile(
        norm_a=SAME_TEXT,
        norm_b=SAME_TEXT,  # at the same line too: Triton's key holds the text and the first line
        test_a=SAME_TEXT_TESTS.format(which="a"),
        test_b=SAME_TEXT_TESTS.format(which="b"),
    )
    result, _ = run_json(pytester, "--regbudget-arch=sm_80", "test_a.py")
    result.assert_outcomes(passed=1)
    result, records = run_json(pytester, "--regbudget-arch=sm_80", "test_b.py")
    result.assert_outcomes(passed=1)
    def_line = {
        name: (pytester.path / name).read_text().splitlines().index("def scale(X, N, BLOCK: tl.constexpr):")
        + 1
        for name in ("norm_a.py", "norm_b.py")
    }
    (rec,) = records
    assert (rec["source"].rpartition("/")[2], rec["line"]) == ("norm_b.py", def_line["norm_b.py"])
    result, records = run_json(pytester, "--regbudget-arch=sm_80", "--regbudget-update")
    result.assert_outcomes(passed=2)
    places = sorted((r["source"].rpartition("/")[2], r["line"]) for r in records)
    assert places == sorted(def_line.items())
    text = (pytester.path / "regbudget-baseline.toml").read_text()
    assert '[kernels."norm_a.py".scale.' in text
    assert '[kernels."norm_b.py".scale.' in text


def test_explain_prints_the_signature_as_compiled(pytester: pytest.Pytester) -> None:
    """`regbudget explain kernels.py::fn --signature "..."` (Triton's AOT syntax): the rows of the build that
    compile_triton(fn, signature=...) measures, each with its signature as compiled, and per config."""
    pytester.makepyfile(kernels_py=KERNELS)
    hinted = "*fp16:16, *fp16:16, *fp16:16, *fp16:16, *fp32:16, *fp32:16, i32:16, i32:16, fp32, 4096"
    done = regbudget(
        "explain",
        "kernels_py.py::layer_norm",
        "--arch",
        "sm_80,sm_90",
        "--num-warps",
        "8",
        "--signature",
        hinted,
        cwd=pytester.path,
    )
    assert done.returncode == 0, done.stderr
    shown = (
        "triton signature X: *fp16:16, Y: *fp16:16, W: *fp16:16, B: *fp16:16, Mean: *fp32:16, "
        "Rstd: *fp32:16, stride: i32:16, N: i32:16, eps: fp32, BLOCK_SIZE: constexpr 4096"
    )
    assert f"sm_80: {shown}" in done.stdout
    assert f"sm_90: {shown}" in done.stdout
    assert re.search(r"^\(256\) +sm_80 +\d+ ", done.stdout, re.M), done.stdout
    tuned = regbudget(
        "explain",
        "kernels_py.py::scale_rows",
        "--arch",
        "sm_80",
        "--signature",
        "*fp16:16, *fp16:16, i32:16, fp32, -, True",
        cwd=pytester.path,
    )
    assert tuned.returncode == 0, tuned.stderr
    assert tuned.stdout.count("triton signature") == 4
    assert "sm_80 (BLOCK: 2048, num_warps: 8, num_stages: 3): triton signature" in tuned.stdout
    assert "EVEN: constexpr True" in tuned.stdout
    short = regbudget("explain", "kernels_py.py::layer_norm", "--signature", "*fp16", cwd=pytester.path)
    assert short.returncode == 2
    assert "layer_norm has 10 parameters (X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE" in short.stderr


TWO_SETTINGS = """
import pytest
from kernels_py import layer_norm, LN_4096

@pytest.mark.regbudget()
def test_eight(regbudget):
    regbudget.compile_triton(layer_norm, args=LN_4096, constexprs={"BLOCK_SIZE": 4096}, num_warps=8)

@pytest.mark.regbudget()
def test_two(regbudget):
    regbudget.compile_triton(
        layer_norm, args=LN_4096, constexprs={"BLOCK_SIZE": 4096}, num_warps=2, variant=LABEL
    )
"""


def test_one_variant_two_settings_is_a_conflict_that_variant_resolves(pytester: pytest.Pytester) -> None:
    """Two tests that build one variant with different num_warps share its entry, so their numbers must agree:
    the conflict names compile_triton's variant= keyword, which gives one build an entry of its own."""
    pytester.makepyfile(kernels_py=KERNELS, test_two=TWO_SETTINGS.replace("LABEL", "None"))
    result, _ = run_json(pytester, "--regbudget-arch=sm_80", "--regbudget-update")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(['*give one compile_triton call variant="..." (an entry of its own)*'])
    assert not (pytester.path / "regbudget-baseline.toml").exists()
    pytester.makepyfile(test_two=TWO_SETTINGS.replace("LABEL", '"2 warps"'))
    result, records = run_json(pytester, "--regbudget-arch=sm_80", "--regbudget-update")
    result.assert_outcomes(passed=2)
    variants = sorted(r["key"][2] for r in records)
    assert variants[0] + " | variant=2 warps" == variants[1]
    assert len(triton_entries(pytester.path / "regbudget-baseline.toml")) == 2
