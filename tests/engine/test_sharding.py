"""engine/sharding.py: `K/N` parsed strictly, every unit in exactly one shard, loads within the bound, and an
added file moving few others."""

from __future__ import annotations

import re

import pytest

from pytest_regbudget.engine.sharding import SLACK, Assignment, Shard, assign, parse_shard


def test_parse_shard() -> None:
    assert parse_shard("2/3") == Shard(2, 3)
    assert str(parse_shard(" 1/1 ")) == "1/1"


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/3", "1/3/4", ""])
def test_a_bad_shard_names_the_value(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        parse_shard(text)


WEIGHTS = {f"kernels/k{i:03}.cu": float(100 + (i * 37) % 900) for i in range(200)}


def test_every_unit_goes_to_one_shard_within_the_bound() -> None:
    found, loads = assign(WEIGHTS, 4)
    assert set(found) == set(WEIGHTS)
    assert set(found.values()) == {0, 1, 2, 3}
    average = sum(WEIGHTS.values()) / 4
    assert max(loads) <= (1 + SLACK) * average
    assert sum(loads) == pytest.approx(sum(WEIGHTS.values()))


def test_an_added_file_moves_few_others() -> None:
    before, _ = assign(WEIGHTS, 4)
    after, _ = assign({**WEIGHTS, "kernels/new.cu": 500.0}, 4)
    moved = [u for u in before if before[u] != after[u]]
    assert len(moved) <= 10, moved


def test_every_shard_computes_the_same_assignment() -> None:
    shards = [Assignment(Shard(k, 3), WEIGHTS) for k in (1, 2, 3)]
    for a in shards:
        a.add({"tests/test_a.py": 10.0, "kernels/m.cu": 50.0})
    owned = [set(a.owned()) for a in shards]
    assert all(owned)
    assert sum(map(len, owned)) == len(WEIGHTS) + 2
    assert set().union(*owned) == {*WEIGHTS, "tests/test_a.py", "kernels/m.cu"}
