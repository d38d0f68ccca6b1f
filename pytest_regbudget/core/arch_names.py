"""The names of the archs the arch table (arch.py) has limits for, with their arch-specific and family
spellings, and the message for a name it has none for. The standard library alone: the baseline checker that
pre-commit runs without the package's dependencies (baseline_check.py) judges a baseline's archs here, as
arch.py's `get_arch` does. arch.py checks at import that its table holds exactly these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..util.patterns import lazy

# The arch table's names, in compute-capability order (arch.py's SUPPORTED_ARCHS).
ARCH_NAMES: tuple[str, ...] = (
    "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90",
    "sm_100", "sm_101", "sm_103", "sm_107", "sm_110", "sm_120", "sm_121",
)  # fmt: skip

# The arch-specific ("a") and family ("f") spellings that the toolkits' ptxas accept (`ptxas --help`,
# --gpu-name: 12.9.86 for sm_101, 13.5.37 for the rest). They compile for the same hardware, so they share
# their base arch's limits. sm_88 has neither.
SUFFIXES: Mapping[str, str] = MappingProxyType(
    {
        "sm_90": "a",
        "sm_100": "af",
        "sm_101": "af",
        "sm_103": "af",
        "sm_107": "af",
        "sm_110": "af",
        "sm_120": "af",
        "sm_121": "af",
    }
)

VARIANT_NAMES: tuple[str, ...] = tuple(
    base + suffix for base in ARCH_NAMES for suffix in SUFFIXES.get(base, "")
)

NAME = lazy(r"sm_(\d+)([af]?)")
# Spellings people reach for instead of sm_XX: compute_90, lto_90a, SM90, 90, 9.0.
_ALMOST = lazy(r"(?:sm|compute|lto)?_?(\d+)([af]?)")
_DOTTED = lazy(r"(\d+)\.(\d)")
_KNOWN = frozenset(ARCH_NAMES)


def known_base(name: str) -> str | None:
    """The table's base arch of `sm_XX`, `sm_XXa` or `sm_XXf` (`sm_90` for `sm_90a`); None for a name the
    table has no limits for."""
    match = NAME.fullmatch(name)
    if match is None:
        return None
    base = f"sm_{match[1]}"
    return base if base in _KNOWN and match[2] in SUFFIXES.get(base, "") else None


def unknown_message(name: str) -> str:
    """Why `name` is no arch of the table, with the spelling it resembles and the supported set."""
    supported = ", ".join(ARCH_NAMES)
    variants = ", ".join(VARIANT_NAMES)
    hint = _suggestion(name)
    did_you_mean = f"did you mean {hint!r}? " if hint is not None else ""
    return f"unknown arch {name!r} ({did_you_mean}supported: {supported}; arch-specific: {variants})"


def _suggestion(name: str) -> str | None:
    text = name.strip().lower()
    dotted = _DOTTED.fullmatch(text)
    if dotted is not None:
        text = dotted[1] + dotted[2]
    almost = _ALMOST.fullmatch(text)
    if almost is None:
        return None
    for candidate in (f"sm_{almost[1]}{almost[2]}", f"sm_{almost[1]}"):
        if candidate != name and known_base(candidate) is not None:
            return candidate
    return None
