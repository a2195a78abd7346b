"""Turn any user text into a safe FTS5 query over code tokens.

Every term is quoted, so quotes, operators, parentheses or a 100 KB paste are just words.
Long queries (an issue text, a stack trace) keep their most informative terms, chosen by
document frequency in the index, so one call stays fast and focused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from ..core.text import code_identifiers, fts_quote
from .query import content_terms, distinct_tokens

MAX_QUERY_CHARS = 20_000
MAX_TERMS = 48

STOPWORDS = frozenset("""
a an and are as at be but by for from has have if in into is it its of on or so that the their
then there these this those to was were will with not no can could should would do does did
i you we they he she me my our your us them what which who whom when where why how all any
each some such than too very just also only own same other more most about above after again
against below between both during further here once out over under until up down off while
been being am let get got make made use used using via per e g ie eg etc like want need
please thanks hi hello one two new way work works working seem seems
""".split())


def query_terms(text: str) -> list[str]:
    """Distinct code tokens of the query's first `MAX_QUERY_CHARS` chars, in order, without
    stopwords, single ASCII characters and a lone digit of any script (`rank.query`)."""
    terms = content_terms(distinct_tokens(text[:MAX_QUERY_CHARS]), STOPWORDS)
    return [t for t in terms if not (len(t) == 1 and t.isdigit())]


def select_terms(
    terms: Sequence[str],
    doc_freq: Callable[[Sequence[str]], Mapping[str, int]],
    total_docs: int,
    max_terms: int = MAX_TERMS,
) -> list[str]:
    """Keep terms the index knows, rarest first when there are too many."""
    if not terms:
        return []
    df = doc_freq(terms)
    known = [t for t in terms if df.get(t, 0) > 0]
    if len(known) <= max_terms:
        return known
    # Prefer rare terms, but drop those in more than half the corpus: they rank nothing.
    ranked = sorted(known, key=lambda t: (df[t], terms.index(t)))
    limit = max(1, total_docs // 2)
    chosen = [t for t in ranked if df[t] <= limit][:max_terms]
    return chosen or ranked[:max_terms]


def match_expression(terms: Sequence[str], boost: frozenset[str] | set[str] = frozenset()) -> str:
    """An FTS5 MATCH string: OR of quoted terms (BM25 rewards chunks matching more of them).

    A boosted term is repeated: FTS5's bm25() sums over the query's phrases, so it counts
    twice."""
    return " OR ".join(fts_quote(t) for term in terms for t in [term] * (2 if term in boost else 1))


def named_symbols(text: str) -> set[str]:
    """Names the query writes as code (`CodeService.search`, `parse_args`, `HttpClient`, or
    a query that is one identifier), lower-cased, dotted names kept whole."""
    out = {m.lower() for m in code_identifiers(text[:MAX_QUERY_CHARS])}
    word = text.strip()
    if word.isidentifier():
        out.add(word.lower())
    return out


def identifier_terms(text: str) -> set[str]:
    """Whole identifiers written in the query (snake_case, camelCase, dotted.names): in a
    bug report or a question they point at code more surely than prose words do."""
    out: set[str] = set()
    for m in code_identifiers(text[:MAX_QUERY_CHARS]):
        for part in m.split("."):
            if part.strip("_"):
                out.add(part.lower().strip("_") if part.startswith("__") else part.lower())
    return out


def idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))
