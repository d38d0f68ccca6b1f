"""Kernel names: the readable name a kernel is shown by, and how a name the user writes finds its kernel.

A kernel's *entry* is its name in the PTX or the cubin: `scale` for an `extern "C"` kernel, a mangled name
for C++ (`_Z13MatrixMulCUDAILi32EEvPfS0_S0_ii`). Reports, the baseline and annotations show its *readable*
name; the entry stays in the JSON record's `entry`.

- `demangle(entry)`: the full C++ name, as GNU c++filt prints it (through the `cxxfilt` package, a ctypes
  binding of libstdc++'s own demangler): `void MatrixMulCUDA<32>(float*, float*, float*, int, int)`. A name
  libstdc++ refuses (over 1,024 characters: CUTLASS's) goes to LLVM's demangler (`pycxxfilt`), printed with
  GNU's spacing. A name that is not mangled (`extern "C"`) comes back as it is, and so does one both reject.
- `readable(entry)`: that name without its return type and parameter list, with its namespaces and template
  arguments as c++filt prints them: `MatrixMulCUDA<32>`, `cutlass::Kernel2<Foo>`,
  `reduce6<float, 256u, true>`, `apply<void (*)(int)>`.
- `display_names(entries)`: the readable name of each entry; entries that share one (an overload set) are
  shown with their parameter lists instead: `k(int)`, `k(float)`.
- `shown(requested, entry)`: the name a kernel the user named is reported by: its readable name, whatever the
  spelling it was found by (with its parameter list if the user gave one), so that one kernel has one name
  in the report and one key in the baseline.

A name the user writes (marker `kernel=`, `load(kernel=)`, an nvcc build, a manifest's `kernels`) finds an
entry through `match`, in this order; a step that finds two or more entries finds none, and the error lists
them:

1. the entry itself: `_Z13MatrixMulCUDAILi32EEvPfS0_S0_ii`, `scale`;
2. the readable name, both normalized (below): `MatrixMulCUDA<32>`, `reduce6<float, 256, true>`. A name
   written with a parameter list is compared with the demangled signature instead, which tells overloads
   apart: `k(float*)`;
3. the readable name without the kernel's namespaces, when the user wrote none: `Kernel2<Foo>` finds
   `cutlass::Kernel2<Foo>` (namespaces inside template arguments stay: `Kernel2<cutlass::Foo>`).

Template arguments always count: `MatrixMulCUDA` finds neither `MatrixMulCUDA<16>` nor `MatrixMulCUDA<32>`.

`normalize` makes two spellings of one name equal, and does nothing else:

- whitespace goes, except one space between two identifier characters (`unsigned int`):
  `reduce6<float,256, true>` is `reduce6<float, 256, true>`, and `Kernel<Foo<int> >` is `Kernel<Foo<int>>`;
- integer literal suffixes go: `256u`, `256U`, `256l`, `256ul`, `256ull`, `256LL` are all `256`;
- a cast in front of a literal template argument goes: `(int)32` is `32`, `(unsigned char)3` is `3` (c++filt
  prints `(char)65`, `(short)3` and an enumerator's value as `(Mode)1`);
- a leading `::` goes.

Not normalized, so write them as c++filt prints them: `float const*` (not `const float*`), `true` (not `1`),
an enumerator by its value (`1` or `(Mode)1`, not `Mode::Fast`), and types behind typedefs (`unsigned int`,
not `uint32_t`).

`select(patterns, entries)` picks many kernels: `"*"` is every one; a pattern with fnmatch wildcards (`*`,
`?`, `[`) is matched, normalized, against each readable name, and also against the name without its
namespaces when the pattern has none (`reduce*<float,*>`); any other pattern is a name, found by `match`.

`candidates(requested, entries)` is what every "kernel not found" error lists: at most 10 readable names,
nearest to the requested one first (difflib), and how many more there are.

Nothing here imports pytest, CuPy or NVRTC. cxxfilt is imported on the first mangled name.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..util.patterns import lazy
from .errors import CompileError

CANDIDATES = 10
_OPEN, _CLOSE = "<([{", ">)]}"


@functools.lru_cache(maxsize=1)
def _demanglers() -> tuple[Callable[[str], str], ...]:
    """The demanglers a name is tried with, in order: libstdc++'s through `cxxfilt` (GNU c++filt's output),
    then LLVM's through `pycxxfilt` (Python 3.11+) for the names libstdc++ refuses: it rejects any mangled
    name over 1,024 characters, as every CUTLASS sm_90 kernel's is (tests/data/names)."""
    found: list[Callable[[str], str]] = []
    try:
        import cxxfilt  # a ctypes binding: loads libstdc++ (and runs ldconfig -p) when imported

        found.append(cxxfilt.demangle)
    except (ImportError, OSError):
        pass
    try:
        import pycxxfilt  # only where cxxfilt refused a name

        found.append(lambda entry: _gnu_spacing(pycxxfilt.itanium_demangle(entry) or entry))
    except ImportError:
        pass
    return tuple(found)


def _gnu_spacing(name: str) -> str:
    """LLVM's `Foo<Bar<int>>` as GNU prints it, `Foo<Bar<int> >` (but `operator>>`)."""
    return re.sub(r"(?<!operator)>(?=>)", "> ", name)


# entry -> demangled, as the demangler printed it when the compile cache stored the entry's build: a run
# whose builds all come from the cache needs no demangler (importing cxxfilt runs `ldconfig -p`).
_LEARNT: dict[str, str] = {}


def learn(demangled: Mapping[str, str]) -> None:
    """Take names demangled before (`demangle` of each key), so as not to demangle them again."""
    _LEARNT.update(demangled)


# entry -> readable name, made when a binary was read and kept with its facts (tools/cuobjdump.py): a warm run
# of a library makes none of its thousands (0.15 s of libcublas's 8,436).
_READABLE: dict[str, str] = {}


def learn_readable(names: Mapping[str, str]) -> None:
    """Take readable names made before (`readable` of each key), so as not to make them again."""
    _READABLE.update(names)


@functools.lru_cache(maxsize=8192)
def demangle(entry: str) -> str:
    """`entry` as GNU c++filt prints it; `entry` itself when it is not mangled or cannot be demangled."""
    if not entry.startswith("_Z"):
        return entry
    known = _LEARNT.get(entry)
    if known is not None:
        return known
    for demangler in _demanglers():
        try:
            return demangler(entry)
        except Exception:  # cxxfilt.InvalidName (its InternalError, LibraryNotFound); pycxxfilt's ValueError
            continue
    return entry


def _split_params(name: str) -> tuple[str, str]:
    """(`name` without its trailing parameter list, the list): the last top-level parenthesized group."""
    if not name.endswith(")"):
        return name, ""
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        c = name[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return (name[:i], name[i:]) if i > 0 else (name, "")
    return name, ""


def _top_level(name: str) -> Iterable[tuple[int, str]]:
    """(index, character) of the characters of `name` outside every bracket pair."""
    depth = 0
    for i, c in enumerate(name):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0:
            yield i, c


def _drop_return_type(head: str) -> str:
    """`void ns::k<1>` -> `ns::k<1>`: what follows the last space outside brackets."""
    spaces = [i for i, c in _top_level(head) if c == " "]
    return head[spaces[-1] + 1 :] if spaces else head


# One kernel name in several cubins of one library (its translation units each instantiate it): each copy's
# entry carries a tag after this mark (`_Z10dtrsv_initPi@dtrsv_kernel.3fa9c1`, tools/cuobjdump.py), kept by
# every name below, so that two copies are two kernels. A mangled name never holds it.
COPY_MARK = "@"


def split_copy(entry: str) -> tuple[str, str]:
    """(`entry` without its copy tag, the tag with its mark or "")."""
    base, mark, tag = entry.partition(COPY_MARK)
    return (base, mark + tag) if base and tag else (entry, "")


def signature(entry: str) -> str:
    """The demangled name without its return type, and without what depends on where and with which library
    version it was built (`stable`): `MatrixMulCUDA<32>(float*, float*, float*, int, int)`. A name that is
    not mangled has no return type: it is returned as it is. A copy's tag stays at the end."""
    base, tag = split_copy(entry)
    return _signature(base) + tag


# Remembered: a library's thousands of entries are read by every pattern and every item of a manifest.
@functools.lru_cache(maxsize=1 << 16)
def _signature(entry: str) -> str:
    full = demangle(entry)
    if full == entry:
        return entry
    head, params = _split_params(stable(full.strip()))
    return _drop_return_type(head.strip()) + params


# What a demangled name holds of where and with what it was built, not of what the kernel is: nvcc's hash of
# the file's path in a file-local name, and the versioned, per-arch inline namespaces of CUB, Thrust and
# libcu++. The exact name stays in the record (`entry`, `demangled`).
_BUILD_MARKS = (
    # A `static` function's namespace: _INTERNAL_<path hash>_<length>_<file>_<hash>; the file is in the key.
    (lazy(r"\b_INTERNAL_[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}::"), ""),
    # An anonymous namespace the demangler left as nvcc named it.
    (lazy(r"\b_GLOBAL__N__[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}\b"), "(anonymous namespace)"),
    # CUB's and Thrust's ABI namespaces: _V_300500_SM_800 (CCCL 2.5+), CUB_200200_SM_800_NS (older).
    (lazy(r"\b_V_\d+(?:_SM_\d+)*(?:_NVHPC)?::"), ""),
    (lazy(r"\b(?:CUB|THRUST)_\d+(?:_SM_\d+)*_NS::"), ""),
    # libcu++'s, in any of its namespaces: cuda::std::__4::, cuda::execution::__4::
    (lazy(r"\b(cuda::(?:\w+::)*?)__\d+::"), r"\1"),
)


def stable(name: str) -> str:
    """A demangled name without its build marks (`_BUILD_MARKS`): the same for a file in any directory, on
    any arch and with any CCCL release. `cub::_V_300500_SM_800::detail::EmptyKernel<void>` ->
    `cub::detail::EmptyKernel<void>`; `apply<&_INTERNAL_e7bc940b_4_k_cu_73f58c4c::twice>` ->
    `apply<&twice>`."""
    for pattern, replacement in _BUILD_MARKS:
        name = pattern.sub(replacement, name)
    # One spelling of a literal template argument, whatever its type: `256u` and `(ggml_type)10` are `256` and
    # `10`, as a node id and a name written by hand spell them.
    return _SPACED_CAST.sub("", _SUFFIX.sub(r"\1", name))


@functools.lru_cache(maxsize=1 << 16)
def readable(entry: str) -> str:
    """The name a report shows: `_Z13MatrixMulCUDAILi32EEvPfS0_S0_ii` -> `MatrixMulCUDA<32>`; a copy's
    tag stays (`dtrsv_init@dtrsv_kernel.3fa9c1`)."""
    known = _READABLE.get(entry)
    if known is not None:
        return known
    base, tag = split_copy(entry)
    return _split_params(_signature(base))[0] + tag


def shown(requested: str, entry: str) -> str:
    """The name a kernel that `requested` found is reported (and keyed in the baseline) by: its readable name,
    so that every spelling of one kernel (`reduce6<float,256,true>`, its mangled entry) reports alike; with
    its parameter list when the user gave one (to pick one of an overload set). A name that `match` would
    not find `entry` by (a Python function's, for its front end's entry) is kept as it is."""
    if not entry.startswith("_Z") or match(requested, [entry]) is None:
        return requested
    return signature(entry) if _has_params(requested) else readable(entry)


def display_names(entries: Sequence[str]) -> dict[str, str]:
    """Each entry's readable name; entries sharing one (overloads) get their signatures instead.
    CompileError when two entries still share one: their names differ only in build marks (`stable`), and
    one baseline entry cannot hold both."""
    shown = {e: readable(e) for e in dict.fromkeys(entries)}  # an entry listed twice is no overload
    counts: dict[str, int] = {}
    for name in shown.values():
        counts[name] = counts.get(name, 0) + 1
    final = {e: signature(e) if counts[name] > 1 else name for e, name in shown.items()}
    seen: dict[str, str] = {}
    for entry, name in final.items():
        other = seen.setdefault(name, entry)
        if other != entry:
            raise CompileError(
                f"two kernels read as {name!r} once the path hashes and library versions are left out of "
                f"their names: {other} and {entry}. One baseline entry cannot hold both: rename one of them"
            )
    return final


def _unqualified(name: str) -> str:
    """`cutlass::Kernel2<cutlass::Foo>` -> `Kernel2<cutlass::Foo>`: the part after the last top-level `::`."""
    colons = [i for i, c in _top_level(name) if c == ":"]
    return name[colons[-1] + 1 :] if colons else name


def base_name(name: str) -> str:
    """The bare identifier of a kernel name, as its definition spells it: `ns::gemm<128, 64>` -> `gemm`.
    A mangled name is demangled first."""
    head = _split_params(readable(name) if name.startswith("_Z") else name.strip())[0]
    depth = 0
    for i, c in enumerate(head):
        if c == "<" and depth == 0:
            head = head[:i]
            break
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
    return _unqualified(head).strip()


_SPACE = lazy(r"\s+")
_WORD = lazy(r"\w")
_SUFFIX = lazy(r"(?<![\w.])(\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)(?![\w.])")
# A cast in front of a literal template argument: `(ggml_type)10`, `(unsigned char)3`.
_CAST_OF_LITERAL = r"\([A-Za-z_][\w:]*(?: [A-Za-z_][\w:]*)*\)(?=-?\d)"
_CAST = lazy(r"(?<=[<,])" + _CAST_OF_LITERAL)  # in a name without spaces (normalize)
_SPACED_CAST = lazy(r"(?:(?<=<)|(?<=, ))" + _CAST_OF_LITERAL)  # in c++filt's spacing (stable)


def _squeeze(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    between_words = start > 0 and end < len(text) and _WORD.match(text[start - 1]) and _WORD.match(text[end])
    return " " if between_words else ""


@functools.lru_cache(maxsize=1 << 16)
def normalize(name: str) -> str:
    """The form two spellings of one kernel name share (the rules are in this module's docstring)."""
    text = _SPACE.sub(_squeeze, name.strip())
    text = _SUFFIX.sub(r"\1", text)
    text = _CAST.sub("", text)
    return text.removeprefix("::")


def _has_params(name: str) -> bool:
    return bool(_split_params(name.strip())[1])


def match(requested: str, entries: Sequence[str]) -> str | None:
    """The one entry `requested` names (the rules are in this module's docstring), else None."""
    if requested in entries:
        return requested
    wanted = normalize(requested)
    shown = signature if _has_params(requested) else readable
    steps: list[Callable[[str], str]] = [lambda e: normalize(shown(e))]
    if not any(c == ":" for _, c in _top_level(wanted)):
        steps.append(lambda e: _unqualified(normalize(shown(e))))
    for step in steps:
        found = list(dict.fromkeys(e for e in entries if step(e) == wanted))
        if found:
            return found[0] if len(found) == 1 else None
    return None


def is_pattern(name: str) -> bool:
    """Whether `name` has fnmatch wildcards, and so picks every kernel it matches."""
    return any(c in name for c in "*?[")


def select(patterns: Sequence[str], entries: Sequence[str]) -> list[str]:
    """The entries any of `patterns` names, in `entries`' order, each once ("*" is every entry)."""
    chosen: set[str] = set()
    for pattern in patterns:
        if pattern.strip() == "*":
            chosen.update(entries)
        elif is_pattern(pattern):
            wanted = normalize(pattern)
            qualified = any(c == ":" for _, c in _top_level(wanted))
            for e in entries:
                name = normalize(readable(e))
                if fnmatch.fnmatchcase(name, wanted) or (
                    not qualified and fnmatch.fnmatchcase(_unqualified(name), wanted)
                ):
                    chosen.add(e)
        else:
            found = match(pattern, entries)
            if found is not None:
                chosen.add(found)
    return [e for e in dict.fromkeys(entries) if e in chosen]


def candidates(requested: str, entries: Sequence[str], limit: int = CANDIDATES) -> str:
    """At most `limit` readable names of `entries`, nearest to `requested` first, and how many more there are:
    `MatrixMulCUDA<16>, MatrixMulCUDA<32> and 213 more`; `no kernels` when there are none."""
    names = sorted(set(display_names(list(dict.fromkeys(entries))).values()))
    if not names:
        return "no kernels"

    wanted = normalize(readable(requested))

    def distance(name: str) -> float:
        return -difflib.SequenceMatcher(None, wanted, normalize(name), autojunk=False).ratio()

    nearest = sorted(names, key=lambda n: (distance(n), n))
    listed = ", ".join(nearest[:limit])
    more = len(nearest) - limit
    return f"{listed} and {more} more" if more > 0 else listed


# What splitlines() ends a line at, besides \n: cuobjdump prints a symbol's name as it is.
_LINE_BREAKS = lazy(r"\r\n|[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def escaped_symbol(name: str) -> str:
    """A symbol's name as the plugin keeps it: each space, line break or other character that is not
    printable escaped (`k\\x20x`, `k\\nx`), every line break as `\\n`. Such a name (only a hand-made binary
    has one: the compilers make none) would otherwise be cut at the space by the listings' readers, or
    forge lines of their own. A name without them is itself."""
    if name.isprintable() and " " not in name:
        return name
    return "".join(_escaped_char(c) for c in _LINE_BREAKS.sub("\n", name))


def _escaped_char(c: str) -> str:
    if c == " ":
        return "\\x20"
    return c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
