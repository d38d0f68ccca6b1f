"""The run's translation units: one build per unit however many kernels, threads and plans ask for it.
A recorded ptxas report and its PTX stand for a build (no compiler runs here)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pytest_regbudget.cache.prefetch import Prefetcher, _worker_order
from pytest_regbudget.cache.store import CompileCache
from pytest_regbudget.core.errors import CompileError
from pytest_regbudget.tools.compiler import nvrtc_name_sets
from pytest_regbudget.tools.options import CompileOptions, Timeouts
from pytest_regbudget.tools.outputs import UnitOutputs
from pytest_regbudget.tools.toolkit import Toolkit
from pytest_regbudget.tools.units import Spec, Unit

DATA = Path(__file__).parents[1] / "data" / "ptxas"
TOOLKIT = Toolkit(
    origin="recorded", ptxas=Path("/x/ptxas"), nvrtc=Path("/x/nvrtc"), nvrtc_version="11.8",
    ptxas_version="11.8.89",
)  # fmt: skip
KERNELS = ["simple_add", "spill_heavy", "pressure", "stack_frame", "shared_reverse", "poly_eval"]


class CountingCache(CompileCache):
    """A cache whose builds are the recorded module, slowly, counted per unit."""

    def __init__(self, directory: Path | None = None) -> None:
        super().__init__(directory)  # never read or written: only whether there is one counts
        self.built: list[Unit] = []
        self.lock = threading.Lock()

    def unit(self, unit: Unit, *args: object, **kwargs: object) -> UnitOutputs:
        with self.lock:
            self.built.append(unit)
        time.sleep(0.05)  # long enough for every thread to ask while it is being built
        if any("bad" in n for n in unit.names):
            raise CompileError("NVRTC failed", "__nv_name_map(2): error: identifier bad is undefined")
        lowered = {n: n.split("<")[0] for n in unit.names}
        ptx = (DATA / "11.8_sm_90.ptx").read_text()
        return UnitOutputs.of(ptx, "", (DATA / "11.8_sm_90.txt").read_text(), b"cubin", lowered)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "k.cu"
    path.write_text("".join(f'extern "C" __global__ void {k}() {{}}\n' for k in KERNELS))
    return path


def spec(source: Path, kernel: str, arch: str = "sm_90") -> Spec:
    return (source, kernel, arch, CompileOptions(), None)


@pytest.mark.parametrize("jobs", [1, 4])
def test_concurrent_requests_share_one_build(source: Path, jobs: int) -> None:
    cache = CountingCache()
    pool = Prefetcher(cache, TOOLKIT, jobs, Timeouts(10.0))
    specs = [spec(source, k) for k in KERNELS]
    pool.submit(specs)
    results: dict[str, int] = {}

    def ask(s: Spec) -> None:
        results[s[1]] = pool.get(s).resources.registers

    threads = [threading.Thread(target=ask, args=(s,)) for s in specs * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pool.shutdown()
    assert cache.built == [Unit(source, "sm_90", CompileOptions())]
    assert sorted(results) == sorted(KERNELS)
    assert all(r > 0 for r in results.values())


def test_template_names_of_one_file_build_together(source: Path) -> None:
    cache = CountingCache()
    pool = Prefetcher(cache, TOOLKIT, 1, Timeouts(10.0))
    specs = [spec(source, "simple_add<1>"), spec(source, "pressure<2>"), spec(source, "poly_eval")]
    pool.submit(specs)
    for s in specs:
        pool.get(s)
    assert cache.built == [Unit(source, "sm_90", CompileOptions(), names=("pressure<2>", "simple_add<1>"))]
    # A kernel no plan named: its own build.
    pool.get(spec(source, "stack_frame<3>"))
    assert cache.built[1:] == [Unit(source, "sm_90", CompileOptions(), names=("stack_frame<3>",))]


def test_a_bad_name_in_a_group_sends_each_kernel_to_its_own_build(source: Path) -> None:
    cache = CountingCache()
    pool = Prefetcher(cache, TOOLKIT, 1, Timeouts(10.0))
    specs = [spec(source, "simple_add<1>"), spec(source, "bad<2>")]
    pool.submit(specs)
    assert pool.get(specs[0]).entry == "simple_add"
    with pytest.raises(CompileError):
        pool.get(specs[1])
    names = [u.names for u in cache.built]
    assert names[0] == ("bad<2>", "simple_add<1>")
    assert ("simple_add<1>",) in names


def test_name_sets_cheapest_first() -> None:
    assert nvrtc_name_sets("k") == [(), ("k",)]
    assert nvrtc_name_sets("k<1>") == [("k<1>",)]
    assert nvrtc_name_sets("k<1>", ["k<1>", "j<2>"]) == [("k<1>", "j<2>"), ("k<1>",)]
    assert nvrtc_name_sets("k<3>", ["k<1>"]) == [("k<3>",)]
    assert nvrtc_name_sets("plain", ["k<1>"]) == [("k<1>",), (), ("plain",)]


def test_each_xdist_worker_starts_at_its_own_share() -> None:
    units = [Unit(Path(f"{i}.cu"), "sm_90", CompileOptions()) for i in range(4)]
    assert _worker_order(units, {}) == units
    two = {"PYTEST_XDIST_WORKER_COUNT": "2"}
    assert _worker_order(units, {**two, "PYTEST_XDIST_WORKER": "gw0"}) == units
    assert _worker_order(units, {**two, "PYTEST_XDIST_WORKER": "gw1"}) == units[2:] + units[:2]


@pytest.mark.parametrize("on_disk", [True, False], ids=["cache", "no-cache"])
def test_built_units_are_let_go_once_no_planned_kernel_wants_them(tmp_path: Path, on_disk: bool) -> None:
    """Memory does not grow with the number of files: a unit is kept while its planned kernels are to come,
    then among the last few; without a cache on disk (where it could be found again), for the whole run."""
    cache = CountingCache(tmp_path / "cache" if on_disk else None)
    pool = Prefetcher(cache, TOOLKIT, 1, Timeouts(10.0))
    files = []
    for i in range(40):
        files.append(tmp_path / f"k{i}.cu")
        files[-1].write_text('extern "C" __global__ void simple_add() {}\n')
    planned = [spec(f, "simple_add") for f in files[:20]]
    pool.submit(planned)
    for s in planned + [spec(f, "simple_add") for f in files[20:]]:
        pool.get(s)
    assert len(cache.built) == 40
    assert len(pool._units) == (16 if on_disk else 40)


def test_a_listed_file_serves_its_own_template_instances(source: Path) -> None:
    """A manifest lists a file's kernels with its plain compile; the template instances the file makes
    itself are then picked from that build, not built again with name expressions."""
    cache = CountingCache()
    pool = Prefetcher(cache, TOOLKIT, 1, Timeouts(10.0))
    listed = pool.entries(Unit(source, "sm_90", CompileOptions()))
    assert "_Z5scaleIfLi4EEvPT_S0_" in listed
    specs = [spec(source, "scale<float, 4>"), spec(source, "scale<double, 2>"), spec(source, "pressure")]
    pool.submit(specs)
    entries = [pool.get(s).entry for s in specs]
    assert entries == ["_Z5scaleIfLi4EEvPT_S0_", "_Z5scaleIdLi2EEvPT_S0_", "pressure"]
    assert cache.built == [Unit(source, "sm_90", CompileOptions())]
