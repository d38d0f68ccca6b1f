"""What one compiler of a run builds, and the one line that says it does not build an arch.

`Targets` holds the archs a compiler's own list names (NVRTC's, `nvcc --list-gpu-code`'s) with the arch
table's `a`/`f` variants of them (`with_variants`), less those its ptxas does not take (`--gpu-name` in
`ptxas --help`, read by `gpu_names`; `assembled_by`), and the refusal for an arch it lacks: why (renamed,
dropped, newer than it) and advice that is true. `table_lacks` is the error for an arch the compilers build
but the arch table has no limits for; `in_explain_words` puts the advice in `regbudget explain`'s words.
Pure: no tool is run here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from msgspec import Struct
from msgspec.structs import replace

from ..core.arch import SUPPORTED_ARCHS, SUPPORTED_VARIANTS, arch_number, is_arch_name, lineage, renamed
from ..util.patterns import lazy

# How a run picks another compiler of a kind: the advice of a refusal names the option.
TOOLKIT_OPTION = "--regbudget-toolkit"
NVCC_OPTION = "--regbudget-nvcc"


class Targets(Struct, frozen=True):
    """What one compiler of a run builds, as its own list says (nvrtcGetSupportedArchs, `nvcc
    --list-gpu-code`), and the words a message names it by. An empty list means the compiler could not be
    asked: it is taken to build every arch, and its own error says otherwise."""

    who: str  # "NVRTC 12.9.86 (pip wheels (nvidia-cuda-nvcc-cu12 12.9.86))", "nvcc 13.0.88 (/bin/nvcc, ...)"
    release: str  # "12.9"
    archs: tuple[str, ...]  # "sm_75", "sm_90", "sm_90a", ...: its real archs and the table's variants of them
    option: str  # TOOLKIT_OPTION or NVCC_OPTION: how the run would pick another
    # Its ptxas, where that lacks archs the compiler lists (`assembled_by`), and those archs.
    assembler: str = ""
    assembler_lacks: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return bool(self.archs)

    def builds(self, arch: str) -> bool:
        return not self.archs or arch in self.archs

    def real_archs(self) -> tuple[str, ...]:
        """Its archs without the `a`/`f` variants, in its own order."""
        return tuple(a for a in self.archs if a[-1].isdigit())

    def refusal(self, arch: str) -> str | None:
        """None where it builds `arch`, else the one line that says so: the arch, the compiler with its
        release, why (renamed, dropped, newer than it) and advice that is true."""
        if self.builds(arch):
            return None
        head = f"{self.who} does not build {arch}"
        if arch in self.assembler_lacks:
            lists = f"its --gpu-name list lacks it), though {self.who} lists it"
            head = f"{self.assembler} does not build {arch} ({lists}"
        mine = _release_key(self.release)
        major = mine[0] if mine else 0
        line = lineage(arch)
        older = [r for r in line.listed_by if _release_key(r) < mine] if line else []
        newer = [r for r in line.listed_by if _release_key(r) > mine] if line else []
        new_name = renamed(arch, major)
        if new_name is not None:
            back = (
                f" ({arch} is CUDA {older[-1].split('.')[0]}'s name: {_how(self.option, older[-1])})"
                if older
                else ""
            )
            return f"{head}: CUDA {major} calls this arch {new_name}. Fix: --regbudget-arch={new_name}{back}"
        oldest = min(self.real_archs(), key=arch_number, default=None)
        if oldest is not None and is_arch_name(arch) and arch_number(arch) < arch_number(oldest):
            base = f"sm_{arch_number(arch)}"
            dropped = line is not None and line.dropped_in is not None and major >= line.dropped_in
            why = f"its oldest target is {oldest}" + (f"; CUDA {major} dropped {base}" if dropped else "")
            if not older:
                return f"{head}: {why}. Fix: drop {arch}"
            last = older[-1]
            return f"{head}: {why}. Fix: build it with CUDA {last.split('.')[0]}.x: {_how(self.option, last)}"
        if newer:
            listed = " and ".join(newer)
            verb = "builds" if len(newer) == 1 else "build"
            return f"{head}: CUDA {listed} {verb} it. Fix: {_how(self.option, newer[-1])}"
        return f"{head}, and no CUDA release pytest-regbudget knows of lists it. Fix: drop {arch}"


def assembled_by(targets: Targets, assembler: str, takes: Sequence[str]) -> Targets:
    """`targets` less the archs its ptxas (`assembler`, as a message names it) does not take, by `takes`
    (`gpu_names`); where the compiler's own list is unknown, ptxas's list stands for it. Unchanged where
    ptxas could not say."""
    if not takes:
        return targets
    if not targets.archs:
        return replace(targets, archs=tuple(takes))
    lacks = tuple(a for a in targets.archs if a not in takes)
    kept = tuple(a for a in targets.archs if a in takes)
    return replace(targets, archs=kept, assembler=assembler, assembler_lacks=lacks) if lacks else targets


_GPU_NAME = lazy(r"^--gpu-name\b.*?Allowed values for this option:(.*?)(?:Default value|^--)", re.M | re.S)


def gpu_names(help_text: str) -> tuple[str, ...]:
    """The archs `ptxas --help` allows for --gpu-name ("sm_75", ..., "sm_90a", "sm_100f", ...), in its
    order, without the virtual compute_ and lto_ names; () where the text has no such list."""
    found = _GPU_NAME.search(help_text)
    return tuple(re.findall(r"'(sm_\w+)'", found.group(1))) if found else ()


def _how(option: str, release: str) -> str:
    """How a run gets a compiler of `release` for `option` (a toolkit, or a pinned nvcc). The cu13 and nvcc
    extras install CUDA 13.5 (pyproject.toml), which builds every arch the lineage (core/arch.py) lists for
    a 13.x release."""
    major = release.split(".")[0]
    if option == TOOLKIT_OPTION:
        install = ' (pip install "pytest-regbudget[cu13]")' if major == "13" else ""
        return (
            f"run with --regbudget-toolkit=cu{major}{install}"
            if major in ("12", "13")
            else f"use CUDA {release}"
        )
    if major == "13":
        wheel = 'pip install "pytest-regbudget[nvcc]" installs one'
        return f"pin an nvcc of CUDA {release} with --regbudget-nvcc ({wheel})"
    return f"pin an nvcc of CUDA {major}.x with --regbudget-nvcc (a CUDA {major} install's bin/nvcc)"


# The plugin's options in a refusal's advice, and how `regbudget explain` spells each.
_EXPLAIN_WORDS = (
    ("--regbudget-arch=", "--arch "),
    ("--regbudget-toolkit=", "--toolkit "),
    ("pin an nvcc of CUDA", "use the nvcc of CUDA"),
    ("with --regbudget-nvcc", "with --toolkit (cu13, or that nvcc's CUDA home)"),
)


def in_explain_words(message: str) -> str:
    """A refusal's advice as `regbudget explain` takes it: its --arch and --toolkit for the plugin's
    options."""
    for plugin, explain in _EXPLAIN_WORDS:
        message = message.replace(plugin, explain)
    return message


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split(".")[:2] if p.isdigit())


def with_variants(archs: Iterable[str]) -> tuple[str, ...]:
    """`archs` and, after each, the `a`/`f` variants the arch table knows of it: NVRTC and `nvcc
    --list-gpu-code` list real archs only, and build a listed arch's variants too."""
    out: list[str] = []
    for arch in archs:
        out.append(arch)
        out += [v for v in SUPPORTED_VARIANTS if v[:-1] == arch]
    return tuple(out)


def table_lacks(arch: str, builders: Sequence[Targets]) -> str:
    """The usage error for an arch that compilers of the run build but the arch table has no limits for (an
    arch of a later release, or one older than the table): it is never built with guessed limits."""
    whose = " and ".join(t.who for t in builders)
    newest = max(SUPPORTED_ARCHS, key=arch_number)
    later = is_arch_name(arch) and arch_number(arch) > arch_number(newest)
    fix = f"drop {arch}" + (", or upgrade pytest-regbudget (a later version may know it)" if later else "")
    return (
        f"{whose} {'builds' if len(builders) == 1 else 'build'} {arch}, but pytest-regbudget's arch table "
        f"has no limits for it (threads, blocks, barriers and shared memory per SM; it knows "
        f"{', '.join(SUPPORTED_ARCHS)}), and it does not guess them. Fix: {fix}"
    )
