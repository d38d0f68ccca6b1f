"""Outside text through every writer: no forged workflow command, no raw terminal control (issue 44).

A hostile corpus (CORPUS: legacy `##[` commands anywhere in a line and in any case, `::` commands after
indentation or after a line break the runner sees, stop-commands and its resume token, add-mask, terminal
escapes, and characters .NET's culture-sensitive search skips) is put where a pull request's data reaches
the plugin: a `.cu` line NVRTC quotes, a ptxas warning, a kernel name, a parametrize id, ini values, a
manifest pattern, a source file's name, a committed baseline's keys, a prebuilt cubin's symbols, JSON
reports, and a baseline's git history. Each writer runs for real (pytest and `regbudget` in subprocesses,
the wheels' NVRTC, ptxas and cuobjdump) and its stdout and stderr are replayed through a reader that
behaves as the GitHub runner does (helpers/runner_commands.py). Asserted for each: the text reached the
output (its tag is there), no command is obeyed but the plugin's own annotations, every one of those is
(no forged stop-commands silenced it), and no raw ESC, BEL or CSI is left.

pytest's own lines are not the plugin's: a node id pytest prints in the shapes it prints them (`NODEID
PASSED` of -v, `FAILED NODEID - ...` of its summary, `NODEID` alone in its warnings summary, `___ NAME ___`
and `___ ERROR collecting NODEID ___` headers) is replaced by `<nodeid>` before the replay
(`without_pytest_ids`), with the node ids of the items and collectors the run had, as a conftest.py of the
scratch project writes them (NODEIDS). A line of the plugin's that starts with a node id (`ID: bad regbudget
marker: ...`) has none of those shapes, so it is still read. --tb=short keeps pytest from printing the test
function's arguments (the corpus, as pytest writes them); -q, where a file's name holds the corpus, keeps it
from naming the file in its progress.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from helpers.history import commit_versions, entry, key
from helpers.projects import fake_home, write
from helpers.runner_commands import Obeyed, raw_controls, replay
from helpers.runs import pytest_argv, regbudget, run_pytest
from msgspec.structs import replace

from pytest_regbudget.core.baseline import Baseline, BaselineEntry, Key, dumps
from pytest_regbudget.tools import nvrtc, toolkit
from pytest_regbudget.tools.options import CompileOptions

# Each string carries a tag of its own (h01...), so that a test can tell it reached the output.
CORPUS = {
    "legacy-stop": "##[stop-commands]h01tok",
    "legacy-warning-upper": "##[WARNING]h02 forged",
    "legacy-mid-line": "k ##[error file=a.cu]h03 forged",
    "v2-error": "::error::h04 forged",
    "v2-add-mask": "  ::add-mask::h05",
    "v2-resume-token": "::h01tok::h06",
    "osc-title": "\x1b]0;h07\x07",
    "clear-screen": "\x1b[2Jh08",
    "c1-csi": "\x9b31mh09",
    "line-separator": "\u2028::error::h10",
    "carriage-return": "\r::warning::h11",
    "soft-hyphen": "#\u00ad#[error]h12",
    "variation-selector": "#\ufe0f#[notice]h13",
}
TAGS = [f"h{n:02d}" for n in range(1, len(CORPUS) + 1)]
ITEMS = list(CORPUS.values())
JOINED = "".join(ITEMS)  # a file name that holds all of it
SMALL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
MARKED = """
import pytest

@pytest.mark.regbudget(source="k.cu", kernel="k")
def test_k():
    pass
"""
STATUS = "PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS"


def test_the_corpus_is_obeyed_raw() -> None:
    """The reader's control: each string of the corpus, printed as it is, forges a command or shows a raw
    terminal control; together, the stop token silences what follows until it is resumed."""
    for name, text in CORPUS.items():
        alone = text if name != "v2-resume-token" else f"{CORPUS['legacy-stop']}\n{text}"
        assert replay(alone) or raw_controls(alone), name
    silenced = replay("##[stop-commands]tok\n::error::x\n::tok::\n::error file=a.cu::y\n")
    assert [c.name for c in silenced] == ["stop-commands", "tok", "error"]
    assert replay("::add-mask::secret\n::error::a secret\n")[-1].data == "a ***"


def without_pytest_ids(output: str, nodeids: Iterable[str]) -> str:
    """`output` with each node id in one of pytest's own line shapes replaced by `<nodeid>` (the module's
    docstring says which); a line of the plugin's that names a node id otherwise is left as it is."""
    for nodeid in sorted(set(nodeids), key=len, reverse=True):
        node, name = re.escape(nodeid), re.escape(nodeid.rsplit("::", 1)[-1])
        shapes = [
            (rf"^{node}(?= (?:{STATUS})\b)", ""),  # -v: `NODEID PASSED [ 50%]`
            (rf"^((?:{STATUS}) ){node}(?= - |$)", r"\1"),  # the short summary: `FAILED NODEID - message`
            (rf"^{node}$", ""),  # the warnings summary
            (rf"^(_+ (?:ERROR at (?:setup|teardown) of )?){name}(?= _+$)", r"\1"),  # `____ test_k[id] ____`
            (rf"^(_+ ERROR collecting ){node}(?= _+$)", r"\1"),
        ]
        for shape, kept in shapes:
            output = re.sub(shape, kept + "<nodeid>", output, flags=re.MULTILINE)
    return output


def own_annotation(command: Obeyed) -> bool:
    """One of the plugin's annotations (report/terminal.py github_annotations)."""
    return command.name in ("error", "warning") and "title=regbudget " in command.properties


def check(output: str, *, annotations: int = 0, tags: Iterable[str] = TAGS) -> None:
    """No forged command, the plugin's `annotations` all obeyed, no raw control, and every tag shown."""
    obeyed = replay(output)
    forged = [c for c in obeyed if not own_annotation(c)]
    assert forged == [], "\n".join(map(str, forged))
    assert len(obeyed) == annotations, obeyed
    assert raw_controls(output) == []
    missing = [tag for tag in tags if tag not in output]
    assert missing == [], output


def environment(root: Path) -> dict[str, str]:
    """A GitHub Actions job's: annotations on, no step summary, no colour, and a terminal wide enough that
    no cell of the table is cut."""
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(root), "PY_COLORS": "0"}
    env["COLUMNS"] = "300"
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


# A conftest.py of the scratch project's that writes the node ids pytest collected, exactly as pytest holds
# them: what `without_pytest_ids` takes out of pytest's own lines.
NODEIDS = """
import json, pathlib

IDS = []

def pytest_collectreport(report):
    IDS.append(report.nodeid)

def pytest_collection_finish(session):
    ids = IDS + [item.nodeid for item in session.items]
    pathlib.Path(session.config.rootpath, "nodeids.json").write_text(json.dumps(ids))
"""


def plugin_run(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, list[dict[str, Any]]]:
    """pytest with the plugin in `root`, -rA: its stdout and stderr (pytest's node ids taken out) and its
    JSON report's records."""
    report, nodeids = root / "report.json", root / "nodeids.json"
    report.unlink(missing_ok=True)
    nodeids.unlink(missing_ok=True)
    write(root, "conftest.py", NODEIDS)
    argv = pytest_argv(
        "-p",
        "no:cacheprovider",
        "-rA",
        "--tb=short",  # a long traceback shows the test's arguments (the corpus) as pytest writes them
        "--regbudget-arch=sm_90",
        f"--regbudget-json={report}",
        *args,
    )
    # Bytes, not text: text mode would turn a `\r` of a node id into a line break, which it no longer
    # matches (the reader breaks the line there as well).
    done = subprocess.run(argv, cwd=root, capture_output=True, env=env or environment(root), timeout=600)
    output = (done.stdout + done.stderr).decode("utf-8", "replace")
    records = json.loads(report.read_text())["kernels"] if report.exists() else []
    collected = json.loads(nodeids.read_text()) if nodeids.exists() else []
    return without_pytest_ids(output, collected), records


def failing(records: list[dict[str, Any]]) -> int:
    """The annotations a run writes: one per kernel that did not pass."""
    return sum(1 for r in records if r["outcome"] != "passed")


def c_string(text: str) -> str:
    """`text` as a C string literal's body: each character that is not printable ASCII as an escape."""
    return "".join(
        c if " " <= c <= "~" and c not in '"\\' else "".join(f"\\x{b:02x}" for b in c.encode()) for c in text
    )


# --- the plugin ---------------------------------------------------------------------------------------------
def test_a_compile_error_quoting_the_corpus(tmp_path: Path) -> None:
    """NVRTC quotes the failing line, with the corpus in its comment: the failure, the table, the
    annotations."""
    tests = ["import pytest\n"]
    for n, text in enumerate(ITEMS):
        write(
            tmp_path, f"bad{n}.cu", f'extern "C" __global__ void bad(float* x) {{ x[0] = nope; }} // {text}\n'
        )
        tests.append(
            f'@pytest.mark.regbudget(source="bad{n}.cu", kernel="bad")\ndef test_bad{n}():\n    pass\n'
        )
    write(tmp_path, "test_bad.py", "\n".join(tests))
    output, records = plugin_run(tmp_path)
    assert len(records) == len(ITEMS)
    check(output, annotations=failing(records))


def test_a_ptxas_warning_quoting_the_corpus(tmp_path: Path) -> None:
    """ptxas quotes an unknown pragma in its warning, and a warning new since the baseline fails the kernel:
    the failure names it."""
    tests = ["import pytest\n"]
    for n in range(len(ITEMS)):
        write(tmp_path, f"k{n}.cu", SMALL)
        tests.append(f'@pytest.mark.regbudget(source="k{n}.cu", kernel="k")\ndef test_k{n}():\n    pass\n')
    write(tmp_path, "test_k.py", "\n".join(tests))
    plugin_run(tmp_path, "--regbudget-update")
    for n, text in enumerate(ITEMS):
        pragma = f'asm volatile(".pragma \\"{c_string(text)}\\";");'
        write(tmp_path, f"k{n}.cu", SMALL.replace("{ ", "{ " + pragma + " "))
    output, records = plugin_run(tmp_path)
    assert len(records) == len(ITEMS)
    # Those past the eighth are not ASCII: ptxas refuses their bytes, or cuts its line at U+2028.
    check(output, annotations=failing(records), tags=TAGS[:8])


def test_kernel_names_and_parametrize_ids_of_the_corpus(tmp_path: Path) -> None:
    """A marker's kernel name that the source does not hold (the error quotes it), a parametrize id (the
    table's test column), and a bad marker's message, which starts with the test's node id."""
    write(tmp_path, "k.cu", SMALL)
    write(
        tmp_path,
        "test_names.py",
        f"""
import pytest

ITEMS = {ITEMS!r}

@pytest.mark.parametrize("name", ITEMS)
def test_name(regbudget, name):
    regbudget.compile("k.cu", name)

@pytest.mark.regbudget(max_regs=1)
@pytest.mark.parametrize("n", range(len(ITEMS)), ids=ITEMS)
def test_id(regbudget, n):
    regbudget.compile("k.cu", "k")

@pytest.mark.regbudget(max_regs="lots")
@pytest.mark.parametrize("n", range(len(ITEMS)), ids=ITEMS)
def test_bad_marker(n):
    pass
""",
    )
    output, records = plugin_run(tmp_path, "-v")
    check(output, annotations=failing(records))


def hostile_keys(*, archs: bool = False) -> dict[Key, BaselineEntry]:
    """Baseline entries whose keys carry the corpus, two strings a key (its source and its kernel name), so
    that the few a listing names hold all of it; each recorded for a test of test_k.py that is gone. With
    `archs`, each key of an arch of its own that no GPU has (`regbudget baseline check` names one key an
    arch)."""
    half = (len(ITEMS) + 1) // 2
    out = {}
    for n in range(half):
        arch = f"sm_9{n}0" if archs else "sm_90"
        kernel = ITEMS[half + n] if half + n < len(ITEMS) else "k"
        out[(f"{ITEMS[n]}.cu", kernel, "-", arch, "12.9")] = replace(
            entry(8), tests=(f"test_k.py::test_gone{n}[{arch}]",)
        )
    return out


def test_a_committed_baseline_whose_keys_carry_the_corpus(tmp_path: Path) -> None:
    """A stale listing quotes the keys of a committed baseline: outside text from data alone."""
    write(tmp_path, "k.cu", SMALL)
    write(tmp_path, "test_k.py", MARKED)
    write(tmp_path, "regbudget-baseline.toml", dumps(Baseline(hostile_keys())))
    output, records = plugin_run(tmp_path)
    check(output, annotations=failing(records))


# --- the regbudget command ----------------------------------------------------------------------------------
def command(*args: str, cwd: Path | None = None) -> str:
    """`regbudget ARGS`: its stdout and stderr."""
    done = regbudget(*args, cwd=cwd)
    return done.stdout + done.stderr


def test_baseline_check_naming_keys_of_the_corpus(tmp_path: Path) -> None:
    baseline = write(tmp_path, "regbudget-baseline.toml", dumps(Baseline(hostile_keys(archs=True))))
    check(command("baseline", "check", str(baseline)))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The JSON report of a real run of one kernel."""
    root = tmp_path_factory.mktemp("report")
    write(root, "k.cu", SMALL)
    write(root, "test_k.py", MARKED)
    run_pytest(root, "-p", "no:cacheprovider", "--regbudget-arch=sm_90", "--regbudget-json=r.json")
    doc: dict[str, Any] = json.loads((root / "r.json").read_text())
    return doc


def hostile_report(doc: dict[str, Any], path: Path, registers: int) -> Path:
    """`doc` with a record per string of the corpus, its kernel, test and key naming it, and `registers`."""
    (first,) = doc["kernels"]
    records = []
    for n, text in enumerate(ITEMS):
        nodeid = f"test_k.py::test_k[{ITEMS[-1 - n]}]"
        key = [first["key"][0], text, *first["key"][2:]]
        measured = {**first["measured"], "registers": registers, "tests": [nodeid]}
        records.append(
            {
                **first,
                "kernel": text,
                "nodeid": nodeid,
                "key": key,
                "registers": registers,
                "measured": measured,
            }
        )
    path.write_text(json.dumps({**doc, "kernels": records}))
    return path


def test_compare_and_merge_of_reports_naming_the_corpus(report: dict[str, Any], tmp_path: Path) -> None:
    """Reports are data a fork's job wrote: compare's table, Markdown and `worse:` lines, merge's lines and
    its refusal, which names the tests and kernels that disagree."""
    a = hostile_report(report, tmp_path / "a.json", 8)
    b = hostile_report(report, tmp_path / "b.json", 16)
    check(command("compare", str(a), str(b)))
    check(command("compare", str(a), str(b), "--markdown"))
    check(command("compare", str(a), str(b), "--fail-on", "registers"))
    check(command("compare", str(a), str(tmp_path / JOINED)))  # the error line names the file
    updated = command(
        "merge", str(a), "-o", str(tmp_path / "merged.json"), "--update", str(tmp_path / "b.toml")
    )
    check(updated, tags=())  # it names no kernel
    check(command("merge", str(a), str(b)), tags=["h01", "h13"])  # the first record that disagrees
    check(command("merge", str(a), "--update", str(tmp_path / JOINED / "b.toml")))  # no such folder


def test_history_and_blame_of_keys_and_subjects_of_the_corpus(tmp_path: Path) -> None:
    """A baseline's history is data too: each kernel named by a string of the corpus, each commit's subject
    one, and a damaged version whose subject holds all of it (the unreadable version's note)."""

    def first(entries: dict[Key, BaselineEntry]) -> None:
        entries.update({key(text): entry(32) for text in ITEMS})

    def change(text: str, registers: int) -> Callable[[dict[Key, BaselineEntry]], None]:
        return lambda entries: entries.__setitem__(key(text), entry(registers))

    steps: list[tuple[str, Callable[[dict[Key, BaselineEntry]], str | None]]] = [("initial", first)]
    steps += [(text, change(text, 40 + n)) for n, text in enumerate(ITEMS)]
    steps.append((JOINED, lambda entries: "version = [\n"))
    commit_versions(tmp_path, steps)
    check(command("history", cwd=tmp_path))
    check(command("blame", "*", "--metric", "registers", cwd=tmp_path))
    check(command("blame", JOINED, cwd=tmp_path))  # no such kernel: the error line quotes the pattern
    history = regbudget("history", "--json", cwd=tmp_path)
    blame = regbudget("blame", "*", "--metric", "registers", "--json", cwd=tmp_path)
    for printed in (history, blame):
        check(printed.stdout + printed.stderr, tags=())  # escaped as JSON, \u005b for a `##[`'s `[`
    # Read back, the JSON holds the text as it was.
    kernels = json.loads(history.stdout)["kernels"]
    assert {k["kernel"] for k in kernels} == set(ITEMS)
    assert {row["subject"] for k in kernels for row in k["rows"]} == {"initial", *ITEMS}
    assert {row["subject"] for k in json.loads(blame.stdout) for row in k["rows"]} == {"initial", *ITEMS}


def failing_lines() -> str:
    """A kernel of a line per string of the corpus, each an error NVRTC quotes."""
    body = "".join(f"    x[{n}] = nope{n};  // {text}\n" for n, text in enumerate(ITEMS))
    return f'extern "C" __global__ void bad(float* x) {{\n{body}}}\n'


def test_explain_of_a_source_whose_log_quotes_the_corpus(tmp_path: Path) -> None:
    write(tmp_path, "bad.cu", failing_lines())
    check(command("explain", "bad.cu::bad", "--arch", "sm_90", cwd=tmp_path))


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def test_ini_values_and_manifest_patterns_of_the_corpus(tmp_path: Path) -> None:
    """What a project's settings hold: a baseline's file name (the header names it), the manifest's kernel
    names and patterns (an error for a name NVRTC does not know, a warning for a pattern that matches
    nothing), and a bad value (the usage error quotes it)."""
    write(tmp_path, "k.cu", SMALL)
    patterns = ", ".join(toml_string(text) for text in ["k", *ITEMS])
    settings = f"""
[tool.pytest.ini_options]
regbudget_baseline = {toml_string(JOINED + ".toml")}

[[tool.regbudget.kernels]]
source = "k.cu"
kernels = [{patterns}]
"""
    write(tmp_path, "pyproject.toml", settings)
    output, records = plugin_run(tmp_path)
    # A name without a pattern's characters is one NVRTC is asked for: its item fails, naming it.
    check(output, annotations=failing(records))
    write(tmp_path, "pyproject.toml", settings.replace("regbudget_baseline", "regbudget_time_basis"))
    check(plugin_run(tmp_path)[0])


def hostile_cubin(path: Path) -> Path:
    """A cubin whose kernels are named by the corpus: built by NVRTC and ptxas from kernels of placeholder
    names as long as the longest string, each name then written over in the ELF's string tables (no
    compiler makes such a symbol; a binary a pull request brings can hold any)."""
    found = toolkit.discover()
    width = max(len(text.encode()) for text in ITEMS)
    names = [f"k{n:02d}".ljust(width, "A") for n in range(len(ITEMS))]
    source = "".join(f'extern "C" __global__ void {name}(float* x) {{ x[0] = 1.0f; }}\n' for name in names)
    ptx = path.with_suffix(".ptx")
    ptx.write_text(nvrtc.compile_ptx(source, "h.cu", "sm_90", CompileOptions(), found).ptx)
    subprocess.run([str(found.ptxas), "-arch=sm_90", str(ptx), "-o", str(path)], check=True)
    data = path.read_bytes()
    for name, text in zip(names, ITEMS, strict=True):
        data = data.replace(name.encode(), text.encode().ljust(width, b"_"))
    path.write_bytes(data)
    return path


def test_a_prebuilt_cubin_whose_symbols_are_the_corpus(tmp_path: Path) -> None:
    """A binary's kernel names, as cuobjdump lists them: items, failures and annotations name them."""
    hostile_cubin(tmp_path / "hostile.cubin")
    write(tmp_path, "pyproject.toml", '[[tool.regbudget.kernels]]\nbinary = "hostile.cubin"\nmax_regs = 1\n')
    output, records = plugin_run(tmp_path, "-v")
    # A name with a space inside is read from the ELF and checked, escaped (issue 44); one that starts with a
    # space or holds a line break is not yet read from cuobjdump's listing, so it is not asked for.
    listed = [tag for tag, text in zip(TAGS, ITEMS, strict=True) if not re.search(r"^\s|[\r\u2028]", text)]
    check(output, annotations=failing(records), tags=listed)
    # A binary cuobjdump cannot read, named by the corpus: the collection error names it.
    (tmp_path / "hostile.cubin").rename(tmp_path / f"{JOINED}.cubin")
    (tmp_path / f"{JOINED}.cubin").write_bytes(b"not an ELF")
    write(tmp_path, "pyproject.toml", '[[tool.regbudget.kernels]]\nbinary = "*.cubin"\n')
    check(plugin_run(tmp_path)[0])


def test_the_progress_line_naming_a_source_of_the_corpus(tmp_path: Path) -> None:
    """A build over the pipe's interval gets a progress line that names its source file: a file named by
    the whole corpus, and a ptxas of the test's own that takes 6 s before it runs the real one."""
    home = fake_home(
        tmp_path / "toolkit", 'case "$1" in --version|--help) ;; *) sleep 6 ;; esac\nexec "$REAL" "$@"\n'
    )
    project = tmp_path / "project"
    write(project, f"kernels/{JOINED}.cu", SMALL)
    write(project, "pyproject.toml", '[[tool.regbudget.kernels]]\nsource = "kernels/*.cu"\n')
    # -q: pytest names no file in its own progress (`kernels/NAME.cu .`), only the plugin's line does.
    output, _ = plugin_run(project, "-q", "--regbudget-no-cache", f"--regbudget-cuda-home={home}")
    assert re.search(r"^regbudget: 0/1 builds \(\d+ threads?\), slowest kernels/", output, re.MULTILINE)
    check(output)
