"""The FTS5 query of a SQLite chunk store when no score lists answer (stores/sqlite/impacts.py):
MaxScore for FTS5, an OR query split into its rare phrases and its common ones, so that
bm25() is paid on the few rows holding a rare term instead of the many holding a common one.
`answer` runs it through the store's own statement (`bm25(match, limit, path_prefix)`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ...core.text import fts_quote
from .. import fts5
from .terms import ONE_TOKEN as _ONE_TOKEN

Hits = list[tuple[int, float]]
Bm25 = Callable[[str, int, "str | None"], Hits]

# FTS5's bm25 (fts5_aux.c; stores/fts5.py): a phrase adds
#   idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avglen))
# with f its column-weighted count in the row. That grows with f towards idf * (k1 + 1),
# the most one phrase can add to any row's score.
SPLIT_MIN_PHRASES = 2  # a one-term query has nothing to split
SPLIT_MAX_PHRASES = 10  # longer queries rarely prove exact; one full query is cheaper then
SPLIT_RARE_SHARE = 0.02  # rare terms: the rarest until their rows pass 2% of the chunks
# A longer query (a pasted issue or log keeps up to 48 terms) proves nothing: its common
# terms' ceilings add up past any score. It is answered from the rows holding its rarest
# terms, up to 5,000 rows or 5% of the index, scored on every term. Against the exact query
# on 51 pasted SWE-bench issues (bench/scale.py): the same top 10 for 49-50 of them at 98k
# and 299k chunks, p50 160 -> 60 ms and 412 -> 118 ms (2% at 299k: 44 of 51).
LONG_RARE_ROWS = 5_000
LONG_RARE_SHARE = 0.05
LONG_MIN_CHUNKS = 20_000  # below this the full query is cheap (tens of ms): it runs as it is


def split_match(match: str, doc_freqs: Callable[[Sequence[str]], Mapping[str, int]],
                total: Callable[[], int]) -> tuple[str, str, float | None] | None:
    """MaxScore for FTS5: split an OR query into its rare phrases and its common ones.

    bm25() is paid on every row the MATCH selects, and a common term selects most of the
    index. The rows that hold a rare phrase are few; scored on the whole query they are
    exact, and a row holding only common phrases can score at most the sum of their
    ceilings (`bound`). When the `limit`-th best rare row scores above that, the answer is
    the full query's, at a fraction of the cost. Returns (rare MATCH, common MATCH, bound),
    or None to run the query as it is. For a query of more than SPLIT_MAX_PHRASES terms the
    bound is None: the rare rows are the answer (see LONG_RARE_ROWS)."""
    words = fts5.fts5_terms(match)
    long = len(words) > SPLIT_MAX_PHRASES
    if len(words) < SPLIT_MIN_PHRASES:
        return None
    if any(not _ONE_TOKEN.fullmatch(w) for w in words):
        return None  # a phrase of several tokens: its row count is not a term's
    keys = list(dict.fromkeys(w.lower() for w in words))
    df = doc_freqs(keys)
    n = total()
    if not n or (long and n < LONG_MIN_CHUNKS):
        return None
    ceiling: dict[str, float] = {}
    for w in words:  # a phrase written twice counts twice
        k = w.lower()
        ceiling[k] = ceiling.get(k, 0.0) + fts5.idf(n, df.get(k, 0)) * (fts5.K1 + 1)
    order = sorted(keys, key=lambda k: (df.get(k, 0), k))
    rare: list[str] = []
    rows = 0
    most = max(LONG_RARE_ROWS, LONG_RARE_SHARE * n) if long else SPLIT_RARE_SHARE * n
    for k in order:
        if rare and rows + df.get(k, 0) > most:
            break
        rare.append(k)
        rows += df.get(k, 0)
    common = [k for k in order if k not in rare]
    if not common:
        return None
    def pick(group: set[str]) -> str:
        return " OR ".join(fts_quote(w) for w in words if w.lower() in group)

    return pick(set(rare)), pick(set(common)), (None if long else sum(ceiling[k] for k in common))


def answer(match: str, limit: int, path_prefix: str | None, bm25: Bm25,
           doc_freqs: Callable[[Sequence[str]], Mapping[str, int]], total: Callable[[], int]) -> Hits:
    """The `limit` best chunks for `match` as one full FTS5 query ranks them (a long query:
    as its rarest rows rank them, see LONG_RARE_ROWS)."""
    plan = split_match(match, doc_freqs, total)
    if plan is None:
        return bm25(match, limit, path_prefix)
    rare, common, bound = plan
    hits = rare_rows(bm25, rare, common, limit, path_prefix)
    if len(hits) == limit and (bound is None or hits[-1][1] > bound):
        return hits  # a chunk holding only common terms scores at most `bound`: exact
    # Not proven: the chunks holding only common terms are the rest of the full query.
    rest = bm25(f"({common}) NOT ({rare})", limit, path_prefix)
    return sorted(hits + rest, key=lambda h: (-h[1], h[0]))[:limit]


def rare_rows(bm25: Bm25, rare: str, common: str, limit: int, path_prefix: str | None) -> Hits:
    """The `limit` best chunks holding a rare term, scored on every term.

    Those that also hold a common term come from `(rare) AND (common)`, scored in full.
    Those that hold none score on their rare terms alone, so `rare` by itself ranks them:
    a statement that reads only the rare terms' rows, where `(rare) NOT (common)` read every
    common term's rows again (bm25() counts each phrase's rows, statement by statement).
    Its best `limit` are enough: a row below them is outranked by each of them, whether it
    holds a common term (then its full score is at least its rare one) or not. A row of
    `rare` that holds a common term but is not among `both`'s best shows less than its full
    score, and that is at most the lowest of `both`'s `limit`: it cannot pass any of them."""
    both = bm25(f"({rare}) AND ({common})", limit, path_prefix)
    seen = {i for i, _ in both}
    only = [h for h in bm25(rare, limit, path_prefix) if h[0] not in seen]
    return sorted(both + only, key=lambda h: (-h[1], h[0]))[:limit]
