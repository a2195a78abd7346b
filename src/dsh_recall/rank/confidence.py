"""How sure a code answer is: `match` strong | weak | none (services/base.Answer).

A fused score says how a hit ranks against the other hits of the same query, never whether
any of them answers it: RRF gives the best hit of a query about nothing the same 1.0 as the
best hit of a good one. So the confidence is read off evidence that does not depend on the
other candidates:

- `coverage`: the share of the query's information a hit holds, each query term weighted by
  its BM25 idf in this index (a term the index has never seen weighs the most: a made-up
  identifier is the strongest sign that nothing here is about the query). A long pasted text
  (an issue, a log) carries many incidental words, so there only the terms the index knows
  count (those it searched by);
- `cosine`: the vector layer's cosine for the hit, counted only when that layer looked at
  the whole candidate head (services/hybrid.Head).

The thresholds were read off the dev sets once (bench/confidence.py prints the figures:
made-up identifiers and unrelated phrases against questions and issues whose gold file came
first) and are round numbers with a margin on both sides, not fitted: see
docs/code-ranking.md#confidence. Pure over plain values.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from ..core.text import code_tokens

# A hit holding half the query's idf mass (a paste's: its title's) answers it.
STRONG_COVERAGE = 0.5
# The shipped model's cosine for a hit on the query's topic: 0.36-0.80 for dev questions and
# issues whose gold file came first, at most 0.43 for 150 made-up queries (bench/confidence.py).
STRONG_COSINE = 0.45
# Below both of these for every hit, nothing here is about the query.
NONE_COVERAGE = 0.25
NONE_COSINE = 0.35


def idf(df: int, n: int) -> float:
    """BM25's idf (as FTS5 computes it, floored at a small positive value)."""
    return max(1e-6, math.log((n - df + 0.5) / (df + 0.5)))


def term_weights(terms: Sequence[str], df: Mapping[str, int], n: int,
                 long: bool, title: Collection[str] = ()) -> dict[str, float]:
    """Each query term's weight: its idf here; an unknown term the idf of a term in no chunk.
    `long`: a pasted text, whose unknown words are dropped (they are incidental there) and
    whose `title` terms alone count when it has a title (its first line, Query.tiers)."""
    out: dict[str, float] = {}
    for t in dict.fromkeys(terms):
        d = int(df.get(t, 0))
        if d == 0 and long:
            continue
        out[t] = idf(d, max(n, 1))
    if long and title:  # a paste (an issue) is about its title: the rest is incidental
        out = {t: w for t, w in out.items() if t in title} or out
    return out


WORD_CHECKS = 20  # words holding a term as a substring checked before it counts as absent


def held(terms: Collection[str], text: str) -> set[str]:
    """Which of `terms` (query terms: code tokens, lower case) are code tokens of `text`,
    without tokenizing all of it: every code token is a substring of the lower-cased text,
    so a term that is not one is absent, and one that is is confirmed on the few words
    holding it (`applied` holds "app" as a substring, not as a token)."""
    low = text.lower()
    out: set[str] = set()
    for t in terms:
        i, checks = low.find(t), 0
        while i >= 0 and checks < WORD_CHECKS:
            s, e = i, i + len(t)
            # Between two characters that are not letters or digits (an underscore, a dot,
            # a space): a whole identifier or a snake_case part, a token either way.
            if (s == 0 or not low[s - 1].isalnum()) and (e == len(low) or not low[e].isalnum()):
                out.add(t)
                break
            while s > 0 and (low[s - 1].isalnum() or low[s - 1] == "_"):
                s -= 1
            while e < len(low) and (low[e].isalnum() or low[e] == "_"):
                e += 1
            if t in code_tokens(text[s:e]):
                out.add(t)
                break
            checks += 1
            i = low.find(t, e)
    return out


def coverage(weights: Mapping[str, float], tokens: Collection[str]) -> float:
    """The share of the weights' mass whose terms are among `tokens`."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for t, w in weights.items() if t in tokens) / total


def hit_match(cov: float, cosine: float | None) -> str:
    """One hit: "strong" or "weak" (see the module docstring for the evidence)."""
    if cov >= STRONG_COVERAGE or (cosine is not None and cosine >= STRONG_COSINE):
        return "strong"
    return "weak"


def unknown_identifiers(identifiers: Collection[str], df: Mapping[str, int]) -> tuple[int, int]:
    """(identifiers the query writes, how many of them this index has never seen)."""
    return len(identifiers), sum(1 for t in identifiers if not df.get(t, 0))


def answer_match(covs: Sequence[float], cosines: Sequence[float | None], long: bool,
                 identifiers: tuple[int, int] = (0, 0)) -> str:
    """The answer: strong when its best hit is; none when no hit holds much of the query
    and the vector layer (when it looked) found nothing close; else weak.

    `identifiers` (unknown_identifiers): a short query naming code (`parse_widget`,
    `FooBar`) that this index has never seen asks for something that is not here: none when
    it names nothing else the index knows, and never strong."""
    if not covs:
        return "none"
    written, unknown = identifiers
    if not long and unknown:
        return "none" if unknown == written else "weak"
    if hit_match(covs[0], cosines[0] if cosines else None) == "strong":
        return "strong"
    best_cov = max(covs)
    seen = [c for c in cosines if c is not None]
    if best_cov < NONE_COVERAGE and (not seen or max(seen) < NONE_COSINE):
        return "none"
    return "weak"
