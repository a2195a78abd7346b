"""Cached single-term scores (stores/sqlite/impacts.py): a query summed from them ranks and scores
as one full FTS5 query does, before and after writes that touch or leave its terms, across
processes sharing the cache file, and with a damaged or foreign cache file."""

from __future__ import annotations

import random

import pytest

from dsh_recall.core.text import index_text
from dsh_recall.core.types import Chunk
from dsh_recall.rank.lexical import match_expression
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from dsh_recall.stores.sqlite import chunks as sq
from dsh_recall.stores.sqlite import impact_sum, impacts
from dsh_recall.stores.sqlite.chunks import SqliteChunkStore

WORDS = ["request", "session", "value", "data", "config", "item", "cookiejar", "backoff",
         "teardown", "blueprint", "rewrite", "monkeypatch", "tmpdir", "adapter", "redirect"]


def write(store: SqliteChunkStore, rng: random.Random, path: str, n_chunks: int = 3,
          extra: str = "") -> None:
    chunks = []
    for c in range(n_chunks):
        words = [rng.choice(WORDS[: rng.randint(3, len(WORDS))]) for _ in range(rng.randint(2, 50))]
        text = " ".join(words + ([extra] if extra else []))
        ch = Chunk(path, 1 + 10 * c, 9 + 10 * c, text, "python", ())
        chunks.append(IndexedChunk(ch, index_text(text), "", index_text(path.replace("/", " ")),
                                   text, f"{path}-{c}-{rng.random()}"))
    store.replace_file(FileRow(path, "/abs/" + path, "", f"h{rng.random()}", 1, 1, 1), chunks)


def make(tmp_path, n_files: int = 60, seed: int = 3) -> tuple[SqliteChunkStore, random.Random]:
    rng = random.Random(seed)
    store = SqliteChunkStore(tmp_path / "index.sqlite")
    for f in range(n_files):
        write(store, rng, f"pkg/m{f:03d}.py")
    return store, rng


QUERIES = [["request", "cookiejar"], ["session", "value", "data", "teardown"], ["blueprint"],
           WORDS, ["redirect", "adapter", "tmpdir"], ["nowhere", "item"]]


def close(got: list, full: list, rel: float) -> None:
    """Same rows (as a set when scores may drift) and scores within `rel`."""
    assert len(got) == len(full)
    if rel <= 1e-9:
        assert [i for i, _ in got] == [i for i, _ in full]
    want = dict(full)
    for i, s in got:
        assert s == pytest.approx(want.get(i, -1.0), rel=rel), i


def same_as_fts5(store: SqliteChunkStore, limit: int = 25, exact: bool = True,
                 warm: bool = True) -> int:
    """Every query through the cache equals the full FTS5 query; returns how many the cache
    answered (the rest fell back to FTS5). `warm`: bring every list up to date first."""
    if warm:
        store.warm_terms(WORDS)
    answered = 0
    for terms in QUERIES:
        for boost in (frozenset(), frozenset(terms[:1])):
            match = match_expression(terms, boost)
            full = store._bm25(match, limit, None)
            got = store._lexical_impacts(match, limit)
            if got is None:
                continue
            answered += 1
            if exact:
                assert [i for i, _ in got] == [i for i, _ in full], terms
            close(got, full, 1e-9 if exact else 2e-3)
    return answered


def test_sum_of_single_terms_equals_the_full_query(tmp_path):
    store, _ = make(tmp_path)
    assert same_as_fts5(store) == 2 * len(QUERIES)
    assert store.lexical(match_expression(["nowhere"]), 5) == []
    store.close()


def test_writes_invalidate_the_terms_they_touch(tmp_path, monkeypatch):
    """Edits, new files and deletions, with entries cached before each: every answer stays
    the full query's. No drift tolerance, so an entry is used only when exact."""
    monkeypatch.setattr(impacts, "AVGDL_TOLERANCE", 0.0)
    store, rng = make(tmp_path)
    same_as_fts5(store)
    for step in range(12):
        kind = step % 3
        if kind == 0:
            write(store, rng, f"pkg/m{rng.randrange(60):03d}.py")
        elif kind == 1:
            write(store, rng, f"new/n{step}.py", extra="cookiejar")
        else:
            store.delete_files([f"pkg/m{rng.randrange(60):03d}.py"])
        same_as_fts5(store)
    store.close()


def test_unrelated_writes_keep_entries_and_rescale_idf(tmp_path):
    """A write that leaves a term alone keeps its entry: the idf follows the new row count
    exactly, the average length within the tolerance."""
    store, rng = make(tmp_path)
    match = match_expression(["teardown", "cookiejar"])
    assert store.warm_terms(["teardown", "cookiejar"]) == 2
    before = store.impacts._mem["teardown"]
    for n in range(3):  # rows without either term
        text = " ".join(["zzz", "yyy"] * 15)[:-4]  # 29 tokens and the path's 1: the average
        ch = Chunk(f"o{n}.py", 1, 2, text, "python", ())
        store.replace_file(FileRow(f"o{n}.py", f"/abs/o{n}.py", "", f"o{n}", 1, 1, 1),
                           [IndexedChunk(ch, text, "", "o", text, f"o{n}")])
    assert store._averages()[0] == before.nrow + 3
    stats = store._term_stats(["teardown"])
    assert store.impacts._mem["teardown"].valid(stats["teardown"][1], stats["teardown"][0],
                                                store._averages()[1], impacts.AVGDL_TOLERANCE)
    got = store._lexical_impacts(match, 10)
    assert store.impacts._mem["teardown"] is before  # not computed again
    close(got, store._bm25(match, 10, None), 2e-3)
    store.close()


def test_a_second_process_reads_the_cache_file(tmp_path, monkeypatch):
    store, _ = make(tmp_path)
    same_as_fts5(store)
    store.close()
    other = SqliteChunkStore(tmp_path / "index.sqlite")

    def refuse(*a, **k):
        raise AssertionError("computed again although the cache file holds it")

    monkeypatch.setattr(other, "_compute_impact", refuse)
    assert same_as_fts5(other) == 2 * len(QUERIES)
    other.close()


def test_an_index_made_anew_does_not_reuse_old_entries(tmp_path):
    """Generations count from 1 again in a new index at the same path: its own id tells
    the cache file's entries are another index's."""
    store, _ = make(tmp_path, seed=3)
    same_as_fts5(store)
    store.close()
    for p in tmp_path.glob("index.sqlite*"):
        if "impacts" not in p.name:
            p.unlink()
    again, _ = make(tmp_path, seed=4)
    assert again.impacts_path.exists()
    assert same_as_fts5(again) == 2 * len(QUERIES)
    again.close()


@pytest.mark.parametrize("content", [b"not a database at all" * 100, None])
def test_a_damaged_or_foreign_cache_file_is_not_fatal(tmp_path, content):
    import sqlite3

    store, _ = make(tmp_path)
    path = store.impacts_path
    if content is None:  # someone else's SQLite file
        c = sqlite3.connect(path)
        c.execute("PRAGMA application_id = 12345")
        c.execute("CREATE TABLE mine (x)")
        c.commit()
        c.close()
    else:
        path.write_bytes(content)
    assert same_as_fts5(store) == 2 * len(QUERIES)
    if content is None:  # left as it was
        c = sqlite3.connect(path)
        assert c.execute("SELECT name FROM sqlite_master").fetchall() == [("mine",)]
        c.close()
    store.close()


def test_long_lived_process_computes_common_terms_behind_the_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(sq, "IMPACT_SYNC_ROWS", 0)
    store, _ = make(tmp_path)
    match = match_expression(["session", "value", "cookiejar"])
    assert store._lexical_impacts(match, 10) is None  # a one-shot process: FTS5 answers
    assert not store.impacts._queue and store.impacts._warmer is None
    store.warm_behind = True
    close(store.lexical(match, 10), store._bm25(match, 10, None), 1e-9)  # FTS5 answers now
    store.impacts.wait_idle()
    got = store._lexical_impacts(match, 10)
    assert got is not None
    close(got, store._bm25(match, 10, None), 1e-9)
    store.close()


def test_terms_get_the_generation_of_the_write_that_changed_them(tmp_path):
    store, rng = make(tmp_path, n_files=5)
    gen = int(store.get_meta("generation"))
    before = store._term_stats(["cookiejar", "request"])
    ch = Chunk("x.py", 1, 1, "cookiejar", "python", ())
    store.replace_file(FileRow("x.py", "/abs/x.py", "", "hx", 1, 1, 1),
                       [IndexedChunk(ch, "cookiejar", "", "x py", "cookiejar", "hx")])
    after = store._term_stats(["cookiejar", "request"])
    assert after["cookiejar"][1] == gen + 1 == int(store.get_meta("generation"))
    assert after["request"] == before["request"]
    store.close()


def test_phrases_and_non_ascii_terms_are_left_to_fts5(tmp_path):
    store, _ = make(tmp_path, n_files=5)
    assert store._lexical_impacts('"request session"', 5) is None
    assert store._lexical_impacts('"naïve" OR "request"', 5) is None
    store.close()


def test_an_edit_that_keeps_row_count_and_length_still_invalidates(tmp_path):
    """Same rows holding the term, same total length, a different count in one row: only
    the term's generation tells the cached list is stale."""
    store = SqliteChunkStore(tmp_path / "index.sqlite")

    def put(path: str, text: str) -> None:
        ch = Chunk(path, 1, 1, text, "python", ())
        store.replace_file(FileRow(path, "/abs/" + path, "", text, 1, 1, 1),
                           [IndexedChunk(ch, text, "", "", text, text)])

    for n in range(30):
        put(f"f{n}.py", f"filler{n} other words here")
    put("a.py", "cookiejar pad pad pad")
    put("b.py", "cookiejar cookiejar pad pad")
    match = match_expression(["cookiejar"])
    store.warm_terms(["cookiejar"])
    first = store.lexical(match, 5)
    assert [i for i, _ in first][0] == store._bm25(match, 1, None)[0][0]
    put("a.py", "cookiejar cookiejar cookiejar pad")  # now a.py leads
    store.warm_terms(["cookiejar"])
    close(store._lexical_impacts(match, 5), store._bm25(match, 5, None), 1e-9)
    store.close()


def test_edits_patch_lists_from_the_change_log(tmp_path, monkeypatch):
    """Rows of one length, so the average never moves and a patched list must equal FTS5
    exactly: edits, new files and deletions patch every stale list (no list is scored
    anew), and every query still ranks and scores as the full query."""
    monkeypatch.setattr(impacts, "AVGDL_TOLERANCE", 0.0)
    rng = random.Random(11)
    store = SqliteChunkStore(tmp_path / "index.sqlite")

    def put(path: str) -> None:
        chunks = []
        for c in range(rng.randint(1, 4)):
            text = " ".join(rng.choice(WORDS[: rng.randint(4, len(WORDS))]) for _ in range(20))
            ch = Chunk(path, 1 + c, 1 + c, text, "python", ())
            chunks.append(IndexedChunk(ch, text, "", "p", text, f"{path}{c}{rng.random()}"))
        store.replace_file(FileRow(path, "/abs/" + path, "", str(rng.random()), 1, 1, 1), chunks)

    for f in range(40):
        put(f"m{f}.py")
    assert store.warm_terms(WORDS) == len(WORDS)
    computed = []
    real = impacts.compute
    monkeypatch.setattr(impacts, "compute", lambda *a, **k: computed.append(a[1]) or real(*a, **k))
    for step in range(15):
        kind = step % 3
        if kind == 0:
            put(f"m{rng.randrange(40)}.py")
        elif kind == 1:
            put(f"n{step}.py")
        else:
            store.delete_files([f"m{rng.randrange(40)}.py"])
        stats = store._term_stats(WORDS)
        assert store.warm_terms(WORDS) == len(stats)
        assert computed == [], "a stale list was scored anew instead of patched"
        assert same_as_fts5(store, warm=False) == 2 * len(QUERIES)
    store.close()


def test_a_log_that_does_not_reach_back_means_scoring_anew(tmp_path, monkeypatch):
    """A list older than the log (a bulk index suspended it) is not patched."""
    store, rng = make(tmp_path)
    store.warm_terms(WORDS)
    store.suspend_term_df()
    write(store, rng, "pkg/m001.py", extra="cookiejar")
    store.ensure_term_df()
    computed = []
    real = impacts.compute
    monkeypatch.setattr(impacts, "compute", lambda *a, **k: computed.append(a[1]) or real(*a, **k))
    assert same_as_fts5(store) == 2 * len(QUERIES)
    assert "cookiejar" in computed
    store.close()


def test_warm_common_brings_the_commonest_terms_up_to_date(tmp_path, monkeypatch):
    """After a large index run the indexer computes the lists of terms too common for a
    one-shot CLI to compute itself, commonest first, leaving out the terms it is told to."""
    store, _ = make(tmp_path)
    dfs = store.doc_freqs(WORDS)
    cut = sorted(dfs.values())[len(dfs) // 2]  # "common": above the median row count
    monkeypatch.setattr(sq, "IMPACT_SYNC_ROWS", cut)
    common = {t for t, df in dfs.items() if df > cut}
    rare = set(dfs) - common
    assert common and rare  # the corpus has both, or the test proves nothing
    # Before: a one-term query on a common term is answered by FTS5 (list too dear).
    probe = max(common - {"data"}, key=dfs.get)
    assert store._lexical_impacts(match_expression([probe]), 10) is None
    assert store.warm_common(0.0) == 0  # no budget: nothing computed
    assert "data" in common
    warmed = store.warm_common(30.0, frozenset({"data"}))
    found, stale, missing = store.impacts.lookup(store._term_stats(list(dfs)), store._averages()[1])
    assert set(found) == common - {"data"} and not stale
    assert "data" in missing and rare <= set(missing)
    # Path tokens ("pkg", "py") are common terms too; each list warmed is a common term's.
    everything = [t for (t,) in store.conn.execute("SELECT term FROM term_df")]
    kept, _, _ = store.impacts.lookup(store._term_stats(everything), store._averages()[1])
    assert warmed == len(kept) >= len(common) - 1
    assert all(store.doc_freqs([t])[t] > cut for t in kept)
    # After: the same query is summed from the list, and equals FTS5's answer.
    got = store._lexical_impacts(match_expression([probe]), 10)
    assert got is not None
    close(got, store._bm25(match_expression([probe]), 10, None), 1e-9)
    assert store.warm_common(30.0, frozenset({"data"})) == 0  # all current: nothing to do


def _brute(entries, nrow, limit):
    from dsh_recall.stores import fts5
    total: dict[int, float] = {}
    for e, w in entries:
        scale = w * fts5.idf(nrow, e.n)
        for i, x in zip(e.ids.tolist(), e.weights.tolist()):
            total[i] = total.get(i, 0.0) + x * scale
    return sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


@pytest.mark.parametrize("seed", range(12))
def test_maxscore_sum_is_the_full_sum(seed, monkeypatch):
    """top() skips summing the lists that cannot change the answer (MaxScore): its answer is
    the full sum's, ties included, for rare and common lists, repeated phrases, tied rows."""
    import numpy as np
    monkeypatch.setattr(impact_sum, "PRUNE_MIN_ROWS", 0)  # small lists, pruned all the same
    rng = np.random.default_rng(seed)
    nrow = 20_000
    entries = []
    for t in range(int(rng.integers(4, 30))):
        df = int(rng.choice([5, 40, 300, 3000, 9000]))
        ids = np.sort(rng.choice(nrow, size=df, replace=False)).astype(np.int32)
        weights = np.round(rng.uniform(0.2, 2.2, size=df), 1 if seed % 3 == 0 else 12)
        e = impacts.Entry(0, nrow, 10.0, ids, weights)
        entries.append((e, float(rng.choice([1.0, 1.0, 2.0]))))
    for limit in (1, 10, 200):
        got = impacts.top(entries, nrow, limit)
        want = _brute(entries, nrow, limit)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert all(abs(a - b) <= 1e-9 * max(1.0, abs(b)) for (_, a), (_, b) in zip(got, want))


def test_maxscore_prunes_common_lists(monkeypatch):
    """With a few rare lists and many common ones, the common ones are looked up for the
    candidates only (fewer rows summed than they hold)."""
    import numpy as np
    rng = np.random.default_rng(1)
    nrow = 50_000
    entries = [(impacts.Entry(0, nrow, 10.0, np.sort(rng.choice(nrow, 50, replace=False)).astype(np.int32),
                              rng.uniform(1.5, 2.2, 50)), 1.0) for _ in range(6)]
    entries += [(impacts.Entry(0, nrow, 10.0, np.sort(rng.choice(nrow, 20_000, replace=False)).astype(np.int32),
                               rng.uniform(0.1, 0.5, 20_000)), 1.0) for _ in range(3)]
    monkeypatch.setattr(impact_sum, "PRUNE_MIN_ROWS", 0)
    searched = []
    real = np.searchsorted
    monkeypatch.setattr(impacts.np, "searchsorted", lambda a, v, **kw: searched.append(len(a)) or real(a, v, **kw))
    got = impacts.top(entries, nrow, 10)
    assert searched, "no list was pruned"
    assert [i for i, _ in got] == [i for i, _ in _brute(entries, nrow, 10)]


def test_memory_budget_grows_with_the_index_and_evicts_past_it():
    import numpy as np
    cache = impacts.ImpactCache(None)
    cache.fit(1000)
    assert cache.budget == impacts.MEMORY_POSTINGS
    cache.fit(1_000_000)
    assert cache.budget == impacts.MEMORY_PER_CHUNK * 1_000_000
    cache.budget = 250  # rows
    for t in range(5):
        ids = np.arange(100, dtype=np.int32)
        cache.store([(f"t{t}", impacts.Entry(0, 100, 1.0, ids, np.ones(100)))])
    assert cache.peek("t4") is not None and cache.peek("t3") is not None
    assert cache.peek("t0") is None  # least recently used, past the budget


def test_the_warmer_starts_no_term_while_a_query_answers(tmp_path, monkeypatch):
    """A list computed behind the answer takes a core from the query it spares (two cores):
    the warmer waits while a query is in `foreground`, then goes on, and a query that never
    ends does not stop it for longer than WARM_YIELD_S per term."""
    import threading
    import time

    store, _ = make(tmp_path)
    cache = store.impacts
    done: list[str] = []

    def compute_one(conn, term):
        done.append(term)
        return None

    gate = cache.foreground()
    gate.__enter__()
    cache.warm(["request", "session"], lambda: store._warm_conn(), compute_one)
    time.sleep(0.3)
    assert done == []  # held back while the query answers
    gate.__exit__(None, None, None)
    cache.wait_idle(10)
    assert done == ["request", "session"]

    monkeypatch.setattr(impacts, "WARM_YIELD_S", 0.05)
    done.clear()
    stuck = cache.foreground()
    stuck.__enter__()
    t = threading.Thread(target=cache.warm, args=(["data"], lambda: store._warm_conn(), compute_one))
    t.start()
    t.join()
    cache.wait_idle(10)
    assert done == ["data"]  # it yields for a while, not for ever
    stuck.__exit__(None, None, None)
    store.close()


def test_the_held_sum_array_is_zero_again_after_every_sum():
    """top() sums into an array the thread keeps from one query to the next: whatever a sum
    touched (few rows, or most of them; pruned or not), the next sum starts from zeros."""
    import numpy as np
    rng = np.random.default_rng(3)
    nrow = 40_000
    def entries(df, count):
        return [(impacts.Entry(0, nrow, 10.0, np.sort(rng.choice(nrow, df, replace=False)).astype(np.int32),
                               rng.uniform(0.1, 2.0, df)), 1.0) for _ in range(count)]
    for case in (entries(30_000, 5), entries(20, 3), entries(3000, 8), entries(5, 2)):
        assert [i for i, _ in impacts.top(case, nrow, 10)] == [i for i, _ in _brute(case, nrow, 10)]
        held = impact_sum._held.buf
        assert not held.any()
