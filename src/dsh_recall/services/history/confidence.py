"""How sure a history answer is: `match` on the answer and on each hit (services/base.MATCHES).

The evidence is what the hit holds of the query, not how it ranked: a ranking always has a
first hit, related or not. Each of the query's terms (`history_query.terms`) weighs its
idf in the scope searched, over the idf of a term no block holds (`term_weights`), so a
word every turn says weighs little and a word the index does not know weighs the most and
counts as missing. A hit holds a term when the word index finds it in the hit's block, in
the turn it answers (the question before it, past tool traffic, by another speaker: the
answer partner rule's pair) or in a coarse event's other hits; a turn dated in the date the
question names holds that date's words. Its coverage is the share of the query's weight
it holds:

- strong: more than half (`STRONG_COVERAGE`): the hit holds most of what the query asks;
- weak: a related hit, short of that;
- none: the best hit holds less than `NONE_COVERAGE` of the query's weight and the
  semantic layer (when it answered: past its coverage gate) does not single it out either.

The semantic layer's say: its score is the hit's cosine margin over the scope's mean
cosine. It lifts none to weak, never to strong: a vector is always close to something.
docs/history.md#confidence says what this was checked on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...core.errors import StoreError
from ...core.text import fts_quote
from ...rank import history_query as hq
from ...rank import history_rules as hr
from ...stores.sqlite.history import HistoryStore
from .rank import REPLY_REACH, _day

STRONG_COVERAGE = 0.5  # more than this share of the query's weight: "most of it"
NONE_COVERAGE = 0.25  # below this (about one informative term in four): nothing related
# A semantic margin this far over the scope's mean cosine singles a hit out: cosines of
# normalised sentence vectors of unrelated texts sit within about 0.1 of each other.
SEMANTIC_MARGIN = 0.3
# Past this many blocks in scope the document frequencies are estimated from a sample
# (HistoryStore.term_shares) and only the hits' own sessions are searched for a term, when
# it is rare: FTS5 reads every block holding a term before it filters them by session (a
# word in a third of 100k blocks took 9 ms), so a term in more than COMMON_SHARE of the
# blocks is checked on the hits' own words instead (history_query.holds_term).
EXACT_MAX_BLOCKS = 20_000
COMMON_SHARE = 0.01


class Judge:
    """The evidence for one search: the query's term weights in scope, then which terms each
    hit holds. A few FTS lookups per query term, no model call."""

    def __init__(self, store: HistoryStore, query: str, scope: Sequence[str] | None):
        self.store, self.scope = store, scope
        self.terms = hq.terms(query)
        self.date_words = hr.date_words(query) & set(self.terms)
        self.parts = hq.compounds(query)
        self.n_docs = store.block_count(scope)
        self._found: dict[str, set[int]] = {}  # term -> the blocks holding it (in reach)
        self._reach: set[str] = set()  # the sessions _found covers (a large scope)
        self._common: list[str] = []  # terms checked on the hits' words (a large scope)
        self._words: dict[int, set[str]] = {}  # block -> hq.word_stems of its text
        df: dict[str, int] = {}
        exact = self.n_docs <= EXACT_MAX_BLOCKS
        try:
            if exact:
                for t in self.terms:
                    found = self._fts(t, scope, self.n_docs)
                    self._found[t] = found
                    df[t] = len(found)
            else:
                shares = store.term_shares("literal", self.terms, 0) or {}
                df = {t: round(shares.get(t, 0.0) * self.n_docs) for t in self.terms}
                self._common = [t for t in self.terms if shares.get(t, 0.0) > COMMON_SHARE]
        except StoreError:
            df = {}
        self.weights = hq.term_weights(self.terms, df, self.n_docs)
        self._exact = exact

    def _fts(self, term: str, sessions: Sequence[str] | None, limit: int) -> set[int]:
        if limit <= 0:
            return set()
        return {i for i, _ in self.store.fts("literal", fts_quote(term), sessions, limit)}

    def reach(self, sessions: Sequence[str]) -> None:
        """Look the rare terms up in these sessions (a large scope: the hits' sessions)."""
        want = [] if self._exact else sorted(set(sessions) - self._reach)
        if not want:
            return
        limit = min(self.store.block_count(want), EXACT_MAX_BLOCKS)
        try:
            for t in self.terms:
                if t not in self._common:
                    self._found.setdefault(t, set()).update(self._fts(t, want, limit))
        except StoreError:
            pass
        self._reach |= set(want)

    def held(self, blocks: Sequence[int], dated: bool = False,
             texts: Mapping[int, str] | None = None) -> set[str]:
        """The query terms any of `blocks` holds (`texts`: the blocks' text, for the common
        terms of a large scope); `dated`: they are dated in the date the query names, so
        they hold its words too."""
        out = {t for t, ids in self._found.items() if any(b in ids for b in blocks)}
        if self._common and texts is not None:
            stems = [self._stems(b, texts) for b in blocks]
            out |= {t for t in self._common if any(hq.light_stem(t) in s for s in stems)}
        return out | self.date_words if dated else out

    def _stems(self, block: int, texts: Mapping[int, str]) -> set[str]:
        if block not in self._words:
            self._words[block] = hq.word_stems(texts.get(block, ""))
        return self._words[block]

    def coverage(self, blocks: Sequence[int], dated: bool = False,
                 texts: Mapping[int, str] | None = None) -> float:
        return hq.coverage(self.weights, self.held(blocks, dated, texts), self.parts)


def decide(coverage: float, margin: float | None) -> str:
    """One hit's match from its coverage and its semantic margin (None: no semantic layer)."""
    if coverage > STRONG_COVERAGE:
        return "strong"
    if coverage >= NONE_COVERAGE or (margin is not None and margin >= SEMANTIC_MARGIN):
        return "weak"
    return "none"


def answer_match(per_hit: Sequence[str]) -> str:
    """The answer's match: strong when a hit shown is, none when no hit is related."""
    if "strong" in per_hit:
        return "strong"
    return "weak" if "weak" in per_hit else "none"


def judge_hits(judge: Judge, groups: Sequence[Sequence[int]], sessions: Sequence[str],
               semantic: Mapping[int, float] | None, dated: Sequence[bool] = (),
               texts: Mapping[int, str] | None = None) -> list[str]:
    """Each hit's match ("strong" | "weak" | "none": none is shown as weak on the hit).
    `groups`: per hit, its block first, then the blocks whose terms count for it; `dated`:
    per hit, whether it is dated in the date the query names; `texts`: the blocks' text."""
    judge.reach(sessions)
    out = []
    for k, g in enumerate(groups):
        margin = None if semantic is None or not g else max(0.0, semantic.get(g[0], 0.0))
        out.append(decide(judge.coverage(g, k < len(dated) and dated[k], texts), margin))
    return out


class Rater:
    """Each hit's match, judged on the hits a page shows, in their order (search.py calls
    it on a page's hits before the coarse budget fit, so the fit counts the matches too).
    The evidence is looked up once per search and only when there are hits to judge."""

    def __init__(self, store: HistoryStore, query: str, scope: Sequence[str] | None,
                 rows: dict[int, Any], semantic: list[tuple[int, float]] | None):
        self.store, self.query, self.scope, self.rows = store, query, scope, rows
        self.semantic = dict(semantic) if semantic is not None else None
        self.judge: Judge | None = None
        self.matches: list[str] = []  # "strong" | "weak" | "none", per hit rated

    def __call__(self, hits: list[dict[str, Any]], blocks: list[int],
                 more: list[list[int]] | None = None) -> None:
        """Set each hit's `match` ("strong" | "weak"); `blocks`: each hit's best block,
        `more`: the other blocks each hit spans (a coarse event's other hits)."""
        if not hits:
            return
        if self.judge is None:
            self.judge = Judge(self.store, self.query, self.scope)
        sessions = sorted({self.rows[b].session for b in blocks})
        groups = self._groups(blocks)
        for g, extra in zip(groups, more or []):
            g += [b for b in extra if b not in g]
        texts = {b: self.rows[b].text for g in groups for b in g} if self.judge._common else None
        found = judge_hits(self.judge, groups, sessions, self.semantic,
                           self._dated(groups, sessions), texts)
        for h, m in zip(hits, found):
            h["match"] = "strong" if m == "strong" else "weak"
        self.matches += found

    def _groups(self, blocks: list[int]) -> list[list[int]]:
        """Each block with the question it answers: the turn before it (past the tool calls
        and output an agent ran first), by another speaker, asking something: the answer
        partner rule's pair. Tool traffic answers nothing."""
        groups = {b: [b] for b in blocks}
        at = {b: b for b in blocks if not hr.is_tool(self.rows[b])}  # reply -> block reached
        for _ in range(REPLY_REACH):
            if not at:
                break
            near = self.store.neighbours(sorted(set(at.values())))
            new = sorted({n for ns in near.values() for n in ns if n not in self.rows})
            if new:
                self.rows.update(self.store.blocks(new))
            walking = {}
            for b, c in at.items():
                cur = self.rows[c]
                p = next((self.rows[n] for n in near.get(c, ()) if n in self.rows
                          and self.rows[n].session == cur.session and self.rows[n].ord == cur.ord - 1), None)
                if p is None:
                    continue
                if hr.is_tool(p):
                    walking[b] = p.id
                elif p.role != self.rows[b].role and "?" in p.text:
                    groups[b].append(p.id)
            at = walking
        return [groups[b] for b in blocks]

    def _dated(self, groups: list[list[int]], sessions: list[str]) -> list[bool]:
        """Per group, whether a block of it is dated in a date the query names (the date
        rule's test: its session's day, or a day its own words point to)."""
        if not self.judge or not self.judge.date_words:
            return []
        days = {s["id"]: _day(s.get("created_ms")) for s in self.store.sessions(sessions)}
        wanted = hr.question_dates(self.query, sorted({d.year for d in days.values() if d}))
        if not wanted:
            return []
        return [any(hr.dates_overlap(wanted, hr.turn_dates(self.rows[b].text, days.get(self.rows[b].session)))
                    for b in g) for g in groups]

    def shown(self, hits: list[dict[str, Any]]) -> list[str]:
        """The matches of the hits a page shows (a prefix of those rated)."""
        return self.matches[:len(hits)]
