"""The memory-mapped vector file: same answers as exact brute force over SQLite, kept up to
date incrementally, safe with a concurrent writer and after a writer dies mid-write."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from dsh_recall.core.types import Chunk
from dsh_recall.rank.vector import int8_scores, top_k
from dsh_recall.services.vectors import VECTOR_FILE_META, VectorIndex, sync_vector_file
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from dsh_recall.stores.sqlite.chunks import SCHEMA_VERSION, SqliteChunkStore
from dsh_recall.stores.sqlite.vector_file import FileState, append_file, quantize

DIM = 32


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _add_file(store: SqliteChunkStore, path: str, n: int, salt: str = "") -> list[str]:
    """A file of n chunks; returns their embed hashes (distinct texts, distinct hashes)."""
    items, hashes = [], []
    for i in range(n):
        text = f"{path} chunk {i} {salt}"
        h = hashlib.sha256(text.encode()).hexdigest()[:32]
        hashes.append(h)
        items.append(IndexedChunk(Chunk(path, i + 1, i + 1, text, "python", (), "block"),
                                  text, "", path, text, h))
    store.replace_file(FileRow(path, "/x/" + path, "", path + salt, 1, 1, 10), items)
    return hashes


def _embed(store: SqliteChunkStore, hashes: list[str]) -> None:
    store.put_vectors([(h, _vec(int(h[:8], 16))) for h in hashes])


def _exact(store: SqliteChunkStore, q: np.ndarray, k: int, prefix: str | None = None):
    return top_k(*store.vector_matrix(prefix), q, k)


@pytest.fixture
def store(tmp_path):
    s = SqliteChunkStore(tmp_path / "index.sqlite")
    yield s
    s.close()


def _state(store: SqliteChunkStore) -> FileState | None:
    return FileState.loads(store.get_meta(VECTOR_FILE_META))


def test_ranking_matches_exact_brute_force(store):
    for f in range(20):
        _embed(store, _add_file(store, f"pkg{f % 3}/m{f}.py", 50))
    assert sync_vector_file(store) == "rebuild"
    st = _state(store)
    assert st.rows == 1000 and (store.vector_dir / st.file).is_file()
    idx = VectorIndex()
    for seed in range(20):
        q = _vec(10_000 + seed)
        got = idx.rank(store, q, 10)
        want = _exact(store, q, 10)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
    # scoped to a directory, and to an allowed set
    q = _vec(777)
    assert [i for i, _ in idx.rank(store, q, 10, prefix="pkg1")] == \
        [i for i, _ in _exact(store, q, 10, prefix="pkg1")]
    ids, _ = store.vector_matrix()
    allowed = set(int(i) for i in ids[::7])
    got = idx.rank(store, q, 10, allowed=allowed)
    assert {i for i, _ in got} <= allowed and len(got) == 10


def test_file_is_updated_incrementally_and_deleted_chunks_never_answer(store):
    for f in range(6):
        _embed(store, _add_file(store, f"m{f}.py", 400))
    assert sync_vector_file(store) == "rebuild"
    first = _state(store)
    idx = VectorIndex()
    # One file edited: its new chunks arrive as a delta, answered before any sync.
    new_hashes = _add_file(store, "m0.py", 10, salt="v2")
    _embed(store, new_hashes)
    q = _vec(int(new_hashes[3][:8], 16))  # the query is one of the new chunks' vectors
    got = idx.rank(store, q, 5)
    assert got[0][0] == _exact(store, q, 5)[0][0]
    assert abs(got[0][1] - 1.0) < 1e-3  # kept as float16 (stores/vec_codec.py)
    alive = set(int(i) for i in store.vector_matrix()[0])
    assert {i for i, _ in idx.rank(store, _vec(5), 50)} <= alive
    # The sync appends to the same file instead of rewriting it.
    assert sync_vector_file(store) == "append"
    second = _state(store)
    assert second.file == first.file and second.rows == first.rows + 10
    assert [i for i, _ in idx.rank(store, q, 10)] == [i for i, _ in _exact(store, q, 10)]
    assert sync_vector_file(store) == "none"
    # Once a quarter of its rows belong to deleted chunks, the file is rebuilt.
    store.delete_files(["m1.py", "m2.py"])
    _embed(store, _add_file(store, "late.py", 1))
    assert sync_vector_file(store) == "rebuild"
    assert _state(store).rows == store.vector_covered(_state(store).seq) == 4 * 400 - 400 + 10 + 1


def test_a_reused_chunk_id_is_scored_with_its_own_vector(store):
    _embed(store, _add_file(store, "a.py", 300))
    sync_vector_file(store)
    # Replacing the last file lets SQLite hand out the same chunk ids again.
    hashes = _add_file(store, "a.py", 300, salt="new")
    _embed(store, hashes[:150])  # half of them embedded, half pending
    idx = VectorIndex()
    for seed in range(5):
        q = _vec(seed)
        assert [i for i, _ in idx.rank(store, q, 10)] == [i for i, _ in _exact(store, q, 10)]


def test_an_embedder_change_retires_the_file(store):
    _embed(store, _add_file(store, "a.py", 50))
    sync_vector_file(store)
    idx = VectorIndex()
    assert idx.rank(store, _vec(1), 5)
    store.clear_vectors()
    assert store.pending_count() == 50
    assert idx.rank(store, _vec(1), 5) == []  # the old space is never mixed in
    assert sync_vector_file(store) == "removed"
    assert not list(store.vector_dir.glob("*.i8v"))


def test_pending_count_and_pending_follow_vectors(store):
    h = _add_file(store, "a.py", 5) + _add_file(store, "b.py", 3)
    assert store.pending_count() == 8
    _embed(store, h[:5])
    assert store.pending_count() == 3
    assert [x[0] for x in store.pending(10)] == h[5:]
    # A chunk whose text was embedded before gets the vector when it is indexed.
    _add_file(store, "a.py", 5, salt="")
    assert store.pending_count() == 3


def test_a_killed_append_leaves_the_committed_file_usable(store):
    _embed(store, _add_file(store, "a.py", 200))
    sync_vector_file(store)
    st = _state(store)
    path = store.vector_dir / st.file

    def dies():
        yield np.array([999_999], np.int64), _vec(3)[None, :]
        raise KeyboardInterrupt  # the writer is killed after part of the batch hit the disk

    with pytest.raises(KeyboardInterrupt):
        append_file(path, st, dies())
    assert path.stat().st_size > 64 + st.rows * (12 + DIM)  # a torn tail past the commit
    idx = VectorIndex()
    q = _vec(3)
    assert [i for i, _ in idx.rank(store, q, 10)] == [i for i, _ in _exact(store, q, 10)]
    _embed(store, _add_file(store, "b.py", 5))
    assert sync_vector_file(store) == "append"
    assert path.stat().st_size == 64 + (st.rows + 5) * (12 + DIM)  # the tail was dropped
    assert [i for i, _ in VectorIndex().rank(store, q, 10)] == [i for i, _ in _exact(store, q, 10)]


def test_a_killed_rebuild_leaves_the_previous_file(store, tmp_path):
    _embed(store, _add_file(store, "a.py", 400))
    sync_vector_file(store)
    st = _state(store)
    (store.vector_dir / "0123.i8v.tmp").write_bytes(b"half written")  # killed before rename
    idx = VectorIndex()
    q = _vec(9)
    assert [i for i, _ in idx.rank(store, q, 5)] == [i for i, _ in _exact(store, q, 5)]
    store.delete_files(["a.py"])
    _embed(store, _add_file(store, "b.py", 10))
    assert sync_vector_file(store) == "rebuild"
    name = _state(store).file
    assert sorted(p.name for p in store.vector_dir.iterdir()) == [name, name + ".bits"]
    assert name != st.file


def test_schema_1_index_is_migrated(tmp_path):
    db = tmp_path / "old.sqlite"
    s = SqliteChunkStore(db)
    hashes = _add_file(s, "a.py", 4)
    _embed(s, hashes[:2])
    s.close()
    conn = sqlite3.connect(db)  # turn it back into a schema-1 file
    conn.execute("DROP INDEX chunks_vec_seq")
    conn.execute("DROP INDEX chunks_pending_code")  # schema 6's, on the same column
    conn.execute("ALTER TABLE chunks DROP COLUMN vec_seq")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    conn.commit()
    conn.close()
    s = SqliteChunkStore(db)
    assert s.get_meta("schema") == SCHEMA_VERSION  # schema 1 -> 2 (vec_seq) and on
    assert s.pending_count() == 2
    sync_vector_file(s)
    q = _vec(int(hashes[1][:8], 16))
    assert VectorIndex().rank(s, q, 1)[0][0] == _exact(s, q, 1)[0][0]
    s.close()


def test_a_searcher_alongside_a_writer_always_sees_a_consistent_index(tmp_path):
    path = tmp_path / "index.sqlite"
    writer = SqliteChunkStore(path)
    _embed(writer, _add_file(writer, "base.py", 500))
    sync_vector_file(writer)
    stop = threading.Event()
    errors: list[str] = []

    def write() -> None:
        try:
            for n in range(40):
                _embed(writer, _add_file(writer, f"f{n % 5}.py", 60, salt=str(n)))
                sync_vector_file(writer)
        finally:
            stop.set()

    def search() -> None:
        reader = SqliteChunkStore(path)
        idx = VectorIndex()
        seed = 0
        try:
            while not stop.is_set():
                seed += 1
                q = _vec(seed)
                got = idx.rank(reader, q, 10)
                ids, mat = reader.vectors_of([i for i, _ in got])
                exact = dict(zip(ids.tolist(), (mat @ q).tolist()))
                for i, s in got:  # every answer is a live chunk with its exact score
                    if i in exact and abs(exact[i] - s) > 1e-5:
                        errors.append(f"chunk {i}: {s} != {exact[i]}")
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            errors.append(repr(e))
        finally:
            reader.close()

    t = threading.Thread(target=search)
    t.start()
    write()
    t.join()
    writer.close()
    assert errors == []


@pytest.mark.parametrize("kernel", [True, False])
def test_int8_first_pass_is_close_to_exact(kernel, monkeypatch):
    from dsh_recall.rank import vector

    if not kernel:
        monkeypatch.setattr(vector, "_nk", None)  # the numpy fallback
    elif vector._nk is None:
        pytest.skip("no SIMD kernel package installed (pip install simsimd, or numkong)")
    rng = np.random.default_rng(0)
    mat = rng.standard_normal((500, 384)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    q8, scale = quantize(mat)
    approx = int8_scores(q8, scale, mat[0])
    assert np.max(np.abs(approx - mat @ mat[0])) < 0.02


@pytest.mark.slow
def test_recall_at_10_on_real_minilm_vectors_is_at_least_098(tmp_path):
    """Real embeddings of this project's own source: the file's answers against exact."""
    from dsh_recall.core.config import load_config
    from dsh_recall.services.code import CodeService

    src = Path(__file__).resolve().parents[1] / "src"
    cfg = load_config(workspace=src, overrides={"embedder": {"name": "minilm"}})
    svc = CodeService(src, cfg)
    svc.index()
    assert svc.store.pending_count() == 0
    queries = ["where is the index lock taken", "parse a config file", "reciprocal rank fusion",
               "split camelCase identifiers", "import a Claude Code transcript",
               "offload a large tool result", "mcp token budget", "excerpt bounding",
               "walk the workspace honoring gitignore", "notes access levels",
               "embedding cache", "history search by session", "kill -9 safety",
               "vector file append", "chunk python with tree-sitter"]
    emb = svc.embedder()
    idx = VectorIndex()
    hits = 0
    for text in queries:
        q = emb.embed_query(text)
        got = {i for i, _ in idx.rank(svc.store, q, 10)}
        want = {i for i, _ in _exact(svc.store, q, 10)}
        hits += len(got & want)
    assert hits / (10 * len(queries)) >= 0.98
    svc.close()


def test_history_blocks_rank_through_the_same_file(tmp_path):
    from dsh_recall.stores.sqlite.history import BlockIn, HistoryStore

    store = HistoryStore(tmp_path / "history.sqlite")
    for sid in ("s1", "s2", "s3"):
        blocks = [BlockIn(sid, n, 0, "user", "text", None, f"{sid} block {n}", f"{sid}-{n}",
                          f"{sid} block {n}", "", "") for n in range(300)]
        store.write_batch([{"id": sid, "source": "generic", "workspace": None, "title": None,
                            "created_ms": None, "updated_ms": None, "path": None}], [], blocks, [],
                          None)
    todo = store.unhashed(None, 10_000)
    store.set_embed_hashes([(i, hashlib.sha256(t.encode()).hexdigest()[:32]) for i, t, _ in todo])
    pend = store.pending(None, 10_000)
    store.put_vectors([(h, _vec(int(h[:8], 16))) for h, _, _ in pend[:700]])
    assert sync_vector_file(store) == "rebuild"
    store.put_vectors([(h, _vec(int(h[:8], 16))) for h, _, _ in pend[700:]])  # a delta
    idx = VectorIndex()
    for scope in (None, ["s2"], ["s1", "s3"]):
        ids, mat = store.vector_matrix(scope)
        for seed in range(5):
            q = _vec(500 + seed)
            keep = store.block_ids(scope) if scope else None
            got = idx.rank(store, q, 10, keep=keep)
            assert [i for i, _ in got] == [i for i, _ in top_k(ids, mat, q, 10)]
            assert abs(idx.mean_cosine(store, q, keep) - float((mat @ q).mean())) < 1e-3
    store.close()


WRITER = '''
import hashlib, sys
import numpy as np
from pathlib import Path
from dsh_recall.core.types import Chunk
from dsh_recall.services.vectors import sync_vector_file
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from dsh_recall.stores.sqlite.chunks import SqliteChunkStore

store = SqliteChunkStore(Path(sys.argv[1]))
for n in range(100000):
    path = f"f{n % 40}.py"
    items = []
    for i in range(40):
        text = f"{path} {n} {i}"
        h = hashlib.sha256(text.encode()).hexdigest()[:32]
        items.append(IndexedChunk(Chunk(path, i + 1, i + 1, text, "python", (), "block"), text, "",
                                  path, text, h))
    store.replace_file(FileRow(path, "/x/" + path, "", str(n), 1, 1, 10), items)
    store.put_vectors([(it.embed_hash, np.random.default_rng(int(it.embed_hash[:8], 16))
                        .standard_normal(32).astype(np.float32)) for it in items])
    sync_vector_file(store)
'''


def test_kill_9_while_the_vector_file_is_written_leaves_a_usable_index(tmp_path):
    import subprocess
    import sys
    import time

    db = tmp_path / "index.sqlite"
    for delay in (0.0, 0.13, 0.37):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:  # until it writes the file
            try:
                conn = sqlite3.connect(db, timeout=5)
                row = conn.execute("SELECT value FROM meta WHERE key = ?", (VECTOR_FILE_META,)).fetchone()
                conn.close()
            except sqlite3.Error:
                row = None
            state = FileState.loads(row[0]) if row else None
            if state is not None and state.rows >= 400:
                break
            time.sleep(0.02)
        time.sleep(delay)
        proc.kill()  # SIGKILL, wherever it is: mid-append, mid-rebuild, mid-commit
        proc.wait()
        store = SqliteChunkStore(db)
        assert _state(store) is not None and _state(store).rows > 0  # it got to the file
        idx = VectorIndex()
        for seed in range(3):
            q = np.random.default_rng(seed).standard_normal(32).astype(np.float32)
            q /= np.linalg.norm(q)
            assert [i for i, _ in idx.rank(store, q, 10)] == [i for i, _ in _exact(store, q, 10)]
        assert sync_vector_file(store) in ("none", "append", "rebuild")
        assert [i for i, _ in VectorIndex().rank(store, q, 10)] == [i for i, _ in _exact(store, q, 10)]
        store.close()


# -- the sign-bit first pass of a large file ----------------------------------------------

def test_top_of_over_many_scores_is_exact_ties_by_position():
    from dsh_recall.rank.vector import SAMPLE_FROM, top_of
    rng = np.random.default_rng(3)
    for n, k in ((SAMPLE_FROM * 3, 10), (SAMPLE_FROM * 3, 192), (1000, 7)):
        scores = rng.standard_normal(n).astype(np.float32)
        scores[::97] = 0.5  # many ties, some of them at the edge
        ids = np.arange(n, dtype=np.int64) + 100
        ref = sorted(range(n), key=lambda i: (-scores[i], i))[:k]
        assert [i for i, _ in top_of(ids, scores, k)] == [int(ids[i]) for i in ref]
    # a sample whose floor leaves too few (every score but a few equal): still exact
    flat = np.zeros(SAMPLE_FROM * 2, dtype=np.float32)
    flat[[5, 70_000]] = [2.0, 1.0]
    assert [i for i, _ in top_of(np.arange(len(flat)), flat, 3)] == [5, 70_000, 0]


def test_nearest_by_bits_keeps_the_nearest_and_honours_the_mask():
    from dsh_recall.rank.vector import has_fast_kernel, nearest_by_bits
    from dsh_recall.stores.sqlite.vector_file import sign_bits
    if not has_fast_kernel():
        pytest.skip("no SIMD kernels (simsimd) installed: the sign-bit pass is off without them")
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((5000, 64)).astype(np.float32)
    q = rows[17] + 0.01 * rng.standard_normal(64).astype(np.float32)
    bits = sign_bits(rows)
    ham = np.unpackbits(bits ^ sign_bits(q[None, :]), axis=1).sum(axis=1)
    got = nearest_by_bits(bits, q, 50)
    assert got is not None and 17 in got and list(got) == sorted(got)
    edge = np.sort(ham)[49]
    assert set(got) == set(np.flatnonzero(ham <= edge)) or len(got) == 100
    mask = np.ones(len(rows), dtype=bool)
    mask[17] = False
    mask[2500:] = False
    got = nearest_by_bits(bits, q, 50, mask)
    assert 17 not in got and got.max() < 2500 and len(got) >= 50
    assert len(nearest_by_bits(bits, q, 50, np.zeros(len(rows), dtype=bool))) == 0


@pytest.mark.parametrize("width", [8, 13, 48])
def test_sign_bits_by_word_measure_what_the_rows_do(width):
    """SignPlanes (the warm layout) gives the row layout's distances at any width (a width
    that is not a whole number of words is padded with zeros on both sides), and the same
    rows out of nearest_by_bits, with and without a mask, at sizes on both sides of the
    sampled edge (_nearest)."""
    from dsh_recall.rank.vector import has_fast_kernel, nearest_by_bits
    from dsh_recall.stores.sqlite.vector_file import SignPlanes, sign_bits
    rng = np.random.default_rng(width)
    for n in (3000, 70_000):
        rows = rng.standard_normal((n, width * 8)).astype(np.float32)
        bits = sign_bits(rows)
        planes = SignPlanes.of(bits, block=4096)
        q = rows[11] + 0.3 * rng.standard_normal(width * 8).astype(np.float32)
        ham = np.unpackbits(bits ^ sign_bits(q[None, :]), axis=1).sum(axis=1)
        assert np.array_equal(planes.hamming(planes.query_words(q)), ham)
        mask = rng.random(n) < 0.7
        for count in (1, 50, 900):
            for m in (None, mask):
                got = nearest_by_bits(planes, q, count, m)
                d = ham if m is None else np.where(m, ham, 10**6)
                live = n if m is None else int(m.sum())
                edge = np.sort(d)[min(count, live) - 1]
                want = np.flatnonzero(d <= edge)
                if len(want) > 2 * count:
                    want = np.sort(want[np.argsort(d[want], kind="stable")[:count]])
                assert got is not None and np.array_equal(got, want), (n, count)
                if has_fast_kernel():
                    assert np.array_equal(nearest_by_bits(bits, q, count, m), got)


def test_a_large_file_ranks_through_its_sign_bits_with_exact_scores(store, monkeypatch):
    import dsh_recall.services.vectors as vectors_mod
    from dsh_recall.rank.vector import has_fast_kernel
    if not has_fast_kernel():
        pytest.skip("no SIMD kernels (simsimd) installed: the sign-bit pass is off without them")
    for f in range(6):
        _embed(store, _add_file(store, f"{'ab'[f // 5]}/f{f}.py", 500))
    sync_vector_file(store)
    calls = []
    real = vectors_mod.nearest_by_bits
    monkeypatch.setattr(vectors_mod, "nearest_by_bits",
                        lambda *a, **kw: calls.append(1) or real(*a, **kw))
    monkeypatch.setattr(vectors_mod, "BITS_FROM", 1000)
    monkeypatch.setattr(vectors_mod, "BITS_MIN", 600)  # a fifth of the rows go on to int8
    idx = VectorIndex()
    hits = 0
    for seed in range(20):
        q = _vec(1000 + seed)
        got, want = idx.rank(store, q, 10), _exact(store, q, 10)
        assert calls, "the sign-bit pass did not run"
        exact = dict(want)
        for i, s in got:  # what it answers carries the exact cosine
            assert abs(s - float(store.vectors_of([i])[1][0] @ q)) < 1e-5
        hits += len(set(exact) & {i for i, _ in got})
    assert hits >= 0.9 * 200  # recall@10 of the first pass on random 32-dim vectors
    # a scope: only chunks under it, through the same pass
    calls.clear()
    b = set(store.chunk_ids_under("b/").tolist())
    under = idx.rank(store, _vec(7), 10, prefix="a/")
    assert calls and len(under) == 10 and not any(i in b for i, _ in under)


def test_a_vector_file_without_its_sign_file_ranks_and_gets_one(store, monkeypatch):
    import dsh_recall.services.vectors as vectors_mod
    from dsh_recall.stores.sqlite.vector_file import bits_path
    for f in range(3):
        _embed(store, _add_file(store, f"f{f}.py", 300))
    assert sync_vector_file(store) == "rebuild"
    st = _state(store)
    path = store.vector_dir / st.file
    fresh = bits_path(path).read_bytes()
    bits_path(path).unlink()  # a file a release before sign files wrote
    monkeypatch.setattr(vectors_mod, "BITS_FROM", 100)
    q = _vec(4)
    assert [i for i, _ in VectorIndex().rank(store, q, 5)] == [i for i, _ in _exact(store, q, 5)]
    assert sync_vector_file(store) == "bits"
    assert bits_path(path).read_bytes() == fresh
    assert sync_vector_file(store) == "none"
    # a short sign file (a writer killed between its two files) is completed, then appended to
    bits_path(path).write_bytes(fresh[: 64 + 100 * (DIM // 8)])
    _embed(store, _add_file(store, "g.py", 20))
    assert sync_vector_file(store) == "append"
    st2 = _state(store)
    assert bits_path(path).stat().st_size == 64 + st2.rows * (DIM // 8)
    assert bits_path(path).read_bytes()[: len(fresh)] == fresh


def test_a_process_that_lives_on_holds_the_sign_bits_in_memory(store):
    """Every query of the sign-bit pass scans all of the sign file: the first query maps it
    (a one-shot CLI would pay more to load it than to scan it), the second reads it into the
    process's memory, so other work between queries cannot push it out of the page cache."""
    from dsh_recall.stores.sqlite.vector_file import MappedVectors, SignPlanes
    for f in range(2):
        _embed(store, _add_file(store, f"f{f}.py", 50))
    sync_vector_file(store)
    st = _state(store)
    view = MappedVectors(store.vector_dir / st.file, st)
    first = view.bits
    assert isinstance(first, np.memmap)
    held = view.bits
    assert isinstance(held, SignPlanes) and len(held) == len(first) and view.bits is held
    q = _vec(3)
    qb = np.packbits(q > 0)
    ham = np.unpackbits(np.asarray(first) ^ qb, axis=1).sum(axis=1)
    assert np.array_equal(held.hamming(held.query_words(q)), ham)
