"""History service API for the MCP server and the auto-recall gate: paging of search and
show, known_terms / OlderTurns, recent_events, the compaction anchor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.services import history as svc


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(svc.SESSION_ENV, raising=False)


@pytest.fixture
def cfg():
    return load_config(overrides={"embedder": {"name": "fake"}})


def _import(tmp_path: Path, rows: list[dict], cfg) -> None:
    p = tmp_path / "h.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    svc.import_paths([str(p)], fmt="generic", cfg=cfg)


@pytest.fixture
def many(tmp_path, cfg):
    """Session `s` with 30 turns about widgets (each also names one colour), spaced apart
    by filler so coarse events do not merge; and session `t` with 3 widget turns."""
    rows = []
    for i in range(30):
        rows.append({"session": "s", "seq": 2 * i * 6, "role": "user", "text": f"widget number {i} is colour{i}",
                     "id": f"w{i}", "workspace": "/ws"})
        for j in range(1, 7):
            rows.append({"session": "s", "seq": 2 * i * 6 + j, "role": "assistant", "text": f"filler {i} {j} ok"})
    for i in range(3):
        rows.append({"session": "t", "seq": i, "role": "user", "text": f"another widget {i}", "workspace": "/ws"})
    _import(tmp_path, rows, cfg)
    return rows


def _all_pages(cfg, **kw) -> list[list[dict]]:
    pages, offset = [], 0
    while True:
        ans = svc.search("widget", all_sessions=True, cfg=cfg, offset=offset, layers=["literal"], **kw)
        pages.append(ans["hits"])
        assert ans["offset"] == offset
        if not ans["has_more"]:
            assert ans["next_offset"] is None
            return pages
        assert ans["next_offset"] == offset + len(ans["hits"]) and ans["hits"]
        offset = ans["next_offset"]
        assert len(pages) < 50


def test_detail_paging_partitions_the_ranking(many, cfg):
    whole = svc.search("widget", all_sessions=True, cfg=cfg, detail=True, limit=500, layers=["literal"])
    n = len(whole["hits"])
    assert n >= 33 and not whole["has_more"]  # 33 direct matches (+ their neighbours)
    pages = _all_pages(cfg, detail=True, limit=7)
    assert [len(p) for p in pages] == [7] * (n // 7) + ([n % 7] if n % 7 else [])
    flat = [(h["session"], h["start_seq"]) for p in pages for h in p]
    assert flat == [(h["session"], h["start_seq"]) for h in whole["hits"]]


def test_coarse_paging_has_no_repeats_and_each_page_fits_the_budget(many, tmp_path, cfg):
    # 14 more sessions with a widget each: coarse shows at most 3 events per session.
    extra = tmp_path / "x"
    extra.mkdir()
    _import(extra, [{"session": f"u{i}", "seq": 0, "role": "user", "text": f"the widget {i} " + "blah " * i}
                    for i in range(14)], cfg)
    pages = _all_pages(cfg, limit=5)
    flat = [(h["session"], h["start_seq"]) for p in pages for h in p]
    # s: 3 events (the cap); t: its 3 adjacent turns merge into 1 event; u0..u13: 14.
    assert len(flat) == len(set(flat)) == 3 + 1 + 14 and [len(p) for p in pages] == [5, 5, 5, 3]
    first = svc.search("widget", all_sessions=True, cfg=cfg, limit=5, layers=["literal"])
    assert first["has_more"] and first["next_offset"] == len(first["hits"])
    assert svc.answer_tokens(first) <= cfg.history.coarse_budget_tokens
    past_end = svc.search("widget", all_sessions=True, cfg=cfg, offset=500, layers=["literal"])
    assert past_end["hits"] == [] and not past_end["has_more"]


def test_show_offset_paging_and_next_offset(many, cfg):
    total = svc.show("s")["session"]["events"]
    seen, offset = [], 0
    while offset is not None:
        ans = svc.show("s", offset=offset, page_size=50)
        assert ans["offset"] == offset
        seen += [e["seq"] for e in ans["events"]]
        offset = ans["next_offset"]
        assert ans["has_more"] == (offset is not None)
    assert len(seen) == total == len(set(seen)) and seen == sorted(seen)
    # A window around a seq says where browsing continues after it.
    # (seqs run 0-6, 12-18, 24-30, ...)
    win = svc.show("s", around=14, window=2)
    assert [e["seq"] for e in win["events"]] == [12, 13, 14, 15, 16]
    assert win["offset"] == 7 and win["next_offset"] == 12
    assert svc.show("s", offset=win["next_offset"], page_size=1)["events"][0]["seq"] == 17
    # Page numbers still work and agree with offsets.
    assert svc.show("s", page=2)["events"] == svc.show("s", offset=20)["events"]


def test_known_terms_sees_only_older_turns(tmp_path, cfg):
    rows = [{"session": "g", "seq": 0, "role": "user", "text": "we pinned the Kafka consumer to version 3.6"},
            {"session": "g", "seq": 1, "role": "assistant", "text": "数据库迁移要在周五完成"},
            {"session": "g", "seq": 2, "role": "user", "text": "now about the redis cache"},
            {"session": "h", "seq": 0, "role": "user", "text": "terraform modules"}]
    _import(tmp_path, rows, cfg)
    found = svc.known_terms(["kafka", "迁移", "redis", "terraform", "kafak consumer", "", 'x" OR ('], "g",
                            before_seq=2)
    assert {"kafka", "迁移", "kafak consumer"} <= found
    assert "redis" not in found and "terraform" not in found  # newer turn; other session
    assert "redis" in svc.known_terms(["redis"], "g")
    older = svc.OlderTurns("g", 2, svc.open_store())
    assert "kafka" in older and "redis" not in older and 3 not in older
    assert [e["seq"] for e in svc.recent_events("g", 2)] == [1, 2]
    assert svc.recent_events("nope", 2) == []


def test_anchor_is_summary_plus_fragments_decisions_and_users_first(tmp_path, cfg):
    rows = [{"session": "c", "seq": 0, "role": "user", "text": "set the retry limit to 7"},
            {"session": "c", "seq": 1, "role": "assistant", "text": "long reply " * 100},
            {"session": "c", "seq": 2, "role": "tool", "text": "tool output " * 500},
            {"session": "c", "seq": 3, "role": "assistant", "text": "ok"},
            {"session": "c", "seq": 4, "role": "user", "text": "and keep the backoff exponential"},
            {"session": "c", "seq": 5, "role": "summary", "text": "We tuned retries. " * 200}]
    _import(tmp_path, rows, cfg)
    a = svc.compaction_anchor("c", budget_chars=1500)
    assert [f["seq"] for f in a["fragments"]] == [0, 1, 3, 4]  # never the tool output
    assert a["summary"]["truncated"] == len("We tuned retries. " * 200)
    assert a["ttl"] == 3 and "recall id=" in a["context"] and "retry limit to 7" in a["context"]
    assert "keep the backoff exponential" in a["context"]
    assert len(a["context"]) < 1500 + 400
    # No compaction: no anchor, and the recall service says so with None.
    _import(tmp_path, [{"session": "d", "seq": 0, "role": "user", "text": "hi"}], cfg)
    assert svc.compaction_anchor("d")["summary"] is None


def test_recall_service_anchor_goes_through_history(tmp_path, cfg):
    from dsh_recall.services.recall import RecallService

    rows = [{"session": "c", "seq": 0, "role": "user", "text": "set the retry limit to 7"},
            {"session": "c", "seq": 1, "role": "summary", "text": "We tuned retries."}]
    _import(tmp_path, rows, cfg)
    rs = RecallService(cfg)
    got = rs.anchor("c")
    assert got["context"] == svc.compaction_anchor("c", budget_chars=2400)["context"]
    assert rs.anchor("unknown-session") is None


def test_neighbour_spread_and_question_words():
    from dsh_recall.rank import history_query as hq

    # 2 has no match of its own but sits between two strong ones: it enters, below them.
    ranked = hq.spread_to_neighbours({1: 10.0, 3: 9.0, 7: 1.0}, {1: [0, 2], 3: [2, 4], 7: [6, 8]}, 0.2)
    assert ranked[:2] == [1, 3] and ranked.index(2) < ranked.index(7)
    assert hq.spread_to_neighbours({5: 1.0}, {}, 0.2) == [5]
    # Question-form words go while topic words remain; alone they are kept.
    assert hq.terms("What kind of pottery did Melanie mention?") == ["pottery", "melanie"]
    assert hq.terms("what did you mention") == ["mention"]


def test_answer_next_to_its_question_is_found(tmp_path, cfg):
    rows = [{"session": "q", "seq": 0, "role": "user", "text": "which database did we pick for the ledger?"},
            {"session": "q", "seq": 1, "role": "assistant", "text": "PostgreSQL 16, with logical replication"},
            {"session": "q", "seq": 2, "role": "user", "text": "unrelated chat about lunch"},
            {"session": "q", "seq": 3, "role": "assistant", "text": "noodles"}]
    _import(tmp_path, rows, cfg)
    hits = svc.search("ledger database", session="q", detail=True, layers=["literal"], cfg=cfg)["hits"]
    assert [h["start_seq"] for h in hits] == [0, 1]


def test_fusion_by_rank_or_by_score():
    from dsh_recall.core.config import HistoryConfig
    from dsh_recall.services.history import fuse_layers

    layers = {"literal": [(1, 9.0), (2, 1.0)], "semantic": [(3, 0.4), (2, 0.3), (1, 0.0)]}
    by_rank = fuse_layers(layers, HistoryConfig(fusion="rank"))
    assert [i for i, _, _ in by_rank] == [2, 1, 3]  # found by both layers first
    assert "semantic" not in dict((i, r) for i, _, r in by_rank)[1]  # zero score: no rank
    by_score = fuse_layers(layers, HistoryConfig(fusion="score"))
    assert [i for i, _, _ in by_score][0] == 1  # literal's large margin survives
