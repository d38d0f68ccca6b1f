"""The archs a run is given: the option's, else the ini key's, else the manifest's, else the default. Both
faces choose their archs here, then check each name with core/arch.py's `parse_archs`, as the option table
(project/options.py) does while an arch option is parsed.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from .manifest import Manifest, arch_conflict
from .options import ARCH_INI, DEFAULT_ARCH


class ArchChoice(Struct, frozen=True):
    """The archs a run is given, before they are checked, and where they were named (for its messages)."""

    given: tuple[str, ...]
    named_by: str  # "--regbudget-arch", "regbudget_arch (ini)", or the manifest's "LABEL: arch"


def choose_archs(
    option: Sequence[str] | None, ini: Sequence[str], manifest: Manifest | None, *, flag: str
) -> ArchChoice:
    """The option's archs (`flag` names it), else the ini key's, else the manifest's, else DEFAULT_ARCH.
    ValueError when the ini key and the manifest both set them, differently (the option overrides both)."""
    if manifest is not None and not option:
        conflict = arch_conflict(manifest, ini)
        if conflict:
            raise ValueError(f"regbudget manifest: {conflict}")
    given = option or ini or (manifest.archs if manifest else ()) or [DEFAULT_ARCH]
    named_by = flag
    if not option and ini:
        named_by = f"{ARCH_INI.name} (ini)"
    elif not option and manifest is not None and manifest.archs:
        named_by = f"{manifest.label}: arch"
    return ArchChoice(tuple(given), named_by)
