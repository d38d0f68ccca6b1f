"""Where an update may write the baseline (core/baseline_write.py `confine`): a path the repository brings
stays in the rootdir or its git work tree once every link is followed; a typed one is the user's choice, but
for the repository's links it meets inside the project."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_regbudget.core.baseline_write import confine, work_tree
from pytest_regbudget.core.errors import BaselineError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree (its `.git` is all `confine` looks for) with the project in `sub`, and a folder
    beside it."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "sub").mkdir()
    (tmp_path / "elsewhere").mkdir()
    return tmp_path / "repo"


def test_inside_the_rootdir_or_its_work_tree(repo: Path) -> None:
    project = repo / "sub"
    confine(project / "regbudget-baseline.toml", project)
    confine(project / "deep" / "new" / "b.toml", project)  # not there yet: the update makes it
    (project / "up.toml").symlink_to(repo / "shared.toml")  # a link to the work tree above the rootdir
    confine(project / "up.toml", project)
    assert work_tree(project) == repo


@pytest.mark.parametrize(
    "plant",
    [
        lambda project, out: (project / "b.toml").symlink_to(out / "b.toml"),
        lambda project, out: (project / "b.toml").symlink_to(out / "missing" / "b.toml"),  # dangling
        lambda project, out: (project / "b.toml").symlink_to("../../elsewhere/b.toml"),  # relative
    ],
    ids=["link", "dangling link", "relative link"],
)
def test_a_link_out_is_refused_naming_its_target(repo: Path, plant: Callable[[Path, Path], None]) -> None:
    project, out = repo / "sub", repo.parent / "elsewhere"
    plant(project, out)
    with pytest.raises(
        BaselineError, match=rf"leads to {re.escape(str(out))}/.*outside the project .*nothing written"
    ):
        confine(project / "b.toml", project)


def test_a_directory_link_on_the_way_out_is_refused(repo: Path) -> None:
    project, out = repo / "sub", repo.parent / "elsewhere"
    (project / "records").symlink_to(out)
    with pytest.raises(BaselineError, match=re.escape(f"leads to {out / 'b.toml'}")):
        confine(project / "records" / "b.toml", project)
    with pytest.raises(BaselineError):  # an ini's ../ the same
        confine(project / ".." / ".." / "elsewhere" / "b.toml", project)


def test_a_typed_path_is_the_users_choice_but_not_a_link_in_the_project(repo: Path) -> None:
    project, out = repo / "sub", repo.parent / "elsewhere"
    confine(out / "b.toml", project, chosen=True)  # typed outside: anywhere
    (out / "link.toml").symlink_to("/etc/anything.toml")
    confine(out / "link.toml", project, chosen=True)  # a link outside the project is not the repository's
    (project / "b.toml").symlink_to(out / "b.toml")
    with pytest.raises(BaselineError, match=re.escape(f"--update {out / 'b.toml'}") + "$"):
        confine(project / "b.toml", project, chosen=True, option="--update ")


def test_without_a_work_tree_the_rootdir_bounds_it(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (tmp_path / "up.toml").touch()
    (project / "up.toml").symlink_to(tmp_path / "up.toml")
    if work_tree(project) is None:  # /tmp in a git checkout would hold it
        with pytest.raises(BaselineError):
            confine(project / "up.toml", project)
