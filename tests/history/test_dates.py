"""history/git.py's reading of --since and --until dates: what it takes, and that it refuses what git would
guess (git reads any text it cannot parse as some date, and `2100-01-01` as today)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pytest_regbudget.history.git import GitError, _date

NOW = datetime(2026, 3, 31, 12, 0, tzinfo=timezone.utc)
STAMP = int(NOW.timestamp())


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2026-01-01T19:30:00+00:00", 1767295800),
        ("2100-01-01T00:00:00Z", 4102444800),  # after every commit: selects none, as asked
        ("1960-01-01T00:00:00+00:00", 0),  # git keeps no time before 1970
        ("now", STAMP),
        ("yesterday", STAMP - 86400),
        ("2 weeks ago", STAMP - 14 * 86400),
        ("2.weeks.ago", STAMP - 14 * 86400),
        ("90 minutes ago", STAMP - 5400),
        ("1 month ago", int(datetime(2026, 2, 28, 12, 0, tzinfo=timezone.utc).timestamp())),  # no Feb 31st
        ("2 years ago", int(datetime(2024, 3, 31, 12, 0, tzinfo=timezone.utc).timestamp())),
    ],
)
def test_a_date_is_read_here(value: str, seconds: int) -> None:
    assert _date("since", value, now=NOW) == seconds


@pytest.mark.parametrize("value", ["v9.9", "2025-13-45", "10", "-1", "last.friday", "next week", ""])
def test_what_git_would_guess_is_refused(value: str) -> None:
    with pytest.raises(GitError, match=r"--since .* is neither a revision of this repository nor a date"):
        _date("since", value, now=NOW)
