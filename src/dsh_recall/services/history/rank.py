"""The history service's turn rules: what search.history_rules decides, fed from the store.

`apply_rules` takes the fused (id, score, layer ranks) list of a search and returns it
re-scored by the rules the `history` config turns on (answer partner, speaker, time, dates, decisions,
session-then-turn). `feedback_match` builds the pseudo-relevance feedback query. Each rule
reads only the candidates' rows, their next blocks and their sessions' dates: a few indexed
lookups, no model call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime

from ...core.config import HistoryConfig
from ...core.text import fts_quote
from ...rank import history_rules as hr
from ...stores.sqlite.history import HistoryStore

Fused = list[tuple[int, float, dict[str, int]]]


def decision_boost(h: HistoryConfig) -> float:
    """`history.decision_boost` (rank/history_rules.states_decision): a decision question's
    turns that state one are multiplied by 1 + this."""
    return float(h.decision_boost)


def rules_on(h: HistoryConfig) -> bool:
    return any(x > 0 for x in (h.answer_share, h.speaker_boost, h.time_boost, h.date_boost,
                               h.session_boost, decision_boost(h)))


def _day(ms: int | None) -> date | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).date()


def _turns(store: HistoryStore, ids: Sequence[int], rows: dict | None = None) -> dict[int, hr.Turn]:
    rows = {i: rows[i] for i in ids if i in rows} if rows is not None else store.blocks(list(ids))
    days = {s["id"]: _day(s.get("created_ms"))
            for s in store.sessions(sorted({r.session for r in rows.values()}))} if rows else {}
    return {i: hr.Turn(i, r.session, r.ord, r.role, r.text, days.get(r.session), r.kind)
            for i, r in rows.items()}


# How many blocks of tool traffic (calls, outputs: a big output is several blocks) a
# question's reply may sit behind.
REPLY_REACH = 8


def _replies(store: HistoryStore, turns: dict[int, hr.Turn], asking: Sequence[int],
             rows: dict | None) -> dict[int, int]:
    """Each asking turn -> the next block of its session that is not tool traffic (the
    block right after it, in a conversation without tools), within REPLY_REACH blocks.
    Adds the blocks it reads to `turns` (and to the caller's `rows`)."""
    out: dict[int, int] = {}
    at = {i: i for i in asking}  # asking turn -> the block reached so far
    for _ in range(REPLY_REACH):
        if not at:
            break
        nb = store.neighbours(sorted(set(at.values())))
        new = sorted({n for ns in nb.values() for n in ns if n not in turns})
        if rows is not None and new:
            rows.update(store.blocks(new))  # the caller's rows then hold the partners too
        turns.update(_turns(store, new, rows))
        walking: dict[int, int] = {}
        for i, c in at.items():
            cur = turns[c]
            n = next((n for n in nb.get(c, ()) if n in turns and turns[n].session == cur.session
                      and turns[n].ord == cur.ord + 1), None)
            if n is None:
                continue
            if hr.is_tool(turns[n]):
                walking[i] = n
            else:
                out[i] = n
        at = walking
    return out


def apply_rules(store: HistoryStore, h: HistoryConfig, query: str, fused: Fused,
                rows: dict | None = None) -> tuple[Fused, dict[int, float]]:
    """Re-score a fused ranking by the turn rules that are on (unchanged when none is).
    Only the best `candidate_pool` blocks (and their answer partners) are re-scored; the
    rest keep their order after them. `rows`: the blocks' rows when the caller has them.
    Also returns each block's evidence: its score before the multiplying boosts (the fused
    score plus what an answer partner passed it), for the coarse answer's strength floor."""
    if not fused or not rules_on(h):
        return fused, {i: s for i, s, _ in fused}
    head, tail = fused[:h.candidate_pool], fused[h.candidate_pool:]
    ranks = {i: r for i, _, r in fused}
    order = [i for i, _, _ in head]
    scores = {i: s for i, s, _ in head}
    turns = _turns(store, order, rows)
    if h.answer_share > 0:
        asking = [i for i in order if i in turns and "?" in turns[i].text and not hr.is_tool(turns[i])]
        nxt = _replies(store, turns, asking, rows)
        scores = hr.answer_partner(scores, turns, nxt, h.answer_share)
    evidence = dict(scores)
    if h.speaker_boost > 0:
        named = hr.named_speakers(query, (t.role for t in turns.values()))
        if named and len(named) < len({t.role for t in turns.values()}):
            scores = hr.boost(scores, [i for i in scores if i in turns and turns[i].role in named],
                              h.speaker_boost)
    if h.time_boost > 0 and hr.is_when_question(query):
        scores = hr.boost(scores, [i for i in scores if i in turns and hr.has_time_expression(turns[i].text)],
                          h.time_boost)
    if h.date_boost > 0:
        years = sorted({t.day.year for t in turns.values() if t.day})
        wanted = hr.question_dates(query, years)
        if wanted:
            hit = [i for i in scores if i in turns
                   and hr.dates_overlap(wanted, hr.turn_dates(turns[i].text, turns[i].day))]
            scores = hr.boost(scores, hit, h.date_boost)
    if decision_boost(h) > 0 and hr.asks_decision(query):
        scores = hr.boost(scores, [i for i in scores if i in turns and hr.states_decision(turns[i])],
                          decision_boost(h))
    if h.session_boost > 0:
        scores = hr.session_lift(scores, turns, h.session_boost, h.session_turns)
    out = [(i, s, ranks.get(i, {})) for i, s in hr.ranked(scores, order)]
    seen = set(scores)
    # The tail follows, below the re-scored head whatever its fused score.
    floor = min(scores.values(), default=0.0)
    out += [(i, min(s, floor), r) for i, s, r in tail if i not in seen]
    evidence.update({i: s for i, s, _ in tail if i not in evidence})
    return out, evidence


def feedback_match(store: HistoryStore, h: HistoryConfig, query: str, fused: Fused,
                   scope: Sequence[str] | None) -> str | None:
    """The pseudo-relevance feedback query: the query's terms plus `prf_terms` words from
    the best `prf_docs` turns of the first pass, as an FTS5 OR query (None: nothing to add)."""
    from ...rank import history_query as hq

    if h.prf_terms <= 0 or not fused:
        return None
    top = [i for i, _, _ in fused[: h.prf_docs]]
    rows = store.blocks(top)
    texts = [rows[i].text for i in top if i in rows]
    roles = {rows[i].role for i in top if i in rows}
    words = hr.candidate_words(texts)
    if not words:
        return None
    # Document frequency of each candidate word in scope, from the word index itself.
    n_docs = store.block_count(scope)
    df = {w: len(store.fts("literal", fts_quote(w), scope, n_docs)) for w in words}
    extra = hr.feedback_terms(query, texts, {w: n for w, n in df.items() if n}, n_docs, h.prf_terms,
                              exclude=roles)
    if not extra:
        return None
    base = hq.terms(query)
    return " OR ".join(fts_quote(t) for t in [*base, *extra])
