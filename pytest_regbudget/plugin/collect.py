"""pytest nodes for the kernel manifest: a `KernelFile` per file it names, a `KernelItem` per (kernel,
variant, arch). An item is judged exactly as a marked test is: it carries an `ItemState` with the kernel's
source and budget, and plugin.py's runtest hooks measure it and finish it (`session.measure`,
`session.finish_test`).

Collection follows the manifest, not the tree:
- a plain `pytest` (no path arguments, from the rootdir) collects every file of the manifest, wherever it
  is: testpaths and norecursedirs limit where pytest looks for test modules, not the manifest;
- path arguments collect the manifest's files at or below them (`pytest kernels/`, `pytest build/libk.so`),
  and nothing else of it: `pytest tests/test_x.py` runs no manifest item;
- a node id (`pytest 'kernels/mm.cu::MatrixMulCUDA<32>[sm_90]'`) selects as it does for a test.
A file collected this way counts as collected in full for the baseline's stale rule (`full_prefixes`).

The kernels of a file that a pattern ("*") selects need a listing: a build per arch of the run (shared with
the items' own builds through the compile cache), or cuobjdump for a binary. A listing that fails is a
collection error of that file alone, with the compiler's log.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..build.options import CompileOptions
from ..core import names
from ..core.errors import CompileError, MarkerError, RegbudgetWarning, ToolchainError
from ..project import manifest
from ..project.manifest import LISTING_COMPILERS, Kernel, Manifest, build_options, kernel_id, variant_id
from ..project.markers import compile_options
from ..update.scope import COLLECTED
from .session import RegbudgetSession
from .state import ItemState

PLUGIN_NAME = manifest.PLUGIN_NAME
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

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        path = Path(file_path)
        if path in self._files:
            self._reached.add(path)
            return KernelFile.from_parent(parent, path=path)
        if path.suffix in CUDA_SUFFIXES and parent.session.isinitpath(path):
            return NotInManifest.from_parent(parent, path=path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, items: list[pytest.Item]) -> None:
        # Before -k, -m and --deselect (tryfirst): the files pytest's walk did not reach, as if it had.
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

    def in_full(self) -> list[Path]:
        """The manifest's files this run collects in full (see the module's docstring)."""
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

    def full_prefixes(self) -> tuple[str, ...]:
        """The rootdir-relative files collected in full: the stale rule's prefixes, as path arguments are.

        A run of the whole manifest also saw that the files of its earlier items that it no longer names
        hold no item now: they count as collected, with none (their entries are stale, as those of a test
        deleted from a module are)."""
        mine = [self.manifest.relative(f) for f in self.in_full()]
        if not self.whole():
            return tuple(mine)
        earlier = {
            test.split("::", 1)[0]
            for entry in self.session.baseline.entries.values()
            for test in entry.tests
            if "::" in test and not test.split("::", 1)[0].endswith(".py")
        }
        dropped = sorted(earlier - set(mine))
        for file in dropped:
            self.session.note_collection(file, COLLECTED, "", module=True)
        return (*mine, *dropped)

    # -- what a file holds ---------------------------------------------------------------------------------
    def _start_listings(self) -> None:
        """Build every file's listing at once on the compile pool (collection then only waits), instead of
        one file after another as collection reaches them."""
        if self._listings_started:
            return
        self._listings_started = True
        manifest, archs = self.manifest, self.session.settings.archs
        wanted = []
        for path in manifest.files():
            if not manifest.lists(path):
                continue
            table = manifest.listing_table(path)
            compiler = manifest.compiler_of(path, self.session.settings.compiler)
            if table.binary or compiler not in LISTING_COMPILERS:
                continue
            try:
                options = _listing_options(table.keys, manifest.rootdir)
            except MarkerError:
                continue  # the file's listing says so itself
            wanted += [(path, arch, options, compiler) for arch in archs]
        self.session.builder.prefetch_listings(wanted)

    def items(self, node: KernelFile) -> Iterator[pytest.Item]:
        self._start_listings()
        path = Path(node.path)
        manifest = self.manifest
        by_arch = self._listing(path) if manifest.lists(path) else None
        entries = None if by_arch is None else _one_per_kernel(e for held in by_arch.values() for e in held)
        kernels, unmatched = manifest.kernels(
            path, entries, manifest.compiler_of(path, self.session.settings.compiler)
        )
        if by_arch is not None and not entries and manifest.listing_table(path).binary:
            # A binary of host code or device functions only: one line for all of them, not a warning each.
            self.session.empty_binaries[manifest.relative(path)] = 0
            unmatched = []
        for message in unmatched:
            warnings.warn(RegbudgetWarning(message), stacklevel=1)
        # Each arch's kernels by readable name, read once: a library lists thousands, and each is looked up.
        shown = {arch: {names.readable(e) for e in found} for arch, found in (by_arch or {}).items()}
        ids: set[str] = set()
        for kernel in kernels:
            name = kernel_id(kernel.name)
            while name in ids:  # two names that read alike once made into ids
                name += "~"
            ids.add(name)
            # A listed kernel is collected for the archs whose build holds it (a kernel guarded by
            # __CUDA_ARCH__ exists on some only); one the tables only name, for every arch.
            held = None
            if by_arch is not None and kernel.entry is not None:
                held = {arch for arch, found in shown.items() if names.readable(kernel.entry) in found}
            elif by_arch is not None and names.match(kernel.name, entries or []) is not None:
                held = {
                    arch for arch, found in by_arch.items() if names.match(kernel.name, found) is not None
                }
            yield from self._kernel_items(node, path, kernel, name, held)

    def _kernel_items(
        self, node: KernelFile, path: Path, kernel: Kernel, name: str, held: set[str] | None = None
    ) -> Iterator[pytest.Item]:
        session = self.session
        for variant in kernel.variants():
            try:
                budget = kernel.budget(path, self.manifest.rootdir, variant)
                source = session.marker_source(budget)
            except (MarkerError, ValueError) as exc:
                tables = ", ".join(str(t.index) for t in kernel.tables)
                raise node.CollectError(
                    f"{self.manifest.label}: kernel {kernel.name} of {node.nodeid} (tables {tables}): {exc}"
                ) from None
            archs = tuple(a for a in session.item_archs(budget) if held is None or a in held)
            prefix = f"{variant_id(variant)}-" if variant else ""
            if not archs:
                wanted = ",".join(budget.archs or ())
                item = KernelItem.from_parent(node, name=f"{name}[{prefix}{wanted}]", kernel=kernel.name)
                reason = (
                    f"regbudget archs={wanted} not among this run's archs {','.join(session.settings.archs)}"
                )
                item.add_marker(pytest.mark.skip(reason=reason))
                yield item
                continue
            for arch, toolkit, param_id in session.item_params(budget, archs):
                item = KernelItem.from_parent(node, name=f"{name}[{prefix}{param_id}]", kernel=kernel.name)
                item.stash[self.item_key] = ItemState(
                    arch=arch, budget=budget, source=source, item_archs=archs, toolkit=toolkit
                )
                yield item

    def _listing(self, path: Path) -> dict[str, list[str]]:
        """The entries of every kernel the file holds, per arch of the run."""
        table = self.manifest.listing_table(path)
        archs = self.session.settings.archs
        found: dict[str, list[str]] = {arch: [] for arch in archs}
        try:
            if table.binary:
                for arch in archs:
                    held = self.session.builder.binary_arch(path, arch)
                    found[arch] = [k.entry for k in held.kernels]
                    empty = self.session.empty_binaries
                    rel = self.manifest.relative(path)
                    empty[rel] = empty.get(rel, 0) + held.empty
            else:
                compiler = self.manifest.compiler_of(path, self.session.settings.compiler)
                if compiler not in LISTING_COMPILERS:
                    raise CompileError(
                        f"{table.label}: compiler {compiler!r} cannot list the kernels of "
                        f"{self.manifest.relative(path)}: name each kernel (kernels = [...])"
                    )
                options = _listing_options(table.keys, self.manifest.rootdir)
                for arch in archs:
                    found[arch] = self.session.builder.entries(path, arch, options, compiler)
        except (CompileError, ToolchainError) as exc:
            raise KernelFile.CollectError(
                f"cannot list the kernels of {self.manifest.relative(path)} for {self.manifest.label} "
                f"({table.label}):\n{exc}"
            ) from None
        return found


def _one_per_kernel(entries: Iterable[str]) -> list[str]:
    """One entry per kernel, in order: a CUB kernel's mangled name differs per arch (its namespace names the
    arch), and its stable signature does not (names.stable). Each arch's build finds its own entry by name."""
    kernels: dict[str, str] = {}
    for entry in entries:
        kernels.setdefault(names.signature(entry), entry)
    return list(kernels.values())


def _at_or_below(path: Path, target: Path) -> bool:
    return path == target or target in path.parents


def _listing_options(keys: Mapping[str, Any], rootdir: Path) -> CompileOptions:
    """The compile options a file's listing build uses: its first table's, with that table's first variant
    (built as that variant's item is, so the listing build is one of the run's)."""
    given = dict(keys)
    variants = given.pop("variants", None)
    table_defines = given.pop("defines", None)
    if variants:
        given["defines"] = variants[0]
    return build_options(compile_options(given, rootdir), table_defines)


def collection(config: pytest.Config) -> ManifestCollection | None:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return plugin if isinstance(plugin, ManifestCollection) else None


def full_prefixes(config: pytest.Config) -> tuple[str, ...]:
    """The manifest files this run collects in full (rootdir-relative), for the stale rule; () without one."""
    found = collection(config)
    return found.full_prefixes() if found is not None else ()


class KernelFile(pytest.File):
    """A file the manifest names: its kernels' items."""

    def collect(self) -> Iterator[pytest.Item]:
        found = collection(self.config)
        assert found is not None  # only its hooks make these nodes
        return found.items(self)


class NotInManifest(pytest.File):
    """A CUDA file or binary named on the command line that no manifest table names."""

    def collect(self) -> Sequence[pytest.Item]:
        found = collection(self.config)
        label = found.manifest.label if found is not None else "the manifest"
        raise self.CollectError(
            f"{self.nodeid} is not in {label}: add it to a table's source (or binary) globs, or name it in a "
            "marked test"
        )


class KernelItem(pytest.Item):
    """One kernel, variant and arch of the manifest. Its ItemState (plugin.ITEM_KEY) carries what to build
    and the budget; plugin.pytest_runtest_call measures and judges it, as for a marked test."""

    def __init__(self, *, kernel: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernel = kernel

    def runtest(self) -> None:
        """Nothing beyond the measurement, which the plugin's runtest_call wrapper does around this."""

    def reportinfo(self) -> tuple[Path, int, str]:
        # The failure's heading: the node id, which names the file, the kernel, the variant and the arch. The
        # line is the file's first (a skip's report needs one; the verdict's lines name the kernel's own).
        return Path(self.path), 0, self.nodeid
