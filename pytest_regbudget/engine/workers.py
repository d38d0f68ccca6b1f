"""pytest-xdist: what a worker's session sends the controller when its tests are done (`payload`), and how
the controller adds it to its own (`merge`). Only the controller writes files, from the merged session.
"""

from __future__ import annotations

from typing import Any

from ..cache.store import CacheStats
from ..update import broken
from .session import RegbudgetSession

WORKEROUTPUT_KEY = "regbudget"


def payload(session: RegbudgetSession) -> dict[str, Any]:
    # The records carry everything an update writes (update.fresh_entries): the controller rebuilds the
    # entries from all workers' records, as `regbudget merge` does from CI shards' reports.
    return {
        "cache": session.cache_stats(CacheStats()).to_payload(),
        "records": session.records,
        "scope": session.scope.payload(),
        "conflicts": session.conflicts,
        "empty_binaries": session.empty_binaries,
        "empty_sources": sorted(session.empty_sources),
        "nvcc": session.nvcc_found(),
        "builds": broken.json_objects(session.builds),
        "unmatched": session.unmatched,
        "no_arch": sorted(session.no_arch),
    }


def merge(session: RegbudgetSession, payload: dict[str, Any]) -> None:
    """Add a worker's `payload` to the controller's `session`."""
    session.records.extend(payload.get("records", []))
    session.worker_cache = session.worker_cache.merged(CacheStats.from_payload(payload.get("cache")))
    session.scope.merge(payload.get("scope", {}))
    session.conflicts += payload.get("conflicts", [])
    session.empty_sources.update(payload.get("empty_sources", []))
    session.worker_nvcc = session.worker_nvcc or payload.get("nvcc")
    session.builds.update(broken.from_json(payload.get("builds", [])))
    for message in payload.get("unmatched", []):
        session.note_unmatched(message)  # every worker collects the manifest: once each
    session.no_arch.update(payload.get("no_arch", []))
    for file, count in payload.get("empty_binaries", {}).items():
        session.empty_binaries[file] = max(count, session.empty_binaries.get(file, 0))
