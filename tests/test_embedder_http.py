"""HttpEmbedder against local servers on 127.0.0.1 that behave like Ollama and OpenAI."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from dsh_recall.core.config import EmbedderConfig
from dsh_recall.core.errors import ConfigError, EmbedderError
from dsh_recall.embedders.registry import create

DIM = 8


def fake_vector(text: str) -> list[float]:
    h = hashlib.sha256(text.encode()).digest()
    return [b / 255.0 - 0.5 for b in h[:DIM]]


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with srv.lock:
            srv.calls.append((self.path, body))
            srv.auth.append(self.headers.get("Authorization"))
        if srv.status != 200:
            self._send(srv.status, {"error": "model not found"})
            return
        texts = body["input"]
        if self.path == "/api/embed":
            self._send(200, {"model": body["model"], "embeddings": [fake_vector(t) for t in texts]})
        elif self.path == "/v1/embeddings":
            # Reversed on purpose: clients must order by "index".
            data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)}
                    for i, t in enumerate(texts)][::-1]
            self._send(200, {"object": "list", "data": data, "model": body["model"]})
        elif self.path == "/garbage/api/embed":
            self._send(200, {"something": "else"})
        else:
            self._send(404, {"error": "no such route"})

    def _send(self, status, obj):
        raw = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.calls, srv.lock, srv.status, srv.auth = [], threading.Lock(), 200, []
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def wedged():
    """A socket that accepts connections (the kernel backlog does) and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def _url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def _cfg(url: str, **kw) -> EmbedderConfig:
    return EmbedderConfig(name="http", url=url, model="test-embed", **kw)


def _expected(texts):
    v = np.asarray([fake_vector(t) for t in texts], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_ollama_embeds_in_order_and_learns_dim(server):
    emb = create(_cfg(_url(server), api="ollama"))
    assert emb.remote
    texts = ["alpha", "beta", "gamma"]
    vecs = emb.embed(texts)
    assert emb.dim == DIM
    np.testing.assert_allclose(vecs, _expected(texts), rtol=1e-5, atol=1e-6)
    path, body = server.calls[0]
    assert path == "/api/embed"
    assert body == {"model": "test-embed", "input": texts}
    assert len(server.calls) == 1  # the dimension came from the answer, not a probe


def test_openai_orders_by_index(server):
    emb = create(_cfg(_url(server) + "/v1", api="openai"))
    texts = ["one", "two", "three", "four"]
    vecs = emb.embed(texts)
    np.testing.assert_allclose(vecs, _expected(texts), rtol=1e-5, atol=1e-6)
    assert {p for p, _ in server.calls} == {"/v1/embeddings"}


def test_batch_size_and_concurrency_respected(server):
    emb = create(_cfg(_url(server), batch_size=3, concurrency=3))
    texts = [f"text {i}" for i in range(10)]
    seen = []
    vecs = emb.embed(texts, progress=lambda done, total: seen.append((done, total)))
    sizes = sorted(len(body["input"]) for _, body in server.calls)
    assert sizes == [1, 3, 3, 3]
    np.testing.assert_allclose(vecs, _expected(texts), rtol=1e-5, atol=1e-6)
    assert seen[-1] == (10, 10)


def test_query_prefix_applied(server):
    emb = create(_cfg(_url(server), query_prefix="search_query: ", doc_prefix="search_document: "))
    emb.embed_query("where is retry")
    emb.embed(["def retry(): ..."])
    assert server.calls[0][1]["input"] == ["search_query: where is retry"]
    assert server.calls[1][1]["input"] == ["search_document: def retry(): ..."]


def test_fingerprint_names_model_not_url(server):
    a = create(_cfg(_url(server)))
    b = create(_cfg(_url(server) + "/"))
    assert a.fingerprint == b.fingerprint
    assert "test-embed" in a.fingerprint and str(DIM) in a.fingerprint
    assert "127.0.0.1" not in a.fingerprint


def test_probe_ok(server):
    ok, msg = create(_cfg(_url(server))).probe(timeout_s=5)
    assert ok, msg
    assert "dimension 8" in msg


def test_http_error_names_url(server):
    server.status = 404
    emb = create(_cfg(_url(server)))
    with pytest.raises(EmbedderError) as e:
        emb.embed(["x"])
    assert _url(server) in str(e.value) and "404" in str(e.value)
    ok, msg = emb.probe()
    assert not ok and "404" in msg


def test_wrong_shape_answer_is_an_error(server):
    emb = create(_cfg(_url(server) + "/garbage"))
    with pytest.raises(EmbedderError, match="embedder.api"):
        emb.embed(["x"])


def test_refused_connection(server):
    url = _url(server)
    server.shutdown()
    server.server_close()
    with pytest.raises(EmbedderError, match="cannot reach"):
        create(_cfg(url)).embed(["x"])


def test_wedged_endpoint_raises_and_probe_fails(wedged):
    emb = create(_cfg(wedged, timeout_s=0.3, batch_size=2, concurrency=2))
    outcome = {}

    def run():
        try:
            emb.embed(["a", "b", "c", "d"])
        except EmbedderError as e:
            outcome["error"] = str(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)  # a hang guard, not a timing assertion
    assert not t.is_alive(), "embed hung on a wedged endpoint"
    assert "did not answer" in outcome["error"] and wedged in outcome["error"]
    ok, msg = emb.probe(timeout_s=0.3)
    assert not ok and "did not answer" in msg


def test_missing_url_or_model_is_config_error():
    with pytest.raises(ConfigError, match="embedder.url"):
        create(EmbedderConfig(name="http", model="m"))


def test_bearer_token_comes_from_the_named_env_var(server, monkeypatch):
    url = f"http://127.0.0.1:{server.server_address[1]}"
    cfg = EmbedderConfig(name="http", url=url, api="openai", model="m", api_key_env="TEST_EMBED_KEY")
    with pytest.raises(EmbedderError, match="TEST_EMBED_KEY"):
        create(cfg)
    monkeypatch.setenv("TEST_EMBED_KEY", "s3cret")
    create(cfg).embed(["hello"])
    assert server.auth == ["Bearer s3cret"]
