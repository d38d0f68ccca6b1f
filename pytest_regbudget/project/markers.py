"""`@pytest.mark.regbudget(...)` arguments -> a frozen Budget, checked once at collection.

Owns the set of valid keys, their types and ranges, and per-arch budgets (`max_regs={"sm_80": 96}`).
Every error names the key, the bad value and what would be valid.
"""

from __future__ import annotations

import glob
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from msgspec import Struct, field
from msgspec.structs import replace

from .. import sources
from ..core.arch import get_arch
from ..core.errors import MarkerError, UnknownArchError
from ..core.limits import LEVELS, Launch, Level, Limits
from ..core.metrics import CAP_KEYS, TOLERANCE_KEYS
from ..core.text import close_key_hint
from ..tools.options import CompileOptions
from ..util.files import one_globstar
from ..util.paths import expand_path
from ..util.patterns import lazy

COMPILE_KEYS = (
    "source",
    "kernel",
    "defines",
    "include_dirs",
    "options",
    "ptxas_options",
    "compiler",
    "binary",
    "depends",
)
# Budgets may be given per arch as a dict keyed by arch name.
BUDGET_KEYS = (
    "max_regs",
    *CAP_KEYS,  # spills, and the capped metrics' names: the metrics table's
    "launch",
    "dynamic_smem",
    "min_occupancy",
    "max_time_ratio",
    "max_time_ms",
    "hot_spills",
    "max_local_share",
    "loop_trips",
    "setmaxnreg",
    "setmaxnreg_threads",
    "ptxas_warnings",
    "tmem_cols",
    "cluster",
    "min_active_clusters",
)
OTHER_KEYS = ("archs", "level", "tolerance")
VALID_KEYS = (*COMPILE_KEYS, *BUDGET_KEYS, *OTHER_KEYS)


class Budget(Struct, frozen=True):
    source: Path | None = None
    kernel: str | None = None
    compiler: str | None = None  # None: ini regbudget_compiler
    binary: Path | None = None  # a prebuilt cubin/fatbin/object/shared library instead of a source
    options: CompileOptions = field(default_factory=CompileOptions)
    archs: tuple[str, ...] | None = None  # None: every arch of the run
    level: Level = "fail"
    default: Limits = field(default_factory=Limits)  # the budgets of an arch that no per-arch value names
    # The archs that per-arch values name (max_regs={"sm_80": 96}), each with all of its budgets.
    per_arch: Mapping[str, Limits] = field(default_factory=dict)
    tolerance: Mapping[str, float] = field(default_factory=dict)

    def limits(self, arch: str) -> Limits:
        """The budgets of `arch`: its own per-arch values, else its base arch's (`max_regs={"sm_90": 64}`
        holds on sm_90a and sm_90f, as `archs=["sm_90"]` runs there), else the default."""
        found = self.per_arch.get(arch)
        if found is None:
            found = self.per_arch.get(_BASE_ARCH.sub("", arch))
        return self.default if found is None else found


_BASE_ARCH = lazy(r"(?<=\d)[af]$")  # sm_90a -> sm_90
_NUMBER = lazy(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _string_number(value: object) -> str:
    """ "; got a string '64': write 64" when a number came quoted, else nothing."""
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return f"; got a string {value!r}: write {value.strip()}"
    return ""


def _count(value: object, label: str, unit: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MarkerError(f"{label}={value!r}: expected a whole number >= 0{unit}{_string_number(value)}")
    return value


def _bytes(value: object, label: str) -> int:
    return _count(value, label, " bytes")


def _registers(value: object, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 255:
        raise MarkerError(f"{label}={value!r}: expected 1..255 registers per thread{_string_number(value)}")
    return value


def _launch(value: object, label: str) -> Launch:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if (
        not isinstance(value, (tuple, list))
        or not 1 <= len(value) <= 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise MarkerError(
            f"{label}={value!r}: expected (threads,) or (threads, blocks_per_sm) with positive integers, "
            f"e.g. launch=(256,) or launch=(256, 4){_string_number(value)}"
        )
    return Launch(value[0], value[1] if len(value) == 2 else None)


def _occupancy(value: object, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        hint = (
            f"; for {value}% write {value / 100:g}" if isinstance(value, (int, float)) and value > 1 else ""
        )
        raise MarkerError(f"{label}={value!r}: expected a fraction in (0, 1]{hint}{_string_number(value)}")
    return float(value)


def _share(value: object, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        hint = (
            f"; for {value}% write {value / 100:g}" if isinstance(value, (int, float)) and value > 1 else ""
        )
        raise MarkerError(
            f"{label}={value!r}: expected a fraction in [0, 1] of the executed instructions, e.g. "
            f"{label}=0.05{hint}{_string_number(value)}"
        )
    return float(value)


_LOOP_LINE = lazy(r"(?P<file>[^:]+):(?P<line>[1-9]\d*)")


def _trips(value: object, label: str) -> int | tuple[tuple[str, int, int], ...]:
    """A count for every loop whose count the code does not show, or counts by FILE:LINE."""
    example = f'e.g. {label}=50 or {label}={{"poly.cu:17": 50}}'
    if not isinstance(value, Mapping):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise MarkerError(
                f"{label}={value!r}: expected a trip count >= 1 or counts by loop, {example}"
                f"{_string_number(value)}"
            )
        return value
    counts = []
    for where, count in value.items():
        found = _LOOP_LINE.fullmatch(where) if isinstance(where, str) else None
        if found is None or isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise MarkerError(
                f"{label}: {where!r}: {count!r} is not a loop's FILE:LINE with a trip count >= 1, {example}"
            )
        counts.append((Path(found.group("file")).name, int(found.group("line")), count))
    return tuple(counts)


def _positive(value: object, label: str, minimum: float, example: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum:
        raise MarkerError(
            f"{label}={value!r}: expected a number >= {minimum:g}, e.g. {example}{_string_number(value)}"
        )
    return float(value)


def _cap(key: str) -> Callable[[Limits, object, str], Limits]:
    """The setter of a metric's cap, in bytes (every capped metric's unit)."""
    return lambda lim, v, label: replace(lim, caps={**lim.caps, key: _bytes(v, label)})


# Per budget key: check a marker value (`label` names it in the error) and set it on a Limits.
_SETTERS: Mapping[str, Callable[[Limits, object, str], Limits]] = {
    "max_regs": lambda lim, v, label: replace(lim, max_regs=_registers(v, label)),
    **{key: _cap(key) for key in CAP_KEYS},
    "launch": lambda lim, v, label: replace(lim, launch=_launch(v, label)),
    "dynamic_smem": lambda lim, v, label: replace(lim, dynamic_smem=_bytes(v, label)),
    "min_occupancy": lambda lim, v, label: replace(lim, min_occupancy=_occupancy(v, label)),
    "max_time_ratio": lambda lim, v, label: replace(
        lim, max_time_ratio=_positive(v, label, 1.0, "1.10 for 10 % slower than the baseline")
    ),
    "max_time_ms": lambda lim, v, label: replace(lim, max_time_ms=_positive(v, label, 0.0, "2.5")),
    "hot_spills": lambda lim, v, label: replace(lim, hot_spills=_count(v, label)),
    "max_local_share": lambda lim, v, label: replace(lim, max_local_share=_share(v, label)),
    "loop_trips": lambda lim, v, label: replace(lim, loop_trips=_trips(v, label)),
    "setmaxnreg": lambda lim, v, label: replace(lim, setmaxnreg=_setmaxnreg(v, label)),
    "ptxas_warnings": lambda lim, v, label: replace(lim, ptxas_warnings=_warnings(v, label)),
    "setmaxnreg_threads": lambda lim, v, label: replace(lim, setmaxnreg_threads=_role_threads(v, label)),
    "tmem_cols": lambda lim, v, label: replace(lim, tmem_cols=_tmem_cols(v, label)),
    "cluster": lambda lim, v, label: replace(lim, cluster=_cluster(v, label)),
    "min_active_clusters": lambda lim, v, label: replace(lim, min_active_clusters=_clusters(v, label)),
}


def _tmem_cols(value: object, label: str) -> int:
    # tcgen05.alloc takes a power of 2 from 32 to 512 columns (PTX ISA, "tcgen05.alloc").
    if isinstance(value, bool) or not isinstance(value, int) or value not in (32, 64, 128, 256, 512):
        raise MarkerError(
            f"{label}={value!r}: expected TMEM columns per block, a power of 2 from 32 to 512 as "
            f"tcgen05.alloc takes them, e.g. {label}=256{_string_number(value)}"
        )
    return value


def _cluster(value: object, label: str) -> tuple[int, int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if (
        not isinstance(value, (tuple, list))
        or not 1 <= len(value) <= 3
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise MarkerError(
            f"{label}={value!r}: expected the blocks of a cluster as (x, y, z) positive integers, e.g. "
            f"{label}=(2, 1, 1){_string_number(value)}"
        )
    x, y, z = (*value, 1, 1)[:3]
    return x, y, z


def _clusters(value: object, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MarkerError(
            f"{label}={value!r}: expected a whole number of clusters >= 1, e.g. {label}=32"
            f"{_string_number(value)}"
        )
    return value


def _setmaxnreg(value: object, label: str) -> str | tuple[tuple[str, int], ...]:
    if value == "required":
        return "required"
    if isinstance(value, Mapping) and value and set(value) <= {"inc", "dec"}:
        targets = []
        for direction, count in value.items():
            if isinstance(count, bool) or not isinstance(count, int) or not 24 <= count <= 256 or count % 8:
                raise MarkerError(
                    f"{label}={value!r}: {direction} {count!r} is no setmaxnreg target "
                    "(24..256, a multiple of 8)"
                )
            targets.append((str(direction), count))
        return tuple(sorted(targets))
    raise MarkerError(
        f'{label}={value!r}: expected "required" or the targets by direction, e.g. {{"inc": 232, "dec": 40}}'
    )


def _role_threads(value: object, label: str) -> tuple[tuple[str, int], ...]:
    if isinstance(value, Mapping) and value and set(value) <= {"inc", "dec"}:
        out = []
        for direction, threads in value.items():
            if isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0 or threads % 128:
                raise MarkerError(
                    f"{label}={value!r}: {direction} {threads!r} is not whole warpgroups (128 threads)"
                )
            out.append((str(direction), threads))
        return tuple(sorted(out))
    raise MarkerError(
        f'{label}={value!r}: expected the threads of each role, e.g. {{"inc": 256, "dec": 128}}'
    )


def _warnings(value: object, label: str) -> int | tuple[str, ...]:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise MarkerError(
        f"{label}={value!r}: expected a count (0: none) or the codes/patterns allowed, "
        'e.g. ["C7510", "*serialized*"]'
    )


def _limits(kwargs: Mapping[str, object]) -> tuple[Limits, dict[str, Limits]]:
    """The budgets of every arch, and those of each arch that a per-arch value names (its own values on
    top of every arch's). Values are checked in key order, and a dict's in its order."""
    default = Limits()
    per_arch: dict[str, Limits] = {}
    for key in BUDGET_KEYS:
        if key not in kwargs:
            continue
        value, put = kwargs[key], _SETTERS[key]
        # {"inc": 232, "dec": 40} is setmaxnreg's value, {"poly.cu:17": 50} loop_trips', not per-arch values.
        own = isinstance(value, Mapping) and (
            (key in ("setmaxnreg", "setmaxnreg_threads") and set(value.keys()) <= {"inc", "dec"})
            or (key == "loop_trips" and not all(str(k).startswith("sm_") for k in value))
        )
        if isinstance(value, Mapping) and not own:
            for a, v in value.items():
                arch = _arch_name(key, a)
                per_arch[arch] = put(per_arch.get(arch, default), v, f"{key}[{a!r}]")
        else:
            default = put(default, value, key)
            per_arch = {arch: put(lim, value, key) for arch, lim in per_arch.items()}
    return default, per_arch


def _level(value: object) -> Level:
    for level in LEVELS:
        if value == level:
            return level
    raise MarkerError(f"level={value!r}: expected 'fail' or 'warn'")


def _arch_name(key: str, name: object) -> str:
    if not isinstance(name, str):
        raise MarkerError(f"{key}: arch {name!r} is not a string like 'sm_90'")
    try:
        get_arch(name)
    except UnknownArchError as exc:
        raise MarkerError(f"{key}: {exc}") from None
    return name


def _strings(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, (str, Path)):
        return (str(value),)
    if isinstance(value, Sequence) and all(isinstance(v, (str, Path)) for v in value):
        return tuple(str(v) for v in value)
    raise MarkerError(f"{key}={value!r}: expected a string or a list of strings")


def check_text(key: str, value: object) -> None:
    """Every string in a key's value (a list's items, a mapping's keys and values, nested) without a NUL
    byte, else MarkerError naming the key: a NUL ends a C string, so NVRTC and the file system would take
    `k\\x00x` as `k` while the baseline keeps it whole. (A file name that is not UTF-8 compiles; only the
    baseline, which is UTF-8, cannot hold it, and an update says so: core/baseline_write.py `encoded`.)"""
    pending, seen = [value], set()
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue  # a list that holds itself
        seen.add(id(item))
        if isinstance(item, Mapping):
            pending.extend([*item.keys(), *item.values()])
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
        elif isinstance(item, (str, Path)) and "\x00" in str(item):
            raise MarkerError(
                f"{key}={value!r}: a NUL byte (\\x00) cannot be in a kernel name, a path or a compiler flag"
            )


# A macro name, function-like ones included ("F(x)"), as -D takes it.
_MACRO = lazy(r"[A-Za-z_]\w*(\([\w\s,.]*\))?")
_DEFINES_HOW = "write defines={'N': 4, 'DEBUG': None} or defines=['N=4', 'DEBUG']"


def _defines(value: object) -> Mapping[str, object] | tuple[str, ...] | None:
    """`{"N": 4, "DEBUG": None}`, `["N=4", "DEBUG"]` or "N=4", checked item by item."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        for name, v in value.items():
            if not isinstance(name, str) or not _MACRO.fullmatch(name):
                raise MarkerError(f"defines: {name!r} is not a macro name; {_DEFINES_HOW}")
            if isinstance(v, bool):
                raise MarkerError(f"defines[{name!r}]={v!r} would define {name} as {v}: write 1 or 0")
            if v is not None and not isinstance(v, (str, int, float)):
                raise MarkerError(
                    f"defines[{name!r}]={v!r}: expected a string, a number or None (a macro without a "
                    f"value); {_DEFINES_HOW}"
                )
        return value
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise MarkerError(f"defines={value!r}: expected a dict or a list of strings; {_DEFINES_HOW}")
    for item in items:
        if not isinstance(item, str):
            hint = ""
            if isinstance(item, (tuple, list)) and len(item) == 2:
                hint = f" (for {item!r} write '{item[0]}={item[1]}' or {{{item[0]!r}: {item[1]!r}}})"
            raise MarkerError(f"defines: item {item!r} is not a string{hint}; {_DEFINES_HOW}")
        name = item.partition("=")[0]
        if not _MACRO.fullmatch(name):
            hint = f" (write {item[2:]!r}: the -D is added for you)" if item.startswith("-D") else ""
            raise MarkerError(f"defines: {item!r} does not start with a macro name{hint}; {_DEFINES_HOW}")
    return tuple(items)


# Options that pick the target: the run does that, per arch (nvcc, NVRTC and ptxas spellings).
_ARCH_OPTIONS = (
    "--gpu-architecture",
    "-arch",
    "--gpu-name",
    "--gpu-code",
    "-code",
    "--generate-code",
    "-gencode",
)
_PASS_THROUGH = ("-Xptxas", "--ptxas-options")
_ARCH_IN = lazy(r"(?:sm|compute|lto)_(\d+[af]?)")


def _arch_option(option: str) -> bool:
    name, eq, value = option.partition("=")
    if name in _PASS_THROUGH and eq:
        return any(_arch_option(o) for o in value.split(","))
    return name in _ARCH_OPTIONS


def _options(key: str, value: object) -> tuple[str, ...]:
    """A list of options, or one string split as a POSIX shell would ("-std=c++17 -O3")."""
    example = f"write {key}=['-std=c++17', '-O3'] or {key}='-std=c++17 -O3'"
    if isinstance(value, str):
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            raise MarkerError(f"{key}={value!r} cannot be split into options ({exc}); {example}") from None
    elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, Path)) for v in value):
        parts = [str(v) for v in value]
    else:
        raise MarkerError(f"{key}={value!r}: expected a string or a list of strings; {example}")
    for i, option in enumerate(parts):
        if _arch_option(option):
            rest = " ".join(parts[i : i + 2])
            found = _ARCH_IN.search(rest)
            arch = f"sm_{found[1]}" if found else "sm_90"
            raise MarkerError(
                f"{key}: {option!r} sets the target arch, which the run chooses for each test: drop it, and "
                f"use archs=[{arch!r}] on the marker to limit this test, or --regbudget-arch={arch} (ini "
                "regbudget_arch) for the whole run"
            )
    return tuple(parts)


def duplicate_markers(found: Sequence[tuple[str, Sequence[object], Mapping[str, object]]]) -> str | None:
    """The error for a test that more than one regbudget marker applies to, None for one or none.

    `found` is (where, args, kwargs) per marker, closest first. Budgets are not merged: a class or module
    marker and a test's own would each hold half of what the test is judged by, so give one marker.
    """
    if len(found) < 2:
        return None
    shown = [
        "regbudget("
        + ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        + f") on {where}"
        for where, args, kwargs in found
    ]
    return (
        f"{len(found)} regbudget markers apply to this test: {'; '.join(shown)}. Markers are not merged: "
        "put every key into one marker, on the test or on its class or module"
    )


def parse_tolerance(value: object, where: str) -> dict[str, float]:
    """`{"registers": 4}` (marker) or "registers=4, spills=16" (ini) -> validated amounts per metric."""
    if isinstance(value, str):
        items: dict[str, object] = {}
        for part in value.replace("\n", ",").split(","):
            if not part.strip():
                continue
            name, eq, amount = part.partition("=")
            if not eq:
                raise MarkerError(f"{where}: {part.strip()!r} is not metric=amount (e.g. registers=4)")
            try:
                items[name.strip()] = float(amount)
            except ValueError:
                raise MarkerError(f"{where}: {part.strip()!r}: {amount.strip()!r} is not a number") from None
        value = items
    if not isinstance(value, Mapping):
        raise MarkerError(f'{where}={value!r}: expected a dict such as {{"registers": 4}}')
    out: dict[str, float] = {}
    for name, amount in value.items():
        if name not in TOLERANCE_KEYS:
            hint = close_key_hint(str(name), TOLERANCE_KEYS)
            raise MarkerError(
                f"{where}: unknown metric {name!r}{hint}; valid metrics: {', '.join(TOLERANCE_KEYS)}"
            )
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise MarkerError(f"{where}: {name}={amount!r}: expected a number >= 0{_string_number(amount)}")
        if name == "occupancy" and amount > 1:
            raise MarkerError(f"{where}: occupancy={amount!r}: expected a fraction such as 0.05")
        out[name] = float(amount)
    return out


def _paths(key: str, kwargs: Mapping[str, object], base_dir: Path) -> tuple[str, ...]:
    """Each path relative to `base_dir`; one that names nothing (a typo, a glob that matches no file) is an
    error, since the cache would then track nothing where the user meant a file."""
    paths = []
    for given in _strings(key, kwargs.get(key, ())):
        magic = any(c in given for c in "*?[")
        # A run of `**` walks the tree once per `**`: expanded as one (the cache key expands it too).
        path = str(base_dir / (one_globstar(given) if magic else given))
        if not (glob.glob(path, recursive=True) if magic else os.path.exists(path)):
            what = "matches no file" if magic else "names no file or directory"
            raise MarkerError(
                f"{key}: {given!r} {what} (relative to {base_dir}); fix the path, or leave it out"
            )
        paths.append(path)
    return tuple(paths)


def _path(key: str, given: str | Path, base_dir: Path) -> Path:
    """A path with `$VAR`, `${VAR}` and `{package}` expanded (util/paths.py), a relative one from base_dir."""
    try:
        return expand_path(str(given), base_dir)
    except LookupError as exc:  # an unset variable, a package that is not installed
        raise MarkerError(f"{key}: {exc}") from None


def source_path(given: str | Path, base_dir: Path) -> Path:
    """A source named as the marker's `source` or a fixture call's (`_path`: MarkerError where unfound)."""
    return _path("source", given, base_dir)


def compile_options(kwargs: Mapping[str, object], base_dir: Path) -> CompileOptions:
    """The compile keys (defines, include_dirs, options, ptxas_options, depends) of a marker or of a
    fixture call, checked alike; relative paths are from `base_dir`, the test file's directory."""
    for key in ("defines", "include_dirs", "options", "ptxas_options", "depends"):
        check_text(key, kwargs.get(key))
    return CompileOptions.make(
        defines=_defines(kwargs.get("defines")),
        include_dirs=[
            str(_path("include_dirs", d, base_dir))
            for d in _strings("include_dirs", kwargs.get("include_dirs", ()))
        ],
        options=_options("options", kwargs.get("options", ())),
        ptxas_options=_options("ptxas_options", kwargs.get("ptxas_options", ())),
        # Relative to the test file, like include_dirs; globs are expanded when the cache key is made.
        depends=_paths("depends", kwargs, base_dir),
    )


def parse_marker(args: Sequence[object], kwargs: Mapping[str, object], base_dir: Path) -> Budget:
    """Validate a marker's arguments; `base_dir` is the test file's directory, for relative paths."""
    if args:
        raise MarkerError(
            f"regbudget takes keyword arguments only, got positional {list(args)!r}; "
            "write e.g. regbudget(source='kernels/poly.cu', kernel='poly_eval', max_regs=64)"
        )
    unknown = [k for k in kwargs if k not in VALID_KEYS]
    if unknown:
        key = unknown[0]
        hint = close_key_hint(key, VALID_KEYS)
        raise MarkerError(f"unknown regbudget key {key!r}{hint}; valid keys: {', '.join(VALID_KEYS)}")
    source = kwargs.get("source")
    kernel = kwargs.get("kernel")
    for key, value in kwargs.items():
        check_text(key, value)
    if source is not None and not isinstance(source, (str, Path)):
        raise MarkerError(f"source={source!r}: expected a path to a .cu file")
    if kernel is not None and not isinstance(kernel, str):
        raise MarkerError(f"kernel={kernel!r}: expected a kernel name such as 'poly_eval' or 'gemm<128, 64>'")
    binary = kwargs.get("binary")
    if binary is not None and not isinstance(binary, (str, Path)):
        raise MarkerError(f"binary={binary!r}: expected a path to a cubin, fatbin, object or shared library")
    if binary is not None and source is not None:
        raise MarkerError("give source= (to compile) or binary= (to read a prebuilt binary), not both")
    if (source is None and binary is None) != (kernel is None):
        missing = "kernel" if kernel is None else "source (or binary)"
        raise MarkerError(f"regbudget needs both source and kernel; {missing} is missing")
    compiler = kwargs.get("compiler")
    if compiler is not None and compiler not in sources.names():
        raise MarkerError(f"compiler={compiler!r}: expected one of {', '.join(map(repr, sources.names()))}")
    options = compile_options(kwargs, base_dir)
    archs = kwargs.get("archs")
    if archs is not None and not archs:
        raise MarkerError(
            f"archs={archs!r} selects no arch; drop it to use every arch of the run, or name some: "
            "archs=['sm_90']"
        )
    arch_tuple = None if archs is None else tuple(_arch_name("archs", a) for a in _strings("archs", archs))
    level = _level(kwargs.get("level", "fail"))
    default, per_arch = _limits(kwargs)
    tolerance = parse_tolerance(kwargs["tolerance"], "tolerance") if "tolerance" in kwargs else {}
    if "min_occupancy" in kwargs and "launch" not in kwargs:
        raise MarkerError("min_occupancy needs a block size: add launch=(threads,)")
    if "min_active_clusters" in kwargs and "launch" not in kwargs:
        raise MarkerError(
            "min_active_clusters needs a block size: add launch=(threads,) (and cluster=(x, y, z) for a "
            "kernel without __cluster_dims__)"
        )
    return Budget(
        source=None if source is None else _path("source", source, base_dir),
        kernel=kernel,
        compiler=compiler,
        binary=None if binary is None else (base_dir / binary),
        options=options,
        archs=arch_tuple,
        level=level,
        default=default,
        per_arch=per_arch,
        tolerance=tolerance,
    )
