"""`--regbudget-shard=K/N` in collection: a shard collects the manifest files it owns (plugin/collect.py asks
`owns`), so it lists and builds no other, and deselects the other marked tests and plain tests: a test's
build unit is its marker's source file (or binary), else its own test file. engine/sharding.py decides who
owns what.

pytest-split and pytest-xdist's `--dist loadgroup` split items once collected; a manifest's items are made
by building each file's listing during collection, so a split after collection has built everything.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..engine.session import RegbudgetSession
from ..engine.sharding import Assignment, Shard
from ..engine.state import ItemState
from ..project.manifest import Manifest

PLUGIN_NAME = "regbudget-shard"


class ShardSelection:
    """The hooks of one shard (registered only with --regbudget-shard)."""

    def __init__(
        self,
        config: pytest.Config,
        shard: Shard,
        kernels: Manifest | None,
        item_key: pytest.StashKey[ItemState],
    ) -> None:
        self.config = config
        self.item_key = item_key
        self.rootdir = config.rootpath
        weights: dict[str, float] = {}
        if kernels is not None:
            for path in kernels.files():
                weights[kernels.relative(path)] = _size(path) * max(len(kernels.file_variants(path)), 1)
        self.assignment = Assignment(shard, weights)

    def owns(self, path: Path) -> bool:
        """Whether this shard builds the unit of `path` (a manifest file)."""
        return self.assignment.owns(self._unit(path))

    def _unit(self, path: Path) -> str:
        try:
            return Path(path).resolve().relative_to(self.rootdir.resolve()).as_posix()
        except ValueError:
            return str(path)

    def _item_unit(self, item: pytest.Item) -> Path:
        state = item.stash.get(self.item_key, None)
        source = state.source if state is not None else None
        if source is not None:
            where = Path(self.rootdir, source.where)
            if where.is_file():
                return where
        return Path(item.path)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        # trylast: after hooks.py gave each marked test its ItemState, and after -k, -m and --deselect (every
        # shard is given the same ones, so every shard sees the same units).
        units = {item.nodeid: self._item_unit(item) for item in items}
        self.assignment.add({self._unit(u): _size(u) for u in set(units.values())})
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            (keep if self.owns(units[item.nodeid]) else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_report_header(self) -> str:
        a = self.assignment
        manifest = f": {len(a.owned())} of the manifest's {len(a.units)} files" if a.units else ""
        return f"regbudget: shard {a.shard}{manifest} (marked tests split by source file once collected)"


def _size(path: Path) -> float:
    try:
        return float(max(os.stat(path).st_size, 1))
    except OSError:
        return 1.0


def register(
    config: pytest.Config,
    session: RegbudgetSession,
    kernels: Manifest | None,
    item_key: pytest.StashKey[ItemState],
) -> None:
    shard = session.settings.shard
    if shard is not None:
        config.pluginmanager.register(ShardSelection(config, shard, kernels, item_key), PLUGIN_NAME)


def selection(config: pytest.Config) -> ShardSelection | None:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return plugin if isinstance(plugin, ShardSelection) else None
