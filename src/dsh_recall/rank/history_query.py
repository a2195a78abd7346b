"""Query handling for history search: terms, FTS5 match strings, snippets, and how much of
a query a hit holds (the answer's confidence). Pure.

Any user text is a valid query: every term is quoted for FTS5 (core.text.fts_quote), so
`NEAR(`, `"`, `*` or `AND` are matched as words, never parsed as syntax.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from ..core.text import cjk_bigrams, code_tokens, fts_quote, is_cjk
from .query import content_terms, distinct_tokens

# Function words that carry no topic: dropping them keeps OR queries and trigram queries
# from matching every block. Kept short and generic on purpose.
STOPWORDS = frozenset("""
a an and are as at be been being but by can could did do does doing done for from had has
have having he her hers him his how i if in into is it its itself just me my no nor not of
on or our ours she should so some such than that the their theirs them then there these they
this those to too us very was we were what when where which while who whom why will with
would you your yours am any all also about after again against because before between both
each few more most other own same over under until up down out off once only here ever
""".split())
# Words of the question's form rather than its topic ("what kind of", "did she mention",
# "how does he describe"): matching them finds turns that talk the same way, not about the
# same thing. Dropped only while topic terms remain.
QUESTION_WORDS = frozenset("""
kind type sort think thinks thought feel feels felt mention mentioned mentions say said says
describe described tell told recent recently ever like likes often usually way ways
something anything thing things happen happened
""".split())

# A turn next to a strong match shares part of its score: in a conversation the answer
# sits next to its question ("what did you paint?" / "a sunrise"). 0.2 lifts literal R@5
# on locomo-dev from 0.543 to 0.565; more starts to crowd out direct matches.
NEIGHBOUR_SHARE = 0.2

MAX_TRIGRAMS = 48
# Over a large history a query's common trigrams ("the", "ing", "ion") each sit in a good
# share of all blocks, and FTS5 scores every block any trigram matches: at 100k blocks the
# fuzzy layer scored 65-70% of them (100-190 ms a search). From COMMON_MIN_BLOCKS blocks on,
# trigrams held by more than COMMON_SHARE of the blocks are left out of the query (their
# idf is small: log(9) at 10%, near 0 past half), keeping at least KEEP_TRIGRAMS of the
# rarest; below that size the whole OR costs little and runs as before.
COMMON_MIN_BLOCKS = 20_000
COMMON_SHARE = 0.10
KEEP_TRIGRAMS = 3


def terms(query: str) -> list[str]:
    """Distinct lower-case query terms (`rank.query`) without stopwords and, while topic
    terms remain, question words (all terms if only stopwords)."""
    seen = distinct_tokens(query)
    content = content_terms(seen, STOPWORDS)
    topical = [t for t in content if t not in QUESTION_WORDS]
    return topical or content or seen


def literal_match(query: str) -> str | None:
    """An OR of quoted terms for the word index (ranked by BM25), or None for no terms."""
    ts = terms(query)
    return " OR ".join(fts_quote(t) for t in ts) if ts else None


def spread_scores(scores: dict[int, float], neighbours: dict[int, list[int]],
                  share: float = NEIGHBOUR_SHARE) -> list[tuple[int, float]]:
    """(id, score) ranked by the block's own score (higher is better) plus `share` of each
    adjacent block's; a block with no match of its own can enter through its neighbours.
    Ties keep the input order."""
    out = dict(scores)
    for i, s in scores.items():
        for n in neighbours.get(i, ()):
            out[n] = out.get(n, 0.0) + share * s
    order = {i: k for k, i in enumerate(out)}
    return [(i, out[i]) for i in sorted(out, key=lambda i: (-out[i], order[i]))]


def spread_to_neighbours(scores: dict[int, float], neighbours: dict[int, list[int]],
                         share: float = NEIGHBOUR_SHARE) -> list[int]:
    """The ids of `spread_scores`, best first."""
    return [i for i, _ in spread_scores(scores, neighbours, share)]


def fuse_scores(layers: dict[str, list[tuple[int, float]]],
                weights: dict[str, float]) -> list[tuple[int, float, dict[str, int]]]:
    """Fuse layers by score: each layer's scores (higher is better, >= 0) are divided by
    its best, then summed with the layer's weight. Returns (id, score, {layer: 1-based
    rank}) best first, like `fuse.rrf`; ties break by best single rank, then id.

    Unlike reciprocal rank, a block that one layer ranks far above the rest keeps that
    margin, and a layer's long tail of weak matches adds almost nothing.
    """
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for name, items in layers.items():
        top = max((s for _, s in items), default=0.0)
        w = weights.get(name, 1.0)
        for r, (i, s) in enumerate(items, 1):
            if name in ranks.get(i, {}):
                continue
            ranks.setdefault(i, {})[name] = r
            scores[i] = scores.get(i, 0.0) + (w * max(0.0, s) / top if top > 0 else 0.0)
    order = sorted(scores, key=lambda i: (-scores[i], min(ranks[i].values()), i))
    return [(i, scores[i], ranks[i]) for i in order]


def trigrams(word: str) -> list[str]:
    return [word[i:i + 3] for i in range(len(word) - 2)]


def trigram_match(query: str) -> str | None:
    """An OR of the query words' trigrams: typos and fragments still share most of them."""
    return or_match(trigram_terms(query))


def or_match(grams: Sequence[str]) -> str | None:
    return " OR ".join(fts_quote(g) for g in grams) if grams else None


def drop_common(grams: Sequence[str], shares: dict[str, float] | None,
                share: float = COMMON_SHARE, keep: int = KEEP_TRIGRAMS) -> list[str]:
    """`grams` without those in more than `share` of the blocks (`shares`: gram -> share,
    None when the history is too small to bother), keeping at least the `keep` rarest;
    the query's order is kept."""
    if not shares:
        return list(grams)
    rarest = sorted(grams, key=lambda g: shares.get(g, 0.0))
    kept = set(rarest[:keep]) | {g for g in grams if shares.get(g, 0.0) <= share}
    return [g for g in grams if g in kept]


def trigram_terms(query: str) -> list[str]:
    """The query words' distinct trigrams (and those of CJK runs), at most MAX_TRIGRAMS."""
    grams: list[str] = []
    for t in terms(query):
        if any(is_cjk(c) for c in t) and len(t) < 3:
            continue  # CJK pairs go to the bigram index
        for g in trigrams(t) if len(t) >= 3 else []:
            if g not in grams:
                grams.append(g)
    # Also whole CJK runs of 3+ characters as they appear in the query.
    for run in re.findall(r"[^\x00-\x7f]{3,}", query):
        for g in trigrams(run):
            if all(is_cjk(c) for c in g) and g not in grams:
                grams.append(g)
    return grams[:MAX_TRIGRAMS]


def cjk_match(query: str) -> str | None:
    """An OR of the query's CJK bigrams (trigram search cannot see two-character words)."""
    grams = list(dict.fromkeys(g for g in cjk_bigrams(query) if len(g) == 2))
    return " OR ".join(fts_quote(g) for g in grams) if grams else None


def cjk_body(text: str) -> str:
    """The bigram index body of a block: its CJK bigrams, space-separated."""
    return " ".join(g for g in cjk_bigrams(text) if len(g) == 2)


def best_line(text: str, query_terms: Sequence[str]) -> int:
    """The index of the line of `text` that holds the most of the query (each term weighs 1,
    shared among the lines holding it, so a rare term outvotes a common one), the first
    line on a tie or when none holds a term."""
    lines = [ln.lower() for ln in text.split("\n")]
    holding = {t: [k for k, ln in enumerate(lines) if t in ln] for t in query_terms if t}
    score = [0.0] * len(lines)
    for ks in holding.values():
        for k in ks:
            score[k] += 1 / len(ks)
    return max(range(len(lines)), key=lambda k: (score[k] > 1e-9, score[k], -k)) if lines else 0


def snippet(text: str, query_terms: list[str], max_chars: int) -> str:
    """A window of `text` around its best query-term matches, at most `max_chars` long.

    It starts at the line that holds the most of the query (`best_line`; "…" stands for
    the lines before it), not at the block's first line: a turn's decision or a tool
    result's matching line is what the hit is shown for. Within a longer text the window
    chosen holds the most of the query: each term weighs 1, shared among its matches, so a
    rare term ("01000") is not outvoted by a common one ("line" on every line); only
    matches the window shows whole are counted."""
    if max_chars > 1 and "\n" in text.strip():
        k = best_line(text.strip(), query_terms)
        if k > 0:
            rest = _window("\n".join(text.strip().split("\n")[k:]), query_terms, max_chars - 1)
            return "…" + rest.removeprefix("…")
    return _window(text, query_terms, max_chars)


def _window(text: str, query_terms: list[str], max_chars: int) -> str:
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    if max_chars <= 1:
        return ""
    low = flat.lower()
    per_term = max(1, 200 // max(1, len(query_terms)))
    matches: list[tuple[int, int, float]] = []  # (position, length, weight)
    for t in query_terms:
        found: list[int] = []
        start = 0
        while (i := low.find(t, start)) >= 0 and len(found) < per_term:
            found.append(i)
            start = i + 1
        matches += [(i, len(t), 1 / len(found)) for i in found]
    lead = max_chars // 3  # shown before the window's first match
    center = 0
    if matches:
        matches.sort()
        # What a window starting at match p shows whole: up to p + reach (its last char
        # becomes "…").
        reach = max_chars - lead - 1
        center, best_w = matches[0][0], 0.0
        for k, (p, _, _) in enumerate(matches):
            w = 0.0
            for q, n, weight in matches[k:]:
                if q > p + reach:
                    break
                if q + n <= p + reach:
                    w += weight
            if w > best_w + 1e-9:
                center, best_w = p, w
    start = max(0, min(center - lead, len(flat) - max_chars))
    end = min(len(flat), start + max_chars)
    if start > 0:
        sp = flat.find(" ", start, min(start + 20, center))  # a word cut, never the match
        start = sp + 1 if sp >= 0 else start
    out = flat[start:end]
    if start > 0:
        out = "…" + out[1:] if len(out) >= max_chars else "…" + out
    if end < len(flat):
        out = out[:-1] + "…"
    return out[:max_chars]


# -- confidence: how much of the query a hit holds -------------------------------------------

def compounds(query: str) -> dict[str, tuple[str, ...]]:
    """Each identifier the query writes (`SESSION_COOKIE_SAMESITE`, `parseHttpResponse`) ->
    its parts as `terms` reads them: a hit holding every part holds the identifier too."""
    out: dict[str, tuple[str, ...]] = {}
    for word in re.findall(r"[A-Za-z0-9_]+", query):
        toks = code_tokens(word)
        if len(toks) > 1:
            out[toks[0]] = tuple(dict.fromkeys(toks[1:]))
    return out


def term_weights(query_terms: Sequence[str], df: Mapping[str, int], n_docs: int) -> dict[str, float]:
    """Each term's informativeness in the scope searched: its idf over the idf of a term no
    block holds, so 1.0 for a term the index does not know (`df` 0 or absent) and near 0 for
    one nearly every block holds. BM25's idf, log(1 + (N - df + 0.5) / (df + 0.5)), never
    negative."""
    n = max(0, int(n_docs))

    def idf(d: int) -> float:
        d = min(max(0, d), n)
        return math.log(1.0 + (n - d + 0.5) / (d + 0.5))

    top = idf(0)
    return {t: (idf(df.get(t, 0)) / top if top > 0 else 1.0) for t in query_terms}


def coverage(weights: Mapping[str, float], held: Iterable[str],
             parts: Mapping[str, Sequence[str]] | None = None) -> float:
    """The share of the query's informative weight the terms `held` carry (0..1); an
    identifier counts as held when all its `parts` are."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    got = set(held)
    for whole, ps in (parts or {}).items():
        ps = [p for p in ps if p in weights]  # a part `terms` drops (a stopword) asks nothing
        if ps and all(p in got for p in ps):
            got.add(whole)
    return sum(w for t, w in weights.items() if t in got) / total


# Endings a word and a query term may differ by and still be the same word, longest first:
# a rough Porter stem, for terms looked up without the word index (`holds_term`).
_ENDINGS = ("ations", "ation", "ings", "ing", "edly", "ers", "ed", "er", "es", "ly", "s", "e")


def light_stem(word: str) -> str:
    """`word` without one common ending, keeping at least three characters."""
    for end in _ENDINGS:
        if word.endswith(end) and len(word) - len(end) >= 3:
            return word[: -len(end)]
    return word


def word_stems(text: str) -> set[str]:
    """The `light_stem` of every token the word index reads in `text` (core.text.index_text:
    code tokens, identifiers whole and in parts)."""
    return {light_stem(t) for t in code_tokens(text)}


def holds_term(text: str, term: str, stems: set[str] | None = None) -> bool:
    """Does `text` have a token that is `term` up to a plural or verb ending (`light_stem`)?
    Near what the word index's Porter stems say, without the index: for a term so common
    that looking it up costs more than reading the few hits it is checked on. `stems`:
    `word_stems(text)` when the caller has it."""
    return light_stem(term) in (word_stems(text) if stems is None else stems)
