"""History search: three layers (literal, fuzzy, semantic) fused, re-scored by the turn
rules, reranked when configured, answered coarse (events per session within a token budget)
or in detail (one hit per event seq). `HistoryService.search` (service.py) is the surface
callers use; `search` here is the same pipeline for callers that hold no service.

Token counts use core.text.estimate_tokens (one per CJK character plus one per four other
characters) over the compact JSON of the answer, which is what a caller pastes into a model.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

from ...core.clean import as_limit, as_name, as_offset, as_path, as_query, cleaned
from ...core.config import Config, HistoryConfig
from ...core.errors import InputError, StoreError
from ...core.text import estimate_tokens
from ...rank import history_query as hq
from ...rank.aggregate import BlockHit, aggregate
from ...rank.fuse import rrf
from ...stores.sqlite.history import HistoryStore, loads_flags
from .. import rerank
from ..access import forgotten
from ..access.channel import Viewer
from ..base import Backlog, backlog_item
from ..report import usage
from . import confidence
from .common import LAYERS, SESSION_ENV, _cfg, _iso, open_store
from .rank import apply_rules, feedback_match
from .semantic import EMBED_COMMAND, EMBED_HINT, EMBED_JOB, SemanticLayer

# Layers merge by score (history.fusion = "score", the default: search.history_query.
# fuse_scores, each layer's scores over its best) or by reciprocal rank ("rank", k = rrf_k).
# Fuzzy mostly re-finds literal's matches (and adds typos), so it counts half lest it double
# literal's vote. The semantic score is the cosine's margin over the scope's mean cosine.
# Measured on locomo-dev (bench/history_locomo.py, minilm with context vectors): merged turn
# R@5 0.604 by rank (k 10, weights 1/0.5/0.7; k 60 gave 0.584), 0.627 by score (1/0.5/0.8).
LAYER_WEIGHTS = {"rank": {"literal": 1.0, "fuzzy": 0.5, "semantic": 0.7},
                 "score": {"literal": 1.0, "fuzzy": 0.5, "semantic": 0.8}}


Fused = list[tuple[int, float, dict[str, int]]]


def fuse_layers(rankings: dict[str, list[tuple[int, float]]], hcfg: HistoryConfig) -> Fused:
    """Merge the layers' (id, score) lists by score (default) or by rank, per config."""
    weights = LAYER_WEIGHTS[hcfg.fusion]
    if hcfg.fusion == "score":
        return hq.fuse_scores(rankings, weights)
    # A layer's zero scores are "not found" (the semantic layer scores every candidate, with
    # its margin over the scope's mean floored at 0): only positive scores earn a rank.
    return rrf({n: [i for i, s in items if s > 0] for n, items in rankings.items()},
               k=hcfg.rrf_k, weights=weights)


COARSE_MIN_SHARE = 0.3  # a hit below this share of the best fused score is not shown coarse


# -- search --------------------------------------------------------------------------------

def resolve_scope(store: HistoryStore, session: str | None = None, workspace: str | None = None,
                  all_sessions: bool = False, cwd: str | None = None) -> dict[str, Any]:
    """Which sessions a search covers. Default: $DSH_RECALL_SESSION, else the cwd's workspace."""
    if all_sessions:
        return {"kind": "all", "value": None, "sessions": None}
    if session is None and workspace is None:
        session = os.environ.get(SESSION_ENV) or None
        if session is None:
            workspace = cwd or os.getcwd()
    if session is not None:
        return {"kind": "session", "value": session, "sessions": [session]}
    ids = [s["id"] for s in store.sessions(workspace=(workspace or "").rstrip("/") or "/")]
    return {"kind": "workspace", "value": workspace, "sessions": ids}


def _restrict_scope(store: HistoryStore, scope: dict[str, Any], viewer: Viewer | None) -> str | None:
    """Narrow the scope's sessions to those the viewer's channel may see; say why."""
    if viewer is None or viewer.unfiltered:
        return None
    visible = {s["id"] for s in store.sessions() if viewer.can_see(s.get("channel"))}
    wanted = scope["sessions"]
    scope["sessions"] = sorted(visible) if wanted is None else [x for x in wanted if x in visible]
    ch = viewer.channel
    return f"{ch.kind} channel: {ch.reason}; only sessions this channel may see"


def partial_note(pending: int, total: int) -> str:
    """The note of an answer whose semantic layer waits below its coverage gate; ends with
    EMBED_HINT (a front end that fills the backlog itself says so instead)."""
    return (f"semantic layer partial: {pending} of {total} blocks in scope still wait for "
            f"vectors, so this answer is by words only; {EMBED_HINT}")


def _rank_layers(store: HistoryStore, cfg: Config, query: str, scope: Sequence[str] | None,
                 layers: Sequence[str]
                 ) -> tuple[dict[str, list[tuple[int, float]]], dict[str, str], list[Backlog], list[str]]:
    """(id, score) lists per layer, best first, scores higher-is-better and >= 0; each
    layer's status; the backlog (blocks in scope still waiting for vectors); notes for a
    person (the semantic layer partial)."""
    pool = cfg.history.candidate_pool
    rankings: dict[str, list[tuple[int, float]]] = {}
    status: dict[str, str] = {name: "not requested" for name in LAYERS}
    backlog: list[Backlog] = []
    notes: list[str] = []

    def run(layer: str, match: str | None) -> list[tuple[int, float]]:
        # FTS5 bm25() is lower-is-better (negative); negate it.
        return [(i, -s) for i, s in store.fts(layer, match, scope, pool)] if match else []

    # Lexical layers first, so the semantic layer can also score their candidates.
    for name in sorted(layers, key=LAYERS.index):
        try:
            if name == "literal":
                found = run("literal", hq.literal_match(query))
                ranked = hq.spread_scores(dict(found), store.neighbours([i for i, _ in found]))[:pool]
            elif name == "fuzzy":
                grams = hq.trigram_terms(query)
                shares = store.term_shares("trigram", grams, hq.COMMON_MIN_BLOCKS)
                ranked = run("trigram", hq.or_match(hq.drop_common(grams, shares)))
                cjk = run("cjk", hq.cjk_match(query))
                if cjk:
                    ranked = [(i, s) for i, s, _ in hq.fuse_scores({"tri": ranked, "cjk": cjk}, {})]
            else:
                sem = SemanticLayer(store, cfg)
                extra = {i for r in rankings.values() for i, _ in r}
                ranked = sem.rank(query, scope, pool, gate=len(layers) > 1, extra=extra)
                gated = sem.status.startswith("gated")
                if gated:
                    # Said in the notes too: a person reads those, not the layer statuses.
                    notes.append(partial_note(sem.pending, sem.total))
                if sem.pending:
                    # The hint only when a note or the layer's status tells a person the command.
                    hint = EMBED_HINT if gated or sem.status.endswith(EMBED_HINT) else ""
                    backlog.append(backlog_item("history", "vectors", sem.pending, EMBED_COMMAND,
                                                EMBED_JOB, hint=hint))
                if sem.status != "ok":
                    status[name] = sem.status
                    continue
        except StoreError as e:  # a failing layer degrades to the others
            status[name] = f"failed: {e}"
            continue
        except Exception as e:  # the optional semantic layer (model, vector file, a lock past the busy timeout) degrades too
            if name != "semantic":
                raise
            status[name] = f"failed: {type(e).__name__}: {e}"
            continue
        rankings[name] = ranked
        status[name] = "ok" if ranked else "no match"
    return rankings, status, backlog, notes


def _feedback(store: HistoryStore, cfg: Config, query: str, scope: Sequence[str] | None,
              rankings: dict[str, list[tuple[int, float]]], fused: Fused) -> Fused:
    """Pseudo-relevance feedback (`history.prf_terms`): the query plus words of the first
    pass's best turns runs as one more lexical ranking ("feedback", weight `prf_weight`)."""
    h = cfg.history
    if h.prf_terms <= 0 or "literal" not in rankings or h.fusion != "score":
        return fused
    try:
        match = feedback_match(store, h, query, fused, scope)
        if not match:
            return fused
        found = [(i, -s) for i, s in store.fts("literal", match, scope, h.candidate_pool)]
    except StoreError:
        return fused
    ranked = hq.spread_scores(dict(found), store.neighbours([i for i, _ in found]))[:h.candidate_pool]
    out = hq.fuse_scores({**rankings, "feedback": ranked}, {**LAYER_WEIGHTS["score"], "feedback": h.prf_weight})
    # The feedback ranking is a literal search: report it as the literal layer.
    return [(i, s, {"literal": r["feedback"], **{k: v for k, v in r.items() if k in LAYERS}} if "feedback" in r
             else r) for i, s, r in out]


@cleaned(query=as_query, session=as_name, workspace=as_path, cwd=as_path, limit=as_limit,
         offset=as_offset)
def search(
    query: str,
    session: str | None = None,
    workspace: str | None = None,
    all_sessions: bool = False,
    limit: int | None = None,
    layers: Sequence[str] | None = None,
    detail: bool = False,
    cfg: Config | None = None,
    store: HistoryStore | None = None,
    cwd: str | None = None,
    offset: int = 0,
    viewer: Viewer | None = None,
) -> dict[str, Any]:
    """Search history. Coarse by default (events grouped per session, within
    `history.coarse_budget_tokens`); `detail=True` gives the full ranked list, one hit per
    event seq. An empty query returns no hits.

    Paging: `offset` skips the first `offset` hits of the same ranking (events when coarse,
    event seqs with `detail`); the answer's `has_more` says whether hits follow this page and
    `next_offset` is the offset to ask for next (None on the last page).

    `viewer` (services.access.channel.Viewer): only sessions that channel may see are searched.
    """
    cfg = _cfg(cfg)
    offset = max(0, int(offset or 0))
    layers = list(layers or LAYERS)
    bad = [x for x in layers if x not in LAYERS]
    if bad:
        raise InputError(f"unknown layer {', '.join(bad)}; valid layers: {', '.join(LAYERS)}")
    own = store is None
    store = store or open_store(cfg=cfg)
    try:
        scope = resolve_scope(store, session, workspace, all_sessions, cwd)
        access_note = _restrict_scope(store, scope, viewer)
        answer: dict[str, Any] = {"query": query, "scope": {"kind": scope["kind"], "value": scope["value"]},
                                  "hits": [], "layers": [], "offset": offset, "has_more": False,
                                  "next_offset": None}
        if not query.strip() or (scope["sessions"] is not None and not scope["sessions"]):
            answer["match"] = "none"
            answer["layer_status"] = {n: "not run" for n in LAYERS}
            if access_note:
                answer["layer_status"]["access"] = access_note
            return answer
        rankings, status, backlog, notes = _rank_layers(store, cfg, query, scope["sessions"], layers)
        answer["layers"] = [n for n in LAYERS if n in rankings]
        answer["layer_status"] = status
        if backlog:
            answer["backlog"] = backlog
        if notes:
            answer["notes"] = notes
        if access_note:
            status["access"] = access_note
        fused = fuse_layers(rankings, cfg.history)
        fused = _feedback(store, cfg, query, scope["sessions"], rankings, fused)
        rows = store.blocks([i for i, _, _ in fused])
        fused, evidence = apply_rules(store, cfg.history, query, fused, rows)
        missing = [i for i, _, _ in fused if i not in rows]  # none when the rules kept rows
        if missing:
            rows.update(store.blocks(missing))
        hits = [BlockHit(i, rows[i].session, rows[i].ord, rows[i].seq, s, tuple(sorted(r, key=LAYERS.index)))
                for i, s, r in fused if i in rows]
        # A forgotten note (services/access/forgotten.py) is found by no source: not by a quote.
        hits = forgotten.drop_quotes(hits, lambda h: rows[h.block].text)
        hits, reranked = rerank.apply(cfg, "history", query, hits, lambda h: rows[h.block].text)
        if reranked == rerank.APPLIED or reranked.startswith("partial"):
            # the new order keeps the old scores, best first (the coarse answer reads them)
            hits = [dataclasses.replace(h, score=v)
                    for h, v in zip(hits, sorted((h.score for h in hits), reverse=True))]
        status["rerank"] = answer["rerank"] = reranked
        terms = hq.terms(query)
        rate = confidence.Rater(store, query, scope["sessions"], rows, rankings.get("semantic"))
        answer["match"] = "strong"  # as wide as the real value, so the budget fit holds
        if detail:
            n = limit or 20
            page = _detail_hits(store, hits, rows, terms, offset, n + 1, rate)
            answer["hits"] = page[:n]
        else:
            answer["next_offset"] = 10**6  # as wide as the real value, so the budget fit holds
            page = _coarse(store, cfg, answer, hits, rows, terms, offset, limit or cfg.history.max_sessions,
                           evidence, rate)
        answer["match"] = confidence.answer_match(rate.shown(answer["hits"]))
        # One hit beyond the page is looked for, so `has_more` is exact, not a guess; hits
        # the coarse budget left out come first on the next page.
        answer["has_more"] = len(page) > len(answer["hits"])
        answer["next_offset"] = offset + len(answer["hits"]) if answer["has_more"] else None
        if "tokens" in answer:
            answer["tokens"] = answer_tokens(answer)
        return usage.history_search(store, answer)
    finally:
        if own:
            store.close()


def _event_rows(store: HistoryStore, pairs: set[tuple[str, int]]) -> dict[tuple[str, int], dict]:
    by_s: dict[str, list[int]] = {}
    for s, q in pairs:
        by_s.setdefault(s, []).append(q)
    out = {}
    for s, seqs in by_s.items():
        for e in store.events(s, seqs=seqs):
            out[(s, e["seq"])] = e
    return out


def _hit(ev: dict | None, rows: dict[int, Any], best: BlockHit, start: int, end: int, ids: list[str],
         layers: Sequence[str], snippet: str) -> dict[str, Any]:
    b = rows[best.block]
    h = {"session": best.session, "start_seq": start, "end_seq": end, "message_ids": ids,
         "role": ev["role"] if ev else b.role, "time": (_iso(ev["time_ms"]) or ev["time"]) if ev else None,
         "snippet": snippet, "score": round(best.score, 5), "layers": list(layers), "kind": b.kind}
    if b.tool:
        h["tool"] = b.tool
    flags = loads_flags(ev["flags"]) if ev else []
    if flags:
        h["flags"] = flags
    return h


def _detail_hits(store: HistoryStore, hits: list[BlockHit], rows: dict[int, Any], terms: list[str],
                 offset: int, limit: int, rate: confidence.Rater | None = None) -> list[dict[str, Any]]:
    best: dict[tuple[str, int], BlockHit] = {}
    for h in hits:  # fused order: the first block of an event is its best
        best.setdefault((h.session, h.seq), h)
    chosen = list(best.values())[offset:offset + limit]
    evs = _event_rows(store, {(h.session, h.seq) for h in chosen})
    out = []
    for h in chosen:
        ev = evs.get((h.session, h.seq))
        ids = [ev["message_id"]] if ev and ev["message_id"] else []
        out.append(_hit(ev, rows, h, h.seq, h.seq, ids, h.layers, hq.snippet(rows[h.block].text, terms, 400)))
    if rate is not None:
        rate(out, [h.block for h in chosen])
    return out


def _strong_hits(hits: list[BlockHit], fusion: str, limit: int,
                 evidence: dict[int, float] | None = None) -> list[BlockHit]:
    """Hits allowed to form coarse events. By score: those whose evidence (the fused score
    before the turn rules' boosts, which reorder but do not make a match stronger) is
    within COARSE_MIN_SHARE of the best. By rank (scores only reflect positions there):
    every hit a word layer found, plus the best `limit` that only the semantic layer found,
    so vectors cannot chain a session."""
    if fusion == "score":
        ev = evidence or {h.block: h.score for h in hits}
        top = max((ev.get(h.block, 0.0) for h in hits), default=0.0)
        return [h for h in hits if ev.get(h.block, 0.0) >= COARSE_MIN_SHARE * top]
    out, semantic_only = [], 0
    for h in hits:
        if "literal" in h.layers or "fuzzy" in h.layers:
            out.append(h)
        elif semantic_only < max(limit, 10):
            semantic_only += 1
            out.append(h)
    return out


def _coarse(store: HistoryStore, cfg: Config, answer: dict[str, Any], hits: list[BlockHit],
            rows: dict[int, Any], terms: list[str], offset: int, limit: int,
            evidence: dict[int, float] | None = None, rate: confidence.Rater | None = None) -> list[Any]:
    """Up to events_per_session events per session, `limit` events from at most max_sessions
    sessions a page, cut to the token budget.

    The ranked event sequence does not depend on `offset`, so pages partition it. Returns
    the events from `offset` on (up to `limit + 1`): more than the answer shows means
    another page exists (events the budget or the session cap left out come next).
    """
    hc = cfg.history
    per_session: dict[str, int] = {}
    ranked = []
    # Only strong hits form events: a ranker that scores everything (vectors) would
    # otherwise chain a whole session into one event.
    want = offset + limit + 1
    # Every strong hit (not a prefix sized by the page) so that events, and therefore
    # pages, do not depend on `offset`.
    strong = _strong_hits(hits, hc.fusion, limit, evidence)
    for ev in aggregate(strong, hc.event_gap):
        if per_session.get(ev.session, 0) >= hc.events_per_session:
            continue
        per_session[ev.session] = per_session.get(ev.session, 0) + 1
        ranked.append(ev)
        if len(ranked) >= want:
            break
    rest = ranked[offset:]
    picked: list = []
    page_sessions: set[str] = set()
    for ev in rest[:limit]:
        if ev.session not in page_sessions and len(page_sessions) >= hc.max_sessions:
            break
        page_sessions.add(ev.session)
        picked.append(ev)
    per_session = {e.session: 1 for e in picked}
    evs = _event_rows(store, {(h.session, h.seq) for e in picked for h in e.hits})
    sess = {s["id"]: s for s in store.sessions(list(per_session))} if per_session else {}
    answer["sessions"] = {sid: {"title": (sess.get(sid) or {}).get("title"),
                                "date": (_iso((sess.get(sid) or {}).get("created_ms")) or "")[:10] or None}
                          for sid in per_session}
    full = []
    for e in picked:
        seqs = sorted({h.seq for h in e.hits})
        ids = [evs[(e.session, q)]["message_id"] for q in seqs
               if (e.session, q) in evs and evs[(e.session, q)]["message_id"]]
        layers = sorted({x for h in e.hits for x in h.layers}, key=LAYERS.index)
        hit = _hit(evs.get((e.session, e.best.seq)), rows, e.best, e.start_seq, e.end_seq, ids, layers, "")
        hit["score"] = round(e.score, 5)
        full.append((hit, rows[e.best.block].text))
    if rate is not None:  # before the fit: the budget holds the matches too
        rate([h for h, _ in full], [e.best.block for e in picked], [[h.block for h in e.hits] for e in picked])
    _fit_budget(answer, full, terms, hc.coarse_budget_tokens)
    return rest


def answer_tokens(answer: dict) -> int:
    """The token estimate of an answer as a caller would paste it (compact JSON)."""
    return estimate_tokens(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))


def _fit_budget(answer: dict[str, Any], full: list[tuple[dict[str, Any], str]], terms: list[str],
                budget: int) -> None:
    """Give every hit an equal share of what the budget leaves for snippets; drop the
    weakest hits when a share would be too small to be useful."""
    min_chars = 80
    answer["tokens"] = budget  # placeholder as wide as the final count, so the fit holds
    all_sessions = answer.get("sessions", {})
    while True:
        answer["hits"] = [h for h, _ in full]
        answer["sessions"] = {k: v for k, v in all_sessions.items() if any(h["session"] == k for h, _ in full)}
        for h in answer["hits"]:
            h["snippet"] = ""
        spare = budget - answer_tokens(answer) - 2
        n = len(full)
        if n == 0:
            break
        share = spare * 4 // n  # chars: four per token outside CJK
        if share >= min_chars or n == 1:
            for h, text in full:
                h["snippet"] = hq.snippet(text, terms, max(0, min(share, 600)))
            while answer_tokens(answer) > budget and any(h["snippet"] for h in answer["hits"]):
                h = max(answer["hits"], key=lambda x: len(x["snippet"]))
                h["snippet"] = h["snippet"][: int(len(h["snippet"]) * 0.8)]
            if answer_tokens(answer) <= budget or n == 1:
                break
        full = full[:-1]
    answer["tokens"] = answer_tokens(answer)
