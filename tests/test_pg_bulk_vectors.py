"""Vector loads on PostgreSQL (stores/postgres/vectors.py): vectors written by COPY, the
HNSW index deferred while many vectors load and built once at the end, searches exact
meanwhile, and a load killed midway neither claims an index it lacks nor stops the next
load from completing."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from dsh_recall.core.text import index_text
from dsh_recall.core.types import Chunk
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from pg_fixture import pg_namespace, pg_server, pg_url  # noqa: F401  (fixtures)

DIM = 8  # a low dimension: the HNSW graph of a few thousand vectors finds the exact top 10
CHUNKS = 3000
MIN_ROWS = 500  # ANN_MIN_ROWS for these tests
SLACK = 100  # LOAD_SLACK


@pytest.fixture
def vec(monkeypatch):
    from dsh_recall.stores.postgres import vectors

    monkeypatch.setattr(vectors, "ANN_MIN_ROWS", MIN_ROWS)
    monkeypatch.setattr(vectors, "LOAD_SLACK", SLACK, raising=False)  # (absent before)
    return vectors


def open_store(url, ns):
    from dsh_recall.stores.postgres.chunks import PgChunkStore

    return PgChunkStore(url, ns)


def items(start: int, n: int, per_file: int = 10):
    """(FileRow, [IndexedChunk]) for chunks start..start+n, each with its own text."""
    out = []
    for f in range(start // per_file, (start + n) // per_file):
        path = f"pkg/m{f:05d}.py"
        cs = []
        for j in range(per_file):
            text = f"def f{f}_{j}(x):\n    return x + {j}  # word{(f * 7 + j) % 97}"
            c = Chunk(path, 1 + 3 * j, 2 + 3 * j, text, "python", (f"f{f}_{j}",))
            cs.append(IndexedChunk(c, index_text(text), index_text(f"f{f}_{j}"), index_text(path),
                                   path + "\n" + text, f"h{f:05d}-{j}"))
        out.append((FileRow(path, "/abs/" + path, "", f"fh{f}", 1, 1, 1), cs))
    return out


def first_index(store, n: int = CHUNKS) -> None:
    """A first index as the indexer writes it: the bulk load (stores/postgres/bulk.py)."""
    assert store.bulk_begin()
    batch = items(0, n)
    for i in range(0, len(batch), 50):
        store.replace_files(batch[i:i + 50])
    store.bulk_end()


def vectors_for(hashes) -> list[tuple[str, np.ndarray]]:
    """A fixed random unit vector per text hash (the same hash, the same vector)."""
    out = []
    for h in hashes:
        rng = np.random.default_rng(zlib.crc32(h.encode()))
        v = rng.normal(size=DIM).astype(np.float32)
        out.append((h, v / np.linalg.norm(v)))
    return out


def has_index(store) -> bool:
    return store._q("SELECT to_regclass(%s) IS NOT NULL", (f"{store.s}.vectors_hnsw",)).fetchone()[0]


def queries(n: int = 12) -> np.ndarray:
    q = np.random.default_rng(7).normal(size=(n, DIM)).astype(np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def assert_exact(store, k: int = 10) -> None:
    """Every query's top k is the exact ranking over the vectors the store holds."""
    ids, mat = store.vector_matrix()
    for q in queries():
        order = np.argsort(-(mat @ q), kind="stable")[:k]
        got = store.vector_search(q, k)
        assert [i for i, _ in got] == ids[order].tolist()
        assert [s for _, s in got] == pytest.approx((mat @ q)[order].tolist(), abs=1e-5)


def uses_index(store) -> bool:
    with store.conn.transaction():  # a small table is scanned; show the index would serve
        store.conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in store._q(
            "EXPLAIN SELECT hash FROM {s}.vectors ORDER BY vec <#> %s LIMIT 10", (queries(1)[0],)))
    return "vectors_hnsw" in plan


def load(store, batch: int = 700, stop_after: int | None = None) -> int:
    """Vectors for every waiting chunk, in batches, as an indexer writes them."""
    done = 0
    while (pend := store.pending(batch)) and (stop_after is None or done < stop_after):
        store.put_vectors(vectors_for(h for h, _ in pend))
        done += len(pend)
    return done


def test_a_vector_load_ranks_exactly_and_ends_with_one_hnsw_index(vec, pg_url, pg_namespace):
    store = open_store(pg_url, pg_namespace)
    try:
        first_index(store)
        assert store.vector_load_begin()
        assert store.get_meta(vec.LOAD_KEY) is not None
        load(store, stop_after=1400)
        # Past ANN_MIN_ROWS, yet no index: the load defers it; searches scan exactly.
        assert store.vector_count() == 1400 and not has_index(store)
        assert store.get_meta("ann") is None
        assert_exact(store)
        load(store)
        assert store.pending_count() == 0 and not has_index(store)
        store.vector_load_end()
        assert has_index(store) and store.get_meta("ann") == "hnsw"
        assert store.get_meta(vec.LOAD_KEY) is None and uses_index(store)
        assert_exact(store)
        # Written by COPY, read back as written.
        ids, mat = store.vector_matrix()
        rows = store.chunks_by_id(ids[:50].tolist(), with_text=False)
        want = dict(vectors_for(r.embed_hash for r in rows.values()))
        for i, row in zip(ids[:50].tolist(), mat[:50]):
            np.testing.assert_array_equal(row, want[rows[i].embed_hash])
        # Small writes afterwards go into the index as it stands.
        store.replace_files(items(CHUNKS, 20))
        store.put_vectors(vectors_for(h for h, _ in store.pending(100)))
        assert store.pending_count() == 0 and has_index(store) and store.vector_count() == CHUNKS + 20
        assert_exact(store)
    finally:
        store.close()


def test_a_first_index_builds_its_hnsw_index_once_its_vectors_are_in(vec, pg_url, pg_namespace,
                                                                      monkeypatch):
    """The indexer's path: a bulk-loaded first index, then vectors a batch at a time. The
    index is not built when ANN_MIN_ROWS vectors are in (then maintained for every vector
    after), but once, when the backlog is down to LOAD_SLACK."""
    store = open_store(pg_url, pg_namespace)
    built: list[int] = []
    real = store._q

    def spy(sql, params=None):
        if "USING hnsw" in sql:
            built.append(store.vector_count())
        return real(sql, params)

    monkeypatch.setattr(store, "_q", spy)
    try:
        first_index(store)
        marked = store.get_meta("vector_load")
        seen = []
        while pend := store.pending(256):
            store.put_vectors(vectors_for(h for h, _ in pend))
            seen.append((store.pending_count(), has_index(store)))
        assert all(not idx for left, idx in seen if left > SLACK)
        assert seen[-1] == (0, True) and len(built) == 1 and built[0] >= CHUNKS - SLACK
        assert marked is not None  # by the bulk load, with no owner: the last writer built
        assert store.get_meta("ann") == "hnsw" and store.get_meta(vec.LOAD_KEY) is None
        assert_exact(store)
        # A new embedder: every vector goes, and they come back as a load again.
        store.clear_vectors()
        assert store.get_meta(vec.LOAD_KEY) is not None and not has_index(store)
        load(store, batch=256)
        assert len(built) == 2 and has_index(store) and store.get_meta(vec.LOAD_KEY) is None
        assert_exact(store)
    finally:
        store.close()


def test_a_load_killed_midway_searches_exactly_and_the_next_load_completes(vec, pg_url,
                                                                          pg_namespace,
                                                                          monkeypatch):
    store = open_store(pg_url, pg_namespace)
    try:
        first_index(store)
        load(store, batch=600, stop_after=600)
        store.build_ann_index()
        assert has_index(store)
        assert store.vector_load_begin()
        # An index left from before the load is dropped when it begins.
        assert not has_index(store) and store.get_meta("ann") is None
        calls = {"n": 0}
        real = vec.vector_bytes

        def failing(mat):
            calls["n"] += 1
            if calls["n"] == 3:
                raise RuntimeError("killed midway")
            return real(mat)

        monkeypatch.setattr(vec, "vector_bytes", failing)
        with pytest.raises(RuntimeError):
            load(store, batch=500)
        monkeypatch.setattr(vec, "vector_bytes", real)
        store.conn.close()  # the process dies: its session, and its lock, end
    finally:
        store.close()
    after = open_store(pg_url, pg_namespace)
    try:
        # The failed batch left nothing; the two before it stayed; no index is claimed.
        assert after.vector_count() == 1600 and after.pending_count() == CHUNKS - 1600
        assert not has_index(after) and after.get_meta("ann") is None
        assert after.get_meta(vec.LOAD_KEY) is not None and after.vector_load_interrupted()
        assert_exact(after)
        assert after.vector_load_begin()
        assert not after.vector_load_interrupted()
        load(after)
        after.vector_load_end()
        assert after.pending_count() == 0 and after.vector_count() == CHUNKS
        assert has_index(after) and after.get_meta("ann") == "hnsw"
        assert after.get_meta(vec.LOAD_KEY) is None and uses_index(after)
        assert_exact(after)
    finally:
        after.close()


def test_a_live_load_keeps_the_index_deferred_for_other_writers(vec, pg_url, pg_namespace):
    loader = open_store(pg_url, pg_namespace)
    other = open_store(pg_url, pg_namespace)
    try:
        first_index(loader)
        assert loader.vector_load_begin()
        assert not other.vector_load_begin()  # one loader at a time
        assert not other.vector_load_interrupted()
        load(other)  # drains the backlog, but the live loader builds at its end
        other.build_ann_index()
        assert other.pending_count() == 0 and not has_index(other)
        assert_exact(other)
        loader.vector_load_end()
        assert has_index(other) and other.get_meta(vec.LOAD_KEY) is None
        assert_exact(other)
    finally:
        other.close()
        loader.close()


def test_a_closed_loader_lets_the_next_writer_finish_the_load(vec, pg_url, pg_namespace):
    """A store closed mid-load gives its pooled connection back without the load's lock;
    whoever writes the last vectors builds the index."""
    store = open_store(pg_url, pg_namespace)
    try:
        first_index(store)
        assert store.vector_load_begin()
        load(store, stop_after=1000)
    finally:
        store.close()
    nxt = open_store(pg_url, pg_namespace)
    try:
        assert nxt.vector_load_interrupted() and not has_index(nxt)
        load(nxt, batch=400)
        assert has_index(nxt) and nxt.get_meta("ann") == "hnsw"
        assert nxt.get_meta(vec.LOAD_KEY) is None
        assert_exact(nxt)
    finally:
        nxt.close()


def test_copy_keeps_a_vector_already_held(vec, pg_url, pg_namespace):
    """A batch written by COPY (COPY_MIN or more) that repeats hashes already held keeps
    the first vector of each, as row-by-row writes do, and flags every waiting chunk."""
    store = open_store(pg_url, pg_namespace)
    try:
        store.replace_files(items(0, 400))
        pend = [h for h, _ in store.pending(1000)]
        first = vectors_for(pend[:150])
        store.put_vectors(first)
        other = [(h, -v) for h, v in vectors_for(pend)]
        assert len(other) >= vec.COPY_MIN
        store.put_vectors(other)
        assert store.vector_count() == 400 and store.pending_count() == 0
        ids, mat = store.vector_matrix()
        rows = store.chunks_by_id(ids.tolist(), with_text=False)
        want = dict(first) | {h: v for h, v in other if h not in dict(first)}
        for i, row in zip(ids.tolist(), mat):
            np.testing.assert_array_equal(row, want[rows[i].embed_hash])
    finally:
        store.close()


def test_the_indexer_builds_a_first_index_hnsw_once(vec, tmp_path, pg_url, monkeypatch):
    """Through the code service (bulk load, then embedding a batch at a time): the HNSW
    index is built once, when the backlog is down to LOAD_SLACK, and search answers as
    the exact ranking does."""
    from dsh_recall.core.config import load_config
    from dsh_recall.services import vectors as svc_vectors
    from dsh_recall.services.code import CodeService, indexing

    monkeypatch.setattr(vec, "ANN_MIN_ROWS", 60)
    monkeypatch.setattr(vec, "LOAD_SLACK", 10)
    monkeypatch.setattr(svc_vectors, "FULL_BATCH", 16)
    monkeypatch.setattr(indexing, "BULK_MIN_FILES", 1)
    ws = tmp_path / "repo"
    for i in range(200):  # a chunk a file
        p = ws / "pkg" / f"mod_{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n\n".join(f"def step_{i}_{j}(x):\n    return x * {j} + {i}\n\n\n"
                                 f"class Holder_{i}_{j}:\n    value = {i * j}\n" for j in range(2)))
    over = {"embedder": {"name": "fake"}, "index_workers": 1, "store": pg_url}
    svc = CodeService(ws, load_config(workspace=ws, overrides=over), home=tmp_path / "home")
    built: list[tuple[int, int]] = []
    real = type(svc.store)._build

    def spy(self, *a, **kw):
        real(self, *a, **kw)
        if self.get_meta("ann"):
            built.append((self.vector_count(), self.chunk_count()))

    monkeypatch.setattr(type(svc.store), "_build", spy)
    try:
        rep = svc.index()
        store = svc.store
        assert rep.pending == 0 and store.chunk_count() == 200 == store.vector_count()
        assert len(built) == 1 and built[0][0] >= 200 - 10  # not at 60 vectors: once, near the end
        assert has_index(store) and store.get_meta(vec.LOAD_KEY) is None
        emb = svc.embedder()
        ids, mat = store.vector_matrix()
        q = emb.embed(["step value holder"], query=True)[0]
        order = np.argsort(-(mat @ q), kind="stable")[:10]
        assert [i for i, _ in store.vector_search(q, 10)] == ids[order].tolist()
    finally:
        svc.close()


def test_writers_go_on_while_the_index_is_built(vec, pg_url, pg_namespace):
    """The HNSW build runs CONCURRENTLY: a plain CREATE INDEX held a lock that queued every
    writer of the namespace behind it for the whole build (13 minutes at 1M vectors). Here a
    transaction left open holds the build at its start; a second writer's vectors still go
    in, and once the open transaction ends the build completes, valid, and is used."""
    import threading

    import psycopg

    store = open_store(pg_url, pg_namespace)
    builder = open_store(pg_url, pg_namespace)
    writer = open_store(pg_url, pg_namespace)
    held = psycopg.connect(pg_url)  # not autocommit: its insert stays uncommitted
    try:
        first_index(store)
        load(store, stop_after=1400)
        assert not has_index(store)  # the first index's load defers it
        held.execute(f"INSERT INTO {store.s}.vectors(hash, vec) VALUES ('held', %s::vector)",
                     (str(vectors_for(["held"])[0][1].tolist()),))
        errors: list[BaseException] = []

        def run(fn):
            try:
                fn()
            except BaseException as e:  # handed to the test
                errors.append(e)

        build = threading.Thread(target=run, args=(builder.build_ann_index,), daemon=True)
        build.start()
        waiting = False
        for _ in range(200):  # until the build is under way, waiting on the open transaction
            waiting = store._q("SELECT count(*) FROM pg_stat_progress_create_index "
                               "WHERE index_relid = to_regclass(%s)",
                               (f"{store.s}.vectors_hnsw",)).fetchone()[0] > 0
            if waiting:
                break
            build.join(0.05)
        assert waiting and build.is_alive()
        put = threading.Thread(target=run, args=(lambda: load(writer),), daemon=True)
        put.start()
        put.join(30)
        assert not put.is_alive(), "a writer waited for the index build"
        assert build.is_alive() and not errors
        assert writer.pending_count() == 0
        held.rollback()
        build.join(60)
        assert not build.is_alive() and not errors
        assert has_index(store) and store.get_meta("ann") == "hnsw" and uses_index(store)
        assert store._index_valid() is True
        assert_exact(store)
    finally:
        held.close()
        for s in (writer, builder, store):
            s.close()
