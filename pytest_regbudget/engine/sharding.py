"""`--regbudget-shard=K/N`: which build units (a source file or a binary, with every item that builds it) a
shard owns. No pytest here: plugin/shard.py applies the assignment to collection.

Every shard computes the same assignment on its own, from inputs that every shard of one CI run has alike:
the unit names (rootdir-relative paths) and their weights. The weight is the file's size in bytes times the
builds it takes (a manifest file's variants): the committed baseline and the compile cache record no build
time today, and a cache is not alike across shards anyway (one job may restore it and another not); a
weight that differed between shards would give a unit to no shard, or to two.

The assignment is rendezvous hashing with bounded loads: each unit ranks the shards by a hash of (unit,
shard) and goes to the first of its ranking whose load stays within `1 + SLACK` times the average; units
are placed heaviest first (ties by name). A unit's first choice depends on its name alone, so adding or
removing a file moves few others (only where a bound is reached); a sorted greedy (each unit to the least
loaded shard) balances a little better but reshuffles most units whenever one file is added ahead of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from msgspec import Struct

SLACK = 0.15  # how far over the average load a shard may go before a unit tries its next choice


class Shard(Struct, frozen=True):
    """Shard `index` (1 to `count`) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """`K/N` with 1 <= K <= N; ValueError naming the value and the form otherwise."""
    index, sep, count = text.strip().partition("/")
    if not (sep and index.isdigit() and count.isdigit()):
        raise ValueError(f"{text!r}: expected K/N (this shard and the number of shards), e.g. 2/3")
    k, n = int(index), int(count)
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"{text!r}: K must be from 1 to N (N >= 1), e.g. 1/{max(n, 1)}")
    return Shard(k, n)


def _rank(unit: str, count: int) -> list[int]:
    """The shards (0-based) in `unit`'s order of preference: highest random weight first."""

    def score(shard: int) -> bytes:
        return hashlib.blake2b(f"{shard}\0{unit}".encode(), digest_size=8).digest()

    return sorted(range(count), key=score, reverse=True)


def assign(
    weights: Mapping[str, float], count: int, loads: Sequence[float] | None = None
) -> tuple[dict[str, int], list[float]]:
    """Each unit's shard (0-based) and the shards' loads after placing them. `loads`: what earlier units
    (placed by an earlier call) put on each shard; the bound counts them."""
    placed = list(loads) if loads is not None else [0.0] * count
    total = sum(placed) + sum(max(w, 1.0) for w in weights.values())
    bound = (1 + SLACK) * total / count
    found: dict[str, int] = {}
    for unit, weight in sorted(weights.items(), key=lambda item: (-max(item[1], 1.0), item[0])):
        weight = max(weight, 1.0)
        ranking = _rank(unit, count)
        shard = next(
            (s for s in ranking if placed[s] + weight <= bound),
            min(ranking, key=lambda s: (placed[s], ranking.index(s))),
        )
        found[unit] = shard
        placed[shard] += weight
    return found, placed


class Assignment:
    """The units this shard owns, decided in two steps that every shard takes alike: the manifest's files
    at configuration (before collection builds a listing), then the marked tests' other units once they
    are collected (`add`)."""

    def __init__(self, shard: Shard, weights: Mapping[str, float]) -> None:
        self.shard = shard
        self.units, self.loads = assign(weights, shard.count)

    def add(self, weights: Mapping[str, float]) -> None:
        new = {u: w for u, w in weights.items() if u not in self.units}
        if new:
            found, self.loads = assign(new, self.shard.count, self.loads)
            self.units.update(found)

    def owns(self, unit: str) -> bool:
        return self.units.get(unit) == self.shard.index - 1

    def owned(self) -> list[str]:
        return sorted(u for u in self.units if self.owns(u))
