"""The chunk-store contract (stores/contracts/), run on every backend: the embedded SQLite
store always, PostgreSQL + pgvector when a server is there (CI starts one; see
tests/pg_fixture.py). Lexical scores are checked against FTS5's bm25 formula written out
here, vector search against exact brute force, and both backends against each other."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from dsh_recall.core.text import index_text
from dsh_recall.core.types import Chunk
from dsh_recall.rank.lexical import match_expression
from dsh_recall.services.vectors import VectorIndex
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from dsh_recall.stores.sqlite.chunks import SqliteChunkStore
from pg_fixture import pg_namespace, pg_server, pg_url  # noqa: F401  (fixtures)

BACKENDS = ["sqlite", "postgresql"]


def open_store(backend, request, tmp_path, name="index"):
    if backend == "sqlite":
        return SqliteChunkStore(tmp_path / f"{name}.sqlite")
    from dsh_recall.stores.postgres.chunks import PgChunkStore

    url = request.getfixturevalue("pg_url")
    ns = request.getfixturevalue("pg_namespace") + "/" + name
    return PgChunkStore(url, ns)


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path):
    s = open_store(request.param, request, tmp_path)
    yield s
    s.close()


def chunk(path, text, symbols=(), start=1):
    c = Chunk(path, start, start + text.count("\n"), text, "python", tuple(symbols))
    lex = index_text(text)
    return IndexedChunk(c, lex, index_text(" ".join(symbols)),
                        index_text(path.replace("/", " ").replace(".", " ")),
                        path + "\n" + text, f"h-{path}-{start}-{hash(text) & 0xffffff:x}")


def put(store, path, *texts, symbols=()):
    chunks = [chunk(path, t, symbols if i == 0 else (), start=1 + 10 * i) for i, t in enumerate(texts)]
    store.replace_file(FileRow(path, "/abs/" + path, "", "hash-" + path, 10, 1, sum(map(len, texts))),
                       chunks)
    return chunks


CORPUS = {
    "src/session.py": (["def send(request): retry the request with backoff", "class Session: cookies"],
                       ["Session", "send"]),
    "src/adapters.py": (["class HTTPAdapter: max_retries retry retry", "def close(self): pass"],
                        ["HTTPAdapter"]),
    "src/models.py": (["class Request: url headers body", "class Response: status cookies"], []),
    "docs/retry.md": (["How retry works: the adapter retries a request"], []),
    "tests/test_session.py": (["def test_send(): session send request retry"], ["test_send"]),
}


def load(store):
    for path, (texts, symbols) in CORPUS.items():
        put(store, path, *texts, symbols=symbols)


def reference_bm25(store, terms: list[str]) -> dict[int, float]:
    """FTS5's bm25 written out (k1 1.2, b 0.75, columns body/symbols/path weighted 1/4/2,
    a row's length summed over its columns), over every chunk read back from the store."""
    rows = store.chunks_by_id(list(range(1, 10_000)))
    if not rows:
        rows = {}
    docs = {}
    for cid, r in rows.items():
        body = index_text(r.text).split()
        syms = index_text(" ".join(r.symbols)).split()
        path = index_text(r.path.replace("/", " ").replace(".", " ")).split()
        docs[cid] = (Counter(body), Counter(syms), Counter(path), len(body) + len(syms) + len(path))
    n = len(docs)
    avgdl = sum(d[3] for d in docs.values()) / n
    out = {}
    for cid, (b, s, p, dl) in docs.items():
        score = 0.0
        for t in terms:
            df = sum(1 for d in docs.values() if t in d[0] or t in d[1] or t in d[2])
            if not df:
                continue
            idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6) if math.log((n - df + 0.5) / (df + 0.5)) > 0 else 1e-6
            tf = b[t] * 1.0 + s[t] * 4.0 + p[t] * 2.0
            if tf:
                score += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
        if score:
            out[cid] = score
    return out


def test_meta_round_trip(store):
    assert store.get_meta("nothing") is None
    store.set_meta("embedder", "a")
    store.set_meta("embedder", "b")
    assert store.get_meta("embedder") == "b"


def test_files_and_chunks(store):
    load(store)
    files = store.files()
    assert set(files) == set(CORPUS)
    assert files["src/session.py"].abs_path == "/abs/src/session.py"
    assert store.file_count() == len(CORPUS)
    assert store.chunk_count() == sum(len(t) for t, _ in CORPUS.values())
    ids = store.chunk_ids_for_paths(["src/session.py"])
    rows = store.chunks_by_id(ids)
    assert sorted(r.text for r in rows.values()) == sorted(CORPUS["src/session.py"][0])
    first = min(rows.values(), key=lambda r: r.start_line)
    assert first.symbols == ("Session", "send") and first.path == "src/session.py"
    assert first.abs_path == "/abs/src/session.py" and first.start_line == 1
    store.update_stat("src/session.py", 99, 7)
    assert (store.file("src/session.py").size, store.file("src/session.py").mtime_ns) == (99, 7)
    assert store.file("missing.py") is None


def test_count_files_outside(store):
    for path, h in (("a.md", "notes-2:abc"), ("b.md", "notes-1:def"), ("c.md", "xyz"), ("d_x.md", "notes-2:1")):
        store.replace_file(FileRow(path, "/abs/" + path, "", h, 1, 1, 1), [])
    assert store.count_files_outside("notes-2:") == 2
    assert store.count_files_outside("notes_2:") == 4  # no LIKE wildcards
    assert store.count_files_outside("") == 0


def test_replace_and_delete(store):
    load(store)
    old = set(store.chunk_ids_for_paths(["src/models.py"]))
    put(store, "src/models.py", "class Prepared: zebra")
    new = set(store.chunk_ids_for_paths(["src/models.py"]))
    assert len(new) == 1 and not (old & new)
    assert store.chunks_by_id(list(old)) == {}
    assert [i for i, _ in store.lexical(match_expression(["zebra"]), 10)] == list(new)
    assert store.lexical(match_expression(["headers"]), 10) == []
    assert store.doc_freqs(["zebra", "headers"]) == {"zebra": 1}
    store.delete_files(["src/models.py", "docs/retry.md"])
    assert set(store.files()) == set(CORPUS) - {"src/models.py", "docs/retry.md"}
    assert store.lexical(match_expression(["zebra"]), 10) == []
    assert store.chunk_count() == 5
    store.clear()
    assert store.files() == {} and store.chunk_count() == 0
    assert store.lexical(match_expression(["retry"]), 10) == []


def test_lexical_scores_are_fts5_bm25(store):
    load(store)
    for terms, boost in ((["retry"], set()), (["retry", "session", "cookies"], set()),
                         (["send", "request", "adapter"], {"send"}), (["httpadapter"], set())):
        hits = store.lexical(match_expression(terms, boost), 50)
        ref = reference_bm25(store, [t for t in terms for _ in range(2 if t in boost else 1)])
        assert {i for i, _ in hits} == set(ref)
        for i, s in hits:
            assert s == pytest.approx(ref[i], rel=1e-6)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_lexical_limit_prefix_and_odd_terms(store):
    load(store)
    all_hits = store.lexical(match_expression(["retry"]), 50)
    assert store.lexical(match_expression(["retry"]), 2) == all_hits[:2]
    under = store.lexical(match_expression(["retry"]), 50, path_prefix="src")
    rows = store.chunks_by_id([i for i, _ in under])
    assert under and all(rows[i].path.startswith("src/") for i, _ in under)
    assert [i for i, _ in under] == [i for i, _ in all_hits if i in rows]
    # Quotes, backslashes and operators are words, never syntax.
    put(store, "odd.py", "it's a \"quoted\" back\\slash AND OR NOT (x) café")
    for q in ['"', "'", "\\", "it's", "AND", "(x)", "café"]:
        store.lexical(match_expression([q]), 5)
    odd = store.chunk_ids_for_paths(["odd.py"])
    assert [i for i, _ in store.lexical(match_expression(["quoted", "slash"]), 5)] == odd


def test_doc_freqs(store):
    load(store)
    df = store.doc_freqs(["retry", "cookies", "nothing_here", "session"])
    assert df == {"retry": 4, "cookies": 2, "session": 3}


def test_backends_rank_alike(request, tmp_path):
    a = open_store("sqlite", request, tmp_path)
    b = open_store("postgresql", request, tmp_path)
    try:
        for s in (a, b):
            load(s)
        for terms in (["retry"], ["session", "send", "request"], ["class", "cookies", "status"]):
            ra = [(a.chunks_by_id([i])[i].text, round(s, 9)) for i, s in a.lexical(match_expression(terms), 20)]
            rb = [(b.chunks_by_id([i])[i].text, round(s, 9)) for i, s in b.lexical(match_expression(terms), 20)]
            assert ra == rb
    finally:
        a.close()
        b.close()


def unit(rng, n, dim=16):
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_vectors_pending_and_search(store):
    load(store)
    total = store.chunk_count()
    assert store.pending_count() == total
    pend = store.pending(100)
    assert len(pend) == total
    rng = np.random.default_rng(7)
    vecs = unit(rng, len(pend))
    by_hash = {h: vecs[n] for n, (h, _) in enumerate(pend)}
    store.put_vectors(list(by_hash.items())[:4])
    assert store.pending_count() == total - 4
    store.put_vectors(list(by_hash.items()))
    store.put_vectors(list(by_hash.items())[:2])  # again: harmless
    assert store.pending_count() == 0 and store.pending(10) == []
    ids, mat = store.vector_matrix()
    assert len(ids) == total and mat.shape == (total, 16)
    q = unit(rng, 1)[0]
    exact = sorted(zip(ids.tolist(), (mat @ q).tolist()), key=lambda x: -x[1])
    got = VectorIndex().rank(store, q, 5)
    assert [i for i, _ in got] == [i for i, _ in exact[:5]]
    assert [s for _, s in got] == pytest.approx([s for _, s in exact[:5]], abs=1e-5)
    under = VectorIndex().rank(store, q, 3, prefix="src")
    rows = store.chunks_by_id([i for i, _ in under])
    assert all(rows[i].path.startswith("src/") for i, _ in under) and len(under) == 3
    allowed = set(ids[:3].tolist())
    assert {i for i, _ in VectorIndex().rank(store, q, 10, allowed=allowed)} == allowed
    some = store.vectors_of(ids[:2].tolist() + [10 ** 9])
    assert sorted(some[0].tolist()) == sorted(ids[:2].tolist())
    # A chunk whose text was embedded before gets its vector when re-added.
    texts, symbols = CORPUS["src/session.py"]
    put(store, "src/session.py", *texts, symbols=symbols)
    assert store.pending_count() == 0
    # A new embedder: every vector goes, every chunk is pending again.
    store.clear_vectors()
    assert store.pending_count() == total
    assert VectorIndex().rank(store, q, 5) == []


def test_prune_vectors(store):
    load(store)
    rng = np.random.default_rng(3)
    pend = store.pending(100)
    store.put_vectors([(h, v) for (h, _), v in zip(pend, unit(rng, len(pend)))])
    before = store.vector_count()
    store.delete_files(["src/models.py"])
    store.prune_vectors()
    assert store.vector_count() == before - 2


def test_vector_search_top_k_at_larger_size(store):
    """More vectors than one index probe returns: still the exact top k."""
    rng = np.random.default_rng(11)
    texts = [f"text number {i} word{i % 13}" for i in range(300)]
    for f in range(30):
        put(store, f"f{f:02d}.py", *texts[f * 10:(f + 1) * 10])
    pend = store.pending(1000)
    store.put_vectors([(h, v) for (h, _), v in zip(pend, unit(rng, len(pend)))])
    ids, mat = store.vector_matrix()
    for q in unit(rng, 3):
        exact = [i for i, _ in sorted(zip(ids.tolist(), (mat @ q).tolist()), key=lambda x: -x[1])[:50]]
        assert [i for i, _ in VectorIndex().rank(store, q, 50)] == exact


def test_size_is_reported(store):
    load(store)
    assert store.size_bytes() > 0


def test_registry_picks_the_backend_and_names_valid_ones(tmp_path):
    from dsh_recall.core.errors import StoreError
    from dsh_recall.stores import registry

    assert registry.backend(None) == "sqlite" and registry.backend("postgres://h/db") == "postgresql"
    with pytest.raises(StoreError, match="valid stores are sqlite.*postgresql"):
        registry.backend("mysql://h/db")
    s = registry.chunk_store(None, "code/x", tmp_path / "x.sqlite")
    try:
        assert isinstance(s, SqliteChunkStore) and not s.ranks_vectors
        again = registry.reopen(s)
        assert again.path == s.path and again is not s
        again.close()
    finally:
        s.close()


def test_urls_are_shown_without_passwords():
    from dsh_recall.stores.postgres.util import redact

    assert redact("postgresql://bob:s3cret@db:5432/recall") == "postgresql://bob:***@db:5432/recall"
    assert redact("postgresql://bob@db/recall") == "postgresql://bob@db/recall"


def test_candidate_cap_keeps_the_rows_with_rare_terms(request, tmp_path, monkeypatch):
    """PostgreSQL bounds a lexical query to the rows holding its rarest terms; rows holding
    only very common terms are left out, and those holding rare ones rank as before."""
    from dsh_recall.stores.postgres import util as pg_util

    pg = open_store("postgresql", request, tmp_path)
    try:
        for i in range(40):
            put(pg, f"common{i:02d}.py", "common word here " * (1 + i % 3))
        put(pg, "rare.py", "the zebra common word")
        put(pg, "rare2.py", "zebra zebra")
        full = pg.lexical(match_expression(["common", "zebra"]), 5)
        monkeypatch.setattr(pg_util, "CANDIDATE_CAP", 3)
        capped = pg.lexical(match_expression(["common", "zebra"]), 5)
        rows = pg.chunks_by_id([i for i, _ in capped])
        assert {rows[i].path for i, _ in capped} == {"rare.py", "rare2.py"}
        assert capped == [h for h in full if h[0] in rows]
    finally:
        pg.close()


def test_postgres_hnsw_index_answers_once_built(request, tmp_path, monkeypatch):
    """Past ANN_MIN_ROWS vectors the HNSW index is built and used; its top k is the exact
    top k here (a small graph searched with a wide beam), with exact scores."""
    from dsh_recall.stores.postgres import vectors as postgres

    monkeypatch.setattr(postgres, "ANN_MIN_ROWS", 100)
    pg = open_store("postgresql", request, tmp_path)
    try:
        rng = np.random.default_rng(5)
        for f in range(30):
            put(pg, f"g{f:02d}.py", *[f"text {f} {i}" for i in range(10)])
        pend = pg.pending(1000)
        pg.put_vectors([(h, v) for (h, _), v in zip(pend, unit(rng, len(pend)))])
        assert pg.get_meta("ann") == "hnsw"
        q = unit(rng, 1)[0]
        with pg.conn.transaction():  # a small table is scanned; show the index serves the query
            pg.conn.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(r[0] for r in pg.conn.execute(
                f"EXPLAIN SELECT hash FROM {pg.s}.vectors ORDER BY vec <#> %s LIMIT 10", (q,)))
        assert "vectors_hnsw" in plan
        ids, mat = pg.vector_matrix()
        exact = sorted(zip(ids.tolist(), (mat @ q).tolist()), key=lambda x: -x[1])[:10]
        got = VectorIndex().rank(pg, q, 10)
        assert [i for i, _ in got] == [i for i, _ in exact]
        assert [s for _, s in got] == pytest.approx([s for _, s in exact], abs=1e-5)
        pg.clear_vectors()
        assert pg.get_meta("ann") is None and pg.pending_count() == 300
    finally:
        pg.close()
