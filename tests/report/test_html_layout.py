"""The HTML report's layout on generated records: the index, its order and anchors, which kernels get a
chart, and the size of a large page. No toolkit, no pytest run; the browser test is
tests/integration/test_html.py, the staircase's geometry tests/report/test_report.py."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from msgspec.structs import replace

from pytest_regbudget.core.checks import check
from pytest_regbudget.core.kernel_report import KernelReport
from pytest_regbudget.core.limits import Launch, Limits
from pytest_regbudget.core.ptxas import parse_ptxas_output
from pytest_regbudget.core.ratchet import BaselineRule, entry_of_report, ratchet
from pytest_regbudget.report import charts, html
from pytest_regbudget.report.record import ReportRecord, to_record

PTXAS = """\
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 0 bytes smem
"""
RES = parse_ptxas_output(PTXAS)["k"]


def measured(
    i: int,
    *,
    kernel: str | None = None,
    nodeid: str | None = None,
    max_regs: int | None = None,
    level: str = "fail",
    baseline_regs: int | None = 0,
) -> ReportRecord:
    """Kernel number `i` through the real verdict: checked, held to a baseline entry, made a record.
    `baseline_regs`: 0 for an entry equal to the measurement, a count for one that differs, None for none."""
    res = replace(RES, registers=24 + (i * 7) % 100)  # 24..123: every launch below fits
    report = check(
        nodeid or f"tests/test_gen_{i // 30:02d}.py::test_kernel[{i}-sm_90]",
        kernel or f"gemm_{i:03d}<{32 << (i % 3)}, float>",
        "sm_90",
        "/src/gemm.cu",
        res,
        Limits(launch=Launch((128, 256, 512)[i % 3]), max_regs=max_regs),
        "warn" if level == "warn" else "fail",
    )
    report = replace(report, release="12.9", ptxas_version="12.9.86")
    if baseline_regs is None:
        return to_record(ratchet(report, BaselineRule(entry=None, recorded=True)))
    entry = entry_of_report(report)
    if baseline_regs:
        entry = replace(entry, registers=baseline_regs)
    return to_record(ratchet(report, BaselineRule(entry=entry, recorded=True)))


def broken(i: int) -> ReportRecord:
    nodeid = f"tests/test_gen_{i // 30:02d}.py::test_kernel[{i}-sm_90]"
    error = "gemm.cu(3): error: identifier <x> is undefined"
    return to_record(KernelReport(nodeid, f"gemm_{i:03d}<float>", "sm_90", "/src/gemm.cu", None, error=error))


def suite(n: int = 900) -> list[ReportRecord]:
    """A large suite as a pull request sees it: a few kernels fail, warn, changed or are new; most do not."""
    out = []
    for i in range(n):
        regs = 24 + (i * 7) % 100
        if i % 150 == 7:
            out.append(broken(i))
        elif i % 100 == 3:
            out.append(measured(i, max_regs=20))  # over its budget
        elif i % 150 == 11:
            out.append(measured(i, baseline_regs=regs - 8))  # worse than its baseline entry
        elif i % 150 == 13:
            out.append(measured(i, max_regs=20, level="warn"))
        elif i % 150 == 17:
            out.append(measured(i, baseline_regs=regs + 8))  # better: passes, changed
        elif i % 150 == 19:
            out.append(measured(i, baseline_regs=None))  # no entry yet
        else:
            out.append(measured(i))
    return out


class Page(HTMLParser):
    """What a reader follows on the page: the index's rows (cells as text, and the link), and every id."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.rows: list[list[str]] = []
        self.links: list[str] = []
        self.tags: list[str] = []
        self._in_index = False
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        if tag == "table" and found.get("class") == "index":
            self._in_index = True
        elif self._in_index and tag == "tr":
            self.rows.append([])
        elif self._in_index and tag in ("td", "th"):
            self._cell = []
        elif self._in_index and tag == "a":
            self.links.append(str(found["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_index = False
        elif self._in_index and tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def sections(page: str) -> dict[str, str]:
    """Each kernel section's HTML by its id."""
    return dict(re.findall(r'<section id="([^"]+)"[^>]*>(.*?)</section>', page, re.DOTALL))


def test_a_page_of_900_kernels_stays_under_1_5_mb() -> None:
    records = suite()
    page = html.render(records)
    assert len(page.encode()) < 1_500_000, len(page.encode())
    # A chart for each failing, warned and changed kernel that has a launch size, none for the others.
    shown = [r for r in records if html.rank(r) != html.UNCHANGED and r["registers"] is not None]
    assert 20 < len(shown) < 60
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" width=') == len(shown)
    assert page.count('<svg class="suite"') == 1  # and the suite's picture


def test_failing_kernels_come_first_in_the_index_and_have_charts() -> None:
    records = suite()
    page = html.render(records)
    parsed = Page(page)
    header, *rows = parsed.rows
    assert header == [
        "kernel",
        "variant",
        "arch",
        "verdict",
        "registers",
        "spills st/ld",
        "stack",
        "occupancy",
        "delta",
        "file",
        "test",
    ]
    assert len(rows) == len(records)
    verdicts = [row[3] for row in rows]
    failing = sum(1 for r in records if r["outcome"] in ("failed", "error"))
    warned = sum(1 for r in records if r["outcome"] == "warned")
    assert {"FAILED", "ERROR"} == set(verdicts[:failing])
    assert set(verdicts[failing : failing + warned]) == {"warned"}
    assert set(verdicts[failing + warned :]) == {"ok"}
    # After the warnings, the changed and new kernels, then the unchanged ones.
    deltas = [row[8] for row in rows[failing + warned :]]
    changed = [d for d in deltas if d != "="]
    assert deltas[: len(changed)] == changed
    assert {d.split()[0] for d in changed} == {"regs", "new"}
    by_id = sections(page)
    for row, link in zip(rows, parsed.links, strict=True):
        body = by_id[link.removeprefix("#")]
        if row[3] == "ERROR":  # no figures, no chart: the compiler's words
            assert "identifier &lt;x&gt; is undefined" in body
        elif row[3] != "ok" or row[8] != "=":
            assert 'class="steps"' in body, row
        else:
            assert "<svg" not in body, row
    assert rows[0][2] == "sm_90"
    assert rows[0][10].startswith("tests/test_gen_")
    # The figures a reviewer scans for, and which file and variant a repeated name is.
    ok = next(row for row in rows if row[3] == "ok")
    assert (ok[1], ok[5], ok[6], ok[9]) == ("-", "0/0", "0", "/src/gemm.cu")


def test_every_kernel_has_a_section_with_a_unique_id_that_its_index_row_links_to() -> None:
    records = suite(300)
    parsed = Page(html.render(records))
    assert len(parsed.links) == len(records)
    assert len(set(parsed.ids)) == len(parsed.ids)
    assert {link.removeprefix("#") for link in parsed.links} <= set(parsed.ids)


def test_all_kernels_draws_a_chart_for_every_kernel_that_has_a_launch() -> None:
    records = suite(90)
    page = html.render(records, all_kernels=True)
    assert page.count('class="steps"') == sum(1 for r in records if r["registers"] is not None)
    assert 'class="compact"' not in page
    assert "<h2>All kernels</h2>" in page


def test_a_page_without_a_change_has_no_detail_heading() -> None:
    page = html.render([measured(1), measured(2)])
    assert page.count("<svg") == 1  # the suite's picture, no staircase
    assert "Failing, warned and changed" not in page
    assert page.count('class="compact"') == 2
    assert (
        "2 kernel checks: 0 failed, 0 warned, 2 passed; against the baseline: 0 changed, 0 new, 2 unchanged"
        in page
    )


def test_index_cells_carry_numeric_sort_keys() -> None:
    worse = measured(11, baseline_regs=24 + 77 - 8)
    (row,) = re.findall(r"<tr><td><a .*?</tr>", html.render([worse]))
    assert '<td class="failed" data-v="0">FAILED</td><td class="n">101</td>' in row
    assert '<td class="n" data-v="0">0/0</td><td class="n">0</td>' in row
    assert '<td class="n" data-v="0.25">25% @512</td><td class="w" data-v="8">regs +8</td>' in row
    # No baseline entry: no key, so a numeric sort puts it last.
    (row,) = re.findall(r"<tr><td><a .*?</tr>", html.render([measured(1, baseline_regs=None)]))
    assert '<td class="w">new</td>' in row


@pytest.mark.parametrize(
    "kernel",
    ["gemm<32, 32>", "a b#c?d&e", '"><script>x</script>', "ядро", "", "-", "k" * 300, "a\nb"],
)
def test_anchor_is_url_safe_and_stable(kernel: str) -> None:
    rec = measured(1, kernel=kernel)
    name = html.anchor(rec)
    assert re.fullmatch(r"k-[A-Za-z0-9_-]+", name), name
    assert len(name) < 80
    assert html.anchor(measured(1, kernel=kernel)) == name


def test_anchors_differ_for_any_two_records() -> None:
    # Names that shorten to the same slug, the same kernel in two tests, fields that join to the same text.
    same_slug = [measured(1, kernel=k) for k in ("a<b>", "a>b<", "a b", "a_b" + "x" * 60, "a_b" + "x" * 61)]
    two_tests = [measured(1, nodeid=n, kernel="k") for n in ("t.py::a", "t.py::b")]
    joined = [measured(1, nodeid="t.py::a", kernel="b|c"), measured(1, nodeid="t.py::a|b", kernel="c")]
    records = same_slug + two_tests + joined
    names = html.anchors(records)
    assert len(set(names)) == len(records)
    # One test measuring one kernel twice on one arch (two variants): still two ids, the second `-2`.
    twice = html.anchors([two_tests[0], two_tests[0], two_tests[0]])
    assert twice == [twice[0], twice[0] + "-2", twice[0] + "-3"]


def test_anchors_do_not_depend_on_the_order_records_arrive_in() -> None:
    records = suite(60)
    first = Page(html.render(records)).links
    assert Page(html.render(records[::-1])).links == first


def test_user_text_in_the_index_is_escaped() -> None:
    hostile = '"><img src=x onerror=alert(1)>'
    records = [
        measured(1, kernel=hostile, nodeid=f"t.py::test[{hostile}]", max_regs=20),
        measured(2, kernel="<script>alert(2)</script>"),
    ]
    page = html.render(records)
    parsed = Page(page)
    assert "img" not in parsed.tags
    assert parsed.tags.count("script") == 1  # the page's own
    assert "alert(2)</script>" not in page
    _, *rows = parsed.rows
    assert [row[0] for row in rows] == [hostile, "<script>alert(2)</script>"]
    assert rows[0][10] == f"t.py::test[{hostile}]"


def moved(now: dict[str, int], was: dict[str, int], max_regs: int | None = None) -> ReportRecord:
    """A kernel with `now`'s registers and spill bytes held to an entry with `was`'s (each key of
    KernelResources), through the real checks and ratchet."""
    report = check(
        "t.py::test_k[sm_90]", "k", "sm_90", "/src/k.cu", replace(RES, **now), Limits(max_regs=max_regs)
    )
    report = replace(report, release="12.9", ptxas_version="12.9.86")
    entry = replace(entry_of_report(report), **was)
    return to_record(ratchet(report, BaselineRule(entry=entry, recorded=True)))


def marks(page: str) -> list[tuple[str, float, float, str]]:
    """The left panel's marks: (kind, x, y, title)."""
    return [
        (kind, float(x), float(y), title)
        for kind, x, y, title in re.findall(
            r'<circle class="mark" data-kind="(\w+)" cx="([\d.]+)" cy="([\d.]+)"[^>]*><title>([^<]*)', page
        )
    ]


def corner(page: str) -> tuple[float, float, float, float]:
    found = re.search(
        r'<rect class="better" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', page
    )
    assert found is not None
    x, y, w, h = map(float, found.groups())
    return x, y, x + w, y + h


@pytest.mark.parametrize(
    ("now", "was", "kind"),
    [
        # median7x7 on sm_80 (issue 46): fewer registers, far more spill bytes.
        (
            {"registers": 32, "spill_stores": 584, "spill_loads": 644},
            {"registers": 40, "spill_stores": 112, "spill_loads": 140},
            "spills",
        ),
        # Stores grew by 8 bytes while loads fell by 100: still a spill failure, never an improvement.
        (
            {"registers": 30, "spill_stores": 108, "spill_loads": 0},
            {"registers": 40, "spill_stores": 100, "spill_loads": 100},
            "spills",
        ),
        ({"stack": 64}, {"stack": 0}, "spills"),
        ({"registers": 48}, {"registers": 40}, "registers"),
    ],
)
def test_a_kernel_that_got_worse_is_coloured_by_its_metric_and_kept_out_of_the_better_corner(
    now: dict[str, int], was: dict[str, int], kind: str
) -> None:
    rec = moved(now, was)
    assert rec["outcome"] == "failed"
    page = html.render([rec, moved({"registers": 32}, {"registers": 40}), measured(3)])
    (failing,) = [m for m in marks(page) if "FAILED" in m[3]]
    assert failing[0] == kind
    # The corner is the improvements': fewer registers or spill bytes, more of neither (its edges are the zero
    # lines; the centre, where it meets them, is the unchanged kernels').
    left, top, right, bottom = corner(page)

    def improved(x: float, y: float) -> bool:
        return left <= x <= right and top <= y <= bottom and (x, y) != (right, top)

    assert not improved(failing[1], failing[2]), failing
    (better,) = [m for m in marks(page) if m[0] == "changed"]  # only lost registers: passed
    assert improved(better[1], better[2])
    (calm,) = [m for m in marks(page) if m[0] == "calm"]
    assert (calm[1], calm[2]) == (right, top)


def test_a_budget_failure_takes_its_metrics_colour() -> None:
    over = measured(5, max_regs=20)
    assert charts.failed_on(over) == ["registers"]
    res = replace(RES, spill_stores=40, spill_loads=40)
    spilled = to_record(check("t.py::k", "k", "sm_90", "/k.cu", res, Limits(caps={"spills": 8})))
    assert spilled["violations"][0].startswith("spill stores 40 bytes > spills 8")
    assert charts.failed_on(spilled) == ["spills"]
    timed = ReportRecord(**{**over, "violations": ["time 1.30x the baseline's on NVIDIA H100"]})
    assert charts.failed_on(timed) == ["other"]
    page = html.render([over])
    assert 'data-kind="registers" cx=' in page
    assert f'fill="{charts.KERNEL_COLOUR}" stroke="#fff"' in page
