"""The relevance floor of an answer fused from several sources (`services.federated`), and
the folding of hits that repeat one text.

Reciprocal-rank fusion gives every source's first hit the same score, so a source that
holds only a weak match (one query word of four) still ranked second or third, above the
strong hits of the others. Each source now says how sure its answer is (`match`, per answer
and per hit: services/base.py), and the floor orders the fused hits in three tiers, each in
fused order:

1. hits their source calls strong;
2. hits their source calls weak;
3. every hit of a source whose answer is `none` (nothing related found).

A source that says nothing (`match` missing: not every source judges yet) is placed by
what its hits show instead: a hit whose shown text (title and excerpt) holds fewer than
`FLOOR` of the query terms the answer's best hit holds goes with the weak ones, the others
with the strong ones, and neither gets a `match` of its own. Nothing is dropped (a
paraphrase found by a vector layer still shows when the limit has room); the order is all
that changes. Then hits whose excerpts are the same text once normalized (the same log
offloaded twice, a note quoted in a session) are listed once, at the best place, with the
number of copies folded into it. Pure over plain dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.text import code_tokens
from .lexical import query_terms

FLOOR = 0.5
STRONG, WEAK, NONE = "strong", "weak", "none"


def coverage(terms: Sequence[str], text: str) -> int:
    """How many of `terms` (query terms) the code tokens of `text` hold."""
    have = set(code_tokens(text))
    return sum(1 for t in terms if t in have)


def _shown(h: Mapping[str, Any], fields: Sequence[str]) -> str:
    return "\n".join(str(h.get(f) or "") for f in fields)


def below_floor(query: str, hits: Sequence[Mapping[str, Any]], floor: float = FLOOR,
                fields: Sequence[str] = ("title", "excerpt")) -> list[bool]:
    """Per hit: does its shown text hold fewer than `floor` of the query terms the best hit
    holds? All False for a query without terms, or when no hit holds any."""
    terms = list(dict.fromkeys(query_terms(query)))
    if not terms or not hits:
        return [False] * len(hits)
    cov = [coverage(terms, _shown(h, fields)) for h in hits]
    best = max(cov)
    return [best > 0 and c < floor * best for c in cov]


def apply_floor(query: str, hits: Sequence[dict[str, Any]], floor: float = FLOOR,
                fields: Sequence[str] = ("title", "excerpt")) -> list[dict[str, Any]]:
    """`hits` (fused, best first) with those below the term floor moved after the rest,
    each group in its given order."""
    low = below_floor(query, hits, floor, fields)
    return [h for h, b in zip(hits, low, strict=True) if not b] + \
        [h for h, b in zip(hits, low, strict=True) if b]


def tier(hit: Mapping[str, Any], answer_match: str | None, low: bool) -> int:
    """0 strong, 1 weak, 2 from a source that found nothing related (see the module doc).
    `answer_match`: its source's answer's match (None: not said); `low`: below the term
    floor, which places a hit whose source does not judge."""
    if answer_match == NONE:
        return 2
    mark = hit.get("match")
    if mark == STRONG:
        return 0
    if mark == WEAK:
        return 1
    return 1 if low else 0


def order(query: str, hits: Sequence[dict[str, Any]], answers: Mapping[str, str | None],
          floor: float = FLOOR) -> list[dict[str, Any]]:
    """`hits` (fused, best first; each with its `source` and, when the source judges, its
    `match`) in their tiers, each tier in the given order; `answers` maps a source to its
    answer's match (None or missing: it does not say). A hit of a `none` source is marked
    weak; one whose source does not judge keeps no mark. Copies, not the given dicts."""
    low = below_floor(query, hits, floor)
    placed: list[tuple[int, int, dict[str, Any]]] = []
    for i, (h, b) in enumerate(zip(hits, low, strict=True)):
        said = answers.get(str(h.get("source")))
        t = tier(h, said, b)
        out = dict(h)
        if said == NONE:
            out["match"] = WEAK
        elif out.get("match") not in (STRONG, WEAK):
            out.pop("match", None)
        placed.append((t, i, out))
    placed.sort(key=lambda x: (x[0], x[1]))
    return [h for _, _, h in placed]


def payload_key(text: str) -> str:
    """Excerpt text as compared for folding: whitespace runs as one space, case folded."""
    return " ".join(text.split()).casefold()


def fold(hits: Sequence[dict[str, Any]],
         text_of: Callable[[Mapping[str, Any]], str] = lambda h: str(h.get("excerpt") or "")
         ) -> tuple[list[dict[str, Any]], int]:
    """(hits with each repeated text listed once, at its first place, carrying `folded`:
    how many later copies went into it; how many hits were folded). A hit with no text is
    never folded. A folded hit's mark is the best of its copies'."""
    first: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    folded = 0
    for h in hits:
        key = payload_key(text_of(h))
        kept = first.get(key) if key else None
        if kept is None:
            h = dict(h)
            if key:
                first[key] = h
            out.append(h)
            continue
        kept["folded"] = int(kept.get("folded") or 0) + 1
        if h.get("match") == STRONG and kept.get("match") == WEAK:
            kept["match"] = STRONG
        folded += 1
    return out, folded


def answer_match(results: Sequence[Mapping[str, Any]],
                 answers: Mapping[str, tuple[str | None, int]]) -> str | None:
    """The fused answer's match: strong when a strong hit is among `results`; none when
    every source that answered said none or found nothing; weak when every source with
    hits said how sure it is; else None (a source with hits that does not judge leaves it
    unknown). `answers`: source -> (its answer's match, its number of hits)."""
    if any(r.get("match") == STRONG for r in results):
        return STRONG
    if all(m == NONE or n == 0 for m, n in answers.values()):
        return NONE
    if all(m in (STRONG, WEAK, NONE) for m, n in answers.values() if n):
        return WEAK
    return None
