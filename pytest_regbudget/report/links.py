"""Where a comment's links go on GitHub Actions: a kernel's line at the pull request's head commit, and the
run whose artifacts hold the HTML and JSON reports. Read from the runner's environment and event file once
(`github_links`); None elsewhere, where the Markdown shows paths as code spans.

Every part of a link is checked before it is used: the server, repository, commit and run id against their
forms, a file's path as a relative path inside the checkout, percent-encoded. A report read back (`regbudget
merge` of a fork's report) can hold any path; none of it can make a link lead off the repository.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import PurePosixPath
from urllib.parse import quote

from msgspec import Struct

from ..util.files import parse_nested, read_regular
from ..util.patterns import lazy

_SERVER = lazy(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?")
_REPOSITORY = lazy(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SHA = lazy(r"[0-9a-f]{40}|[0-9a-f]{64}")
_RUN = lazy(r"[0-9]{1,20}")
# A runner's event file is a few kilobytes; past this it is not one.
_EVENT_BYTES = 4 << 20


class GithubLinks(Struct, frozen=True):
    server: str  # https://github.com
    repository: str  # owner/name
    sha: str  # the commit the files are read at: the pull request's head
    run_id: str | None = None  # the run whose artifacts are the reports

    def file(self, path: str, line: int | None) -> str | None:
        """The file's line at the commit; None for a path that is not inside the checkout."""
        parts = PurePosixPath(path).parts
        if not parts or path.startswith("/") or ".." in parts or "\\" in path:
            return None
        anchor = f"#L{line}" if line is not None and line > 0 else ""
        return f"{self.server}/{self.repository}/blob/{self.sha}/{quote(path, safe='/')}{anchor}"

    def run(self) -> str | None:
        if self.run_id is None:
            return None
        return f"{self.server}/{self.repository}/actions/runs/{self.run_id}"


def _event(path: str) -> Mapping[str, object]:
    """The runner's event payload; {} where it cannot be read."""
    try:
        data = read_regular(path)
    except OSError:
        return {}
    if len(data) > _EVENT_BYTES:
        return {}
    try:
        doc = parse_nested(json.loads, data.decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON, or nested too deep
        return {}
    return doc if isinstance(doc, dict) else {}


def _get(doc: object, *path: str) -> object:
    for name in path:
        doc = doc.get(name) if isinstance(doc, dict) else None
    return doc


def github_links(environ: Mapping[str, str]) -> GithubLinks | None:
    """The links of this GitHub Actions job; None off GitHub Actions, or where a part is missing or not of
    its form. The commit: the pull request's head (`pull_request.head.sha` of the event: GITHUB_SHA is the
    merge commit GitHub made), the head of the run a `workflow_run` job reads the reports of, else
    GITHUB_SHA. The run: that `workflow_run`'s, else this one (GITHUB_RUN_ID)."""
    if environ.get("GITHUB_ACTIONS") != "true":
        return None
    server = environ.get("GITHUB_SERVER_URL", "").rstrip("/")
    repository = environ.get("GITHUB_REPOSITORY", "")
    event = _event(environ["GITHUB_EVENT_PATH"]) if environ.get("GITHUB_EVENT_PATH") else {}
    sha = _get(event, "pull_request", "head", "sha") or _get(event, "workflow_run", "head_sha")
    sha = sha if isinstance(sha, str) else environ.get("GITHUB_SHA", "")
    run = _get(event, "workflow_run", "id")
    run_id = str(run) if isinstance(run, int) else environ.get("GITHUB_RUN_ID", "")
    if not (_SERVER.fullmatch(server) and _REPOSITORY.fullmatch(repository) and _SHA.fullmatch(sha)):
        return None
    return GithubLinks(server, repository, sha, run_id if _RUN.fullmatch(run_id) else None)
