"""Which Itanium demangler for kernel names: each candidate on a corpus of real mangled names, against GNU
c++filt (`--no-recurse-limit`, so that it takes CUTLASS's long names too) as the reference spelling.

    python benchmarks/demanglers.py [NAMES_FILE ...]

With no file, the corpus is every mangled name in this repository's recorded data, docs and kernels, plus
tests/data/names/cutlass-sm90-kernel-names.txt. Give more files (one name per line, e.g. the `.entry` names
of a CUB build's PTX: `grep -oE '\\.entry [A-Za-z0-9_]+' x.ptx | cut -d' ' -f2`) to widen it.

For each candidate it prints how many names it demangles, how many read as c++filt's once spacing is set
aside (names.normalize), and microseconds per name. A candidate that is not installed is listed as such:
`pip install cxxfilt pycxxfilt cpp-demangle itanium-demangler`. docs/sources.md ("Kernel names") says what
was chosen from these figures and why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_regbudget.core import names  # noqa: E402

MANGLED = re.compile(r"\b_Z[A-Za-z0-9_]+")
Demangle = Callable[[str], str | None]


def corpus(files: list[str]) -> list[str]:
    found: set[str] = set()
    if not files:
        for folder in ("tests/data", "tests/kernels", "docs", "example_project"):
            for path in (ROOT / folder).rglob("*"):
                if path.is_file() and path.suffix in (".txt", ".md", ".cu", ".log", ".json", ".toml", ".ptx"):
                    found.update(MANGLED.findall(path.read_text(errors="replace")))
    for file in files:
        found.update(MANGLED.findall(Path(file).read_text()))
    return sorted(found)


def gnu(all_names: list[str]) -> dict[str, str]:
    """c++filt's spelling of each name (a name it leaves as it is has none)."""
    tool = shutil.which("c++filt")
    if tool is None:
        sys.exit("GNU c++filt (binutils) is the reference: install binutils")
    out = subprocess.run(
        [tool, "--no-recurse-limit"], input="\n".join(all_names), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return {m: d for m, d in zip(all_names, out, strict=True) if d != m}


def candidates() -> dict[str, Demangle | str]:
    found: dict[str, Demangle | str] = {}
    try:
        import cxxfilt

        found["cxxfilt (libstdc++)"] = lambda m: _or_none(cxxfilt.demangle, m)
    except ImportError as exc:
        found["cxxfilt (libstdc++)"] = f"not installed ({exc})"
    try:
        import pycxxfilt

        found["pycxxfilt (LLVM)"] = lambda m: _or_none(pycxxfilt.demangle, m)
    except ImportError as exc:
        found["pycxxfilt (LLVM)"] = f"not installed ({exc})"
    try:
        import cpp_demangle

        found["cpp-demangle (Rust)"] = lambda m: _or_none(cpp_demangle.demangle, m)
    except ImportError as exc:
        found["cpp-demangle (Rust)"] = f"not installed ({exc})"
    try:
        import itanium_demangler

        def pure(m: str) -> str | None:
            node = itanium_demangler.parse(m)
            return None if node is None else str(node)

        found["itanium-demangler (Python)"] = lambda m: _or_none(pure, m)
    except ImportError as exc:
        found["itanium-demangler (Python)"] = f"not installed ({exc})"
    found["names.demangle (ours)"] = lambda m: _or_none(names.demangle, m)
    return found


def _or_none(fn: Callable[[str], str | None], mangled: str) -> str | None:
    try:
        out = fn(mangled)
    except Exception:  # each library signals failure its own way: all mean "not demangled"
        return None
    return None if not out or out == mangled else out


def main() -> None:
    all_names = corpus(sys.argv[1:])
    reference = gnu(all_names)
    print(f"{len(all_names)} mangled names; GNU c++filt --no-recurse-limit demangles {len(reference)}")
    print(f"{'demangler':28} {'demangled':>10} {'= c++filt':>10} {'us/name':>8}")
    for label, fn in candidates().items():
        if isinstance(fn, str):
            print(f"{label:28} {fn}")
            continue
        start = time.perf_counter()
        out = {m: fn(m) for m in all_names}
        spent = (time.perf_counter() - start) / len(all_names) * 1e6
        done = [m for m, d in out.items() if d is not None]
        same = [m for m in done if m in reference and _read(out[m]) == _read(reference[m])]
        print(f"{label:28} {len(done):>10} {len(same):>10} {spent:>8.1f}")
        for m in [m for m in done if m in reference and m not in same][:2]:
            print(f"    differs: {out[m]!s:.110}\n    c++filt: {reference[m]:.110}")


def _read(name: str | None) -> str:
    return names.normalize(name or "").replace(" ", "")


if __name__ == "__main__":
    main()
