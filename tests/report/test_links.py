"""report/links.py: where a comment links on GitHub Actions, read from the runner's environment and event
file, every part checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_regbudget.report.links import GithubLinks, github_links

HEAD = "1" * 40
MERGE = "2" * 40


def env(tmp_path: Path, event: object = None, **more: str) -> dict[str, str]:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event if event is not None else {}))
    base = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_SHA": MERGE,
        "GITHUB_RUN_ID": "987",
        "GITHUB_EVENT_PATH": str(path),
    }
    return {**base, **more}


def test_a_pull_request_links_its_head_commit_not_the_merge_commit(tmp_path: Path) -> None:
    links = github_links(env(tmp_path, {"pull_request": {"head": {"sha": HEAD}}}))
    assert links == GithubLinks("https://github.com", "octo/kernels", HEAD, "987")
    assert (
        links.file("kernels/median.cu", 22)
        == f"https://github.com/octo/kernels/blob/{HEAD}/kernels/median.cu#L22"
    )
    assert links.run() == "https://github.com/octo/kernels/actions/runs/987"


def test_a_push_links_github_sha_and_a_workflow_run_the_run_it_reads(tmp_path: Path) -> None:
    push = github_links(env(tmp_path, {"after": "x"}))
    assert push is not None
    assert push.sha == MERGE
    read = github_links(env(tmp_path, {"workflow_run": {"head_sha": HEAD, "id": 555}}))
    assert read == GithubLinks("https://github.com", "octo/kernels", HEAD, "555")


@pytest.mark.parametrize(
    "more",
    [
        {"GITHUB_ACTIONS": "false"},
        {"GITHUB_SERVER_URL": "javascript:alert(1)//"},
        {"GITHUB_SERVER_URL": "https://evil.example/x"},
        {"GITHUB_REPOSITORY": "octo/kernels/../../x"},
        {"GITHUB_SHA": "main"},
    ],
)
def test_no_links_where_a_part_is_missing_or_not_of_its_form(tmp_path: Path, more: dict[str, str]) -> None:
    assert github_links(env(tmp_path, **more)) is None


def test_an_unreadable_event_file_falls_back_to_github_sha(tmp_path: Path) -> None:
    for text in ("{not json", "[" * 100_000, "\xff"):
        (tmp_path / "bad.json").write_text(text, encoding="latin-1")
        links = github_links(env(tmp_path, GITHUB_EVENT_PATH=str(tmp_path / "bad.json")))
        assert links is not None
        assert links.sha == MERGE
    links = github_links(env(tmp_path, {"pull_request": {"head": {"sha": "<script>"}}}))
    assert links is None  # a head SHA that is no SHA: no link at all
    assert github_links(env(tmp_path, GITHUB_RUN_ID="1; rm")).run() is None  # type: ignore[union-attr]


@pytest.mark.parametrize("path", ["../outside.cu", "/etc/passwd", "a/../../b.cu", "a\\..\\b.cu", ""])
def test_a_path_outside_the_checkout_gets_no_link(path: str) -> None:
    assert GithubLinks("https://github.com", "o/r", HEAD).file(path, 3) is None


def test_a_hostile_path_is_percent_encoded() -> None:
    url = GithubLinks("https://github.com", "o/r", HEAD).file("k/a b)[x](y) @z`.cu", None)
    assert url == f"https://github.com/o/r/blob/{HEAD}/k/a%20b%29%5Bx%5D%28y%29%20%40z%60.cu"
