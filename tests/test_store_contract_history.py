"""The history-store contract (stores/sqlite/history.py's calls), run on SQLite always and on
PostgreSQL when a server is there (tests/pg_fixture.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dsh_recall.core.text import index_text
from dsh_recall.rank import history_query as hq
from dsh_recall.services.vectors import VectorIndex
from dsh_recall.stores.sqlite.history import BlockIn, HistoryStore
from pg_fixture import pg_namespace, pg_server, pg_url  # noqa: F401  (fixtures)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = HistoryStore(tmp_path / "history.sqlite")
    else:
        from dsh_recall.stores.postgres.history import PgHistoryStore

        s = PgHistoryStore(request.getfixturevalue("pg_url"), request.getfixturevalue("pg_namespace"))
    yield s
    s.close()


def session(sid, ws="/w", channel=None, path="/t/a.jsonl"):
    return {"id": sid, "source": "generic", "workspace": ws, "title": f"t-{sid}", "created_ms": 1,
            "updated_ms": 2, "path": path, "channel": channel}


def event(sid, seq, text, role="user", flags=""):
    return {"session": sid, "seq": seq, "role": role, "time_ms": 1000 + seq, "time": None,
            "message_id": f"{sid}-{seq}", "call_id": None, "flags": flags, "text": text}


def block(sid, seq, text, part=0):
    return BlockIn(sid, seq, part, "user", "text", None, text, f"h{sid}{seq}{part}", index_text(text),
                   text, hq.cjk_body(text))


TEXTS = ["we decided the ledger runs on postgres", "pool size stays at twenty connections",
         "数据库迁移要在周五完成", "ingress timeouts for running jobs", "the ledger migration"]


def load(store):
    evs = [event("a", i, t) for i, t in enumerate(TEXTS[:3])]
    n = store.write_batch([session("a", channel="k1")], evs, [block("a", i, t) for i, t in enumerate(TEXTS[:3])],
                          [], {"path": "/t/a.jsonl", "format": "generic", "size": 10, "mtime_ns": 5,
                               "offset": 10, "line_no": 3, "head_hash": "x", "session": "a"})
    evs = [event("b", i, t) for i, t in enumerate(TEXTS[3:])]
    n += store.write_batch([session("b", ws="/other/w2", path="/t/b.jsonl")], evs,
                           [block("b", i, t) for i, t in enumerate(TEXTS[3:])], [], None)
    return n


def test_write_is_idempotent_and_sessions_filter(store):
    assert load(store) == 5
    assert load(store) == 0
    assert store.stats() == {"sessions": 2, "events": 5, "blocks": 5, "vectors": 0, "files": 1}
    assert [s["id"] for s in store.sessions(workspace="/w")] == ["a"]
    assert [s["id"] for s in store.sessions(workspace="w2")] == ["b"]
    assert {s["id"] for s in store.sessions(["a", "b", "zz"])} == {"a", "b"}
    f = store.file("/t/a.jsonl")
    assert (f["offset"], f["line_no"], f["session"]) == (10, 3, "a")


def test_channel_sticks_and_conflict_makes_it_the_owners(store):
    load(store)
    store.write_batch([session("a", channel=None)], [], [], [], None)
    assert store.sessions(["a"])[0]["channel"] == "k1"
    store.write_batch([session("a", channel="k2")], [], [], [], None)
    assert store.sessions(["a"])[0]["channel"] is None


def test_events_paging_and_flags(store):
    load(store)
    assert [e["seq"] for e in store.events("a")] == [0, 1, 2]
    assert [e["seq"] for e in store.events("a", offset=1, limit=1)] == [1]
    assert [e["seq"] for e in store.events("a", lo=1, hi=2)] == [1, 2]
    assert [e["seq"] for e in store.events("a", seqs=[0, 2])] == [0, 2]
    assert store.event_count("a") == 3 and store.events_before("a", 2) == 2
    assert [e["seq"] for e in store.last_events("a", 2)] == [1, 2]
    assert store.event_seqs_near("a", 1, 1) == (0, 2)
    store.write_batch([], [], [], [("a", 1, "pruned"), ("a", 1, "pruned")], None)
    assert store.events("a", seqs=[1])[0]["flags"] == "pruned"
    assert [e["seq"] for e in store.flagged_events("a", "pruned", 10)] == [1]
    assert store.latest_summary("a") is None


def test_word_layers_and_neighbours(store):
    load(store)
    lit = store.fts("literal", hq.literal_match("ledgers"), None, 10)
    rows = store.blocks([i for i, _ in lit])
    assert {rows[i].text for i, _ in lit} == {TEXTS[0], TEXTS[4]}
    assert all(s < 0 for _, s in lit)  # FTS5's sign: lower is better
    scoped = store.fts("literal", hq.literal_match("ledger"), ["b"], 10)
    assert [store.blocks([i])[i].session for i, _ in scoped] == ["b"]
    tri = store.fts("trigram", hq.trigram_match("postgrs"), None, 10)
    assert store.blocks([tri[0][0]])[tri[0][0]].text == TEXTS[0]
    cjk = store.fts("cjk", hq.cjk_match("迁移"), None, 10)
    assert [store.blocks([i])[i].seq for i, _ in cjk] == [2]
    nb = store.neighbours([i for i, _ in lit])
    assert all(len(v) >= 1 for v in nb.values())


def test_term_shares(store):
    load(store)
    assert store.term_shares("trigram", ["led", "ger"], 6) is None  # 5 blocks: below the floor
    shares = store.term_shares("trigram", ["led", "ing", "zzz", "led"], 1)
    assert shares == {"led": 2 / 5, "ing": 1 / 5, "zzz": 0.0}


def test_pending_by_scope_small_and_large(store):
    # 30 sessions of 3 blocks; 2 of every session embedded. A scope of a few sessions and
    # one past PENDING_BY_SESSION_MAX (read by another index on SQLite) find the same.
    sids = [f"s{k:02d}" for k in range(30)]
    for sid in sids:
        texts = [f"{sid} turn {i} about the ledger" for i in range(3)]
        store.write_batch([session(sid, path=f"/t/{sid}.jsonl")], [event(sid, i, t) for i, t in enumerate(texts)],
                          [block(sid, i, t) for i, t in enumerate(texts)], [], None)
    store.set_embed_hashes([(i, f"e{i}") for i, _, _ in store.unhashed(None, 1000)])
    pend = store.pending(None, 1000)
    assert len(pend) == 90
    done = {h for h, text, _ in pend if not text.endswith("turn 2 about the ledger")}
    store.put_vectors([(h, np.ones(8, dtype=np.float32) / np.sqrt(8)) for h in done])
    for scope in (sids[:2], sids[:25], sids):
        got = store.pending(scope, 1000)
        assert sorted(t for _, t, _ in got) == sorted(f"{s} turn 2 about the ledger" for s in scope)
        assert all(p is not None and p.startswith(t.split(" turn")[0]) for _, t, p in got)
    assert len(store.pending(sids, 7)) == 7 and store.pending(None, 1000) and store.embedded_count() == 60
    if isinstance(store, HistoryStore):  # which index SQLite reads: the scope's own blocks
        sql: list[str] = []
        store.conn.set_trace_callback(sql.append)
        store.pending(sids[:2], 10)
        store.conn.set_trace_callback(None)
        query = next(q for q in sql if "FROM blocks b" in q)
        plan = " ".join(r[3] for r in store.conn.execute("EXPLAIN QUERY PLAN " + query))
        assert "blocks_ord" in plan and "blocks_vec_seq" not in plan, plan


def test_embedding_flow_and_vector_ranking(store):
    load(store)
    todo = store.unhashed(None, 100)
    assert len(todo) == 5 and todo[1][2] == TEXTS[0]  # the block before, for context
    store.set_embed_hashes([(i, f"e{i}") for i, _, _ in todo])
    assert store.unhashed(None, 100) == []
    pend = store.pending(None, 100)
    assert len(pend) == 5 and store.embedded_count() == 0
    rng = np.random.default_rng(5)
    m = rng.normal(size=(5, 8)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    store.put_vectors([(h, v) for (h, _, _), v in zip(pend, m)])
    assert store.embedded_count() == 5 and store.embedded_count(["b"]) == 2
    assert store.pending(None, 10) == []
    ids, mat = store.vector_matrix(None)
    q = m[0]
    exact = sorted(zip(ids.tolist(), (mat @ q).tolist()), key=lambda x: -x[1])
    got = VectorIndex().rank(store, q, 3)
    assert [i for i, _ in got] == [i for i, _ in exact[:3]]
    keep = store.block_ids(["b"])
    got = VectorIndex().rank(store, q, 5, keep=keep)
    assert {i for i, _ in got} == set(keep.tolist())
    mean = VectorIndex().mean_cosine(store, q, keep)
    assert mean == pytest.approx(float((store.vectors_of(keep)[1] @ q).mean()), abs=2e-2)
    store.clear_vectors()
    assert store.embedded_count() == 0 and len(store.unhashed(None, 10)) == 5


def test_forget_file_drops_its_sessions(store):
    load(store)
    assert store.forget_file("/t/a.jsonl") == ["a"]
    assert store.stats()["sessions"] == 1 and store.file("/t/a.jsonl") is None
    assert store.fts("literal", hq.literal_match("decided"), None, 10) == []
    assert store.fts("literal", hq.literal_match("ingress"), None, 10)
