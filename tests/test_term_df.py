"""The kept document frequencies (stores/sqlite/chunks.py term_df) equal what fts5vocab counts,
through inserts, replaces, deletes and clears, and an index made before them gets them
filled by its next indexer while searches fall back to fts5vocab meanwhile."""

from __future__ import annotations

import random

from dsh_recall.core.text import index_text
from dsh_recall.core.types import Chunk
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from dsh_recall.stores.sqlite.chunks import SqliteChunkStore

WORDS = ["request", "session", "parseHttpResponse", "tmp_path", "café", "naïve", "日本語",
         "value", "x2", "__init__", "Retry", "BACKOFF", "a_b_c", "data"]


def _file(rng: random.Random, path: str, version: int) -> tuple[FileRow, list[IndexedChunk]]:
    chunks = []
    for c in range(rng.randint(0, 4)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
        sym = rng.choice(["", "Handler.send", "parse_args"])
        ch = Chunk(path, 1 + c, 1 + c, text, "python", (sym,) if sym else ())
        chunks.append(IndexedChunk(ch, index_text(text), index_text(sym),
                                   index_text(path.replace("/", " ")), text, f"{path}{version}{c}"))
    return FileRow(path, "/abs/" + path, "", f"{path}-{version}", 1, version, 1), chunks


def _vocab(store: SqliteChunkStore) -> dict[str, int]:
    return {t: d for t, d in store.conn.execute("SELECT term, doc FROM chunks_vocab")
            if t.isascii()}


def _kept(store: SqliteChunkStore) -> dict[str, int]:
    return dict(store.conn.execute("SELECT term, df FROM term_df"))


def test_kept_counts_follow_every_write(tmp_path):
    rng = random.Random(3)
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    paths = [f"pkg/m{i}.py" for i in range(12)]
    for step in range(60):
        op = rng.random()
        if op < 0.7:
            batch = [_file(rng, p, step) for p in rng.sample(paths, rng.randint(1, 4))]
            store.replace_files(batch)
        elif op < 0.95:
            store.delete_files(rng.sample(paths, 2))
        else:
            store.clear()
        assert _kept(store) == _vocab(store), step
    terms = ["request", "parsehttpresponse", "http", "caf", "é", "e", "日本", "nothere"]
    want = {t: d for t, d in store.conn.execute(
        f"SELECT term, doc FROM chunks_vocab WHERE term IN ({','.join('?' * len(terms))})", terms)}
    assert store._vocab_doc_freqs(terms) == want  # non-ASCII terms still asked of fts5vocab
    store.close()


def test_an_index_made_before_gets_them_filled(tmp_path):
    rng = random.Random(5)
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    store.replace_files([_file(rng, f"m{i}.py", 1) for i in range(10)])
    # As an index of schema 2 was: no kept counts.
    store.conn.execute("DROP TABLE term_df")
    store.conn.execute("DELETE FROM meta WHERE key = 'term_df'")
    store.set_meta("schema", "2")
    store.close()
    store = SqliteChunkStore(tmp_path / "index.sqlite")  # the upgrade adds an empty table
    assert store.get_meta("term_df") is None and _kept(store) == {}
    vocab = _vocab(store)
    assert store._vocab_doc_freqs(list(vocab)) == vocab  # fts5vocab answers meanwhile
    store.replace_files([_file(rng, "m0.py", 2)])  # writes do not half-fill it
    assert _kept(store) == {}
    assert store.ensure_term_df() and not store.ensure_term_df()
    assert _kept(store) == _vocab(store)
    store.replace_files([_file(rng, "m1.py", 3)])
    store.delete_files(["m2.py"])
    assert _kept(store) == _vocab(store)
    store.close()


def test_indexer_refills_after_many_files_and_keeps_them_after_an_edit(tmp_path):
    from dsh_recall.core.config import load_config
    from dsh_recall.services.code import CodeService
    from test_code_concurrency import make_tree

    ws = make_tree(tmp_path / "ws", 220)  # past PARALLEL_MIN_FILES: counted once at the end
    (ws / "pkg0" / "café.py").write_text("def naïve_handler():\n    return 'crème brûlée'\n")
    cfg = load_config(workspace=ws, overrides={"embedder": {"name": "fake"}, "index_workers": 1})
    svc = CodeService(ws, cfg, tmp_path / "home")
    with svc._index_lock(None):
        svc.index_lexical()
    assert svc.store.get_meta("term_df") == "1"
    assert _kept(svc.store) == _vocab(svc.store)
    (ws / "pkg1" / "mod1.py").write_text("def brand_new_name(crème):\n    return crème\n")
    with svc._index_lock(None):
        rep = svc.index_lexical()
    assert rep.indexed == 1
    assert _kept(svc.store) == _vocab(svc.store)
    vocab = _vocab(svc.store)
    assert svc.store.doc_freqs(["brand", "handler", "me"]) == {
        t: vocab[t] for t in ("brand", "handler", "me")}
    assert vocab["brand"] == 1
    svc.close()
