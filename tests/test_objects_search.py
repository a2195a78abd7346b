"""ObjectService.search: one query across every object the caller may see (the source
contract's search), as federated search uses it; the search inside one object is search_in."""

from __future__ import annotations

import json

from dsh_recall.core.config import load_config
from dsh_recall.services.access.channel import Viewer
from dsh_recall.services.base import Source
from dsh_recall.services.objects import ObjectService


def _log(n: int, tag: str, line: str) -> str:
    rows = [f"{tag} step {i}: compiling module_{i}.c" for i in range(n)]
    rows[n // 2] = line
    return "\n".join(rows) + "\n"


def _put(svc: ObjectService, session: str, line: str, channel: str | None = None, tag: str = "") -> str:
    res = svc.put(_log(400, tag or session, line), session=session, tool="Bash", channel=channel)
    assert res.offloaded and res.id
    return res.id


def test_whole_query_lines_rank_first_then_the_newest_and_no_recall_is_counted(tmp_path):
    clock = iter(range(100))
    with ObjectService(path=tmp_path / "o.sqlite", clock=lambda: float(next(clock))) as svc:
        assert isinstance(svc, Source) and svc.name == "objects"
        words = _put(svc, "a", "FATAL: the disk quota of volume 7 is full")  # all words
        whole = _put(svc, "b", "FATAL disk quota exceeded on /var")  # the whole query
        newer = _put(svc, "c", "error: disk quota low, FATAL soon")  # all words, newest
        _put(svc, "d", "nothing to see here")
        ans = svc.search("FATAL disk quota")
        assert [r["id"] for r in ans["results"]] == [whole, newer, words]
        top = ans["results"][0]
        assert top["line"] == 201 and top["tool"] == "Bash"
        assert top["matches"][0] == {"line": 201, "offset": top["matches"][0]["offset"],
                                     "text": "FATAL disk quota exceeded on /var"}
        assert ans["source"] == "objects" and ans["layers"] == ["lines"] and ans["backlog"] == []
        assert ans["scanned"] == 4 and ans["next_offset"] is None
        page = svc.search("FATAL disk quota", limit=1, offset=1)
        assert [r["id"] for r in page["results"]] == [newer] and page["next_offset"] == 2
        assert svc.search("   ")["results"] == [] and svc.search("zzzz qqqq")["results"] == []
        assert svc.stats()["recalls"] == 0  # a search across objects is not a recall
        json.dumps(ans)  # JSON-ready


def test_a_viewer_searches_only_the_objects_its_channel_may_see(tmp_path):
    smap = tmp_path / "sessions.json"
    smap.write_text(json.dumps({"telegram:1": "me", "telegram:2": "guest1"}), encoding="utf-8")
    cfg = load_config(overrides={"notes": {"session_map": str(smap), "owner_ids": ["me"]}})
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        mine = _put(svc, "s", "FATAL disk quota", channel="telegram:1")
        team = _put(svc, "g", "FATAL disk quota", channel="group:team")
        every = {mine, team}
        assert {r["id"] for r in svc.search("FATAL disk")["results"]} == every  # the user
        assert {r["id"] for r in svc.search("FATAL disk", viewer=Viewer.user())["results"]} == every
        owner = Viewer(cfg, "telegram:1")
        assert {r["id"] for r in svc.search("FATAL disk", viewer=owner)["results"]} == every
        group = Viewer(cfg, "group:team")
        assert [r["id"] for r in svc.search("FATAL disk", viewer=group)["results"]] == [team]
        for stranger in (Viewer(cfg, "telegram:2"), Viewer(cfg, "nobody")):
            assert svc.search("FATAL disk", viewer=stranger)["results"] == []


def test_evicted_objects_are_left_out(tmp_path):
    now = [0.0]
    with ObjectService(path=tmp_path / "o.sqlite", clock=lambda: now[0]) as svc:
        old = _put(svc, "a", "FATAL disk quota")
        now[0] = 2 * 86400.0
        new = _put(svc, "b", "FATAL disk quota")
        svc.gc(max_age_days=1)  # evicts the older object only
        assert [r["id"] for r in svc.search("FATAL disk")["results"]] == [new]
        assert old not in {r["id"] for r in svc.search("FATAL disk")["results"]}
