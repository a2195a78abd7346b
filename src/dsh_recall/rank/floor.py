"""A relevance floor for an answer fused from several sources (`services.federated`).

Reciprocal-rank fusion gives every source's first hit the same score, so a source that
holds only a weak match (one query word of four) still ranked second or third, above the
strong hits of the others. The floor compares what each hit shows with the best hit of the
answer: a hit whose shown text (title and excerpt) holds fewer than `FLOOR` of the query
terms the best hit holds ranks after every hit above the floor, in fused order. Nothing is
dropped (a paraphrase found by a vector layer still shows when the limit has room); the
order is all that changes. Pure over plain dicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.text import code_tokens
from .lexical import query_terms

FLOOR = 0.5


def coverage(terms: Sequence[str], text: str) -> int:
    """How many of `terms` (query terms) the code tokens of `text` hold."""
    have = set(code_tokens(text))
    return sum(1 for t in terms if t in have)


def apply_floor(query: str, hits: Sequence[dict[str, Any]], floor: float = FLOOR,
                fields: Sequence[str] = ("title", "excerpt")) -> list[dict[str, Any]]:
    """`hits` (fused, best first) with those below the floor moved after the rest, each
    group in its given order. A query without terms, or with no hit holding any, is left
    as it is."""
    terms = list(dict.fromkeys(query_terms(query)))
    if not terms or not hits:
        return list(hits)
    cov = [coverage(terms, "\n".join(str(h.get(f) or "") for f in fields)) for h in hits]
    best = max(cov)
    if best == 0:
        return list(hits)
    above = [h for h, c in zip(hits, cov, strict=True) if c >= floor * best]
    below = [h for h, c in zip(hits, cov, strict=True) if c < floor * best]
    return above + below
