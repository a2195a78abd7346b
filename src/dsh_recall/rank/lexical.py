"""Turn any user text into a safe FTS5 query over code tokens.

Every term is quoted, so quotes, operators, parentheses or a 100 KB paste are just words.
Long queries (an issue text, a stack trace) keep their most informative terms, chosen by
document frequency in the index, so one call stays fast and focused.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence

from ..core.text import code_identifiers, fts_quote
from .query import content_terms, distinct_tokens

MAX_QUERY_CHARS = 20_000
MAX_TERMS = 48
PROMOTE_MIN = 50  # select_terms: a tier lifts a term in this many chunks whatever the share


def promote_limit(total_docs: int, share: float) -> int:
    """The most chunks a term may be in for a query tier to lift it (select_terms)."""
    return max(PROMOTE_MIN, int(total_docs * share))

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
    return list(_query_terms(text[:MAX_QUERY_CHARS]))


@functools.lru_cache(maxsize=32)
def _query_terms(text: str) -> tuple[str, ...]:
    terms = content_terms(distinct_tokens(text), STOPWORDS)
    return tuple(t for t in terms if not (len(t) == 1 and t.isdigit()))


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


# A line of a pasted environment: `name==1.2.3`, `pytest-7.2.0`, `Python 3.11.1`, `six 1.16`.
_DOTTED_NUMBER = re.compile(r"\d\.\d")  # what every such line holds: a cheap first test
_PINNED = re.compile(r"[A-Za-z][\w.-]*(?:==|[ \t:=-]+v?)\d+\.\d+")


@functools.lru_cache(maxsize=8)
def focus_tiers(text: str) -> dict[str, int]:
    """Where a long query's terms come from, for select_terms: 0 = its first line when that
    reads as a title (a bug report's, an issue's), 1 = the rest of what it writes, and 2 =
    words only found in lines that list versions (`pip freeze`, a test run's platform line,
    a tox log: they say what is installed, not where the problem is) and terms starting
    with a digit (a version, a count, a time). Identifiers count as written anywhere (1 at
    least). Empty for a query of one or two lines (nothing to tell apart). Cached for the
    last few queries (a search asks twice); callers must not change the answer."""
    text = text[:MAX_QUERY_CHARS]
    lines = text.splitlines()
    if len(lines) < 3:
        return {}
    first = next((ln for ln in lines if ln.strip()), "")
    title = first if len(first.split()) <= 25 else ""
    pinned: list[str] = []
    rest: list[str] = []
    for ln in lines:
        (pinned if _DOTTED_NUMBER.search(ln) and _PINNED.search(ln) else rest).append(ln)
    idents = " ".join(i for i in code_identifiers("\n".join(pinned))
                      if not _DOTTED_NUMBER.search(i)) if pinned else ""
    out: dict[str, int] = {}
    # lowest tier first: a term keeps the first tier it is seen in
    for tier, part in ((0, title), (1, "\n".join(rest)), (1, idents), (2, "\n".join(pinned))):
        for t in query_terms(part):
            out.setdefault(t, 2 if t[:1].isdigit() else tier)
    return out


def match_expression(terms: Sequence[str], boost: frozenset[str] | set[str] = frozenset()) -> str:
    """An FTS5 MATCH string: OR of quoted terms (BM25 rewards chunks matching more of them).

    A boosted term is repeated: FTS5's bm25() sums over the query's phrases, so it counts
    twice."""
    return " OR ".join(fts_quote(t) for term in terms for t in [term] * (2 if term in boost else 1))


@functools.lru_cache(maxsize=8)
def _identifiers(text: str) -> tuple[str, ...]:
    """code_identifiers of a query, once for the two callers below."""
    return tuple(code_identifiers(text))


@functools.lru_cache(maxsize=8)
def named_symbols(text: str) -> frozenset[str]:
    """Names the query writes as code (`CodeService.search`, `parse_args`, `HttpClient`, or
    a query that is one identifier), lower-cased, dotted names kept whole. Cached for the
    last few queries (a pasted issue is 20k characters, and a search asks more than once)."""
    out = {m.lower() for m in _identifiers(text[:MAX_QUERY_CHARS])}
    word = text.strip()
    if word.isidentifier():
        out.add(word.lower())
    return frozenset(out)


@functools.lru_cache(maxsize=8)
def identifier_terms(text: str) -> frozenset[str]:
    """Whole identifiers written in the query (snake_case, camelCase, dotted.names): in a
    bug report or a question they point at code more surely than prose words do. Cached as
    named_symbols is."""
    out: set[str] = set()
    for m in _identifiers(text[:MAX_QUERY_CHARS]):
        for part in m.split("."):
            if part.strip("_"):
                out.add(part.lower().strip("_") if part.startswith("__") else part.lower())
    return frozenset(out)


def idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))
