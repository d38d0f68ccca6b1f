"""Hostile inputs end to end (issue 44): each crash, hang and wrong answer that a pull request's data caused,
replayed as a real run of pytest or `regbudget` in a fresh process, with the real NVRTC, ptxas and cuobjdump
from the wheels. A crash or a hang is now a non-zero exit and one line naming the file or the option; a wrong
answer is the right one. Every case ends within 10 s (a hang fails it, by the subprocess's timeout, rather
than blocking the suite), prints no traceback, and leaves the baseline's bytes as they were.

The table holds the cases: what the scratch project gets on top of a kernel, its test and its recorded
baseline (`setup`), the command, and what it must end with.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers.history import git
from helpers.projects import write
from helpers.runs import regbudget, run_pytest

from pytest_regbudget.tools import toolkit
from pytest_regbudget.tools.compiler import build_unit
from pytest_regbudget.tools.options import CompileOptions

BASELINE = "regbudget-baseline.toml"
KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
# Two kernels in one cubin: `kxyz` is renamed in place (same length) to a name a compiler never makes.
BINARY_SOURCE = KERNEL.replace("void k(", "void kxyz(") + KERNEL.replace("void k(", "void plain(")
DEEP_TOML = "version = 3\nx = " + "[" * 500 + "]" * 500 + "\n"  # tomli stops at 400 levels
DEEP_JSON = '{"a": ' * 100_000 + "1" + "}" * 100_000
LIMIT = 10.0  # seconds a case may take
TIMEOUT = 30.0  # past this the run is killed: a hang fails the case instead of blocking the suite
USAGE, FAILED, BAD_INPUT = pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.TESTS_FAILED, 2


def marker_test(**keys: object) -> str:
    """A test module of one test with a regbudget marker of `keys`."""
    given = ", ".join(f"{k}={v!r}" for k, v in keys.items())
    return f"import pytest\n\n@pytest.mark.regbudget({given})\ndef test_k():\n    pass\n"


class Case(NamedTuple):
    name: str
    setup: Callable[[Path], None]  # the hostile part, on top of the scratch project
    command: tuple[str, ...]  # ("pytest", args...) or ("regbudget", args...)
    exit: int
    line: str  # a pattern that one line of the output matches
    env: Mapping[str, str] = {}
    written: tuple[str, ...] = ()  # files the run must have written
    absent: str | None = None  # a pattern no line of the output may match


# -- setups -----------------------------------------------------------------------------------------------
def nothing(root: Path) -> None:
    pass


def files(named: Mapping[str, str | bytes]) -> Callable[[Path], None]:
    """Files written under the project, folders made."""

    def setup(root: Path) -> None:
        for name, text in named.items():
            write(root, name, text)

    return setup


def fifo(*names: str, then: Callable[[Path], None] = nothing) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        for name in names:
            os.mkfifo(root / name)
        then(root)

    return setup


def link(name: str, target: str, then: Callable[[Path], None] = nothing) -> Callable[[Path], None]:
    """`name` made a symbolic link to `target` (what it stood for kept aside as `name.kept`)."""

    def setup(root: Path) -> None:
        then(root)
        path = root / name
        if path.exists():
            path.rename(root / f"{name}.kept")
        path.symlink_to(target)

    return setup


def rename(name: str, new: str) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        (root / name).rename(root / new)

    return setup


def both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        for one in setups:
            one(root)

    return setup


def history(*versions: tuple[str, Callable[[str], str]]) -> Callable[[Path], None]:
    """The baseline committed once per (subject, edit of the recorded text), then as recorded at HEAD."""

    def setup(root: Path) -> None:
        recorded = (root / BASELINE).read_text()
        git(root, "init", "-q", "-b", "main")
        for subject, edit in versions:
            (root / BASELINE).write_text(edit(recorded))
            git(root, "add", "-A")
            git(root, "commit", "-q", "-m", subject)
        (root / BASELINE).write_text(recorded)
        git(root, "commit", "-q", "--allow-empty", "-am", "as recorded")

    return setup


def more_registers(text: str) -> str:
    return re.sub(r"registers = (\d+)", lambda m: f"registers = {int(m[1]) + 1}", text)


TWO_VERSIONS = history(("first one", lambda t: t), ("second: more registers", more_registers))


@cache
def prebuilt_cubin() -> bytes:
    """A cubin of BINARY_SOURCE for sm_90, built by the wheels' NVRTC and ptxas."""
    return build_unit(Path("two.cu"), BINARY_SOURCE, "sm_90", CompileOptions(), toolkit.discover()).cubin


def renamed_cubin(name: bytes) -> Callable[[Path], None]:
    """A manifest of one binary, whose kernel `kxyz` is renamed `name` in its ELF (same length)."""

    def setup(root: Path) -> None:
        assert len(name) == 4
        (root / "two.cubin").write_bytes(prebuilt_cubin().replace(b"kxyz", name))
        (root / "regbudget.toml").write_text('arch = ["sm_90"]\n\n[[kernels]]\nbinary = ["two.cubin"]\n')

    return setup


# -- the cases ----------------------------------------------------------------------------------------------
DEEP = r"nested too deeply to read \(TOML inline arrays/tables are nested more than the allowed 400 levels\)"
CASES = [
    # Recursion in every reader of TOML and JSON.
    Case("deep baseline, a run", files({BASELINE: DEEP_TOML}), ("pytest",), USAGE, rf"{BASELINE} .*{DEEP}"),
    Case(
        "deep baseline, an update",
        files({BASELINE: DEEP_TOML}),
        ("pytest", "--regbudget-update"),
        USAGE,
        rf"{BASELINE} is not valid TOML: {DEEP}",
    ),
    Case(
        "deep baseline, baseline check",
        files({BASELINE: DEEP_TOML}),
        ("regbudget", "baseline", "check", BASELINE),
        BAD_INPUT,
        rf"{BASELINE} is not valid TOML: {DEEP}",
    ),
    Case(
        "deep manifest",
        files({"regbudget.toml": DEEP_TOML}),
        ("pytest",),
        USAGE,
        rf"regbudget\.toml: .*{DEEP}",
    ),
    Case(
        "deep pyproject, read by regbudget",
        files({"pyproject.toml": "[tool.pytest.ini_options]\n" + DEEP_TOML.partition("\n")[2]}),
        ("regbudget", "explain", "k.cu::k"),
        BAD_INPUT,
        rf"pyproject\.toml: {DEEP}",
    ),
    Case(
        "deep report, compare",
        files({"deep.json": DEEP_JSON}),
        ("regbudget", "compare", "deep.json", "deep.json"),
        BAD_INPUT,
        r"deep\.json: not JSON \(nested too deeply to read",
    ),
    Case(
        "deep report, merge",
        files({"deep.json": DEEP_JSON}),
        ("regbudget", "merge", "deep.json"),
        BAD_INPUT,
        r"deep\.json: not JSON \(nested too deeply to read",
    ),
    Case(
        "deep compilation database",
        files({"deep.json": DEEP_JSON, "regbudget.toml": '[[kernels]]\ncompile_commands = "deep.json"\n'}),
        ("pytest",),
        USAGE,
        r"compilation database .*deep\.json is not JSON \(nested too deeply to read",
    ),
    # Empty and degenerate globs; a run of ** expanded once.
    *(
        Case(
            f"glob {glob!r}",
            files({"regbudget.toml": f'[[kernels]]\nsource = ["{glob}"]\n'}),
            ("pytest",),
            USAGE,
            rf"key 'source': '{re.escape(glob)}' names the rootdir itself, not files",
        )
        for glob in ("", ".", "./")
    ),
    Case(
        "ten ** in a row",
        both(
            files(
                {
                    f"d{a}/e{b}/f{c}/x{a}{b}{c}.cu": KERNEL
                    for a in range(4)
                    for b in range(4)
                    for c in range(4)
                }
            ),
            files({"regbudget.toml": '[[kernels]]\nsource = ["' + "**/" * 10 + 'x000.cu"]\n'}),
        ),
        ("pytest",),
        pytest.ExitCode.OK,
        r"^2 passed",
    ),
    # FIFOs and other special files on every read path.
    Case(
        "FIFO as a marker's source",
        fifo("fifo.cu", then=files({"test_k.py": marker_test(source="fifo.cu", kernel="k")})),
        ("pytest",),
        FAILED,
        r"cannot read CUDA source .*fifo\.cu: a FIFO, not a regular file",
    ),
    Case(
        "device as a marker's source",
        link("zero.cu", "/dev/zero", then=files({"test_k.py": marker_test(source="zero.cu", kernel="k")})),
        ("pytest",),
        FAILED,
        r"cannot read CUDA source .*zero\.cu: a device or socket, not a regular file",
    ),
    Case(
        "FIFO as a marker's binary",
        fifo("fifo.cubin", then=files({"test_k.py": marker_test(binary="fifo.cubin", kernel="k")})),
        ("pytest",),
        FAILED,
        r"cannot read the CUDA binary .*fifo\.cubin: it is a FIFO, not a regular file",
    ),
    *(
        Case(
            f"FIFO as an #include'd header{extra}",
            fifo(
                "fifo.h",
                then=files(
                    {
                        "inc.cu": '#include "fifo.h"\n' + KERNEL,
                        "test_k.py": marker_test(source="inc.cu", kernel="k"),
                    }
                ),
            ),
            ("pytest", *options),
            FAILED,
            r'inc\.cu: #include "fifo\.h" finds fifo\.h, a FIFO, not a regular file',
        )
        for extra, options in (("", ()), (", no cache", ("--regbudget-no-cache",)))
    ),
    Case(
        "FIFO as GITHUB_STEP_SUMMARY",
        fifo("summary.md"),
        ("pytest",),
        pytest.ExitCode.OK,
        r"\$GITHUB_STEP_SUMMARY report NOT written to .*summary\.md: a FIFO, not a regular file",
        env={"GITHUB_STEP_SUMMARY": "summary.md", "GITHUB_ACTIONS": "true"},
    ),
    Case(
        "FIFO as the baseline",
        fifo("fifo.toml", then=link(BASELINE, "fifo.toml")),
        ("pytest",),
        USAGE,
        rf"baseline .*{BASELINE} is a FIFO, not a regular file",
    ),
    Case(
        "FIFO as the manifest",
        fifo("fifo.toml", then=link("regbudget.toml", "fifo.toml")),
        ("pytest",),
        USAGE,
        r"regbudget\.toml is not a file \(a FIFO, a device or a socket\)",
    ),
    Case(
        "FIFO as pyproject.toml",
        fifo("pyproject.toml"),
        ("pytest",),
        USAGE,
        r"pyproject\.toml is a FIFO, not a regular file",
    ),
    Case(
        "FIFO as a report, compare",
        fifo("a.json"),
        ("regbudget", "compare", "a.json", "a.json"),
        BAD_INPUT,
        r"a\.json: cannot read it: a FIFO, not a regular file",
    ),
    Case(
        "FIFO as a report, merge",
        fifo("a.json"),
        ("regbudget", "merge", "a.json"),
        BAD_INPUT,
        r"a\.json: cannot read it: a FIFO, not a regular file",
    ),
    # regbudget history's range: what git would guess is refused, a revision is taken as one.
    Case(
        "history --since a tag that does not exist",
        TWO_VERSIONS,
        ("regbudget", "history", "--since", "v9.9"),
        BAD_INPUT,
        r"--since 'v9\.9' is neither a revision of this repository nor a date",
    ),
    Case(
        "history --since a month that does not exist",
        TWO_VERSIONS,
        ("regbudget", "history", "--since", "2025-13-45"),
        BAD_INPUT,
        r"--since '2025-13-45' is neither a revision of this repository nor a date",
    ),
    Case(
        "history --since a date after every commit",
        TWO_VERSIONS,
        ("regbudget", "history", "--since", "2100-01-01"),
        pytest.ExitCode.OK,
        rf"^no commit of {BASELINE} in this range$",
    ),
    *(
        Case(
            f"history --{flag}=--",
            TWO_VERSIONS,
            ("regbudget", "history", f"--{flag}=--"),
            BAD_INPUT,
            rf"--{flag} needs a revision or a date",
        )
        for flag in ("since", "until")
    ),
    Case(
        "history --since :/message",
        TWO_VERSIONS,
        ("regbudget", "history", "--since", ":/first one"),
        pytest.ExitCode.OK,
        r"second: more registers .* registers \d+ -> \d+$",
        absent=r"^\w+ +\S+ +first one ",
    ),
    # The rest.
    Case(
        "PYTEST_XDIST_WORKER_COUNT=abc",
        nothing,
        ("pytest",),
        pytest.ExitCode.OK,
        r"^1 passed",
        env={"PYTEST_XDIST_WORKER_COUNT": "abc"},
    ),
    Case(
        "a source file name that is not UTF-8",
        both(
            files({"regbudget.toml": '[[kernels]]\nsource = ["*.cu"]\n'}),
            files({os.fsdecode(b"k\xff.cu"): KERNEL}),
        ),
        ("pytest", "--regbudget-update"),
        USAGE,
        r'NOT updated: cannot write baseline \S+: line \d+ \(\[kernels\."k\\xff\.cu"\..*\) is not UTF-8',
    ),
    Case(
        "a test file name that is not UTF-8",
        rename("test_k.py", os.fsdecode(b"test_\xff.py")),
        ("pytest", "--regbudget-update"),
        USAGE,
        r"NOT updated: cannot write baseline \S+: line \d+ \(.*test_\\xff\.py::test_k.*\) is not UTF-8",
    ),
    *(
        Case(
            f"a prebuilt kernel named {name!r}",
            renamed_cubin(name),
            ("pytest", "-rA"),
            pytest.ExitCode.OK,
            rf"^PASSED two\.cubin::{re.escape(shown)}\[sm_90\]$",
            absent="hold no kernel",
        )
        for name, shown in ((b"k yz", "k\\x20yz"), (b"k\nyz", "k\\nyz"))
    ),
    *(
        Case(
            f"NUL in {key}",
            files({"test_k.py": marker_test(source="k.cu", kernel="k", **{key: value})}),
            ("pytest",),
            FAILED,
            rf"{key}={re.escape(repr(value))}: a NUL byte \(\\x00\) cannot be in a kernel name, a path",
        )
        for key, value in (
            ("defines", ["N=1\x00x"]),
            ("options", ["-DX\x00y"]),
            ("ptxas_options", ["-O3\x00"]),
            ("include_dirs", ["inc\x00"]),
        )
    ),
    Case(
        "NUL in kernel=",
        files({"test_k.py": marker_test(source="k.cu", kernel="k\x00x")}),
        ("pytest",),
        FAILED,
        r"kernel='k\\x00x': a NUL byte \(\\x00\) cannot be in a kernel name",
    ),
    Case(
        "NUL in a manifest's source",
        files({"regbudget.toml": '[[kernels]]\nsource = ["k\\u0000.cu"]\n'}),
        ("pytest",),
        USAGE,
        r"key 'source': 'k\\x00\.cu': a NUL byte \(\\x00\) cannot be in a path",
    ),
    Case(
        "a '\"' in a source file name",
        files({'a"b.cu': KERNEL, "test_k.py": marker_test(source='a"b.cu', kernel="k")}),
        ("pytest",),
        FAILED,
        r"ptxas .* failed on k \[sm_90\] for sm_90 \(exit \d+\): the file name '.*a\"b\.cu' holds a '\"'",
    ),
    # A deep version only in the history: the run passes and writes its HTML; history lists it unreadable.
    Case(
        "deep version in the history, --regbudget-html",
        history(("deep", lambda t: DEEP_TOML)),
        ("pytest", "--regbudget-html=report.html"),
        pytest.ExitCode.OK,
        r"^1 passed",
        written=("report.html",),
    ),
    Case(
        "deep version in the history, regbudget history",
        history(("deep", lambda t: DEEP_TOML)),
        ("regbudget", "history"),
        pytest.ExitCode.OK,
        rf"^unreadable, skipped: \w+ \S+ deep: blob \w+ is not valid TOML: {DEEP}$",
    ),
]


# -- the runs -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scratch project every case starts from: a kernel, its test, and its baseline as an update
    recorded it."""
    root = tmp_path_factory.mktemp("recorded")
    write(root, "k.cu", KERNEL)
    write(root, "test_k.py", marker_test(source="k.cu", kernel="k"))
    done = run_pytest(root, "-p", "no:cacheprovider", "-q", "--regbudget-update", env=environment({}))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / BASELINE).is_file()
    return root


def environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment (its compile cache among it) without the CI's GitHub variables."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}, **extra}


def run(root: Path, case: Case) -> subprocess.CompletedProcess[str]:
    kind, *args = case.command
    env = environment(case.env)
    if kind == "pytest":
        return run_pytest(root, "-p", "no:cacheprovider", "-q", *args, env=env, timeout=TIMEOUT)
    return regbudget(*args, cwd=root, env=env, timeout=TIMEOUT)


def state(path: Path) -> object:
    """What stands at `path`: a link's target, a file's bytes, or what else is there."""
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_file():
        return path.read_bytes()
    return "absent" if not path.exists() else "not a file"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_input_ends_in_time_with_one_line(case: Case, recorded: Path, tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(recorded, root, symlinks=True)
    case.setup(root)
    before = state(root / BASELINE)
    start = time.monotonic()
    done = run(root, case)
    took = time.monotonic() - start
    out = done.stdout + done.stderr
    assert took < LIMIT, f"{case.name} took {took:.1f} s"
    assert done.returncode == case.exit, out
    assert re.search(case.line, out, re.MULTILINE), out
    assert "Traceback" not in out, out
    assert "INTERNALERROR" not in out, out
    if case.command[0] == "regbudget" and case.exit:
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line, and only that
    if case.absent is not None:
        assert not re.search(case.absent, out, re.MULTILINE), out
    for name in case.written:
        assert (root / name).is_file(), name
    assert state(root / BASELINE) == before
