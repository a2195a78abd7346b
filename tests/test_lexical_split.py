"""The split lexical query (stores/sqlite/chunks.py split_match) returns exactly what one full FTS5
query returns: same chunks, same order, same scores, on a corpus where common terms sit in
most chunks and rare ones in a few, for queries that take the split and ones that do not."""

from __future__ import annotations

import random

import pytest

from dsh_recall.core.text import index_text
from dsh_recall.core.types import Chunk
from dsh_recall.rank.lexical import match_expression
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from dsh_recall.stores.sqlite.chunks import SqliteChunkStore, split_match

COMMON = ["request", "session", "value", "data", "config", "item"]
RARE = ["cookiejar", "backoff", "teardown", "blueprint", "rewrite", "monkeypatch", "tmpdir",
        "adapter", "redirect", "fixture"]


def make_store(tmp_path, n_files=120, seed=7):
    rng = random.Random(seed)
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    for f in range(n_files):
        path = f"pkg/mod{f:03d}.py"
        chunks = []
        for c in range(4):
            kind = rng.random()
            if kind < 0.1:  # short and dense in common terms: may outscore a rare hit
                words = [rng.choice(COMMON) for _ in range(rng.randint(3, 8))]
            elif kind < 0.15:  # short, a rare term and no common one
                words = [rng.choice(RARE)] * rng.randint(1, 3) + ["filler"]
            else:
                words = [rng.choice(COMMON) for _ in range(rng.randint(5, 60))] if kind > 0.2 else []
                if rng.random() < 0.15:
                    words += [rng.choice(RARE)] * rng.randint(1, 4)
                words += [f"name{f}_{c}", "filler"] * rng.randint(1, 20)
            rng.shuffle(words)
            text = " ".join(words)
            ch = Chunk(path, 1 + 10 * c, 5 + 10 * c, text, "python", ())
            chunks.append(IndexedChunk(ch, index_text(text), "", index_text(path.replace("/", " ")),
                                       text, f"h{f}-{c}"))
        store.replace_file(FileRow(path, "/abs/" + path, "", f"hash{f}", 1, 1, 1), chunks)
    return store


QUERIES = [
    ["cookiejar", "request"], ["backoff", "session", "value"], ["teardown", "data", "config", "item"],
    ["blueprint", "rewrite", "request", "session"], ["fixture", "filler"], ["request", "session"],
    ["monkeypatch"], ["tmpdir", "adapter", "redirect", "value", "data", "config", "item", "request"],
    ["unknownword", "request"], ["cookiejar", "cookiejar", "request"],
]


@pytest.mark.parametrize("impacts", [False, True])
@pytest.mark.parametrize("limit", [5, 20, 200])
def test_split_equals_full_query(tmp_path, limit, impacts):
    """Both ways a store answers without running the full query: the split, and the sum
    of cached single-term scores (stores/sqlite/impacts.py)."""
    store = make_store(tmp_path)
    store.use_impacts = impacts
    took_split = 0
    for terms in QUERIES:
        for boost in (frozenset(), frozenset(terms[:1])):
            match = match_expression(terms, boost)
            full = store._bm25(match, limit, None)
            got = store.lexical(match, limit)
            assert [i for i, _ in got] == [i for i, _ in full], (terms, boost)
            assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in full]
            scoped = store.lexical(match, limit, "pkg")
            assert [i for i, _ in scoped] == [i for i, _ in store._bm25(match, limit, "pkg")]
            took_split += split_match(match, store.doc_freqs, store.chunk_count) is not None
    assert took_split >= 6  # the corpus does exercise the split, not only the fallback
    store.close()


def test_split_plan_bounds():
    df = {"rare": 3, "common": 900, "other": 800}
    plan = split_match('"rare" OR "common" OR "other"', lambda ts: {t: df[t] for t in ts if t in df},
                       lambda: 1000)
    assert plan is not None
    rare, common, bound = plan
    assert rare == '"rare"' and common == '"common" OR "other"'
    assert bound > 0
    # one phrase, a multi-token phrase, or too many phrases: the query runs whole
    assert split_match('"rare"', lambda ts: df, lambda: 1000) is None
    assert split_match('"rare" OR "a.b"', lambda ts: df, lambda: 1000) is None
    many = " OR ".join(f'"t{i}"' for i in range(40))
    assert split_match(many, lambda ts: {}, lambda: 1000) is None


def test_doc_freq_cache_follows_index_changes(tmp_path):
    store = make_store(tmp_path, n_files=10)
    before = store.doc_freqs(["cookiejar", "filler"])
    assert before["filler"] == store._vocab_doc_freqs(["filler"])["filler"]
    path = "pkg/extra.py"
    ch = Chunk(path, 1, 1, "filler filler", "python", ())
    store.replace_file(FileRow(path, "/abs/" + path, "", "hx", 1, 1, 1),
                       [IndexedChunk(ch, index_text(ch.text), "", "", ch.text, "hx")])
    assert store.doc_freqs(["filler"])["filler"] == before["filler"] + 1
    assert store.chunk_count() == 41
    store.close()


def test_common_only_chunk_that_outscores_rare_hits_is_kept(tmp_path):
    """A short chunk dense in common terms outranks long chunks holding the rare term: the
    split must notice (its bound) and answer with the full query's order."""
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    texts = ["alpha beta alpha beta alpha beta"]
    texts += [" ".join(["zebra"] + ["pad"] * 99) for _ in range(3)]
    texts += [" ".join(["alpha", "beta"] + ["pad"] * 40) for _ in range(30)]
    texts += [" ".join(["pad"] * 40) for _ in range(66)]
    for n, text in enumerate(texts):
        path = f"f{n:03d}.py"
        ch = Chunk(path, 1, 1, text, "python", ())
        store.replace_file(FileRow(path, "/abs/" + path, "", f"h{n}", 1, 1, 1),
                           [IndexedChunk(ch, index_text(text), "", "", text, f"h{n}")])
    store.use_impacts = False  # the split itself is under test
    match = match_expression(["zebra", "alpha", "beta"])
    assert split_match(match, store.doc_freqs, store.chunk_count) is not None
    full = store._bm25(match, 3, None)
    assert full[0][0] == 1  # the dense common-only chunk leads
    assert store.lexical(match, 3) == full
    store.close()


def test_opening_an_index_for_search_needs_no_write_lock(tmp_path):
    """A search opens the index (and the vector thread opens it again) while an indexer may
    hold the write lock: opening an existing index must not wait for it."""
    import sqlite3
    import threading

    make_store(tmp_path, n_files=3).close()
    writer = sqlite3.connect(str(tmp_path / "index.sqlite"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    opened: list = []

    def open_it():
        s = SqliteChunkStore(tmp_path / "index.sqlite")
        opened.append(s.lexical('"filler"', 3))
        s.close()

    t = threading.Thread(target=open_it, daemon=True)
    t.start()
    t.join(20)  # it would block for the 30 s busy timeout, then fail
    writer.execute("ROLLBACK")
    writer.close()
    assert opened and len(opened[0]) == 3


def test_long_query_is_answered_from_its_rarest_rows(tmp_path, monkeypatch):
    """More than 10 terms: no bound proves the split, so past LONG_MIN_CHUNKS the answer is
    the rows holding the rarest terms, each scored exactly as the full query scores it."""
    from dsh_recall.stores.sqlite import split

    store = make_store(tmp_path)  # 480 chunks
    store.use_impacts = False  # the long-query path itself is under test
    terms = RARE + COMMON  # 16 terms
    match = match_expression(terms)
    assert split_match(match, store.doc_freqs, store.chunk_count) is None  # a small index: exact
    monkeypatch.setattr(split, "LONG_MIN_CHUNKS", 100)
    monkeypatch.setattr(split, "LONG_RARE_ROWS", 60)
    monkeypatch.setattr(split, "LONG_RARE_SHARE", 0.0)
    rare, common, bound = split_match(match, store.doc_freqs, store.chunk_count)
    assert bound is None and rare and common
    df = store.doc_freqs(terms)
    rare_terms = [t for t in terms if f'"{t}"' in rare.split(" OR ")]
    assert sum(df.get(t, 0) for t in rare_terms) <= 60 or len(rare_terms) == 1
    full = dict(store._bm25(match, 10_000, None))
    holders = {i for i, _ in store._bm25(rare, 10_000, None)}
    got = store.lexical(match, 5)
    assert len(got) == 5 and {i for i, _ in got} <= holders
    for i, s in got:  # scored on every term, as the full query scores the row
        assert round(s, 9) == round(full[i], 9)
    best_holders = sorted(holders, key=lambda i: (-full[i], i))[:5]
    assert [i for i, _ in got] == best_holders
    # Fewer rare rows than asked for: the full query answers.
    assert store.lexical(match, 400) == store._bm25(match, 400, None)
    store.close()


@pytest.mark.parametrize("seed", range(6))
def test_rare_rows_rank_as_the_full_query_ranks_them(tmp_path, seed):
    """split.rare_rows reads the rows holding only rare terms from the rare terms alone (their
    best `limit`), not from a NOT query over the common ones: the chunks holding a rare
    term, ranked and scored as the full query ranks them, at every limit, on corpora where
    many such chunks also hold common terms."""
    from dsh_recall.stores.sqlite import split

    store = make_store(tmp_path, n_files=80, seed=seed)
    store.use_impacts = False
    rng = random.Random(seed)
    for _ in range(8):
        terms = rng.sample(RARE, rng.randint(1, 3)) + rng.sample(COMMON, rng.randint(1, 4))
        rare = match_expression([t for t in terms if t in RARE])
        common = match_expression([t for t in terms if t in COMMON])
        full = dict(store._bm25(match_expression(terms), 100_000, None))
        holders = {i for i, _ in store._bm25(rare, 100_000, None)}
        for limit in (1, 2, 3, 5, 10, 40):
            got = split.rare_rows(store._bm25, rare, common, limit, None)
            want = sorted(holders, key=lambda i: (-full[i], i))[:limit]
            assert [i for i, _ in got] == want, (terms, limit)
            assert [round(s, 9) for _, s in got] == [round(full[i], 9) for i in want]
    store.close()
