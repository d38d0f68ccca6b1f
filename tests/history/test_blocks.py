"""The history's block parser gives exactly what parsing each version whole gives: the same samples for every
file the plugin writes, and, for anything else, the whole file's verdict (its error message included)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers.history import entry, key
from msgspec.structs import replace

from pytest_regbudget.core.baseline import Baseline, dumps
from pytest_regbudget.history.git import BlockParser, _parse

EXAMPLE = Path(__file__).parents[2] / "example_project" / "regbudget-baseline.toml"


def versions(count: int = 30) -> list[bytes]:
    rng = random.Random(32)
    table = {key(f"k{n:02d}", release=r): entry(32 + n) for n in range(40) for r in ("12.9", "13.0")}
    out = []
    for _ in range(count):
        for k in rng.sample(sorted(table), 3):
            e = table[k]
            gpu = (
                {"NVIDIA H200": {"time_ms": rng.random(), "sm_clock_mhz": 1980}} if rng.random() < 0.5 else {}
            )
            table[k] = replace(
                e, registers=e.registers + 1, gpu=gpu, occupancy={"256 threads": 0.5, "1024 threads": 0.25}
            )
        out.append(dumps(Baseline(dict(table))).encode())
    return out


def test_the_plugins_files_read_the_same_by_blocks() -> None:
    parser = BlockParser()
    texts = [*versions(), EXAMPLE.read_bytes()]
    for text in texts:
        whole = _parse(text, "b.toml")
        assert whole.samples
        assert parser(text, "b.toml") == whole
    assert 80 < len(parser._blocks) < 80 * len(texts) // 4  # each entry's text parsed once, not per version


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t + t[t.index(b"[kernels.") :],  # every table twice: a merge gone wrong
        lambda t: b"<<<<<<< HEAD\n" + t,
        lambda t: t.replace(b"\n", b"\r\n"),  # CRLF: read whole
        lambda t: b"\xef\xbb\xbf" + t,  # a BOM
        lambda t: t + b"\n[other]\nx = 1\n",
        lambda t: t.replace(b"version = 3", b"version = 9"),
        lambda t: t.replace(b"registers = ", b"registers = -", 1),
        lambda t: t + b"\n[[kernels.x]]\n",
    ],
)
def test_anything_else_gets_the_whole_files_verdict(damage: object) -> None:
    text = damage(versions(1)[0])  # type: ignore[operator]
    assert BlockParser()(text, "b.toml") == _parse(text, "b.toml")
