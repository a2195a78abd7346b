"""Pure ranking pieces: RRF, excerpt bounding, safe FTS5 queries, BM25 order vs a reference."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.core.text import code_tokens, index_text
from dsh_recall.rank.excerpt import bound_excerpt
from dsh_recall.rank.fuse import rrf
from dsh_recall.rank.lexical import match_expression, query_terms

rankings_st = st.dictionaries(
    st.sampled_from(["lexical", "vector", "fuzzy"]),
    st.lists(st.integers(0, 30), max_size=25), min_size=1)


def reference_rrf(rankings, k, weights):
    scores = {}
    for name, items in rankings.items():
        seen = []
        for i in items:
            if i not in seen:
                seen.append(i)
        for r, i in enumerate(seen, 1):
            scores[i] = scores.get(i, 0.0) + weights.get(name, 1.0) / (k + r)
    return scores


@given(rankings_st, st.integers(1, 100))
def test_rrf_matches_reference_and_is_sorted(rankings, k):
    fused = rrf(rankings, k=k)
    ref = reference_rrf(rankings, k, {})
    assert {i for i, _, _ in fused} == set(ref)
    for i, s, ranks in fused:
        assert abs(s - ref[i]) < 1e-12
        assert all(r >= 1 for r in ranks.values())
    scores = [s for _, s, _ in fused]
    assert scores == sorted(scores, reverse=True)


@given(rankings_st, st.integers(1, 100))
def test_rrf_ignores_ranker_order(rankings, k):
    flipped = dict(reversed(list(rankings.items())))
    assert [i for i, _, _ in rrf(rankings, k=k)] == [i for i, _, _ in rrf(flipped, k=k)]


@given(st.lists(st.integers(0, 50), min_size=1, max_size=20, unique=True), st.integers(1, 100))
def test_unanimous_first_wins(items, k):
    rankings = {"a": items, "b": list(items), "c": items[:1] + sorted(items[1:])}
    assert rrf(rankings, k=k)[0][0] == items[0]


def test_zero_weight_layer_only_breaks_ties():
    fused = rrf({"lexical": [1, 2, 3], "vector": [3, 2, 1]}, k=10, weights={"vector": 0.0})
    assert [i for i, _, _ in fused] == [1, 2, 3]


lines_st = st.lists(st.text(alphabet="abc xyz_()\t", max_size=30), min_size=1, max_size=120)


@given(lines_st, st.integers(1, 50), st.integers(1, 40), st.lists(st.sampled_from(["abc", "xyz"]), max_size=2))
def test_excerpt_is_a_bounded_contiguous_slice(lines, start, cap, terms):
    text = "\n".join(lines)
    excerpt, s, e = bound_excerpt(text, start, terms, cap)
    assert e - s + 1 == min(cap, len(lines))
    assert excerpt == "\n".join(lines[s - start: e - start + 1])


def test_excerpt_window_follows_the_query():
    lines = [f"filler line {i}" for i in range(100)]
    lines[70] = "def needle_handler(): pass"
    excerpt, s, e = bound_excerpt("\n".join(lines), 1, ["needle"], 10)
    assert "needle_handler" in excerpt and s <= 71 <= e


def _fts():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\")")
    for doc in ("parse the http response", "retry policy for http", "foo and bar or baz"):
        conn.execute("INSERT INTO t(body) VALUES (?)", (index_text(doc),))
    return conn


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_any_text_is_a_valid_match_expression(text):
    terms = query_terms(text)
    if not terms:
        return
    conn = _fts()
    conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (match_expression(terms),)).fetchall()


def test_operator_words_are_plain_terms():
    conn = _fts()
    q = match_expression(query_terms('"foo AND (bar OR'))
    rows = conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (q,)).fetchall()
    assert rows == [(3,)]


def test_bm25_order_matches_reference_implementation():
    import bm25s

    corpus = [
        "the session manager refreshes the token when it expires",
        "token bucket rate limiter for the http client",
        "parse configuration files and validate every key",
        "refresh the cache after the token rotates and the session ends",
        "a tokenizer splits text into tokens",
        "session cookies and session storage for the web app",
    ]
    queries = ["session token", "refresh session", "http client limiter", "validate configuration"]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    for doc in corpus:
        conn.execute("INSERT INTO t(body) VALUES (?)", (" ".join(code_tokens(doc)),))
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index([code_tokens(d) for d in corpus], show_progress=False)
    for q in queries:
        terms = code_tokens(q)
        ours = [r[0] - 1 for r in conn.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid", (match_expression(terms),))]
        docs, scores = retriever.retrieve([terms], k=len(corpus), show_progress=False)
        ref = [int(d) for d, s in zip(docs[0], scores[0]) if s > 0]
        assert ours[:2] == ref[:2], q


def test_identifiers_in_the_query_count_twice():
    from dsh_recall.rank.query import Query

    ids = Query.parse("Session.resolve_redirects copies; parseHTTPResponse fails in MyClass").identifiers
    assert {"session", "resolve_redirects", "parsehttpresponse", "myclass"} <= ids
    assert "copies" not in ids and "fails" not in ids
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize = \"unicode61 tokenchars '_'\")")
    conn.execute("INSERT INTO t(body) VALUES (?)", (index_text("handle the redirect request twice request request"),))
    conn.execute("INSERT INTO t(body) VALUES (?)", (index_text("def resolve_redirects(self): pass"),))
    terms = ["request", "resolve_redirects"]
    plain = conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (match_expression(terms),)).fetchall()
    boosted = conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)",
                           (match_expression(terms, {"resolve_redirects"}),)).fetchall()
    assert plain[0] == (1,) and boosted[0] == (2,)
