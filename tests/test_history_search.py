"""History search: layers, scope, coverage gate, coarse budget, aggregation, CLI contract."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.rank import history_query as hq
from dsh_recall.rank.aggregate import BlockHit, aggregate
from dsh_recall.rank.history_query import snippet
from dsh_recall.services import history as svc
from fixtures import eval_set


@pytest.fixture
def cfg():
    return load_config(overrides={"embedder": {"name": "fake"}})


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path, cfg):
    rows = [
        {"session": "a", "seq": 0, "role": "user", "text": "We decided to use PostgreSQL for the ledger service", "id": "m0", "workspace": "/p1", "title": "db choice"},
        {"session": "a", "seq": 1, "role": "assistant", "text": "Agreed, the connection pool size stays at 20", "id": "m1"},
        {"session": "a", "seq": 2, "role": "user", "text": "数据库迁移要在周五完成", "id": "m2"},
        {"session": "b", "seq": 0, "role": "user", "text": "Kubernetes ingress needs a longer timeout", "id": "n0", "workspace": "/p2"},
    ]
    svc.import_paths([str(_write(tmp_path / "h.jsonl", rows))], fmt="generic", cfg=cfg)
    return rows


def test_empty_query_and_fts_syntax_never_fail(corpus, cfg):
    assert svc.search("", all_sessions=True, cfg=cfg)["hits"] == []
    assert svc.search("   ", all_sessions=True, cfg=cfg)["hits"] == []
    for q in ['NEAR("a" b', 'ledger* AND OR NOT', '"unbalanced', "col:val ^x", "(((", "-"]:
        ans = svc.search(q, all_sessions=True, cfg=cfg)
        assert isinstance(ans["hits"], list)
    hit = svc.search('ledger" OR (', all_sessions=True, detail=True, layers=["literal"], cfg=cfg)["hits"][0]
    assert hit["message_ids"] == ["m0"]


def test_fuzzy_finds_typos_fragments_and_two_char_cjk(corpus, cfg):
    def top(q):
        hits = svc.search(q, all_sessions=True, detail=True, layers=["fuzzy"], cfg=cfg)["hits"]
        return hits[0]["message_ids"] if hits else None

    assert svc.search("Postgrsql", all_sessions=True, detail=True, layers=["literal"], cfg=cfg)["hits"] == []
    assert top("Postgrsql") == ["m0"]  # a missing letter
    assert top("ubernete") == ["n0"]  # a fragment
    assert top("数据") == ["m2"]  # two CJK characters: below trigram reach
    assert top("周五完成") == ["m2"]


def test_drop_common_keeps_the_rarest_trigrams():
    grams = ["the", "led", "edg", "dge", "ger"]
    shares = {"the": 0.6, "led": 0.02, "edg": 0.5, "dge": 0.3, "ger": 0.04}
    assert hq.drop_common(grams, None) == grams  # a small history: the whole OR
    assert hq.drop_common(grams, shares, share=0.1, keep=1) == ["led", "ger"]  # query order kept
    assert hq.drop_common(grams, shares, share=0.1, keep=3) == ["led", "dge", "ger"]
    assert hq.drop_common(["abc"], {"abc": 0.9}, share=0.1, keep=3) == ["abc"]


def test_fuzzy_leaves_common_trigrams_out_of_a_large_history(tmp_path, cfg, monkeypatch):
    # Every block says "the meeting"; one also has "ledger". From COMMON_MIN_BLOCKS on, the
    # fuzzy layer's query holds only the trigrams few blocks share, and still finds a typo.
    rows = [{"session": f"s{i // 20}", "seq": i % 20, "role": "user", "id": f"m{i}",
             "text": f"notes from the meeting number {i}" + (" about the ledger" if i == 37 else "")}
            for i in range(200)]
    svc.import_paths([str(_write(tmp_path / "h.jsonl", rows))], fmt="generic", cfg=cfg)
    sent: list[str] = []
    real = svc.HistoryStore.fts

    def spy(self, layer, match, sessions, limit):
        if layer == "trigram":
            sent.append(match)
        return real(self, layer, match, sessions, limit)

    monkeypatch.setattr(svc.HistoryStore, "fts", spy)

    def fuzzy(q):
        hits = svc.search(q, all_sessions=True, detail=True, layers=["fuzzy"], cfg=cfg)["hits"]
        return hits[0]["message_ids"]

    assert fuzzy("meeting ledgr") == ["m37"]
    assert '"mee"' in sent[-1] and '"led"' in sent[-1]  # a small history: every trigram
    monkeypatch.setattr(hq, "COMMON_MIN_BLOCKS", 100)
    assert fuzzy("meeting ledgr") == ["m37"]
    assert '"led"' in sent[-1] and '"edg"' in sent[-1]
    assert '"mee"' not in sent[-1] and '"eti"' not in sent[-1]


def test_scope_session_workspace_all_and_env(corpus, cfg, monkeypatch):
    q = "timeout ledger"
    assert {h["session"] for h in svc.search(q, session="a", detail=True, cfg=cfg)["hits"]} == {"a"}
    assert {h["session"] for h in svc.search(q, workspace="/p2", detail=True, cfg=cfg)["hits"]} == {"b"}
    assert {h["session"] for h in svc.search(q, all_sessions=True, detail=True, cfg=cfg)["hits"]} == {"a", "b"}
    monkeypatch.setenv("DSH_RECALL_SESSION", "b")
    assert svc.search(q, detail=True, cfg=cfg)["scope"] == {"kind": "session", "value": "b"}
    monkeypatch.delenv("DSH_RECALL_SESSION")
    ans = svc.search(q, detail=True, cfg=cfg, cwd="/p1")
    assert ans["scope"]["kind"] == "workspace" and {h["session"] for h in ans["hits"]} == {"a"}


def test_coverage_gate_keeps_semantic_out_until_embedded(corpus, cfg):
    store = svc.open_store()
    try:
        store.clear_vectors()
        slow = load_config(overrides={"embedder": {"name": "fake"}, "embed_budget_s": 0})
        ans = svc.search("ledger", all_sessions=True, cfg=slow, store=store)
        assert "semantic" not in ans["layers"] and ans["layer_status"]["semantic"].startswith("gated")
        assert ans["hits"]  # the other layers still answer
        ans = svc.search("ledger", all_sessions=True, cfg=cfg, store=store)  # budget fills the gap
        assert "semantic" in ans["layers"]
    finally:
        store.close()


def _many(tmp_path: Path, session: str, n: int, name: str) -> Path:
    return _write(tmp_path / name, [{"session": session, "seq": k, "role": "user",
                                     "text": f"{session} turn {k} about the ledger and pool {k * 7}"}
                                    for k in range(n)])


def test_search_skips_a_backlog_it_cannot_embed_in_its_budget(tmp_path, cfg):
    """A search embeds toward the gate only when the gap fits its budget at the rate this
    embedder last reached; a bigger backlog answers at once, saying how to catch up."""
    quiet = load_config(overrides={"embedder": {"name": "fake"}, "embed_budget_s": 0})
    svc.import_paths([str(_many(tmp_path, "big", 300, "big.jsonl"))], fmt="generic", cfg=quiet)
    store = svc.open_store()
    try:
        sem = svc.SemanticLayer(store, cfg)
        assert store.embedded_count(None) == 0 and sem.known_rate() is None
        store.set_meta("embed_rate", f"{sem.emb.fingerprint}|10.0")  # 10/s x 2 s < 270
        ans = svc.search("ledger pool", all_sessions=True, cfg=cfg, store=store)
        status = ans["layer_status"]["semantic"]
        assert status.startswith("gated: 0/300") and "history import --embed" in status
        assert store.embedded_count(None) == 0 and ans["hits"]  # nothing embedded, still answers
        # What waits, structured for whoever runs background work (no text to match).
        assert ans["backlog"] == [{"source": "history", "what": "vectors", "pending": 300,
                                   "command": "dsh-recall history import --embed",
                                   "job": "history.embed",
                                   "hint": "`dsh-recall history import --embed` embeds the rest"}]
        assert status.endswith("; " + ans["backlog"][0]["hint"])
        # A rate from another embedder is not this one's: the search measures its own.
        store.set_meta("embed_rate", "other:fp|10.0")
        ans = svc.search("ledger pool", all_sessions=True, cfg=cfg, store=store)
        assert "semantic" in ans["layers"] and store.embedded_count(None) == 300
        assert "backlog" not in ans  # complete: nothing owed
        assert sem.known_rate() is not None and sem.known_rate() > 10  # remembered for next time
    finally:
        store.close()


def test_fill_stops_once_its_measured_rate_says_the_goal_is_out_of_reach(tmp_path, cfg, monkeypatch):
    quiet = load_config(overrides={"embedder": {"name": "fake"}, "embed_budget_s": 0})
    svc.import_paths([str(_many(tmp_path, "big", 200, "big.jsonl"))], fmt="generic", cfg=quiet)
    store = svc.open_store()
    try:
        sem = svc.SemanticLayer(store, cfg)
        real = sem.emb.embed

        def slow(texts, **kw):  # 8 texts take 0.4 s: 20 blocks/s
            import time
            time.sleep(0.05 * len(texts))
            return real(texts, **kw)

        monkeypatch.setattr(sem.emb, "embed", slow)
        monkeypatch.setattr(sem.emb, "batch_size", 8)
        done = sem.fill(None, 2.0, goal=180)  # 180 blocks at 20/s: 9 s, far past 2 s
        assert 0 < done <= 16 and sem.behind  # one or two batches, not the whole 2 s
        assert sem.known_rate() is not None and sem.known_rate() < 40
        sem.behind = False
        assert sem.fill(None, 2.0, goal=3) >= 3 and not sem.behind  # a goal in reach is met
    finally:
        store.close()


def test_hook_import_embeds_only_the_sessions_it_touched(tmp_path, cfg):
    quiet = load_config(overrides={"embedder": {"name": "fake"}, "embed_budget_s": 0})
    svc.import_paths([str(_many(tmp_path, "old", 50, "old.jsonl"))], fmt="generic", cfg=quiet)
    new = _many(tmp_path, "now", 5, "now.jsonl")
    rep = svc.import_paths([str(new)], fmt="generic", cfg=cfg, backlog=False)
    store = svc.open_store()
    try:
        assert store.embedded_count(["now"]) == 5 and store.embedded_count(["old"]) == 0
        assert rep["embedded"] == 5
        # Nothing new in the file: nothing to embed, the backlog stays for a run with time.
        assert svc.import_paths([str(new)], fmt="generic", cfg=cfg, backlog=False)["embedded"] == 0
        assert store.embedded_count(["old"]) == 0
        # An explicit import (the CLI) still spends its budget on the backlog.
        svc.import_paths([str(new)], fmt="generic", cfg=cfg)
        assert store.embedded_count(["old"]) == 50
    finally:
        store.close()


def test_a_hook_imports_without_loading_the_model_and_the_server_embeds_after(tmp_path, cfg, monkeypatch):
    # A Claude Code hook is a process per prompt: loading the model for a prompt's new
    # blocks cost it about half a second. It imports them only; the MCP server embeds them
    # behind its next history answer, even when the layer is past its coverage gate.
    from dsh_recall.frontends.hooks.claude_code_recall import handle_user_prompt_submit
    from dsh_recall.frontends.mcp.handlers import RecallApp
    from dsh_recall.services.history import semantic as history_semantic

    turns = tmp_path / "cc.jsonl"
    said: list[int] = []

    def say(n: int) -> None:  # n more turns of the session, appended as Claude Code does
        with turns.open("a") as f:
            for k in range(len(said), len(said) + n):
                said.append(k)
                role = "user" if k % 2 == 0 else "assistant"
                f.write(json.dumps({
                    "type": role, "sessionId": "cc1", "uuid": f"u{k}", "cwd": str(tmp_path),
                    "timestamp": f"2026-11-30T10:00:{k:02d}Z", "message": {
                        "role": role, "content": f"turn {k}: the ledger pool holds {k} connections"}}) + "\n")

    loads: list[str] = []
    real = history_semantic.shared_embedder
    monkeypatch.setattr(history_semantic, "shared_embedder", lambda c: loads.append(c.name) or real(c))
    imports: list[tuple[dict, list[str]]] = []
    real_import = svc.import_paths

    def spy(*a, **kw):
        rep = real_import(*a, **kw)
        imports.append((rep, list(loads)))  # what had loaded the model by the import's end
        return rep

    monkeypatch.setattr(svc, "import_paths", spy)
    payload = {"session_id": "cc1", "transcript_path": str(turns), "prompt": "what was the pool size",
               "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit"}
    say(12)
    handle_user_prompt_submit(payload, cfg)  # the gate may fire: its search loads the model
    rep, loaded = imports[-1]
    assert rep["blocks"] == 12 and rep["embedded"] == 0 and loaded == []
    store = svc.open_store()
    try:
        svc.SemanticLayer(store, cfg).fill(None, None)
        say(1)
        handle_user_prompt_submit(payload, cfg)
        assert imports[-1][0]["blocks"] == 1 and imports[-1][0]["embedded"] == 0
        assert (store.embedded_count(None), store.block_count(None)) == (12, 13)  # past the gate
        app = RecallApp(tmp_path, cfg)
        try:
            out, _ = app.call("history_search", {"query": "ledger pool", "scope": "all"})
            assert out["hits"] and out["layer_status"]["semantic"] == "ok"
            app.background.wait("history.embed", seconds=60)
            assert app.background.embedded("history.embed") == 1
        finally:
            app.close()
        assert store.embedded_count(None) == 13
    finally:
        store.close()


def test_broken_embedder_degrades_silently(corpus):
    bad = load_config(overrides={"embedder": {"name": "onnx", "model_dir": "/nonexistent/model"}})
    ans = svc.search("ledger", all_sessions=True, cfg=bad)
    assert ans["hits"] and "semantic" not in ans["layers"]
    assert ans["layer_status"]["semantic"].startswith(("unavailable", "failed"))


def test_a_vector_read_that_fails_in_the_driver_degrades_to_the_word_layers(corpus, cfg, monkeypatch):
    # e.g. a lock held past the busy timeout while the semantic layer reads vectors: the
    # driver's own error, not a StoreError; the word layers still answer and say so.
    import sqlite3

    from dsh_recall.services.history import semantic

    def locked(*_a, **_k):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(semantic.SemanticLayer, "rank", locked)
    ans = svc.search("ledger", all_sessions=True, cfg=cfg)
    assert ans["hits"] and "semantic" not in ans["layers"]
    assert ans["layer_status"]["semantic"] == "failed: OperationalError: database is locked"


def test_aggregation_merges_close_hits():
    hits = [BlockHit(1, "s", 0, 10, 0.9), BlockHit(2, "s", 5, 15, 0.5), BlockHit(3, "s", 11, 30, 0.8),
            BlockHit(4, "t", 2, 7, 0.1)]
    evs = aggregate(hits, gap=5)
    assert [(e.session, e.start_seq, e.end_seq) for e in evs] == [("s", 10, 15), ("s", 30, 30), ("t", 7, 7)]
    assert evs[0].best.block == 1


@given(st.lists(st.tuples(st.integers(0, 60), st.floats(0, 1)), max_size=40), st.integers(0, 8))
def test_aggregation_properties(items, gap):
    hits = [BlockHit(i, "s", o, o * 2, sc) for i, (o, sc) in enumerate(items)]
    evs = aggregate(hits, gap)
    assert sum(len(e.hits) for e in evs) == len(hits)
    spans = sorted((min(h.ord for h in e.hits), max(h.ord for h in e.hits)) for e in evs)
    for (_a0, a1), (b0, _b1) in zip(spans, spans[1:]):
        assert b0 - a1 > gap  # separate events are more than `gap` blocks apart
    assert [e.score for e in evs] == sorted((e.score for e in evs), reverse=True)


@given(st.text(max_size=3000), st.lists(st.text(min_size=1, max_size=5), max_size=4), st.integers(0, 700))
def test_snippet_is_bounded(text, terms, n):
    assert len(snippet(text, terms, n)) <= max(n, 0)


@pytest.mark.parametrize("n", [80, 200, 300, 400, 600])
def test_snippet_shows_a_rare_term_a_common_one_surrounds(n):
    # An object_recall answer: the line asked for first, then its neighbours, every one with
    # "line" in it. The window must hold "01000", not just the most "line"s.
    rows = [1000] + [1009 - k for k in range(9)] + list(range(1010, 1030))
    text = "[mcp__recall__object_recall result] object 3dcd61d3 (112000 chars)\n" + "".join(
        f"{i + 1}:{i * 56}: line {i:05d} {'abcdefghij' * 4} {i * 37 % 1000:03d}\n" for i in rows)
    shown = snippet(text, ["line", "01000"], n)
    assert "line 01000" in shown and len(shown) <= n
    # The middle of a long result, far from both ends, is shown too.
    middle = "".join(f"line {i:05d} {'abcdefghij' * 4}\n" for i in range(960, 1040))
    assert "line 01000" in snippet(middle, ["line", "01000"], n)


def test_coarse_answers_stay_within_budget_on_locomo(tmp_path, cfg):
    LOCOMO = eval_set("locomo-dev")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import history_locomo as bench

    files, _ = bench.convert(LOCOMO, tmp_path)
    store = svc.open_store()
    try:
        svc.import_paths([str(f) for f in files], "generic", cfg, store=store)
        qs = bench.questions(LOCOMO)[::8]
        budget = cfg.history.coarse_budget_tokens
        filled = 0
        for q in qs:
            for scope in ({"workspace": q["sample_id"]}, {"all_sessions": True}):
                ans = svc.search(q["question"], cfg=cfg, store=store, **scope)
                assert svc.answer_tokens(ans) <= budget
                assert len(ans["hits"]) <= cfg.history.max_sessions * cfg.history.events_per_session
                per = {}
                for h in ans["hits"]:
                    per[h["session"]] = per.get(h["session"], 0) + 1
                assert max(per.values(), default=0) <= cfg.history.events_per_session
                filled += bool(ans["hits"]) and svc.answer_tokens(ans) >= 100
        assert filled >= len(qs)  # answers are not trivially empty
        small = load_config(overrides={"embedder": {"name": "fake"}, "history": {"coarse_budget_tokens": 200}})
        ans = svc.search(qs[0]["question"], all_sessions=True, cfg=small, store=store)
        assert svc.answer_tokens(ans) <= 200
    finally:
        store.close()


def test_cli_json_contract(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    f = _write(tmp_path / "g.jsonl", [
        {"session": "s1", "seq": i, "role": "user", "text": f"turn {i} about {'parquet' if i == 7 else 'misc'}", "id": f"id{i}",
         "workspace": "w"} for i in range(30)])
    runner = CliRunner()
    r = runner.invoke(cli, ["history", "import", str(f), "--format", "generic", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["index"]["events"] == 30
    r = runner.invoke(cli, ["history", "search", "parquet", "--workspace", "w", "--detail", "--json", "--limit", "3"])
    data = json.loads(r.output)
    hit = data["hits"][0]
    assert set(hit) >= {"session", "start_seq", "end_seq", "message_ids", "role", "time", "snippet", "score", "layers"}
    assert hit["message_ids"] == ["id7"] and len(data["hits"]) <= 3 and data["layers"]
    r = runner.invoke(cli, ["history", "search", "parquet", "--session", "s1", "--layers", "literal", "--json"])
    assert json.loads(r.output)["layers"] == ["literal"]
    r = runner.invoke(cli, ["history", "search", "x", "--layers", "bogus", "--all"])
    assert r.exit_code == 1 and "valid layers" in r.output
    r = runner.invoke(cli, ["history", "show", "s1", "--around", "7", "--window", "2", "--json"])
    assert [e["seq"] for e in json.loads(r.output)["events"]] == [5, 6, 7, 8, 9]
    r = runner.invoke(cli, ["history", "show", "s1", "--page", "2", "--json"])
    page = json.loads(r.output)
    assert page["page"] == 2 and page["pages"] == 2 and page["events"][0]["seq"] == 20
    r = runner.invoke(cli, ["history", "show", "nope"])
    assert r.exit_code == 1 and "unknown session" in r.output


def test_mcp_server_embeds_a_backlog_in_the_background(tmp_path):
    """Through the MCP app: a search gated behind a backlog answers at once, says the server
    is embedding the rest, and the server's background thread then embeds every block."""
    from dsh_recall.frontends.mcp.handlers import RecallApp

    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    quiet = load_config(overrides={"embedder": {"name": "fake"}, "embed_budget_s": 0})
    svc.import_paths([str(_many(tmp_path, "big", 300, "big.jsonl"))], fmt="generic", cfg=quiet)
    store = svc.open_store()
    try:
        sem = svc.SemanticLayer(store, cfg)
        store.set_meta("embed_rate", f"{sem.emb.fingerprint}|10.0")
        app = RecallApp(tmp_path, cfg)
        try:
            out, _ = app.call("history_search", {"query": "ledger pool", "scope": "all"})
            status = out["layer_status"]["semantic"]
            assert status.startswith("gated: 0/300") and "in the background" in status
            assert "history import --embed" not in status
            app.background.wait("history.embed", seconds=60)
            assert store.embedded_count(None) == 300 and app.background.embedded("history.embed") == 300
            out, _ = app.call("history_search", {"query": "ledger pool", "scope": "all"})
            assert out["layer_status"]["semantic"] in ("ok", "no match")
        finally:
            app.close()
        # One process at a time: while another holds the lock, a backfill leaves at once.
        import threading

        from dsh_recall.core.paths import recall_home
        from dsh_recall.services.vectors import file_lock

        store.clear_vectors()
        with file_lock(recall_home() / "history-embed.lock", 0) as got:
            assert got
            assert svc.backfill(cfg, threading.Event()) == 0
        # Slices too short to embed much: hashing the cleared blocks takes slices of its
        # own, and the backfill goes on while either makes progress.
        assert svc.backfill(cfg, threading.Event(), slice_s=0.001) == 300
        assert svc.SemanticLayer(store, cfg).fill(None, 0.0) == 0  # no budget: not even hashes
    finally:
        store.close()
