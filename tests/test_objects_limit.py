"""Issue 28: a line search's limit counts the matches first. A failure query's answer used to
reserve five places for the failure region whatever the limit, so `object search --limit 5 ID
"BUILD FAILURE"` (or MCP `object_recall` with `limit: 3`) came back as context lines only while
real matches waited."""

from __future__ import annotations

import pytest

from dsh_recall.rank import line_search
from dsh_recall.services.objects import ObjectService
from fixtures.failing_logs import BUILDERS


def _log() -> str:
    # many matching lines outside the failure region, which says no "error" itself
    text, _ = BUILDERS["retry-noise"]()
    return text


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 8])
def test_a_small_limit_is_mostly_matches_and_starts_with_one(limit):
    got = line_search.search_lines(_log(), "error", limit=limit, fill=True)
    matches = [m for m in got if not m.context]
    assert len(got) == limit
    assert not got[0].context  # a real match leads
    assert len(matches) >= limit - limit // 4  # the region holds at most a quarter


def test_the_default_limit_still_holds_the_region():
    got = line_search.search_lines(_log(), "error", limit=20, fill=True)
    assert 0 < sum(m.context for m in got) <= 5


def test_object_recall_with_limit_three_answers_matches(tmp_path):
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        obj = svc.put(_log(), session="s").id
        res = svc.search_in(obj, "error", limit=3)
    assert len(res.matches) == 3 and not any(m.context for m in res.matches)
    assert all("error" in m.text.lower() for m in res.matches)
