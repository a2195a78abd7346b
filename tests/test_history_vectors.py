"""History vectors: keyed by the text actually embedded (a block with its context)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_recall.chunkers.transcript import CONTEXT_CHARS, embed_text, text_hash
from dsh_recall.core.config import load_config
from dsh_recall.services import history as svc
from dsh_recall.stores.sqlite.history import HistoryStore


@pytest.fixture
def cfg():
    return load_config(overrides={"embedder": {"name": "fake"}})


def _import(tmp_path: Path, cfg, rows: list[dict], name: str = "h.jsonl") -> None:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    svc.import_paths([str(path)], fmt="generic", cfg=cfg, embed=True)


ROWS = [
    {"session": "a", "seq": 0, "role": "user", "text": "what did you paint last week?", "workspace": "/p"},
    {"session": "a", "seq": 1, "role": "assistant", "text": "a sunrise over the lake"},
    {"session": "a", "seq": 2, "role": "user", "text": "x" * 1000},
    {"session": "a", "seq": 3, "role": "assistant", "text": "nice"},
]


def test_embed_text_puts_own_text_first_and_bounds_the_context():
    assert embed_text("own", None) == "own" and embed_text("own", "") == "own"
    out = embed_text("own", "p" * 5 + "q" * CONTEXT_CHARS)
    assert out.startswith("own\n") and out.endswith("q" * CONTEXT_CHARS) and "p" not in out


def test_vectors_are_keyed_by_the_embedded_text_with_its_context(tmp_path, cfg):
    _import(tmp_path, cfg, ROWS)
    store = svc.open_store()
    try:
        rows = store.conn.execute("SELECT text, embed_hash FROM blocks WHERE session = 'a' ORDER BY ord").fetchall()
        prev = None
        for text, h in rows:
            assert h == text_hash(embed_text(text, prev)) != text_hash(text) or prev is None
            prev = text
        assert rows[0][1] == text_hash(rows[0][0])  # the first block has no context
        assert store.embedded_count(["a"]) == store.block_count(["a"]) == 4
        # The same text after a different turn is a different vector, never a shared one.
        _import(tmp_path, cfg, [{"session": "b", "seq": 0, "role": "user", "text": "hello", "workspace": "/p"},
                                {"session": "b", "seq": 1, "role": "assistant", "text": "nice"}], "b.jsonl")
        keys = {r[0] for r in store.conn.execute("SELECT embed_hash FROM blocks WHERE text = 'nice'")}
        assert len(keys) == 2 and store.stats()["vectors"] == 6
    finally:
        store.close()


def test_an_old_embed_text_version_discards_vectors_and_rehashes(tmp_path, cfg):
    _import(tmp_path, cfg, ROWS)
    store = svc.open_store()
    try:
        fp = store.get_meta("fingerprint")
        store.set_meta("fingerprint", fp.rsplit("|", 1)[0])  # as written before embed texts had a version
        sem = svc.SemanticLayer(store, cfg)
        assert store.stats()["vectors"] == 0 and store.embedded_count() == 0
        assert store.conn.execute("SELECT count(*) FROM blocks WHERE embed_hash IS NOT NULL").fetchone()[0] == 0
        assert sem.fill(None, None) == 4 and store.embedded_count() == 4
        assert store.get_meta("fingerprint") == fp
    finally:
        store.close()


def test_a_database_without_embed_hash_is_migrated(tmp_path, cfg):
    _import(tmp_path, cfg, ROWS)
    store = svc.open_store()
    store.conn.execute("DROP INDEX blocks_embed")
    store.conn.execute("DROP INDEX blocks_pending")  # both came with embed_hash
    store.conn.execute("ALTER TABLE blocks DROP COLUMN embed_hash")
    store.set_meta("schema", "1")  # as such a file recorded it (stores/sqlite/migrations.py)
    path = store.path
    store.close()
    store = HistoryStore(path)
    try:
        assert store.embedded_count() == 0  # old vectors are not trusted without their key
        ans = svc.search("sunrise", all_sessions=True, detail=True, layers=["semantic"], cfg=cfg, store=store)
        assert "semantic" in ans["layers"] and store.embedded_count() == 4
    finally:
        store.close()


def test_fuse_scores_keeps_a_layers_margin_and_ranks():
    from dsh_recall.rank.history_query import fuse_scores

    # Literal finds 1 far ahead of 2; semantic slightly prefers 2. By score, 1 keeps its
    # lead (reciprocal rank would tie them).
    out = fuse_scores({"literal": [(1, 10.0), (2, 1.0)], "semantic": [(2, 0.3), (1, 0.28)]},
                      {"literal": 1.0, "semantic": 1.0})
    assert [i for i, _, _ in out] == [1, 2]
    assert out[0][2] == {"literal": 1, "semantic": 2} and out[0][1] == pytest.approx(1 + 0.28 / 0.3)
    # A zero-weight or all-zero layer adds nothing but still reports its ranks.
    out = fuse_scores({"a": [(5, 2.0)], "b": [(6, 0.0), (5, 0.0)]}, {"a": 1.0})
    assert [i for i, _, _ in out] == [5, 6] and out[1][1] == 0.0 and out[0][2] == {"a": 1, "b": 2}
