"""pytest nodes for the kernel manifest: a `KernelFile` per file it names, a `KernelItem` per (kernel,
variant, arch). An item is judged exactly as a marked test is: it carries an `ItemState` with the kernel's
source and budget, and plugin/hooks.py's runtest hooks measure it and finish it (`session.measure`,
`session.finish_test`).

Collection follows the manifest, not the tree:
- a plain `pytest` (no path arguments, from the rootdir) collects every file of the manifest, wherever it
  is: testpaths and norecursedirs limit where pytest looks for test modules, not the manifest;
- path arguments collect the manifest's files at or below them (`pytest kernels/`, `pytest build/libk.so`),
  and nothing else of it: `pytest tests/test_x.py` runs no manifest item;
- a node id (`pytest 'kernels/mm.cu::MatrixMulCUDA<32>[sm_90]'`) selects as it does for a test.
A file collected this way counts as collected in full for the baseline's stale rule (`full_prefixes`).

Every item carries the `regbudget` marker, so `-m` selects and deselects them as it does marked tests. When
the `-m` expression is false for every item the manifest could make, the manifest collects nothing: no
listing is built, and its files count as not seen (their baseline entries are kept). An item's node id
parses back into the same `NodeId` (the kernel as its name, the variant and arch as its parameters), so the
ids pytest's cache keeps for `--lf`, `--ff` and `--sw` find the items again.

The kernels of a file that a pattern ("*") selects need a listing: a build per variant and arch of the run
(the items' own build, with the file's compile keys: shared through the compile cache), or cuobjdump for a
binary. A build that fails is one `BuildItem` of that file, variant and arch, with the compiler's log, never a
collection error: the baseline's broken table makes it a ratchet (update/broken.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from _pytest._code.code import TerminalRepr
from _pytest.mark import MarkMatcher  # how -m evaluates an expression: pytest has no public API for it
from _pytest.mark.expression import Expression

from ..core import names
from ..core.baseline import NO_VARIANT
from ..core.errors import (
    CompileError,
    MarkerError,
    RegbudgetWarning,
    Rejected,
    ToolchainError,
    ToolTimeout,
    Unbuildable,
)
from ..core.text import one_line, safe_block
from ..engine.session import RegbudgetSession
from ..engine.state import ItemState
from ..project import manifest
from ..project.kernel_tables import LISTING_COMPILERS, Variant
from ..project.manifest import Kernel, Manifest, kernel_id
from ..update.scope import COLLECTED
from . import shard

PLUGIN_NAME = manifest.PLUGIN_NAME
# The item of a file's own build, `kernels/a.cu::<build>[sm_90]`: no kernel name starts with `<`.
BUILD_ITEM = "<build>"
_IDS = pytest.StashKey[dict[str, str]]()  # a file's kernel names -> their item names
_TAKEN = pytest.StashKey[set[str]]()  # those item names, to look up in a file of thousands
# Files an argument may name that the manifest is expected to hold: naming one it does not is an error.
CUDA_SUFFIXES = frozenset({".cu", ".cuh", ".cubin", ".fatbin", ".so", ".o", ".a"})


class ManifestCollection:
    """The hooks that put the manifest's kernels into the run (registered when the rootdir has a manifest)."""

    def __init__(
        self,
        config: pytest.Config,
        manifest: Manifest,
        session: RegbudgetSession,
        item_key: pytest.StashKey[ItemState],
    ) -> None:
        self.config = config
        self.manifest = manifest
        self.session = session
        self.item_key = item_key
        self._files = set(manifest.files())
        self._reached: set[Path] = set()  # files pytest's own walk (or a node id) reached
        self._listings_started = False
        self.selected = marks_select(config, MANIFEST_MARKS)

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        path = Path(file_path)
        if path in self._files:
            if not self._owns(path):
                # Another shard's (--regbudget-shard): built and reported there. Named on the command line,
                # it collects nothing here, and this run's scope does not count it as seen.
                if not parent.session.isinitpath(path):
                    return None
                self.session.other_shards.add(self.manifest.relative(path))
                return OtherShard.from_parent(parent, path=path)
            if not self.selected:
                # Named on the command line: say why it holds nothing (a collector that collects nothing
                # would make pytest report "found no collectors", and count the file as seen).
                return Unselected.from_parent(parent, path=path) if parent.session.isinitpath(path) else None
            self._reached.add(path)
            return KernelFile.from_parent(parent, path=path)
        if path.suffix in CUDA_SUFFIXES and parent.session.isinitpath(path):
            return NotInManifest.from_parent(parent, path=path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, items: list[pytest.Item]) -> None:
        # Before -k, -m and --deselect (tryfirst): the files pytest's walk did not reach, as if it had.
        if not self.selected:
            return
        for path in self.in_full():
            if path not in self._reached:
                items.extend(session.genitems(KernelFile.from_parent(session, path=path)))

    def whole(self) -> bool:
        """Whether this run collects every file of the manifest: no path arguments, from the rootdir."""
        config = self.config
        source = config.args_source
        return source == pytest.Config.ArgsSource.TESTPATHS or (
            source == pytest.Config.ArgsSource.INVOCATION_DIR
            and Path(config.invocation_params.dir) == config.rootpath
        )

    def _owns(self, path: Path) -> bool:
        """Whether this run builds `path`: always, but under --regbudget-shard, where a shard owns it."""
        sharding = shard.selection(self.config)
        return sharding is None or sharding.owns(path)

    def in_full(self) -> list[Path]:
        """The manifest's files this run collects in full (the module's docstring); this shard's only."""
        return [f for f in self._named() if self._owns(f)]

    def _named(self) -> list[Path]:
        """The manifest's files this run's arguments name in full, whatever the shard."""
        config = self.config
        files = self.manifest.files()
        invoked = Path(config.invocation_params.dir)
        if self.whole():
            return files
        chosen: list[Path] = []
        for arg in config.args:
            path_part, sep, _ = arg.partition("::")
            if sep:
                continue  # a node id names only part of its file
            target = Path(invoked, path_part).resolve()
            chosen += [f for f in files if f not in chosen and _at_or_below(f.resolve(), target)]
        return chosen

    @staticmethod
    def made(item: pytest.Item, *, kernels_only: bool = False) -> bool:
        """Whether the manifest made the item: a kernel's (KernelItem), or else a build's (BuildItem)."""
        return isinstance(item, KernelItem if kernels_only else (KernelItem, BuildItem))

    def full_prefixes(self) -> tuple[str, ...]:
        """The rootdir-relative files collected in full: the stale rule's prefixes, as path arguments are.

        A run of the whole manifest also saw that the files of its earlier items that it no longer names
        hold no item now: they count as collected, with none (their entries are stale, as those of a test
        deleted from a module are). A run whose `-m` leaves out every manifest item saw none of its files."""
        if not self.selected:
            return ()
        mine = [self.manifest.relative(f) for f in self.in_full()]
        if not self.whole():
            return tuple(mine)
        named = {self.manifest.relative(f) for f in self._named()}  # another shard's files are not dropped
        earlier = {
            test.split("::", 1)[0]
            for entry in self.session.baseline.entries.values()
            for test in entry.tests
            if "::" in test and not test.split("::", 1)[0].endswith(".py")
        }
        dropped = sorted(earlier - named)
        for file in dropped:
            self.session.note_collection(file, COLLECTED, "", module=True)
        return (*mine, *dropped)

    # -- what a file holds ---------------------------------------------------------------------------------
    def _start_listings(self) -> None:
        """Build the listing of every file this run collects in full at once on the compile pool (collection
        then only waits), instead of one file after another as collection reaches them. Only those: a file
        that a path argument or the shard leaves out builds nothing (a file named by a node id is listed
        when collection reaches it)."""
        if self._listings_started:
            return
        self._listings_started = True
        manifest, archs = self.manifest, self.session.settings.archs
        wanted = []
        for path in self.in_full():
            if not manifest.lists(path):
                continue
            compiler = manifest.compiler_of(path, self.session.settings.compiler)
            if manifest.listing_table(path).binary or compiler not in LISTING_COMPILERS:
                continue
            for variant in manifest.file_variants(path):
                try:
                    options = manifest.build_budget(path, variant).options
                except (MarkerError, ValueError):
                    continue  # the file's items say so themselves
                wanted += [(path, arch, options, compiler) for arch in archs]
        self.session.builder.prefetch_listings(wanted)

    def items(self, node: KernelFile) -> Iterator[pytest.Item]:
        self._start_listings()
        path = Path(node.path)
        manifest = self.manifest
        compiler = manifest.compiler_of(path, self.session.settings.compiler)
        if not manifest.lists(path):
            kernels, unmatched = manifest.kernels(path, None, compiler)
            self._unmatched(unmatched)
            for kernel in kernels:
                yield from self._kernel_items(node, path, kernel, self._id(node, kernel.name))
            return
        if manifest.listing_table(path).binary:
            yield from self._binary_items(node, path, compiler)
            return
        yield from self._built_items(node, path, compiler)

    def _id(self, node: KernelFile, name: str) -> str:
        """The item name's kernel part, one per kernel of the file (two names that read alike get `~`)."""
        ids = node.stash.setdefault(_IDS, {})
        found = ids.get(name)
        if found is None:
            taken = node.stash.setdefault(_TAKEN, set())
            found = kernel_id(name)
            while found in taken:
                found += "~"
            ids[name] = found
            taken.add(found)
        return found

    def _binary_items(self, node: KernelFile, path: Path, compiler: str) -> Iterator[pytest.Item]:
        manifest = self.manifest
        try:
            by_arch, signatures = self._binary_listing(path)
        except ToolTimeout as exc:
            # No verdict on the file, as a source's listing that times out: one failed item per arch, naming
            # the key to raise, and the run goes on.
            rel = manifest.relative(path)
            for arch in self.session.settings.archs:
                key = (rel, NO_VARIANT, arch, "")
                yield _item(BuildItem, node, f"{BUILD_ITEM}[{arch}]", key=key, problem=(str(exc), False))
            return
        entries = _one_per_kernel((e for held in by_arch.values() for e in held), signatures)
        kernels, unmatched = manifest.kernels(path, entries, compiler)
        if not entries:
            # A binary of host code or device functions only: one line for all of them, not a warning each.
            self.session.empty_binaries[manifest.relative(path)] = 0
            unmatched = []
        self._unmatched(unmatched)
        yield from self._listed_items(node, path, kernels, by_arch, entries, None)

    def _built_items(self, node: KernelFile, path: Path, compiler: str) -> Iterator[pytest.Item]:
        """A source file's items, variant by variant: each variant's kernels are those its own build lists
        (a variant may instantiate other templates). A build that fails is one item of its own (BuildItem),
        for that variant and arch; the file's other builds are checked as usual."""
        manifest = self.manifest
        pending = manifest.file_variants(path)
        done: set[str] = set()
        unmatched: list[str] | None = None  # warned only when no variant's kernels match
        any_built = any_kernel = False  # some build of the file made; one held a kernel
        while pending:
            variant = pending.pop(0)
            if variant.id in done:
                continue
            done.add(variant.id)
            by_arch = yield from self._variant_listing(node, path, variant, compiler)
            if not by_arch:
                continue  # no arch built: its BuildItems are the variant's items
            any_built = True
            entries = _one_per_kernel(e for held in by_arch.values() for e in held)
            kernels, warned = manifest.kernels(path, entries, compiler)
            # A kernel listed, or named by a table (an NVRTC template instance is named, not listed).
            any_kernel = any_kernel or bool(entries) or bool(kernels)
            # A pattern warns only if no variant's build matched it (the kernels a warning lists may differ).
            missed = {_pattern_of(w) for w in warned}
            unmatched = warned if unmatched is None else [w for w in unmatched if _pattern_of(w) in missed]
            for kernel in kernels:
                # A kernel selected by tables without this variant asks for its own (the plain build, or
                # another table's): listed in turn, once.
                pending += [v for v in kernel.variants() if v.id not in done]
            yield from self._listed_items(node, path, kernels, by_arch, entries, variant)
        if any_built and not any_kernel:
            # Host code or device functions only: the run's one line names it, with the binaries like it.
            self.session.empty_sources.add(manifest.relative(path))
            unmatched = []
        self._unmatched(unmatched or [])

    def _unmatched(self, messages: Sequence[str]) -> None:
        """A `kernels` pattern that matches no kernel of a file: a warning, and under --regbudget-strict a
        failure of the run (the budgets of its table would be checked nowhere)."""
        for message in messages:
            warnings.warn(RegbudgetWarning(message), stacklevel=1)
            self.session.note_unmatched(message)

    def _variant_listing(
        self, node: KernelFile, path: Path, variant: Variant, compiler: str
    ) -> Generator[pytest.Item, None, dict[str, list[str]]]:
        """The entries of one variant's build per arch of the run that built, yielding a BuildItem for each
        arch whose build failed (or that the baseline records as broken)."""
        session, manifest = self.session, self.manifest
        rel = manifest.relative(path)
        prefix = f"{variant.id}-" if variant.id else ""
        try:
            budget = manifest.build_budget(path, variant)
        except (MarkerError, ValueError) as exc:
            raise node.CollectError(f"{manifest.label}: {rel}: {exc}") from None
        if compiler not in LISTING_COMPILERS:
            raise node.CollectError(
                f"{manifest.listing_table(path).label}: compiler {compiler!r} cannot list the kernels of "
                f"{rel}: name each kernel (kernels = [...])"
            )
        release = _release(session, compiler)
        found: dict[str, list[str]] = {}
        for arch in session.settings.archs:
            key = (rel, budget.options.variant(), arch, release)
            name = f"{BUILD_ITEM}[{prefix}{arch}]"
            try:
                found[arch] = session.builder.entries(path, arch, budget.options, compiler)
            except Rejected as exc:  # the compiler's verdict on the file: the ratchet's business
                session.note_build(key, _log(exc), compiler)
                yield _item(BuildItem, node, name, key=key)
            except (CompileError, ToolchainError) as exc:
                # No verdict on the file (no toolkit, a timeout, an arch the toolkit does not build): the
                # item says so, and nothing is recorded as broken.
                skip = isinstance(exc, Unbuildable)
                yield _item(BuildItem, node, name, key=key, problem=(_log(exc), skip))
            else:
                session.note_build(key, None, compiler)  # a build that is recorded as broken is fixed
        return found

    def _listed_items(
        self,
        node: KernelFile,
        path: Path,
        kernels: Sequence[Kernel],
        by_arch: Mapping[str, list[str]],
        entries: Sequence[str],
        variant: Variant | None,
    ) -> Iterator[pytest.Item]:
        # Each arch's kernels by readable name, read once: a library lists thousands, and each is looked up.
        shown = {arch: {names.readable(e) for e in found} for arch, found in by_arch.items()}
        for kernel in kernels:
            # A listed kernel is collected for the archs whose build holds it (a kernel guarded by
            # __CUDA_ARCH__ exists on some only); one the tables only name, for every arch that built.
            if kernel.entry is not None:
                held = {arch for arch, found in shown.items() if names.readable(kernel.entry) in found}
            elif names.match(kernel.name, list(entries)) is not None:
                held = {a for a, found in by_arch.items() if names.match(kernel.name, found) is not None}
            else:
                held = set(by_arch)
            yield from self._kernel_items(node, path, kernel, self._id(node, kernel.name), held, variant)

    def _kernel_items(
        self,
        node: KernelFile,
        path: Path,
        kernel: Kernel,
        name: str,
        held: set[str] | None = None,
        only: Variant | None = None,
    ) -> Iterator[pytest.Item]:
        session = self.session
        for variant in kernel.variants():
            if only is not None and variant.id != only.id:
                continue
            try:
                budget = kernel.budget(path, self.manifest.rootdir, variant)
                source = session.marker_source(budget)
            except (MarkerError, ValueError) as exc:
                tables = ", ".join(str(t.index) for t in kernel.tables)
                raise node.CollectError(
                    f"{self.manifest.label}: kernel {kernel.name} of {node.nodeid} (tables {tables}): {exc}"
                ) from None
            archs = tuple(a for a in session.item_archs(budget) if held is None or a in held)
            prefix = f"{variant.id}-" if variant.id else ""
            if not archs:
                if held is not None and session.item_archs(budget):
                    continue  # the builds that would hold it failed: their BuildItems say so
                wanted = ",".join(budget.archs or ())
                item = _item(KernelItem, node, f"{name}[{prefix}{wanted}]", kernel=kernel.name)
                reason = (
                    f"regbudget archs={wanted} not among this run's archs {','.join(session.settings.archs)}"
                )
                item.add_marker(pytest.mark.skip(reason=reason))
                yield item
                continue
            for arch, toolkit, param_id in session.item_params(budget, archs):
                item = _item(KernelItem, node, f"{name}[{prefix}{param_id}]", kernel=kernel.name)
                item.stash[self.item_key] = ItemState(
                    arch=arch, budget=budget, source=source, item_archs=archs, toolkit=toolkit
                )
                yield item

    def _binary_listing(self, path: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
        """The entries of every kernel a binary holds, per arch of the run, and their kept signatures."""
        table = self.manifest.listing_table(path)
        archs = self.session.settings.archs
        found: dict[str, list[str]] = {arch: [] for arch in archs}
        signatures: dict[str, str] = {}
        try:
            for arch in archs:
                held = self.session.builder.binary_arch(path, arch)
                found[arch] = [k.entry for k in held.kernels]
                signatures.update(held.signatures)
                if held.empty:  # 0 in the summary's count means the whole file: counted only where some are
                    empty = self.session.empty_binaries
                    rel = self.manifest.relative(path)
                    empty[rel] = empty.get(rel, 0) + held.empty
        except ToolTimeout:
            raise  # its items say so (_binary_items)
        except (CompileError, ToolchainError) as exc:
            raise KernelFile.CollectError(
                f"cannot list the kernels of {self.manifest.relative(path)} for {self.manifest.label} "
                f"({table.label}):\n{exc}"
            ) from None
        return found, signatures


_ItemT = TypeVar("_ItemT", bound=pytest.Item)


def _item(cls: type[_ItemT], node: KernelFile, name: str, **kwargs: Any) -> _ItemT:
    """A manifest item with the node id `FILE::KERNEL[VARIANT-ARCH]` given as a string: pytest reads it as the
    name `KERNEL` with the parameters `VARIANT-ARCH`, as it reads the ids its cache keeps (--lf, --ff, --sw).
    Built from the parent, the id would be one name `KERNEL[VARIANT-ARCH]` that no cached id equals."""
    return cls.from_parent(node, name=name, nodeid=f"{node.nodeid}::{name}", **kwargs)


# The markers a manifest item carries: `regbudget`, and `skip` on the items of a kernel whose archs= leave
# it no arch of the run.
MANIFEST_MARKS: tuple[tuple[str, ...], ...] = (("regbudget",), ("regbudget", "skip"))


def marks_select(config: pytest.Config, mark_sets: Sequence[Sequence[str]]) -> bool:
    """Whether the run's `-m` expression selects an item carrying one of these sets of (argument-less)
    markers, evaluated as pytest evaluates it. True without `-m`, and for an expression pytest cannot parse
    (it reports that itself)."""
    expression = config.option.markexpr
    matcher = getattr(MarkMatcher, "from_markers", None)  # pytest >= 8.1
    if not expression or matcher is None:
        return True
    try:
        compiled = Expression.compile(expression)
    except Exception:  # SyntaxError (ParseError in older pytests): pytest reports a bad expression itself
        return True
    return any(
        compiled.evaluate(matcher(getattr(pytest.mark, name).mark for name in names)) for names in mark_sets
    )


def _release(session: RegbudgetSession, compiler: str) -> str:
    """The release that builds the file's listing (a broken build's key), "" where there is no toolkit (the
    build's item then says why)."""
    try:
        return session.nvcc_release_of(None) if compiler == "nvcc" else session.release_of(None)
    except ToolchainError:
        return ""


def _log(exc: CompileError | ToolchainError) -> str:
    """A failed build's message with the compiler's log, once."""
    text = str(exc)
    log = getattr(exc, "log", "")
    return text if not log or log.strip() in text else f"{text}\n{log}"


def _pattern_of(warning: str) -> str:
    """A no-match warning without the kernels it lists, which differ from one variant's build to another's."""
    return warning.split(" (it holds", 1)[0]


def _one_per_kernel(entries: Iterable[str], known: Mapping[str, str] | None = None) -> list[str]:
    """One entry per kernel, in order: a CUB kernel's mangled name differs per arch (its namespace names the
    arch), and its stable signature does not (names.stable; `known`: signatures made before)."""
    kernels: dict[str, str] = {}
    for entry in entries:
        kernels.setdefault((known or {}).get(entry) or names.signature(entry), entry)
    return list(kernels.values())


def _at_or_below(path: Path, target: Path) -> bool:
    return path == target or target in path.parents


def excluded_lines(manifest: Manifest) -> list[str]:
    """What -v says of the files a manifest's `exclude` took out: each once, with its reason."""
    return [
        safe_block(f"regbudget: excluded {file}" + (f" ({reason})" if reason else ""))
        for file, reason in manifest.excluded()
    ]


def collection(config: pytest.Config) -> ManifestCollection | None:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return plugin if isinstance(plugin, ManifestCollection) else None


def full_prefixes(config: pytest.Config) -> tuple[str, ...]:
    """The manifest files this run collects in full (rootdir-relative), for the stale rule; () without one."""
    found = collection(config)
    return found.full_prefixes() if found is not None else ()


class _File(pytest.File):
    def repr_failure(  # type: ignore[override]  # as pytest's Collector's own
        self, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> str | TerminalRepr:
        shown = super().repr_failure(excinfo)  # an error that quotes the file's kernels, a listing's log
        return safe_block(shown) if isinstance(shown, str) else shown


class KernelFile(_File):
    """A file the manifest names: its kernels' items."""

    def collect(self) -> Iterator[pytest.Item]:
        found = collection(self.config)
        assert found is not None  # only its hooks make these nodes
        return found.items(self)


class Unselected(pytest.File):
    """A manifest file named on the command line in a run whose `-m` deselects every manifest item: skipped
    at collection, with the reason, building nothing (its baseline entries are kept)."""

    def collect(self) -> Sequence[pytest.Item]:
        expression = self.config.option.markexpr
        pytest.skip(
            f"{self.nodeid}: -m {expression!r} deselects every manifest item (each carries the regbudget "
            "marker): nothing of it is built"
        )


class OtherShard(pytest.File):
    """A manifest file named on the command line that another --regbudget-shard owns: nothing here."""

    def collect(self) -> Sequence[pytest.Item]:
        return ()


class NotInManifest(_File):
    """A CUDA file or binary named on the command line that no manifest table names."""

    def collect(self) -> Sequence[pytest.Item]:
        found = collection(self.config)
        label = found.manifest.label if found is not None else "the manifest"
        raise self.CollectError(
            f"{self.nodeid} is not in {label}: add it to a table's source (or binary) globs, or name it in a "
            "marked test"
        )


class ManifestItem(pytest.Item):
    """What every manifest item shares: the `regbudget` marker (-m selects manifest items as it selects
    marked tests), and its location. Its domain, the failure's heading, is `scale[sm_90] in kernels/a.cu`:
    the kernel, variant and arch, then the file. Not the node id: pytest -v would show the dots of a domain
    that ends the node id as `::` (`kernels/a::cu::scale[sm_90]`). The line is the file's first (a skip's
    report needs one; the verdict's lines name the kernel's own)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_marker(pytest.mark.regbudget)

    def reportinfo(self) -> tuple[Path, int, str]:
        return Path(self.path), 0, one_line(f"{self.name} in {self.nodeid.split('::', 1)[0]}")


class BuildItem(ManifestItem):
    """A manifest file's build of one variant and arch that failed (update/broken.py): it fails where the
    failure is new, and passes where the baseline records it as broken, or in an update, which records it."""

    def __init__(
        self, *, key: tuple[str, str, str, str], problem: tuple[str, bool] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.key = key
        self.problem = problem  # (why, whether it is a skip) where no compiler judged the file

    def runtest(self) -> None:
        if self.problem is not None:
            why, skip = self.problem
            if skip:
                pytest.skip(safe_block(why))
            pytest.fail(safe_block(f"{self.key[0]} [{self.key[2]}]: {why}"), pytrace=False)
        found = collection(self.config)
        assert found is not None  # only its hooks make these nodes
        failure = found.session.build_failure(self.key)
        if failure is not None:
            pytest.fail(safe_block(failure), pytrace=False)


class KernelItem(ManifestItem):
    """One kernel, variant and arch of the manifest. Its ItemState (plugin.ITEM_KEY) carries what to build
    and the budget; plugin.pytest_runtest_call measures and judges it, as for a marked test."""

    def __init__(self, *, kernel: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernel = kernel

    def runtest(self) -> None:
        """Nothing beyond the measurement, which the plugin's runtest_call wrapper does around this."""
