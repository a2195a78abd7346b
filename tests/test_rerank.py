"""The optional rerank stage: its contract (deadline, undefined is not zero, the fused order
kept on any failure and said so), the HTTP client against local servers on 127.0.0.1 that
answer like llama.cpp / Infinity / vLLM (`/v1/rerank`) and TEI (`/rerank`), the trust rule
(a repository's config cannot point the stage anywhere), and the notes and search_all wiring."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_recall.core.config import load_config
from dsh_recall.rerankers import RerankError
from dsh_recall.rerankers.http import HttpReranker, parse_scores
from dsh_recall.services import federated, rerank
from dsh_recall.services.notes import NotesService

DEADLINE = 0.5


# -- a local server that answers like a real reranker ------------------------------------------

def _overlap(query: str, doc: str) -> float:
    """The fake model: how many of the query's words the passage holds."""
    words = set(query.lower().split())
    return float(sum(1 for w in set(doc.lower().split()) if w in words))


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with srv.lock:
            srv.calls.append((self.path, body, self.headers.get("Authorization")))
        mode = srv.mode
        if mode == "wedged":
            srv.waiting.set()  # the request is in; the answer never comes (until teardown)
            srv.release.wait(30)
            return
        if mode == "500":
            return self._send(500, b'{"error": "CUDA out of memory"}')
        if mode == "malformed":
            return self._send(200, b'{"results": [{"index": 0, "relevance_score": 0.9')
        docs = body.get("documents") if "documents" in body else body.get("texts")
        if self.path.endswith("/rerank") and "texts" in body:  # TEI: a bare list, `score`
            out = [{"index": i, "score": _overlap(body["query"], d)} for i, d in enumerate(docs)]
            out.sort(key=lambda r: -r["score"])
            return self._send(200, json.dumps(out).encode())
        scores = [_overlap(body["query"], d) for d in docs]
        if mode == "reversed":  # the server's own opinion: last candidate best
            scores = [float(i) for i in range(len(docs))]
        results = [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]
        if mode == "missing":  # a server that silently drops some candidates
            results = [r for r in results if r["index"] % 2 == 0]
        if mode == "junk":  # entries that are not scores: out of range, bool, NaN, repeated
            results = [{"index": 99, "relevance_score": 5.0}, {"index": True, "relevance_score": 9},
                       {"index": 1, "relevance_score": "high"}, {"index": 0, "relevance_score": 1.0},
                       {"index": 0, "relevance_score": -7.0}]
        else:
            results.sort(key=lambda r: -r["relevance_score"])  # servers answer best first
        self._send(200, json.dumps({"model": body.get("model"), "object": "list",
                                    "results": results[: body.get("top_n", len(results))]}).encode())

    def _send(self, status, raw):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.lock, srv.calls, srv.mode = threading.Lock(), [], "normal"
    srv.waiting, srv.release = threading.Event(), threading.Event()
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def cfg_for(url, **rr):
    """The stage at weight 1 (the reranker's order) unless a test asks for another."""
    return load_config(overrides={"embedder": {"name": "fake"},
                                  "rerank": {"url": url, "deadline_s": DEADLINE, "weight": 1.0,
                                             **rr}})


ITEMS = ["alpha beta", "nothing here", "gamma alpha beta delta", "beta", "unrelated words"]
QUERY = "alpha beta gamma"


def run(cfg, items=ITEMS, query=QUERY, source="notes"):
    return rerank.apply(cfg, source, query, items, lambda s: s)


# -- the pure part -------------------------------------------------------------------------------

def test_reorder_follows_scores_and_leaves_unscored_where_they_were():
    assert rerank.reorder(4, {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}) == [3, 2, 1, 0]
    # 1 and 3 have no score: they hold positions 1 and 3; 0, 2, 4 trade places among theirs.
    assert rerank.reorder(5, {0: 0.0, 2: 0.5, 4: 0.9}) == [4, 1, 2, 3, 0]
    # A negative score (a logit) is a score, not "missing": it sorts below the others.
    assert rerank.reorder(3, {0: -3.0, 1: 2.0, 2: -1.0}) == [1, 2, 0]


def test_reorder_weight_blends_ranks():
    scores = {0: 0.0, 1: 0.1, 2: 0.2, 3: 0.3, 4: 5.0}
    assert rerank.reorder(5, scores, weight=0.0) == [0, 1, 2, 3, 4]
    assert rerank.reorder(5, scores, weight=1.0) == [4, 3, 2, 1, 0]
    # Halfway: the last candidate, first by the reranker, moves from 5th to about 3rd.
    assert rerank.reorder(5, {4: 1.0, 0: 0.5, 1: 0.4, 2: 0.3, 3: 0.2}, weight=0.5).index(4) == 2


@given(st.integers(0, 30), st.data(), st.floats(0, 1))
def test_reorder_is_a_permutation_that_never_moves_the_unscored(n, data, weight):
    idx = data.draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n)) if n else set()
    scores = {i: data.draw(st.floats(-1e6, 1e6)) for i in idx}
    out = rerank.reorder(n, scores, weight)
    assert sorted(out) == list(range(n))
    assert all(out[i] == i for i in range(n) if i not in scores)


# -- the HTTP client's answer shapes -------------------------------------------------------------

def test_parse_reads_the_common_shapes():
    v1 = b'{"object":"list","results":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":-2}]}'
    assert parse_scores(v1, 2) == {1: 0.9, 0: -2.0}
    tei = b'[{"index":0,"score":0.1},{"index":2,"score":0.7}]'
    assert parse_scores(tei, 3) == {0: 0.1, 2: 0.7}
    infinity = b'{"results":[{"relevance_score":0.5,"index":0,"document":{"text":"x"}}],"usage":{}}'
    assert parse_scores(infinity, 1) == {0: 0.5}
    voyage_like = b'{"data":[{"index":0,"relevance_score":0.3}]}'
    assert parse_scores(voyage_like, 1) == {0: 0.3}
    with pytest.raises(RerankError, match="not JSON"):
        parse_scores(b"<html>502</html>", 1)
    with pytest.raises(RerankError, match="without a list"):
        parse_scores(b'{"error": "no model"}', 1)


def test_endpoint_and_body_follow_the_api_shape():
    c = load_config(overrides={"rerank": {"url": "http://127.0.0.1:8080/", "model": "bge"}}).rerank
    r = HttpReranker(c)
    assert r.endpoint == "http://127.0.0.1:8080/v1/rerank"
    assert r.body("q", ["a", "b"]) == {"query": "q", "documents": ["a", "b"], "top_n": 2, "model": "bge"}
    r = HttpReranker(c.model_copy(update={"url": "http://h:7997/v1"}))
    assert r.endpoint == "http://h:7997/v1/rerank"
    r = HttpReranker(c.model_copy(update={"url": "http://h:1/v1/reranking"}))
    assert r.endpoint == "http://h:1/v1/reranking"
    t = HttpReranker(c.model_copy(update={"api": "tei"}))
    assert t.endpoint == "http://127.0.0.1:8080/rerank"
    assert t.body("q", ["a"]) == {"query": "q", "texts": ["a"], "truncate": True}


# -- the stage against a real socket -------------------------------------------------------------

def test_a_normal_server_reorders_and_says_applied(server):
    out, status = run(cfg_for(server.url, model="m"))
    assert status == "applied"
    assert out[0] == "gamma alpha beta delta" and out[1] == "alpha beta"
    path, body, _ = server.calls[0]
    assert path == "/v1/rerank" and body["documents"] == ITEMS and body["model"] == "m"


def test_the_default_weight_moves_candidates_halfway(server):
    c = load_config(overrides={"rerank": {"url": server.url, "deadline_s": DEADLINE}})
    assert c.rerank.weight == 0.5
    out, status = run(c)
    # Reranker ranks: 2, 0, 3, 1, 4; fused: 0..4. Halfway: 0 (0.5), 2 (1.0), 1 (2.0), 3 (2.5).
    assert status == "applied" and out == [ITEMS[0], ITEMS[2], ITEMS[1], ITEMS[3], ITEMS[4]]


def test_reversed_scores_reverse_the_order(server):
    server.mode = "reversed"
    out, status = run(cfg_for(server.url))
    assert status == "applied" and out == ITEMS[::-1]


def test_top_n_sends_only_the_head_and_keeps_the_tail(server):
    server.mode = "reversed"
    out, status = run(cfg_for(server.url, top_n=3))
    assert status == "applied"
    assert len(server.calls[0][1]["documents"]) == 3
    assert out == ITEMS[:3][::-1] + ITEMS[3:]


def test_missing_indices_keep_their_fused_places(server):
    server.mode = "missing"  # scores for 0, 2, 4 only (reversed opinion would not matter)
    out, status = run(cfg_for(server.url))
    assert status.startswith("partial: 3 of 5 scored")
    assert out[1] == ITEMS[1] and out[3] == ITEMS[3]  # unscored: exactly where fusion put them
    assert out[0] == "gamma alpha beta delta"  # best of the scored takes the first scored slot
    assert rerank.is_problem(status)


def test_entries_that_are_not_scores_are_unknown_not_zero(server):
    server.mode = "junk"  # only index 0 carries a real score, first seen wins
    out, status = run(cfg_for(server.url))
    assert status.startswith("partial: 1 of 5")
    assert out == ITEMS


@pytest.mark.parametrize("mode, says", [("malformed", "not JSON"), ("500", "HTTP 500")])
def test_a_broken_server_leaves_the_fused_order_and_says_why(server, mode, says):
    server.mode = mode
    out, status = run(cfg_for(server.url))
    assert out == ITEMS
    assert status.startswith("failed:") and says in status and "fused order kept" in status


def test_a_wedged_server_costs_the_deadline_and_no_more(server):
    server.mode = "wedged"
    out, status = run(cfg_for(server.url))
    # The answer came back while the server still held the request unanswered.
    assert server.waiting.is_set() and not server.release.is_set()
    assert out == ITEMS
    assert status == f"timed out after {DEADLINE:g} s; fused order kept"


def test_a_listener_that_never_accepts_is_a_timeout_too():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)  # the kernel completes the handshake; nobody ever reads
    try:
        out, status = run(cfg_for(f"http://127.0.0.1:{sock.getsockname()[1]}"))
    finally:
        sock.close()
    assert out == ITEMS and status.startswith("timed out after")


def test_nothing_listening_is_a_failure_not_an_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    out, status = run(cfg_for(f"http://127.0.0.1:{port}"))
    assert out == ITEMS and status.startswith("failed: cannot reach")


def test_tei_shape(server):
    out, status = run(cfg_for(server.url, api="tei"))
    assert status == "applied" and out[0] == "gamma alpha beta delta"
    assert server.calls[0][0] == "/rerank" and "texts" in server.calls[0][1]


def test_api_key_comes_from_the_named_variable(server, monkeypatch):
    monkeypatch.setenv("MY_RERANK_KEY", "s3cret")
    run(cfg_for(server.url, api_key_env="MY_RERANK_KEY"))
    assert server.calls[-1][2] == "Bearer s3cret"
    monkeypatch.delenv("MY_RERANK_KEY")
    out, status = run(cfg_for(server.url, api_key_env="MY_RERANK_KEY"))
    assert out == ITEMS and "MY_RERANK_KEY" in status and status.startswith("failed")


def test_off_unless_configured_and_per_source(server):
    out, status = run(load_config())
    assert out == ITEMS and status == "disabled"
    out, status = run(cfg_for(server.url, enabled=["code"]))
    assert out == ITEMS and status == "disabled for notes" and not server.calls
    out, status = run(cfg_for(server.url), items=ITEMS[:1])
    assert status.startswith("skipped") and not server.calls


def test_a_reranker_that_raises_or_answers_nonsense_never_breaks_the_search():
    class Boom:
        def score(self, q, docs, timeout_s):
            raise RuntimeError("kaput")

    class Nonsense:
        def score(self, q, docs, timeout_s):
            return [1, 2, 3]

    c = load_config()
    assert run_with(c, Boom()) == (ITEMS, "failed: kaput; fused order kept")
    out, status = run_with(c, Nonsense())
    assert out == ITEMS and status.startswith("failed")


def run_with(c, reranker):
    return rerank.apply(c, "notes", QUERY, ITEMS, lambda s: s, reranker=reranker)


# -- trust: only the user points the stage somewhere ---------------------------------------------

def test_a_repository_cannot_set_the_reranker(tmp_path, monkeypatch):
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / ".dsh-recall.toml").write_text(
        '[rerank]\nurl = "http://127.0.0.1:9/exfiltrate"\napi_key_env = "AWS_SECRET"\n'
        'enabled = ["code"]\n')
    c = load_config(workspace=ws)
    assert c.rerank.url is None and c.rerank.api_key_env is None
    assert c.rerank.enabled == ["code", "history", "notes", "all"]
    assert any("rerank.url" in n and "rerank.api_key_env" in n for n in c.notices)


def test_the_user_sets_it_in_the_home_config_and_the_environment(tmp_path, monkeypatch,
                                                                  _isolated_home):
    (_isolated_home / "config.toml").write_text('[rerank]\nurl = "http://127.0.0.1:8080"\n')
    c = load_config(environ={"DSH_RECALL_RERANK__DEADLINE_S": "0.3"})
    assert c.rerank.url == "http://127.0.0.1:8080" and c.rerank.deadline_s == 0.3


# -- wiring: notes search and search_all ---------------------------------------------------------

def _notes_root(tmp_path):
    root = tmp_path / "memory"
    root.mkdir()
    (root / "a.md").write_text("# Deploy\n\nThe deploy pipeline runs on Fridays.\n")
    (root / "b.md").write_text("# Deploy notes\n\nDeploy deploy pipeline: canary first, then all.\n")
    (root / "c.md").write_text("# Misc\n\nThe pipeline for deploy reviews is manual.\n")
    return root


def _notes_cfg(url, root, **rr):
    return load_config(overrides={"embedder": {"name": "fake"}, "notes": {"roots": [str(root)]},
                                  "rerank": {"url": url, "deadline_s": DEADLINE, "weight": 1.0,
                                             **rr}})


def test_notes_search_is_reranked_and_says_so(server, tmp_path):
    root = _notes_root(tmp_path)
    plain = NotesService(load_config(overrides={"embedder": {"name": "fake"},
                                                "notes": {"roots": [str(root)]}}))
    base = plain.search("deploy pipeline", limit=3)
    plain.close()
    assert base["rerank"] == "disabled" and len(base["results"]) == 3
    server.mode = "reversed"
    svc = NotesService(_notes_cfg(server.url, root))
    got = svc.search("deploy pipeline", limit=3)
    svc.close()
    assert got["rerank"] == "applied"
    assert [r["path"] for r in got["results"]] == [r["path"] for r in base["results"]][::-1]
    assert not any(n.startswith("rerank") for n in got["notes"])


def test_notes_search_with_a_wedged_reranker_answers_in_fused_order(server, tmp_path):
    root = _notes_root(tmp_path)
    plain = NotesService(load_config(overrides={"embedder": {"name": "fake"},
                                                "notes": {"roots": [str(root)]}}))
    base = [r["path"] for r in plain.search("deploy pipeline", limit=3)["results"]]
    plain.close()
    server.mode = "wedged"
    svc = NotesService(_notes_cfg(server.url, root))
    got = svc.search("deploy pipeline", limit=3)
    svc.close()
    assert [r["path"] for r in got["results"]] == base
    assert got["rerank"].startswith("timed out")
    assert f"rerank timed out after {DEADLINE:g} s; fused order kept" in got["notes"]


def test_search_all_reranks_the_merged_list_once(server, tmp_path):
    root = _notes_root(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    server.mode = "reversed"
    c = _notes_cfg(server.url, root)
    data = federated.search_all("deploy pipeline", cfg=c, workspace=repo, sources=["notes"], limit=3)
    assert data["rerank"] == "applied"
    assert len(server.calls) == 1  # notes' own stage stood aside for the merged one
    c_off = _notes_cfg(None, root)
    base = federated.search_all("deploy pipeline", cfg=c_off, workspace=repo, sources=["notes"],
                                limit=3)
    assert base["rerank"] == "disabled"
    assert [r["title"] for r in data["results"]] == [r["title"] for r in base["results"]][::-1]


def test_search_all_with_all_disabled_lets_each_source_rerank(server, tmp_path):
    root = _notes_root(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    server.mode = "500"
    c = _notes_cfg(server.url, root, enabled=["notes"])
    data = federated.search_all("deploy pipeline", cfg=c, workspace=repo, sources=["notes"],
                                limit=3, viewer=None)
    assert data["rerank"] == "disabled for all"
    assert len(server.calls) == 1  # notes asked for itself
    assert data["results"]  # the fused answer stands, and says what went wrong
    assert any(n.startswith("rerank failed: ") and "HTTP 500" in n for n in data["notes"])


def _code_ws(tmp_path):
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    for i in range(6):
        (ws / "pkg" / f"deploy{i}.py").write_text(
            f"def deploy_step_{i}(pipeline):\n    '''deploy pipeline stage {i}'''\n"
            f"    return pipeline.run({i})\n")
    return ws


def _code_search(ws, tmp_path, **rr):
    from dsh_recall.services.code import CodeService

    over = {"embedder": {"name": "fake"}}
    if rr:
        over["rerank"] = {"deadline_s": DEADLINE, "weight": 1.0, **rr}
    svc = CodeService(ws, load_config(workspace=ws, overrides=over), tmp_path / "home")
    try:
        return svc.search("deploy pipeline", limit=3, files=True)
    finally:
        svc.close()


def test_code_search_reranks_its_head_and_cuts_after(server, tmp_path):
    ws = _code_ws(tmp_path)
    base = _code_search(ws, tmp_path)
    assert base["rerank"] == "disabled" and len(base["results"]) == 3
    server.mode = "reversed"  # the server prefers the last of the top_n it was sent
    got = _code_search(ws, tmp_path, url=server.url, top_n=5)
    assert got["rerank"] == "applied" and len(got["results"]) == 3
    sent = server.calls[-1][1]["documents"]
    assert len(sent) == 5  # it saw more than the 3 asked for, then the answer was cut
    # the reranker's best (its last document) leads; the fused best is no longer first
    assert got["results"][0]["path"] == sent[-1].split("\n")[0]
    assert got["results"][0]["path"] != base["results"][0]["path"]


def test_code_search_with_a_wedged_reranker_keeps_the_fused_order(server, tmp_path):
    ws = _code_ws(tmp_path)
    base = [r["path"] for r in _code_search(ws, tmp_path)["results"]]
    server.mode = "wedged"
    got = _code_search(ws, tmp_path, url=server.url)
    assert [r["path"] for r in got["results"]] == base
    assert got["rerank"].startswith("timed out")
    assert any(n.startswith("rerank timed out") for n in got["notes"])


def _history(tmp_path):
    import json as _json

    from dsh_recall.services import history as hsvc

    rows = [{"session": "s", "seq": i, "role": "user" if i % 2 else "assistant",
             "text": f"deploy pipeline note {i} " + " ".join(["filler"] * (i + 1)), "id": f"m{i}"}
            for i in range(6)]
    path = tmp_path / "h.jsonl"
    path.write_text("".join(_json.dumps(r) + "\n" for r in rows))
    hsvc.import_paths([str(path)], fmt="generic", cfg=load_config(overrides={"embedder": {"name": "fake"}}))
    return hsvc


def test_history_search_reranks_and_keeps_scores_descending(server, tmp_path):
    hsvc = _history(tmp_path)
    plain = load_config(overrides={"embedder": {"name": "fake"}})
    base = hsvc.search("deploy pipeline", all_sessions=True, detail=True, cfg=plain)
    assert base["layer_status"]["rerank"] == "disabled"
    server.mode = "reversed"
    got = hsvc.search("deploy pipeline", all_sessions=True, detail=True, cfg=cfg_for(server.url))
    assert got["layer_status"]["rerank"] == "applied"
    b = [h["start_seq"] for h in base["hits"]][:10]
    g = [h["start_seq"] for h in got["hits"]][:10]
    assert g != b and sorted(g) == sorted(b)
    scores = [h["score"] for h in got["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_history_search_with_a_wedged_reranker_keeps_the_fused_order(server, tmp_path):
    hsvc = _history(tmp_path)
    plain = load_config(overrides={"embedder": {"name": "fake"}})
    base = [h["start_seq"] for h in hsvc.search("deploy pipeline", all_sessions=True, detail=True,
                                          cfg=plain)["hits"]]
    server.mode = "wedged"
    got = hsvc.search("deploy pipeline", all_sessions=True, detail=True, cfg=cfg_for(server.url))
    assert [h["start_seq"] for h in got["hits"]] == base
    assert got["layer_status"]["rerank"].startswith("timed out")
