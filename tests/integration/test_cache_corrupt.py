"""Every kind of damaged cache entry is rebuilt, never trusted: the result equals a fresh build, the damage
is counted, and the rewritten entry is trusted again. Real NVRTC + ptxas from the wheels."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.data import KERNELS

from pytest_regbudget.cache.fingerprint import FORMAT
from pytest_regbudget.cache.store import CompileCache
from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.tools.options import CompileOptions
from pytest_regbudget.tools.toolkit import discover

HUNGRY = KERNELS / "hungry.cu"
OPTIONS = CompileOptions.make(defines={"NACC": 6})


def _resign(doc: dict[str, object]) -> str:
    """A document whose checksum matches its (damaged) payload: only the payload's checks can catch it."""
    doc["sha256"] = hashlib.sha256(json.dumps(doc["payload"]).encode()).hexdigest()
    return json.dumps(doc)


def _edit_payload(edit: Callable[[dict[str, object]], object]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        doc = json.loads(path.read_text())
        edit(doc["payload"])
        path.write_text(_resign(doc))

    return damage


def _into_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


DAMAGE: dict[str, Callable[[Path], object]] = {
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_text(p.read_text()[:100]),
    "not-json": lambda p: p.write_text("<html>proxy error</html>"),
    "not-utf8": lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
    "json-list": lambda p: p.write_text("[1, 2, 3]"),
    "wrong-format": lambda p: p.write_text(p.read_text().replace(f'"format":{FORMAT}', '"format":99')),
    "checksum-mismatch": lambda p: p.write_text(p.read_text().replace("Used", "Used 1")),
    "missing-field": _edit_payload(lambda payload: payload.pop("outline")),
    "body-not-a-table": _edit_payload(lambda payload: payload.update(body="%%% not a table %%%")),
    "field-of-wrong-type": _edit_payload(
        lambda payload: payload.update(body={"sha256": "0" * 64, "ptx_bytes": "many"})
    ),
    "unreadable-report": _edit_payload(
        lambda payload: payload.update(ptxas_log="ptxas info    : Used many registers")
    ),
    "a-directory": _into_dir,
}


def _entry(cache_dir: Path) -> Path:
    (entry,) = [p for p in (cache_dir / f"v{FORMAT}").rglob("*.json") if "records" not in p.parts]
    return entry


@pytest.fixture(scope="module")
def fresh() -> tuple[int, int]:
    """Registers and spill stores of a build without a cache."""
    compiled = CompileCache(None).compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, discover())
    return compiled.resources.registers, compiled.resources.spill_stores


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_entry_is_rebuilt(tmp_path: Path, kind: str, fresh: tuple[int, int]) -> None:
    toolkit = discover()
    CompileCache(tmp_path).compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, toolkit)
    entry = _entry(tmp_path)
    DAMAGE[kind](entry)
    cache = CompileCache(tmp_path)
    compiled = cache.compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, toolkit)
    assert (compiled.resources.registers, compiled.resources.spill_stores) == fresh
    assert (cache.stats.hits, cache.stats.misses, cache.stats.corrupt) == (0, 1, 1), kind
    again = CompileCache(tmp_path)
    again.compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, toolkit)
    if kind == "a-directory":
        # A directory in the entry's place cannot be replaced by a file: the cache stays off for it.
        assert (again.stats.hits, again.stats.corrupt) == (0, 1)
    else:
        assert (again.stats.hits, again.stats.misses, again.stats.corrupt) == (1, 0, 0), kind


# The body (PTX and cubin) is read only when a GPU run or a SASS read needs it: its damage shows then.
BODY_DAMAGE: dict[str, Callable[[Path], object]] = {
    "missing": lambda p: p.unlink(),
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:-100]),
    "one-byte-flipped": lambda p: p.write_bytes(p.read_bytes()[:-1] + bytes([p.read_bytes()[-1] ^ 1])),
    "a-directory": _into_dir,
}


@pytest.mark.parametrize("kind", BODY_DAMAGE)
def test_damaged_body_is_rebuilt_when_needed(tmp_path: Path, kind: str) -> None:
    toolkit = discover()
    built = CompileCache(tmp_path).compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, toolkit)
    BODY_DAMAGE[kind](_entry(tmp_path).with_suffix(".body"))
    cache = CompileCache(tmp_path)
    compiled = cache.compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, toolkit)
    assert (cache.stats.hits, cache.stats.misses, cache.stats.corrupt) == (1, 0, 0), kind  # numbers only
    assert compiled.cubin == built.cubin
    assert compiled.ptx == built.ptx
    assert (cache.stats.hits, cache.stats.misses, cache.stats.corrupt) == (1, 1, 1), kind
    again = CompileCache(tmp_path)
    assert again.compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, toolkit).cubin == built.cubin
    if kind == "a-directory":
        assert (again.stats.hits, again.stats.corrupt) == (1, 1)  # the directory stays; rebuilt each time
    else:
        assert (again.stats.hits, again.stats.misses, again.stats.corrupt) == (1, 0, 0), kind


def test_lost_body_whose_rebuild_disagrees_is_an_error(tmp_path: Path) -> None:
    """An entry whose report was forged (checksum and all) and whose body is gone: the rebuild's report
    differs, which is said rather than pairing the entry's numbers with another build's cubin."""
    toolkit = discover()
    CompileCache(tmp_path).compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, toolkit)
    entry = _entry(tmp_path)
    _edit_payload(
        lambda payload: payload.update(ptxas_log=str(payload["ptxas_log"]).replace("Used ", "Used 1"))
    )(entry)
    entry.with_suffix(".body").unlink()
    compiled = CompileCache(tmp_path).compile(HUNGRY, "poly_eval", "sm_90", OPTIONS, toolkit)
    with pytest.raises(
        CompileError, match="lost its PTX and cubin, and building them again gave a different"
    ):
        _ = compiled.cubin
