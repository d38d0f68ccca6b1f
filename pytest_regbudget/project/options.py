"""The settings that both faces take, defined once: the archs, the toolkit, and the ini keys the `regbudget`
command reads as pytest would (headroom, compiler, nvcc, baseline, tolerance, strict).

As pytest-benchmark's `add_display_options(addoption, prefix)` serves its plugin and its command line, each
option is added through the face's own `addoption` (pytest's `group.addoption`, argparse's `add_argument`)
with the face's prefix: `--regbudget-arch` in pytest, `--arch` in `regbudget explain`. Each ini key is one
`IniKey` that the plugin registers (`add_ini`) and the command reads (project/ini.py). No pytest here: the
command line imports this module too.

Every pytest run reads this table (pytest_addoption), kernels or none, so it imports nothing of the engine:
the arch table is loaded when an arch option is given, and archs are chosen by project/archs.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import NamedTuple

DEFAULT_ARCH = "sm_90"
DEFAULT_BASELINE = "regbudget-baseline.toml"
# The manifest's files (project/manifest.py): [tool.regbudget] in pyproject.toml, or regbudget.toml.
PYPROJECT = "pyproject.toml"
STANDALONE = "regbudget.toml"

AddOption = Callable[..., object]  # pytest's OptionGroup.addoption, or argparse's add_argument


class IniKey(NamedTuple):
    """A key of pytest's ini files, as the plugin registers it (`parser.addini`). A NamedTuple, not a msgspec
    Struct: this module loads on every pytest run, and msgspec with it would cost every run that has no
    kernels."""

    name: str
    help: str
    type: str | None = None  # pytest's addini type: "linelist", "bool"; None: a string
    default: object = None  # None: pytest's default for the type (an empty list for a linelist)

    def add(self, addini: Callable[..., object]) -> None:
        given: dict[str, object] = {"type": self.type} if self.type is not None else {}
        if self.default is not None:
            given["default"] = self.default
        addini(self.name, self.help, **given)


ARCH_INI = IniKey(
    "regbudget_arch",
    f"target archs, comma- or line-separated, as --regbudget-arch (all, native; default {DEFAULT_ARCH})",
    type="linelist",
)
BASELINE_INI = IniKey(
    "regbudget_baseline",
    "baseline file, relative to the ini file's directory (default regbudget-baseline.toml in the rootdir)",
    default="",
)
TOLERANCE_INI = IniKey(
    "regbudget_tolerance",
    "how much worse than the baseline a kernel may get, e.g. 'registers=4, spills=16, occupancy=0.05'",
    default="",
)
COMPILER_INI = IniKey(
    "regbudget_compiler", "nvrtc (default) or nvcc, for markers that name no compiler", default="nvrtc"
)
TOOLKIT_INI = IniKey("regbudget_toolkit", "toolkits to build with, as --regbudget-toolkit", type="linelist")
NVCC_INI = IniKey("regbudget_nvcc", "the nvcc for compiler=nvcc, as --regbudget-nvcc", default="")
HEADROOM_INI = IniKey(
    "regbudget_headroom",
    "registers of headroom `regbudget explain` adds to the budget it suggests, e.g. 'registers=8'",
    default="",
)
STRICT_INI = IniKey("regbudget_strict", "true: as --regbudget-strict", type="bool", default=False)


def arch_list(value: str) -> str:
    """argparse type: reject a name that is not spelt as an arch while parsing, naming the value, the spelling
    it resembles and the supported set. Which archs the toolkits build is judged at start-up."""
    # The arch table is loaded here, when an arch option is given: not by every pytest run.
    from ..core.arch import parse_archs
    from ..core.errors import UnknownArchError

    try:
        parse_archs([value])
    except UnknownArchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def add_arch_option(addoption: AddOption, prefix: str) -> None:
    """`--{prefix}arch`: the archs to build and judge."""
    addoption(
        f"--{prefix}arch",
        action="append",
        type=arch_list,
        default=None,
        metavar="ARCHS",
        help="target archs, comma-separated, may repeat (e.g. sm_80,sm_90); all: every arch each toolkit of "
        "the run builds; native: the GPU's. An arch that no toolkit of the run builds is a usage error. "
        f"Default: ini regbudget_arch, else {DEFAULT_ARCH}.",
    )


def add_toolkit_option(addoption: AddOption, prefix: str, *, does: str, several: str) -> None:
    """`--{prefix}toolkit`: which toolkits build. `does` says what the face does with each, `several` what
    it does with more than one."""
    addoption(
        f"--{prefix}toolkit",
        action="append",
        default=None,
        metavar="NAMES",
        help=f"{does}, comma-separated, may repeat: cu12 (the CUDA 12 wheels), cu13 (the CUDA 13 wheels), "
        f"system (CUDA_HOME, CUDA_PATH, PATH) or a toolkit's directory. {several} Default: ini "
        "regbudget_toolkit, else the one toolkit discovery finds.",
    )


def toolkit_names(option: Sequence[str] | None, ini: Sequence[str]) -> tuple[str, ...]:
    """The toolkits named by the option, else by the ini key: comma-separated, may repeat, each once."""
    values = option or ini
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    return tuple(dict.fromkeys(names))


def parse_headroom(text: str) -> int:
    """Registers of headroom from ini regbudget_headroom ("registers=8"); 0 without a `registers` part."""
    for part in text.split(","):
        key, _, amount = part.partition("=")
        if key.strip() == "registers" and amount.strip().isdigit():
            return int(amount)
    return 0
