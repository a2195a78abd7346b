"""Turn any user text into a safe FTS5 query over code tokens.

Every term is quoted, so quotes, operators, parentheses or a 100 KB paste are just words.
Long queries (an issue text, a stack trace) keep their most informative terms, chosen by
document frequency in the index, so one call stays fast and focused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from ..core.text import code_tokens, fts_quote
from .query import MAX_QUERY_CHARS, STOPWORDS, search_terms

__all__ = ["MAX_QUERY_CHARS", "STOPWORDS", "match_expression", "promote_limit", "query_terms",
           "select_terms"]

MAX_TERMS = 48
PROMOTE_MIN = 50  # select_terms: a tier lifts a term in this many chunks whatever the share


def promote_limit(total_docs: int, share: float) -> int:
    """The most chunks a term may be in for a query tier to lift it (select_terms)."""
    return max(PROMOTE_MIN, int(total_docs * share))


def query_terms(text: str) -> list[str]:
    """Distinct code tokens of the query's first `MAX_QUERY_CHARS` chars, in order, without
    stopwords, single ASCII characters and a lone digit of any script (`rank.query`): for a
    caller with the text alone (a code or notes search reads `Query.terms`)."""
    return list(search_terms(code_tokens(text[:MAX_QUERY_CHARS])))


def select_terms(
    terms: Sequence[str],
    doc_freq: Callable[[Sequence[str]], Mapping[str, int]],
    total_docs: int,
    max_terms: int = MAX_TERMS,
    tiers: Mapping[str, int] | None = None,
    promote_share: float = 1.0,
) -> list[str]:
    """Keep terms the index knows, rarest first when there are too many.

    `tiers` (focus_tiers): when there are too many, a term of a lower tier goes before any
    of a higher one (the title's words before the prose's before a pasted log's), rarest
    first within a tier; a term without a tier, or in more than `promote_share` of the
    chunks, goes last."""
    if not terms:
        return []
    df = doc_freq(terms)
    known = [t for t in terms if df.get(t, 0) > 0]
    if len(known) <= max_terms:
        return known
    # Prefer rare terms, but drop those in more than half the corpus: they rank nothing.
    last = max(tiers.values(), default=0) + 1 if tiers else 0
    order = {t: i for i, t in enumerate(terms)}
    # A common word ("class", "error") ranks little in BM25 and costs the most to score: its
    # rows are the query's cost.
    promote = promote_limit(total_docs, promote_share)

    def tier(t: str) -> int:
        return (tiers.get(t, last) if df[t] <= promote else last) if tiers else 0

    ranked = sorted(known, key=lambda t: (tier(t), df[t], order[t]))
    limit = max(1, total_docs // 2)
    chosen = [t for t in ranked if df[t] <= limit][:max_terms]
    return chosen or ranked[:max_terms]


def match_expression(terms: Sequence[str], boost: frozenset[str] | set[str] = frozenset()) -> str:
    """An FTS5 MATCH string: OR of quoted terms (BM25 rewards chunks matching more of them).

    A boosted term is repeated: FTS5's bm25() sums over the query's phrases, so it counts
    twice."""
    return " OR ".join(fts_quote(t) for term in terms for t in [term] * (2 if term in boost else 1))


def idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))
