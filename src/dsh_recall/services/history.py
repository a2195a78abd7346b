"""History recall: import transcripts, search them in three layers, show original text.

Public functions return plain dicts (JSON-ready) so the CLI, an MCP server and hooks share
one pipeline: `import_paths`, `search`, `show`, `compaction_anchor`, `status`, and for the
auto-recall gate `known_terms` / `OlderTurns` / `recent_events`.

Token counts use core.text.estimate_tokens (one per CJK character plus one per four other
characters) over the compact JSON of the answer, which is what a caller pastes into a model.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time as _time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..chunkers.transcript import CHUNKER_VERSION, EMBED_TEXT_VERSION, embed_text, event_blocks, text_hash
from ..core.config import Config, load_config
from ..core.errors import InputError, RecallError
from ..core.paths import recall_home
from ..core.text import estimate_tokens, fts_quote, index_text
from ..search import history_query as hq
from ..search.anchor import ANCHOR_TTL_TURNS, MAX_FRAGMENTS, build_anchor
from ..search.aggregate import BlockHit, aggregate
from ..search.fuse import rrf
from ..sources.transcripts import ReadContext, discover_default, expand, reader
from ..stores.history import BlockIn, HistoryStore, dumps_flags, loads_flags

LAYERS = ("literal", "fuzzy", "semantic")

# Layers merge by score (history.fusion = "score", the default: search.history_query.
# fuse_scores, each layer's scores over its best) or by reciprocal rank ("rank", k = rrf_k).
# Fuzzy mostly re-finds literal's matches (and adds typos), so it counts half lest it double
# literal's vote. The semantic score is the cosine's margin over the scope's mean cosine.
# Measured on locomo-dev (bench/history_locomo.py, minilm with context vectors): merged turn
# R@5 0.604 by rank (k 10, weights 1/0.5/0.7; k 60 gave 0.584), 0.627 by score (1/0.5/0.8).
LAYER_WEIGHTS = {"rank": {"literal": 1.0, "fuzzy": 0.5, "semantic": 0.7},
                 "score": {"literal": 1.0, "fuzzy": 0.5, "semantic": 0.8}}
EVENT_TEXT_CAP = 262_144  # chars of one event's original text kept for `show`
SESSION_ENV = "DSH_RECALL_SESSION"
_HEAD = 4096


def fuse_layers(rankings: dict[str, list[tuple[int, float]]], hcfg) -> list[tuple[int, float, dict[str, int]]]:
    """Merge the layers' (id, score) lists by score (default) or by rank, per config."""
    weights = LAYER_WEIGHTS[hcfg.fusion]
    if hcfg.fusion == "score":
        return hq.fuse_scores(rankings, weights)
    # A layer's zero scores are "not found" (the semantic layer scores every candidate, with
    # its margin over the scope's mean floored at 0): only positive scores earn a rank.
    return rrf({n: [i for i, s in items if s > 0] for n, items in rankings.items()},
               k=hcfg.rrf_k, weights=weights)


COARSE_MIN_SHARE = 0.3  # a hit below this share of the best fused score is not shown coarse


def db_path() -> Path:
    return recall_home() / "history.sqlite"


def open_store(path: Path | None = None) -> HistoryStore:
    return HistoryStore(path or db_path())


def _cfg(cfg: Config | None) -> Config:
    return cfg if cfg is not None else load_config()


# -- import --------------------------------------------------------------------------------

def _head_hash(path: Path, n: int) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.sha256(f.read(min(n, _HEAD))).hexdigest()


def _event_text(ev) -> str:
    parts = []
    for p in ev.pieces:
        label = {"reasoning": "[reasoning] ", "tool_call": "[tool call] ", "summary": ""}.get(p.kind, "")
        if p.kind == "tool_result":
            label = f"[{p.tool or 'tool'} result] "
        parts.append(label + p.text)
    text = "\n".join(parts)
    if len(text) > EVENT_TEXT_CAP:
        text = text[:EVENT_TEXT_CAP] + f"\n[... {len(text) - EVENT_TEXT_CAP} more chars in the source file ...]"
    return text


def import_file(store: HistoryStore, path: Path, fmt: str, cfg: Config) -> dict[str, Any]:
    """Import what is new in one transcript file; a rewritten or shrunk file is re-imported."""
    key = str(path.resolve())
    report: dict[str, Any] = {"path": str(path), "format": fmt, "events": 0, "blocks": 0,
                              "skipped": 0, "ignored": 0, "notes": []}
    try:
        st = path.stat()
        row = store.file(key)
        if row is not None:
            if st.st_size < row["offset"] or _head_hash(path, row["offset"]) != row["head_hash"]:
                gone = store.forget_file(key)
                report["notes"].append(f"file was rewritten; re-imported ({len(gone)} sessions replaced)")
                row = None
            elif st.st_size == row["offset"] and st.st_mtime_ns == row["mtime_ns"]:
                report["status"] = "unchanged"
                return report
        ctx = ReadContext()
        if row is not None:
            sess = store.sessions([row["session"]]) if row["session"] else []
            ctx = ReadContext(session=row["session"], workspace=sess[0]["workspace"] if sess else None,
                              line_no=row["line_no"], call_tools=store.call_tools(row["session"]) if row["session"] else {})
        res = reader(fmt)(path, row["offset"] if row else 0, ctx)
    except OSError as e:
        report["status"] = "error"
        report["notes"].append(f"cannot read: {e}")
        return report
    last_time: dict[str, int] = {}
    for ev in res.events:
        if ev.time_ms:
            last_time[ev.session] = max(last_time.get(ev.session, 0), ev.time_ms)
    sessions = [{"id": m.id, "source": m.source, "workspace": m.workspace, "title": m.title,
                 "created_ms": m.created_ms, "updated_ms": last_time.get(m.id) or m.created_ms, "path": key}
                for m in res.sessions.values()]
    events = [{"session": e.session, "seq": e.seq, "role": e.role, "time_ms": e.time_ms, "time": e.time,
               "message_id": e.message_id, "call_id": e.call_id, "flags": dumps_flags(e.flags),
               "text": _event_text(e)} for e in res.events]
    blocks = [BlockIn(b.session, b.seq, b.part, b.role, b.kind, b.tool, b.text, b.hash,
                      literal=index_text(b.text), trigram=b.text, cjk=hq.cjk_body(b.text))
              for b in event_blocks(res.events, cfg.history.result_block_chars)]
    file_session = next(iter(res.sessions)) if len(res.sessions) == 1 else (row["session"] if row else None)
    file_row = {"path": key, "format": fmt, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                "offset": res.offset, "line_no": res.line_no, "head_hash": _head_hash(path, res.offset),
                "session": file_session}
    report["blocks"] = store.write_batch(sessions, events, blocks, res.marks, file_row)
    report.update(status="imported", events=len(res.events), skipped=res.skipped, ignored=res.ignored,
                  sessions=sorted(res.sessions), notes=report["notes"] + res.notes)
    return report


def import_paths(
    paths: Sequence[str] | None = None,
    fmt: str | None = None,
    cfg: Config | None = None,
    embed: bool = False,
    store: HistoryStore | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Import transcripts (explicit files/folders, or the default locations when none).

    Lexical indexes are written first; then blocks are embedded: all of them with
    `embed=True`, else as many as fit in `embed_budget_s`. Embedding never fails an import.
    """
    cfg = _cfg(cfg)
    own = store is None
    store = store or open_store()
    try:
        files = expand(list(paths), fmt) if paths else discover_default()
        reports = []
        for path, f in files:
            if progress:
                progress(str(path))
            reports.append(import_file(store, path, f, cfg))
        sem = SemanticLayer(store, cfg)
        budget = None if embed else cfg.embed_budget_s
        embedded = sem.fill(None, budget)
        totals = {k: sum(r.get(k, 0) for r in reports) for k in ("events", "blocks", "skipped", "ignored")}
        return {"files": reports, **totals, "embedded": embedded, "semantic": sem.status, "index": store.stats()}
    finally:
        if own:
            store.close()


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
    ids = [s["id"] for s in store.sessions(workspace=workspace.rstrip("/") or "/")]
    return {"kind": "workspace", "value": workspace, "sessions": ids}


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rank_layers(store: HistoryStore, cfg: Config, query: str, scope: Sequence[str] | None,
                 layers: Sequence[str]) -> tuple[dict[str, list[tuple[int, float]]], dict[str, str]]:
    """(id, score) lists per layer, best first, scores higher-is-better and >= 0."""
    pool = cfg.history.candidate_pool
    rankings: dict[str, list[tuple[int, float]]] = {}
    status: dict[str, str] = {name: "not requested" for name in LAYERS}

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
                ranked = run("trigram", hq.trigram_match(query))
                cjk = run("cjk", hq.cjk_match(query))
                if cjk:
                    ranked = [(i, s) for i, s, _ in hq.fuse_scores({"tri": ranked, "cjk": cjk}, {})]
            else:
                sem = SemanticLayer(store, cfg)
                extra = {i for r in rankings.values() for i, _ in r}
                ranked = sem.rank(query, scope, pool, gate=len(layers) > 1, extra=extra)
                if sem.status != "ok":
                    status[name] = sem.status
                    continue
        except sqlite3.OperationalError as e:  # a layer that fails degrades to the others
            status[name] = f"failed: {e}"
            continue
        rankings[name] = ranked
        status[name] = "ok" if ranked else "no match"
    return rankings, status


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
) -> dict[str, Any]:
    """Search history. Coarse by default (events grouped per session, within
    `history.coarse_budget_tokens`); `detail=True` gives the full ranked list, one hit per
    event seq. An empty query returns no hits.

    Paging: `offset` skips the first `offset` hits of the same ranking (events when coarse,
    event seqs with `detail`); the answer's `has_more` says whether hits follow this page and
    `next_offset` is the offset to ask for next (None on the last page).
    """
    cfg = _cfg(cfg)
    offset = max(0, int(offset or 0))
    layers = list(layers or LAYERS)
    bad = [x for x in layers if x not in LAYERS]
    if bad:
        raise InputError(f"unknown layer {', '.join(bad)}; valid layers: {', '.join(LAYERS)}")
    own = store is None
    store = store or open_store()
    try:
        scope = resolve_scope(store, session, workspace, all_sessions, cwd)
        answer: dict[str, Any] = {"query": query, "scope": {"kind": scope["kind"], "value": scope["value"]},
                                  "hits": [], "layers": [], "offset": offset, "has_more": False,
                                  "next_offset": None}
        if not query.strip() or (scope["sessions"] is not None and not scope["sessions"]):
            answer["layer_status"] = {n: "not run" for n in LAYERS}
            return answer
        rankings, status = _rank_layers(store, cfg, query, scope["sessions"], layers)
        answer["layers"] = [n for n in LAYERS if n in rankings]
        answer["layer_status"] = status
        fused = fuse_layers(rankings, cfg.history)
        rows = store.blocks([i for i, _, _ in fused])
        hits = [BlockHit(i, rows[i].session, rows[i].ord, rows[i].seq, s, tuple(sorted(r, key=LAYERS.index)))
                for i, s, r in fused if i in rows]
        terms = hq.terms(query)
        if detail:
            n = limit or 20
            page = _detail_hits(store, hits, rows, terms, offset, n + 1)
            answer["hits"] = page[:n]
        else:
            answer["next_offset"] = 10**6  # as wide as the real value, so the budget fit holds
            page = _coarse(store, cfg, answer, hits, rows, terms, offset, limit or cfg.history.max_sessions)
        # One hit beyond the page is looked for, so `has_more` is exact, not a guess; hits
        # the coarse budget left out come first on the next page.
        answer["has_more"] = len(page) > len(answer["hits"])
        answer["next_offset"] = offset + len(answer["hits"]) if answer["has_more"] else None
        if "tokens" in answer:
            answer["tokens"] = answer_tokens(answer)
        return answer
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


def _hit(ev: dict, rows, best: BlockHit, start: int, end: int, ids: list[str], layers, snippet: str) -> dict:
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


def _detail_hits(store, hits: list[BlockHit], rows, terms, offset: int, limit: int) -> list[dict]:
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
    return out


def _strong_hits(hits: list[BlockHit], top: float, fusion: str, limit: int) -> list[BlockHit]:
    """Hits allowed to form coarse events. By score: those within COARSE_MIN_SHARE of the
    best. By rank (scores only reflect positions there): every hit a word layer found, plus
    the best `limit` that only the semantic layer found, so vectors cannot chain a session."""
    if fusion == "score":
        return [h for h in hits if h.score >= COARSE_MIN_SHARE * top]
    out, semantic_only = [], 0
    for h in hits:
        if "literal" in h.layers or "fuzzy" in h.layers:
            out.append(h)
        elif semantic_only < max(limit, 10):
            semantic_only += 1
            out.append(h)
    return out


def _coarse(store, cfg: Config, answer: dict, hits: list[BlockHit], rows, terms, offset: int,
            limit: int) -> list:
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
    top = hits[0].score if hits else 0.0
    want = offset + limit + 1
    # Every strong hit (not a prefix sized by the page) so that events, and therefore
    # pages, do not depend on `offset`.
    strong = _strong_hits(hits, top, hc.fusion, limit)
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
    _fit_budget(answer, full, terms, hc.coarse_budget_tokens)
    return rest


def answer_tokens(answer: dict) -> int:
    """The token estimate of an answer as a caller would paste it (compact JSON)."""
    return estimate_tokens(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))


def _fit_budget(answer: dict, full: list[tuple[dict, str]], terms, budget: int) -> None:
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


# -- semantic layer ------------------------------------------------------------------------

_EMBEDDERS: dict[str, Any] = {}


def _embedder(cfg: Config):
    key = cfg.embedder.model_dump_json()
    if key not in _EMBEDDERS:
        from ..embedders import create

        _EMBEDDERS[key] = create(cfg.embedder)
    return _EMBEDDERS[key]


class SemanticLayer:
    """Vectors of blocks, keyed by the hash of the text embedded (chunkers.transcript.
    embed_text: the block with the tail of the one before it); a block whose context
    changes gets a new hash and a new vector, so nothing mixes. Degrades to
    `status != "ok"`, never raises.

    The coverage gate: while less than `history.coverage_gate` of the blocks in scope are
    embedded, the layer stays out of a merged ranking (a half-embedded corpus would push
    the embedded half up for no reason), and `status` says how far it got.
    """

    def __init__(self, store: HistoryStore, cfg: Config):
        self.store, self.cfg = store, cfg
        self.status = "ok"
        self.emb = None
        try:
            self.emb = _embedder(cfg)
            fp = f"{self.emb.fingerprint}|{CHUNKER_VERSION}|{EMBED_TEXT_VERSION}"
            if store.get_meta("fingerprint") != fp:
                # Never mix two vector spaces: a new embedder starts from zero.
                store.clear_vectors()
                store.set_meta("fingerprint", fp)
        except (RecallError, ImportError, OSError) as e:
            self.status = f"unavailable: {e}"

    def fill(self, scope: Sequence[str] | None, budget_s: float | None) -> int:
        """Embed blocks without vectors (all, or until `budget_s` runs out). Returns count."""
        if self.emb is None:
            return 0
        done = 0
        deadline = None if budget_s is None else _time.monotonic() + budget_s
        batch = max(8, self.emb.batch_size)
        while todo := self.store.unhashed(scope, 2000):  # cheap: a hash per block, no model
            self.store.set_embed_hashes([(i, text_hash(embed_text(t, p))) for i, t, p in todo])
        while deadline is None or _time.monotonic() < deadline:
            todo = self.store.pending(scope, batch)
            if not todo:
                break
            try:
                vecs = self.emb.embed([embed_text(t, p) for _, t, p in todo])
            except (RecallError, ImportError, OSError, ValueError, RuntimeError) as e:
                self.status = f"failed: {e}"
                break
            self.store.put_vectors([(h, v) for (h, _, _), v in zip(todo, vecs)])
            done += len(todo)
        return done

    def coverage(self, scope: Sequence[str] | None) -> tuple[int, int]:
        return self.store.embedded_count(scope), self.store.block_count(scope)

    def rank(self, query: str, scope: Sequence[str] | None, limit: int, gate: bool = True,
             extra: set[int] | frozenset[int] = frozenset()) -> list[tuple[int, float]]:
        """(block id, score) by cosine similarity to the query, best first: the top `limit`
        plus the blocks in `extra` (other layers' candidates). The score is the cosine's
        margin over the mean cosine in scope, floored at 0. [] when gated or broken."""
        if self.emb is None:
            return []
        done, total = self.coverage(scope)
        if total and done / total < self.cfg.history.coverage_gate:
            self.fill(scope, self.cfg.embed_budget_s)
            done, total = self.coverage(scope)
        if self.status != "ok":
            return []
        if total == 0:
            return []
        if gate and done / total < self.cfg.history.coverage_gate:
            self.status = f"gated: {done}/{total} blocks embedded ({done / total:.0%} < {self.cfg.history.coverage_gate:.0%})"
            return []
        try:
            q = self.emb.embed([query], query=True)[0]
        except (RecallError, ImportError, OSError, ValueError, RuntimeError) as e:
            self.status = f"failed: {e}"
            return []
        ids, mat = self.store.vector_matrix(scope)
        if not len(ids) or mat.shape[1] != q.shape[0]:
            return []
        cos = mat @ q
        margin = np.maximum(cos - float(cos.mean()), 0.0)
        top = np.argsort(-cos, kind="stable")[:limit]
        keep = set(top.tolist())
        if extra:
            keep |= set(np.flatnonzero(np.isin(ids, list(extra))).tolist())
        order = sorted(keep, key=lambda k: (-cos[k], k))
        return [(int(ids[k]), float(margin[k])) for k in order]


# -- detail: original text -----------------------------------------------------------------

def _session_info(store: HistoryStore, session: str) -> dict:
    rows = store.sessions([session])
    if not rows:
        raise InputError(f"unknown session '{session}'; import it first (dsh-recall history import)")
    s = rows[0]
    return {"id": s["id"], "source": s["source"], "workspace": s["workspace"], "title": s["title"],
            "created": _iso(s["created_ms"]), "updated": _iso(s["updated_ms"]),
            "events": store.event_count(session)}


def _event_out(e: dict, max_chars: int) -> dict:
    text = e["text"]
    out = {"seq": e["seq"], "role": e["role"], "time": _iso(e["time_ms"]) or e["time"],
           "message_id": e["message_id"], "text": text[:max_chars]}
    if len(text) > max_chars:
        out["truncated"] = len(text)
    flags = loads_flags(e["flags"])
    if flags:
        out["flags"] = flags
    return out


def show(session: str, around: int | None = None, window: int = 3, page: int | None = None,
         page_size: int = 20, max_chars: int = 20000, store: HistoryStore | None = None,
         offset: int | None = None) -> dict[str, Any]:
    """The exact original text of a session's events: `window` events either side of seq
    `around`; or, when browsing, `page_size` events from event index `offset` (0-based) or
    page `page` (1-based). Every answer carries `offset` (index of its first event),
    `has_more` and `next_offset` (where browsing continues; None at the session's end)."""
    own = store is None
    store = store or open_store()
    try:
        info = _session_info(store, session)
        total = info["events"]
        page_size = max(1, page_size)
        pages = max(1, -(-total // page_size))
        out: dict[str, Any] = {"session": info}
        if around is not None:
            lo, hi = store.event_seqs_near(session, around, max(0, window))
            if window <= 0:
                lo = hi = around
            evs = store.events(session, lo=lo, hi=hi)
            out["around"] = around
            first = store.events_before(session, evs[0]["seq"]) if evs else store.events_before(session, around)
        else:
            if offset is not None:
                first = min(max(0, int(offset)), total)
            else:
                first = (min(max(1, page or 1), pages) - 1) * page_size
            evs = store.events(session, offset=first, limit=page_size)
            out.update(page=first // page_size + 1, pages=pages)
        out["events"] = [_event_out(e, max_chars) for e in evs]
        end = first + len(evs)
        out.update(offset=first, has_more=end < total, next_offset=end if end < total else None)
        return out
    finally:
        if own:
            store.close()


def compaction_anchor(session: str, max_fragments: int = MAX_FRAGMENTS, budget_chars: int = 2400,
                      store: HistoryStore | None = None) -> dict[str, Any]:
    """The anchor for a session's latest compaction: the summary plus up to `max_fragments`
    (3) key original fragments it replaced (the user's messages first, then the longest
    assistant text blocks; never tool output), all within `budget_chars`.

    The one place anchors are made (the SessionStart hook goes through here); the choice
    and cutting of fragments is the pure `search.anchor.build_anchor`. Candidates are the
    events the compaction shadowed (flagged pruned/summarized); a harness that does not
    flag them (Claude Code, Codex) offers the events before the summary instead. Returns
    `{session, summary, fragments, ttl, context}`; `summary` and `context` are None when the
    session has no compaction.
    """
    own = store is None
    store = store or open_store()
    try:
        info = _session_info(store, session)
        summ = store.latest_summary(session)
        out: dict[str, Any] = {"session": info, "summary": None, "fragments": [], "ttl": ANCHOR_TTL_TURNS,
                               "context": None}
        if summ is None:
            return out
        shadowed = store.flagged_events(session, "summarized", 500) + store.flagged_events(session, "pruned", 500)
        if not shadowed:
            shadowed = [e for e in store.events(session, hi=summ["seq"] - 1)[-200:]]
        seen: set[int] = set()
        events = [e for e in sorted(shadowed, key=lambda x: x["seq"])
                  if not (e["seq"] in seen or seen.add(e["seq"]))]
        a = build_anchor(session, summ["text"], events, budget_chars=budget_chars, max_fragments=max_fragments)
        summary = _event_out(summ, len(summ["text"]))
        summary["text"] = a.summary
        if len(a.summary) < len(summ["text"]):
            summary["truncated"] = len(summ["text"])
        out.update(summary=summary, fragments=[dict(f.__dict__) for f in a.fragments], ttl=a.ttl,
                   context=a.render())
        return out
    finally:
        if own:
            store.close()


# -- helpers for the auto-recall gate -------------------------------------------------------

def known_terms(terms: Sequence[str], session: str, before_seq: int | None = None,
                store: HistoryStore | None = None) -> set[str]:
    """The terms (words, phrases, CJK segments) that occur in the session's events before
    seq `before_seq` (all events when None): literal words first, then CJK bigrams, then
    trigrams, so a typo or a fragment still counts. Never raises on odd input."""
    own = store is None
    store = store or open_store()
    try:
        found: set[str] = set()
        for term in dict.fromkeys(t for t in terms if isinstance(t, str) and t.strip()):
            for layer, match in (("literal", fts_quote(term)), ("cjk", hq.cjk_match(term)),
                                 ("trigram", hq.trigram_match(term))):
                if not match:
                    continue
                try:
                    ids = [i for i, _ in store.fts(layer, match, [session], 20)]
                except sqlite3.Error:  # an FTS syntax edge must not break recall
                    continue
                if any(before_seq is None or r.seq < before_seq for r in store.blocks(ids).values()):
                    found.add(term)
                    break
        return found
    finally:
        if own:
            store.close()


class OlderTurns:
    """A lazy `term in older` container over a session's older events, for the gate
    (search.gate probes only the segments it needs); answers are memoised."""

    def __init__(self, session: str, before_seq: int | None, store: HistoryStore):
        self.session, self.before, self.store = session, before_seq, store
        self._memo: dict[str, bool] = {}

    def __contains__(self, term: object) -> bool:
        if not isinstance(term, str):
            return False
        if term not in self._memo:
            self._memo[term] = bool(known_terms([term], self.session, self.before, self.store))
        return self._memo[term]


def recent_events(session: str, n: int, store: HistoryStore | None = None) -> list[dict]:
    """The session's last `n` events (seq, role, text, ...), oldest first; [] if unknown."""
    own = store is None
    store = store or open_store()
    try:
        return store.last_events(session, max(0, n))
    finally:
        if own:
            store.close()


def status(store: HistoryStore | None = None) -> dict[str, Any]:
    own = store is None
    store = store or open_store()
    try:
        return {"db": str(store.path), **store.stats()}
    finally:
        if own:
            store.close()
