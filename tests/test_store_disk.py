"""What a SQLite chunk store keeps once (docs/ARCHITECTURE.md, stores): vectors as float16
behind one codec that still reads float32 blobs of earlier releases, FTS5 strings derived
from the chunk rows (an external-content table over a view), the embedding cache's rows
without overflow pages; and every answer the same as before: an index of an earlier release
searched and edited, an index edited and deleted from against a fresh index of the same files."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dsh_recall.core.text import index_text
from dsh_recall.core.types import Chunk
from dsh_recall.services.vectors import VectorIndex, sync_vector_file
from dsh_recall.stores import vec_codec
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from dsh_recall.stores.sqlite import embed_cache, lexical, migrations
from dsh_recall.stores.sqlite.chunks import APPLICATION_ID, SqliteChunkStore
from dsh_recall.stores.sqlite.embed_cache import EmbedCache

DIM = 48
WORDS = ["request", "session", "parseHttpResponse", "tmp_path", "café", "naïve", "日本語",
         "value", "x2", "__init__", "Retry", "BACKOFF", "a_b_c", "data", "cookie", "jar"]
QUERIES = ["request", "session cookie", "parsehttpresponse", "tmp_path", "retry OR backoff",
           "café", "x2 value", "jar", "data OR request OR naïve", "pkg", "m3"]


# -- the codec ---------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(arrays(np.float32, st.integers(1, 600), elements=st.floats(-1, 1, width=32)))
def test_codec_round_trip(v):
    blob = vec_codec.encode(v)
    assert len(blob) == 2 * len(v) + 1 and len(blob) % 2 == 1
    got = vec_codec.decode(blob)
    assert got.dtype == np.float32 and got.shape == v.shape
    assert np.allclose(got, v, rtol=2.0 ** -11, atol=6e-8)
    # A float32 blob of an earlier release reads back bit for bit, alone or beside new ones.
    old = v.astype("<f4").tobytes()
    assert np.array_equal(vec_codec.decode(old), v)
    mixed = vec_codec.decode_many([old, blob, old])
    assert np.array_equal(mixed[0], v) and np.array_equal(mixed[1], got)
    assert np.array_equal(vec_codec.decode_many([blob, blob]), np.vstack([got, got]))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_codec_moves_a_cosine_by_less_than_1e_3(seed):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((64, 384)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    q = m[0] + 0.3 * m[1]
    q /= np.linalg.norm(q)
    kept = vec_codec.decode_many([vec_codec.encode(r) for r in m])
    assert np.abs(kept @ q - m @ q).max() < 1e-3


# -- stores ------------------------------------------------------------------------------

def _vec(h: str) -> np.ndarray:
    v = np.random.default_rng(int(h[:8], 16)).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _file(rng: random.Random, path: str, version: int, odd: bool = False):
    """A file's row and chunks; `odd`: some chunks' lexical strings are not what index_text
    derives from their text and symbols (a caller may give any), and one's path string differs."""
    chunks = []
    for c in range(rng.randint(1, 4)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
        sym = rng.choice(["", "Handler.send", "parse_args"])
        ch = Chunk(path, 1 + 3 * c, 3 + 3 * c, text, "python", (sym,) if sym else ())
        body, syms, plex = index_text(text), index_text(sym), index_text(path.replace("/", " "))
        if odd and c == 1:
            body, syms = "cookie jar " + body, "override"
        if odd and c == 2:
            plex = "elsewhere"
        h = hashlib.sha256(f"{path}|{version}|{c}|{text}".encode()).hexdigest()[:32]
        chunks.append(IndexedChunk(ch, body, syms, plex, text, h))
    return FileRow(path, "/abs/" + path, "", f"{path}-{version}", 1, version, 1), chunks


def _answers(store: SqliteChunkStore) -> dict[str, list[tuple[str, int, float]]]:
    """Every query's lexical answer by (path, line, score): ids differ between indexes."""
    store.use_impacts = False
    out = {}
    for q in QUERIES:
        hits = store.lexical(q, 50)
        rows = store.chunks_by_id([i for i, _ in hits], with_text=False)
        out[q] = sorted((rows[i].path, rows[i].start_line, round(s, 6)) for i, s in hits)
    return out


def _intact(store: SqliteChunkStore) -> None:
    """FTS5's index holds exactly what its content (the view, or its own copy) gives."""
    store.conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('integrity-check', 1)")


def _fresh(path: Path, files: dict) -> SqliteChunkStore:
    s = SqliteChunkStore(path)
    s.replace_files(list(files.values()))
    return s


def test_edits_and_deletes_answer_as_a_fresh_index(tmp_path):
    rng = random.Random(7)
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    assert lexical.external(store.conn)  # no second copy of the strings
    assert store.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_fts_content'").fetchone() is None
    paths = [f"pkg/m{i}.py" for i in range(10)]
    live: dict[str, tuple] = {}
    for step in range(40):
        if rng.random() < 0.7:
            batch = [_file(rng, p, step, odd=rng.random() < 0.5) for p in rng.sample(paths, rng.randint(1, 3))]
            store.replace_files(batch)
            live.update({row.path: (row, chunks) for row, chunks in batch})
        else:
            gone = rng.sample(paths, 2)
            store.delete_files(gone)
            for p in gone:
                live.pop(p, None)
        _intact(store)
    assert store.conn.execute("SELECT count(*) FROM chunks WHERE lex_body IS NOT NULL").fetchone()[0]
    fresh = _fresh(tmp_path / "fresh.sqlite", live)
    assert _answers(store) == _answers(fresh)
    assert dict(store.conn.execute("SELECT term, df FROM term_df")) == \
        dict(fresh.conn.execute("SELECT term, df FROM term_df"))
    # The strings read back (term counts, `store migrate`) are those indexed.
    want = {(c.chunk.path, c.chunk.start_line): (c.lexical, c.symbols_lexical, c.path_lexical)
            for _, chunks in live.values() for c in chunks}
    got = {(r[0], r[1]): (r[2], r[3], r[4]) for r in store.conn.execute(
        "SELECT f.path, c.start_line, t.body, t.symbols, t.path FROM chunks_fts t "
        "JOIN chunks c ON c.id = t.rowid JOIN files f ON f.id = c.file_id")}
    assert got == want
    # Texts are kept deflated where that is shorter, and read back as written.
    texts = {(c.chunk.path, c.chunk.start_line): c.chunk.text for _, chunks in live.values() for c in chunks}
    rows = store.chunks_by_id([r[0] for r in store.conn.execute("SELECT id FROM chunks")])
    assert {(r.path, r.start_line): r.text for r in rows.values()} == texts
    assert store.conn.execute("SELECT count(*) FROM chunks WHERE typeof(text) = 'blob'").fetchone()[0]
    store.clear()
    _intact(store)
    assert store.chunk_count() == 0 and store.lexical("request", 5) == []
    store.close()
    fresh.close()


def test_a_changed_tokenizer_rebuilds_the_index_before_a_delete(tmp_path, monkeypatch):
    rng = random.Random(3)
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    files = {p: _file(rng, p, 1) for p in ("a.py", "b.py", "c.py")}
    store.replace_files(list(files.values()))
    store.close()
    real = lexical.index_text
    monkeypatch.setattr(lexical, "index_text", lambda t: real(t).replace("request", "req uest"))
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    store.delete_files(["a.py"])
    _intact(store)  # without the rebuild FTS5 would still hold the old strings of b and c
    assert store.get_meta("lexical") == lexical.fingerprint()
    store.close()


def _old_index(path: Path, files: dict) -> None:
    """An index as the release before wrote it: schema 6, chunks_fts with its own copy of
    the strings, vectors as bare float32 blobs."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("BEGIN")
    migrations.run_sql(conn, migrations.CHUNKS_V1)
    for _, step in migrations.CHUNKS[1:6]:
        migrations.run_sql(conn, step) if isinstance(step, str) else step(conn)
    conn.execute("INSERT INTO meta(key, value) VALUES('schema', '6')")
    cid = 0
    for fid, (row, chunks) in enumerate(files.values(), 1):
        conn.execute("INSERT INTO files(id, path, abs_path, root, hash, size, mtime_ns, chars) "
                     "VALUES(?,?,?,?,?,?,?,?)", (fid, row.path, row.abs_path, row.root, row.hash,
                                                    row.size, row.mtime_ns, row.chars))
        for ic in chunks:
            cid += 1
            conn.execute("INSERT INTO chunks(id, file_id, start_line, end_line, language, symbols, "
                         "text, embed_hash, vec_seq) VALUES(?,?,?,?,?,?,?,?,1)",
                         (cid, fid, ic.chunk.start_line, ic.chunk.end_line, ic.chunk.language,
                          json.dumps(list(ic.chunk.symbols)), ic.chunk.text, ic.embed_hash))
            conn.execute("INSERT INTO chunks_fts(rowid, body, symbols, path) VALUES(?,?,?,?)",
                         (cid, ic.lexical, ic.symbols_lexical, ic.path_lexical))
            conn.execute("INSERT OR REPLACE INTO vectors(hash, vec) VALUES(?, ?)",
                         (ic.embed_hash, _vec(ic.embed_hash).tobytes()))
    conn.execute("COMMIT")
    conn.close()


def test_an_index_of_the_release_before_is_searched_and_edited_as_before(tmp_path):
    rng = random.Random(11)
    files = {f"pkg/m{i}.py": _file(rng, f"pkg/m{i}.py", 1, odd=i % 3 == 0) for i in range(8)}
    _old_index(tmp_path / "old.sqlite", files)
    old = SqliteChunkStore(tmp_path / "old.sqlite")
    assert old.get_meta("schema") == str(migrations.latest(migrations.CHUNKS))
    assert not lexical.external(old.conn)  # kept as it was: no re-tokenizing on open
    fresh = _fresh(tmp_path / "fresh.sqlite", files)
    hashes = [ic.embed_hash for _, chunks in files.values() for ic in chunks]
    fresh.put_vectors([(h, _vec(h)) for h in hashes])
    # Its float32 vectors read back bit for bit, and rank as the new index's float16 ones.
    ids, mat = old.vector_matrix()
    by_id = {r.id: r.embed_hash for r in old.chunks_by_id(ids.tolist(), with_text=False).values()}
    assert all(np.array_equal(m, _vec(by_id[int(i)])) for i, m in zip(ids, mat))
    assert _answers(old) == _answers(fresh)
    for s in (old, fresh):
        sync_vector_file(s)
    for h in hashes[:6]:
        q = _vec(h)
        a, b = VectorIndex().rank(old, q, 5), VectorIndex().rank(fresh, q, 5)
        assert abs(a[0][1] - 1.0) < 1e-5 and abs(b[0][1] - 1.0) < 1e-3
        key = lambda s, hits: [s.chunks_by_id([i], with_text=False)[i].embed_hash for i, _ in hits]  # noqa: E731
        assert key(old, a) == key(fresh, b)
        assert np.allclose([x for _, x in a], [x for _, x in b], atol=1e-3)
    # Edited and deleted from: the same answers as a fresh index of what is left.
    edit = _file(rng, "pkg/m3.py", 2, odd=True)
    for s in (old, fresh):
        s.replace_files([edit])
        s.delete_files(["pkg/m5.py", "pkg/m0.py"])
        _intact(s)
    files["pkg/m3.py"] = edit
    for p in ("pkg/m5.py", "pkg/m0.py"):
        del files[p]
    again = _fresh(tmp_path / "again.sqlite", files)
    assert _answers(old) == _answers(again) == _answers(fresh)
    # Emptied, it is made anew without the second copy.
    old.clear()
    assert lexical.external(old.conn)
    old.replace_files(list(files.values()))
    _intact(old)
    assert _answers(old) == _answers(again)
    for s in (old, fresh, again):
        s.close()


# -- the embedding cache -----------------------------------------------------------------

def _old_cache(path: Path, fp: str, hashes: list[str]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {embed_cache.APPLICATION_ID}")
    conn.execute("CREATE TABLE cache (fp TEXT NOT NULL, hash TEXT NOT NULL, vec BLOB NOT NULL, "
                 "PRIMARY KEY(fp, hash)) WITHOUT ROWID")
    conn.executemany("INSERT INTO cache VALUES(?,?,?)", [(fp, h, _vec(h).tobytes()) for h in hashes])
    conn.close()


def _dbstat(conn: sqlite3.Connection) -> dict[str, int]:
    try:
        return dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    except sqlite3.OperationalError:
        pytest.skip("this SQLite is built without the dbstat table")


def test_embed_cache_reads_an_old_cache_and_keeps_new_rows_small(tmp_path, monkeypatch):
    old_hashes = [f"{i:032x}" for i in range(50)]
    _old_cache(tmp_path / "cache.sqlite", "fake:1:48", old_hashes)
    cache = EmbedCache(tmp_path / "cache.sqlite")
    got = cache.get("fake:1:48", old_hashes + ["missing"])
    assert set(got) == set(old_hashes) and all(np.array_equal(got[h], _vec(h)) for h in old_hashes)
    assert cache.get("other:1:48", old_hashes) == {}
    new = [f"{i:032x}" for i in range(100, 2100)]
    # Each put moves some of the old table's rows into the new one; empty, it goes.
    monkeypatch.setattr(embed_cache, "DRAIN_ROWS", 20)
    other = EmbedCache(tmp_path / "cache.sqlite")  # another process, opened before the drop
    for n, part in enumerate((new[:1000], new[1000:1500], new[1500:])):
        cache.put("fake:1:48", [(h, _vec(h)) for h in part])
        left = cache.conn.execute("SELECT name FROM sqlite_master WHERE name = 'cache'").fetchone()
        assert (left is None) == (n == 2)
        got = cache.get("fake:1:48", old_hashes)
        assert set(got) == set(old_hashes)
        assert all(np.allclose(got[h], _vec(h), rtol=2.0 ** -11, atol=6e-8) for h in old_hashes)
    assert set(other.get("fake:1:48", old_hashes)) == set(old_hashes)
    other.drop([old_hashes[1]])
    other.close()
    got = cache.get("fake:1:48", new[:10] + old_hashes[2:7])
    assert len(got) == 15 and all(np.allclose(got[h], _vec(h), rtol=2.0 ** -11, atol=6e-8) for h in new[:10])
    cache.drop([new[0], old_hashes[0]])
    assert cache.get("fake:1:48", [new[0], old_hashes[0], new[1]]).keys() == {new[1]}
    # A row of 384 float16 dimensions fits its page: no overflow page per row.
    big = EmbedCache(tmp_path / "big.sqlite")
    rng = np.random.default_rng(0)
    big.put("fp", [(f"{i:032x}", rng.standard_normal(384).astype(np.float32)) for i in range(2000)])
    pages = _dbstat(big.conn)
    overflow = big.conn.execute("SELECT count(*) FROM dbstat WHERE name = 'vecs' AND pagetype = 'overflow'").fetchone()[0]
    assert overflow == 0 and (pages["vecs"] + pages["vecs_key"]) / 2000 < 1100
    cache.close()
    big.close()


@pytest.mark.parametrize("dim", [384])
def test_old_embed_cache_rows_spilled(tmp_path, dim):
    """The layout replaced: what a float32 row of a WITHOUT ROWID table cost (the figure
    docs/benchmarks.md compares with)."""
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    conn.execute("CREATE TABLE cache (fp TEXT NOT NULL, hash TEXT NOT NULL, vec BLOB NOT NULL, "
                 "PRIMARY KEY(fp, hash)) WITHOUT ROWID")
    rng = np.random.default_rng(0)
    conn.executemany("INSERT INTO cache VALUES(?,?,?)", [("fp", f"{i:032x}", rng.standard_normal(dim)
                                                          .astype(np.float32).tobytes()) for i in range(500)])
    conn.commit()
    _dbstat(conn)
    assert conn.execute("SELECT count(*) FROM dbstat WHERE name = 'cache' AND pagetype = 'overflow'").fetchone()[0] >= 500
    conn.close()


def test_rows_an_earlier_release_wrote_into_a_new_index_do_not_corrupt_it(tmp_path):
    """An earlier release opening this index records its own version and writes files
    without a path string: the next open re-indexes FTS5 from the view, so deletes stay exact."""
    rng = random.Random(5)
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    store.replace_files([_file(rng, "a.py", 1), _file(rng, "b.py", 1)])
    row, chunks = _file(rng, "c.py", 1)
    conn = store.conn
    conn.execute("BEGIN")
    fid = conn.execute("INSERT INTO files(path, abs_path, root, hash, size, mtime_ns, chars) "
                       "VALUES(?,?,?,?,?,?,?)", (row.path, row.abs_path, row.root, row.hash,
                                                  row.size, row.mtime_ns, row.chars)).lastrowid
    for ic in chunks:
        cid = conn.execute("INSERT INTO chunks(file_id, start_line, end_line, language, symbols, text, "
                           "embed_hash) VALUES(?,?,?,?,?,?,?)", (fid, ic.chunk.start_line, ic.chunk.end_line,
                                                                  "python", json.dumps(list(ic.chunk.symbols)),
                                                                  ic.chunk.text, ic.embed_hash)).lastrowid
        conn.execute("INSERT INTO chunks_fts(rowid, body, symbols, path) VALUES(?,?,?,?)",
                     (cid, ic.lexical, ic.symbols_lexical, ic.path_lexical))
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema'")
    conn.execute("COMMIT")
    store.close()
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    _intact(store)
    store.delete_files(["c.py", "a.py"])
    _intact(store)
    assert {r.path for r in store.chunks_by_id(range(1, 50), with_text=False).values()} == {"b.py"}
    store.close()
