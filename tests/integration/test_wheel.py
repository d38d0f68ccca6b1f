"""The package a user installs: the sdist and the wheel built from it, installed into a fresh virtual
environment outside the checkout, import every module, answer `regbudget --version`, and run a copy of the
example project that installs the plugin as its README says.

`pip install -e .` (what the rest of the suite runs under) reads the checkout itself, so it hides a wheel that
leaves a subpackage out: that shipped once, and then every pytest run in the user's environment failed, since
the plugin is a pytest11 entry point. The release workflow runs this file against the wheel it is about to
publish (REGBUDGET_WHEEL), on every supported Python.

Needs the network or a warm pip cache (the wheel's dependencies, and setuptools for the builds).
"""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from helpers.packaging import PROJECT, RELATIVE_LINK, URL_KEYS, release_pythons

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "pytest_regbudget"
EXAMPLE = ROOT / "example_project"

# Every module of the package as the checkout has it: what the wheel must hold.
MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for path in PACKAGE.rglob("*.py")
    if "__pycache__" not in path.parts
)

IMPORT_ALL = """
import importlib, json, sys
names = sys.argv[1:]
for name in names:
    importlib.import_module(name)
import pytest_regbudget
print(json.dumps({"file": pytest_regbudget.__file__, "version": pytest_regbudget.__version__}))
"""


def run(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=1200, env=env
    )
    assert done.returncode == 0, f"{args} in {cwd}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: none of this test run's pytest or xdist settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    env.pop("GITHUB_ACTIONS", None)
    return {**env, **extra}


def wheel_files(wheel: Path) -> dict[str, bytes]:
    """A wheel's files and their bytes, but RECORD (it holds the hashes of the rest)."""
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n) for n in z.namelist() if not n.endswith(".dist-info/RECORD")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel under test: REGBUDGET_WHEEL (the release workflow's), else the sdist built from this
    checkout and the wheel built from that sdist, as `python -m build` makes them."""
    given = os.environ.get("REGBUDGET_WHEEL")
    if given:
        return Path(given).resolve()
    pytest.importorskip("build", reason="`build` is in the test extra")
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=ROOT)
    (sdist,) = dist.glob("pytest_regbudget-*.tar.gz")
    (built,) = dist.glob("pytest_regbudget-*.whl")
    # The sdist is complete: a wheel built straight from the checkout's files holds the same files, byte for
    # byte. Built from a copy of what git tracks (and would track): setuptools' build/ of an earlier build in
    # the checkout would otherwise add modules that no longer exist.
    checkout = tmp_path_factory.mktemp("checkout")
    listed = run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    direct = tmp_path_factory.mktemp("direct")
    run([sys.executable, "-m", "build", "--wheel", "--outdir", direct, checkout], cwd=checkout)
    assert wheel_files(built) == wheel_files(next(direct.glob("*.whl")))
    assert sdist.name.removesuffix(".tar.gz") in built.name
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment outside the checkout with the wheel installed: its bin directory."""
    where = tmp_path_factory.mktemp("venv")
    assert ROOT not in where.parents
    venv.create(where, with_pip=True)
    bin_dir = where / ("Scripts" if sys.platform == "win32" else "bin")
    run([bin_dir / "python", "-m", "pip", "install", "-q", wheel], cwd=where, env=clean_env())
    return bin_dir


def test_the_wheel_holds_and_imports_every_module(wheel: Path, installed: Path, tmp_path: Path) -> None:
    shipped = {
        ".".join(Path(n).with_suffix("").parts).removesuffix(".__init__")
        for n in wheel_files(wheel)
        if n.startswith("pytest_regbudget/") and n.endswith(".py")
    }
    assert sorted(set(MODULES) - shipped) == []
    assert "pytest_regbudget/py.typed" in wheel_files(wheel)
    assert len(MODULES) > 40
    # __main__ runs the command when imported: `python -m pytest_regbudget --version` tries it instead.
    importable = [m for m in MODULES if not m.endswith(".__main__")]
    out = run([installed / "python", "-c", IMPORT_ALL, *importable], cwd=tmp_path, env=clean_env())
    # The modules came from the environment, not from this checkout.
    assert f'"file": "{installed.parent}' in out, out
    assert str(ROOT) not in out


def test_regbudget_version_is_the_packages(installed: Path, tmp_path: Path) -> None:
    from pytest_regbudget import __version__

    for command in ([installed / "regbudget"], [installed / "python", "-m", "pytest_regbudget"]):
        assert run([*command, "--version"], cwd=tmp_path, env=clean_env()) == f"regbudget {__version__}\n"
    # pytest itself loads the plugin (a pytest11 entry point) and lists its options.
    assert "--regbudget-update" in run([installed / "pytest", "--help"], cwd=tmp_path, env=clean_env())


def test_a_copy_of_the_example_project_passes_with_the_wheel(
    wheel: Path, installed: Path, tmp_path: Path
) -> None:
    project = tmp_path / "my-kernels"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    # As its README says until the plugin is on PyPI: the plugin from a wheel, then the project.
    readme = (EXAMPLE / "README.md").read_text()
    assert re.search(r"pip install \S*pytest_regbudget-\S+\.whl -e \.", readme), "the README's install line"
    env = clean_env(PATH=f"{installed}{os.pathsep}{os.environ['PATH']}")
    run([installed / "python", "-m", "pip", "install", "-q", wheel, "-e", "."], cwd=project, env=env)
    out = run([installed / "pytest", "-p", "no:cacheprovider"], cwd=project, env=env)
    last = out.strip().splitlines()[-1]
    assert " passed" in last, out[-3000:]
    assert "failed" not in last, out[-3000:]
    assert "error" not in last, out[-3000:]


def test_the_wheels_metadata_is_what_the_index_shows(wheel: Path) -> None:
    """METADATA: the pytest framework classifier, a Python classifier per version the release workflow tests,
    the project's addresses from [project.urls], an author, and a description with no relative link."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(z.read(name))
    classifiers = meta.get_all("Classifier") or []
    assert "Framework :: Pytest" in classifiers
    assert [c for c in classifiers if c.startswith("Development Status :: ")]
    pythons = [
        c.rsplit(" :: ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert pythons == release_pythons()
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert set(urls) == URL_KEYS
    assert urls == PROJECT["urls"]
    assert (
        meta.get("Author")
        or meta.get("Author-email")
        or meta.get("Maintainer")
        or meta.get("Maintainer-email")
    )
    description = meta.get_payload()
    assert isinstance(description, str)
    assert "pytest-regbudget" in description
    assert meta.get("Description-Content-Type", "").startswith("text/markdown")
    assert RELATIVE_LINK.findall(description) == []
