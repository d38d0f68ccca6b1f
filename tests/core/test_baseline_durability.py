"""What held up under attack stays under test: a baseline write killed with SIGKILL at any moment leaves
the old file or the new one, never half of either; and the same entries always give the same bytes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.data import SAMPLE_ENTRY as ENTRY
from msgspec.structs import replace

from pytest_regbudget.core import baseline as bl

# Rewrites the baseline forever, alternating between two versions of 2,000 entries (about 700 KB), so a
# kill lands mid-write often.
WRITER = """
import sys
from msgspec.structs import replace
from pathlib import Path
from pytest_regbudget.core import baseline as bl
from test_baseline_durability import entries
path, lock_dir = Path(sys.argv[1]), Path(sys.argv[2])
print("ready", flush=True)
n = 0
while True:
    n += 1
    bl.update(path, entries(n % 2), set(), lock_dir=lock_dir)
"""


def entries(version: int) -> dict[bl.Key, bl.BaselineEntry]:
    return {
        (f"kernels/k{i // 10}.cu", f"kernel_{i % 10}", f"N={i}", "sm_90", "12.9"): replace(
            ENTRY,
            registers=32 + version,
            occupancy={"256 threads": 0.5, "1024 threads": 0.25},
            tests=(f"tests/test_{i // 10}.py::test_{i}[sm_90]",),
        )
        for i in range(2000)
    }


@pytest.mark.slow
def test_sigkill_during_updates_never_leaves_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "regbudget-baseline.toml"
    bl.update(path, entries(0), set(), lock_dir=tmp_path / "cache")
    valid = {bl.dumps(bl.Baseline(entries(0))), bl.dumps(bl.Baseline(entries(1)))}
    rng = random.Random(11)
    env_path = str(Path(__file__).parent)
    # The writer imports the same pytest_regbudget as this process (a worktree's, not an installed one).
    package_root = str(Path(bl.__file__).resolve().parents[1])
    for _ in range(30):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(tmp_path / "cache")],
            stdout=subprocess.PIPE,
            cwd=env_path,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join([env_path, str(Path(env_path).parent), package_root]),
            },
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        text = path.read_text(encoding="utf-8")
        assert text in valid
        assert bl.load(path) in (bl.Baseline(entries(0)), bl.Baseline(entries(1)))
    # Killed writers leave their temp files at worst; never a second baseline, and nothing in the repo
    # dir but those temp files.
    others = {p.name for p in tmp_path.iterdir()} - {"regbudget-baseline.toml", "cache"}
    assert all(name.startswith(".regbudget-baseline.toml.") and name.endswith(".tmp") for name in others)


def test_same_entries_same_bytes_in_any_insertion_order() -> None:
    items = list(entries(0).items())
    random.Random(3).shuffle(items)
    expected = bl.dumps(bl.Baseline(entries(0)))
    assert bl.dumps(bl.Baseline(dict(items))) == expected
    # And within an entry: launches and tests in any order.
    key, entry = items[0]
    reordered = replace(entry, occupancy=dict(reversed(list(entry.occupancy.items()))), tests=("b", "a"))
    assert bl.dumps(bl.Baseline({key: reordered})) == bl.dumps(
        bl.Baseline({key: replace(entry, tests=("a", "b"))})
    )
