from __future__ import annotations

from pathlib import Path

import pytest

from pytest_regbudget.core.errors import MarkerError
from pytest_regbudget.core.limits import Launch, Limits
from pytest_regbudget.project.markers import parse_marker

BASE = Path("/proj/tests")


def parse(**kwargs: object) -> object:
    return parse_marker((), kwargs, BASE)


def test_relative_source_resolves_against_the_test_directory() -> None:
    budget = parse_marker((), {"source": "k/poly.cu", "kernel": "poly_eval"}, BASE)
    assert budget.source == BASE / "k/poly.cu"
    assert budget.kernel == "poly_eval"


def test_misspelt_key_names_key_closest_match_and_valid_set() -> None:
    with pytest.raises(MarkerError) as info:
        parse(source="a.cu", kernel="k", max_reg=64)
    msg = str(info.value)
    assert "'max_reg'" in msg
    assert "did you mean 'max_regs'" in msg
    assert "valid keys:" in msg
    assert "min_occupancy" in msg


def test_positional_arguments_are_rejected() -> None:
    with pytest.raises(MarkerError, match="keyword arguments only"):
        parse_marker(("a.cu",), {}, BASE)


def test_source_without_kernel_is_an_error() -> None:
    with pytest.raises(MarkerError, match="kernel is missing"):
        parse(source="a.cu")


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("max_regs", 0, "1..255"),
        ("max_regs", 300, "1..255"),
        ("max_regs", "64", "1..255 registers per thread; got a string '64': write 64"),
        ("spills", -1, "whole number >= 0 bytes"),
        ("stack", 1.5, "whole number"),
        ("launch", (0,), "positive integers"),
        ("launch", (128, 2, 1), "(threads,)"),
        ("min_occupancy", 50, "for 50% write 0.5"),
        ("level", "error", "'fail' or 'warn'"),
    ],
)
def test_bad_values_name_key_and_expectation(key: str, value: object, needle: str) -> None:
    kwargs: dict[str, object] = {"source": "a.cu", "kernel": "k", key: value}
    if key == "min_occupancy":
        kwargs["launch"] = (128,)
    with pytest.raises(MarkerError) as info:
        parse_marker((), kwargs, BASE)
    assert needle in str(info.value)
    assert key in str(info.value)


def test_per_arch_budget_resolves_per_arch_and_skips_missing_archs() -> None:
    budget = parse_marker((), {"max_regs": {"sm_80": 96, "sm_90": 128}, "spills": 0}, BASE)
    assert budget.limits("sm_80").max_regs == 96
    assert budget.limits("sm_90").max_regs == 128
    assert budget.limits("sm_75").max_regs is None
    assert budget.limits("sm_75").caps["spills"] == 0


def test_per_arch_limits_are_built_once_at_parse_time() -> None:
    budget = parse_marker(
        (),
        {"spills": 0, "max_regs": {"sm_80": 96, "sm_90": 128}, "launch": (256,), "stack": {"sm_90": 64}},
        BASE,
    )
    # Every arch gets the scalar keys; a per-arch value only the archs it names, on top of them.
    assert budget.default == Limits(caps={"spills": 0}, launch=Launch(256))
    assert budget.per_arch == {
        "sm_80": Limits(max_regs=96, caps={"spills": 0}, launch=Launch(256)),
        "sm_90": Limits(max_regs=128, caps={"spills": 0, "stack": 64}, launch=Launch(256)),
    }
    assert budget.limits("sm_90") is budget.limits("sm_90")
    assert budget.limits("sm_75") is budget.default


def test_per_arch_values_are_checked_as_scalars_are() -> None:
    with pytest.raises(MarkerError, match=r"max_regs\['sm_80'\]=300: expected 1\.\.255 registers per thread"):
        parse(max_regs={"sm_80": 300})
    with pytest.raises(MarkerError, match=r"stack\['sm_90'\]=-1: expected a whole number >= 0 bytes"):
        parse(stack={"sm_90": -1})
    with pytest.raises(MarkerError, match=r"^hot_spills=-1: expected a whole number >= 0$"):
        parse(hot_spills=-1)


def test_per_arch_budget_with_unknown_arch_lists_supported() -> None:
    with pytest.raises(MarkerError) as info:
        parse(max_regs={"sm_91": 64})
    assert "sm_91" in str(info.value)
    assert "sm_90" in str(info.value)


def test_launch_forms() -> None:
    assert parse_marker((), {"launch": 256}, BASE).limits("sm_90").launch == Launch(256)
    assert parse_marker((), {"launch": (256, 4)}, BASE).limits("sm_90").launch == Launch(256, 4)
    assert str(Launch(512)) == "(512,)"


def test_min_occupancy_needs_launch() -> None:
    with pytest.raises(MarkerError, match="add launch"):
        parse(min_occupancy=0.5)


def test_archs_restriction_validated() -> None:
    assert parse_marker((), {"archs": ["sm_80"]}, BASE).archs == ("sm_80",)
    assert parse_marker((), {"archs": "sm_90"}, BASE).archs == ("sm_90",)
    with pytest.raises(MarkerError, match="sm_91"):
        parse(archs=["sm_91"])


def test_compile_options_from_marker() -> None:
    budget = parse_marker(
        (),
        {
            "defines": {"N": 4, "FAST": None},
            "include_dirs": ["inc"],
            "options": ["-std=c++17"],
            "ptxas_options": "-O2",
        },
        BASE,
    )
    assert budget.options.defines == (("N", "4"), ("FAST", None))
    assert budget.options.include_dirs == (str(BASE / "inc"),)
    assert budget.options.options == ("-std=c++17",)
    assert budget.options.ptxas_options == ("-O2",)


def test_include_dirs_take_environment_variables_and_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H45_INC", str(tmp_path / "inc"))
    (tmp_path / "site" / "h45pkg" / "include").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    budget = parse(include_dirs=["$H45_INC", "${H45_INC}/sub", "{h45pkg}/include", "rel"])
    found = parse(source="{h45pkg}/k.cu", kernel="k")
    assert found.source == tmp_path / "site" / "h45pkg" / "k.cu"  # type: ignore[attr-defined]
    assert budget.options.include_dirs == (  # type: ignore[attr-defined]
        str(tmp_path / "inc"),
        str(tmp_path / "inc" / "sub"),
        str(tmp_path / "site" / "h45pkg" / "include"),
        str(BASE / "rel"),
    )


def test_an_unset_variable_or_a_missing_package_in_include_dirs_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before, "$TORCH_INC" became "<test dir>/$TORCH_INC" and nvcc then failed on a header it could not find.
    monkeypatch.delenv("H45_UNSET_VAR", raising=False)
    with pytest.raises(MarkerError) as info:
        parse(include_dirs=["${H45_UNSET_VAR}/include"])
    assert str(info.value) == (
        "include_dirs: '${H45_UNSET_VAR}/include' names the environment variable H45_UNSET_VAR, which is not "
        "set; set it before the run (export H45_UNSET_VAR=/path/to/dir), or write the path itself "
        "({torch}/include names the directory of an installed package)"
    )
    with pytest.raises(MarkerError, match=r"include_dirs: \{no_such_pkg_h45\} names .*\(pip install"):
        parse(include_dirs=["{no_such_pkg_h45}/include"])


def test_a_per_arch_budget_holds_on_its_suffixed_spellings_unless_they_have_their_own() -> None:
    budget = parse_marker(
        (), {"source": "k.cu", "kernel": "k", "max_regs": {"sm_90": 64, "sm_100a": 96}}, Path(".")
    )
    assert [budget.limits(a).max_regs for a in ("sm_90", "sm_90a", "sm_90f", "sm_100a", "sm_100")] == [
        64,
        64,
        64,
        96,
        None,
    ]


def test_loop_trips_by_file_line_is_a_value_and_by_arch_a_per_arch_one() -> None:
    by_line = parse_marker((), {"loop_trips": {"kernels/poly.cu:17": 50, "poly.cu:30": 8}}, BASE)
    # A loop is named by its file's name, as the diagnosis prints it.
    assert by_line.default.loop_trips == (("poly.cu", 17, 50), ("poly.cu", 30, 8))
    by_arch = parse_marker((), {"loop_trips": {"sm_90": {"poly.cu:17": 50}, "sm_80": 4}}, BASE)
    assert by_arch.default.loop_trips is None
    assert by_arch.limits("sm_90").loop_trips == (("poly.cu", 17, 50),)
    assert by_arch.limits("sm_80").loop_trips == 4
    with pytest.raises(MarkerError, match=r"loop_trips: 'poly.cu': 5 is not a loop's FILE:LINE"):
        parse(loop_trips={"poly.cu": 5, "sm_90": 4})
