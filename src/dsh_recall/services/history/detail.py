"""History detail calls: the exact original text of events (`show`), compaction anchors,
and the look-ups the auto-recall gate makes (`known_terms`, `OlderTurns`, `recent_events`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.clean import as_int, as_name, as_start, cleaned
from ...core.errors import InputError, StoreError, UnknownSession
from ...core.text import fts_quote
from ...policy.anchor import ANCHOR_TTL_TURNS, MAX_FRAGMENTS, build_anchor
from ...rank import history_query as hq
from ...stores.sqlite.history import HistoryStore, loads_flags
from ..access import forgotten
from ..access.channel import Viewer
from .common import _iso, open_store


def _session_info(store: HistoryStore, session: str, viewer: Viewer | None = None) -> dict[str, Any]:
    rows = store.sessions([session])
    if rows and viewer is not None and not viewer.can_see(rows[0].get("channel")):
        rows = []  # a session this channel may not see is answered as unknown
    if not rows:
        raise UnknownSession(f"unknown session '{session}'; import it first (dsh-recall history import)")
    s = rows[0]
    return {"id": s["id"], "source": s["source"], "workspace": s["workspace"], "title": s["title"],
            "created": _iso(s["created_ms"]), "updated": _iso(s["updated_ms"]),
            "events": store.event_count(session)}


def require_session(session: str, viewer: Viewer | None = None,
                    store: HistoryStore | None = None) -> dict[str, Any]:
    """The session's info (id, source, workspace, title, times, events); UnknownSession when
    it is not imported or `viewer` may not see it (answered alike)."""
    own = store is None
    store = store or open_store()
    try:
        return _session_info(store, session, viewer)
    finally:
        if own:
            store.close()


def _event_out(e: dict[str, Any], max_chars: int) -> dict[str, Any]:
    text = e["text"]
    out = {"seq": e["seq"], "role": e["role"], "time": _iso(e["time_ms"]) or e["time"],
           "message_id": e["message_id"], "text": text[:max_chars]}
    if len(text) > max_chars:
        out["truncated"] = len(text)
    flags = loads_flags(e["flags"])
    if flags:
        out["flags"] = flags
    return out


@cleaned(session=as_name, around=as_int, window=as_int, page=as_int, page_size=as_int,
         max_chars=as_int, offset=as_start)
def show(session: str, around: int | None = None, window: int = 3, page: int | None = None,
         page_size: int = 20, max_chars: int = 20000, store: HistoryStore | None = None,
         offset: int | None = None, viewer: Viewer | None = None) -> dict[str, Any]:
    """The exact original text of a session's events: `window` events either side of seq
    `around`; or, when browsing, `page_size` events from event index `offset` (0-based) or
    page `page` (1-based). Every answer carries `offset` (index of its first event),
    `has_more` and `next_offset` (where browsing continues; None at the session's end)."""
    own = store is None
    store = store or open_store()
    try:
        info = _session_info(store, session, viewer)
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
                if page is not None and page > pages:
                    raise InputError(f"session {session} has {pages} page{'s' if pages != 1 else ''} "
                                     f"of {page_size} events; page {page} is past the end")
                first = (max(1, page or 1) - 1) * page_size
            evs = store.events(session, offset=first, limit=page_size)
            out.update(page=first // page_size + 1, pages=pages)
        out["events"] = [_event_out(e, max_chars) for e in evs]
        forgotten.redact_events(out["events"])  # a forgotten note is not shown back in a quote
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
        first: dict[int, dict] = {}  # each seq once (the first row of it), in seq order
        for e in sorted(shadowed, key=lambda x: x["seq"]):
            first.setdefault(e["seq"], e)
        events = list(first.values())
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
                except StoreError:  # an FTS syntax edge must not break recall
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


def recent_events(session: str, n: int, store: HistoryStore | None = None) -> list[dict[str, Any]]:
    """The session's last `n` events (seq, role, text, ...), oldest first; [] if unknown."""
    own = store is None
    store = store or open_store()
    try:
        return store.last_events(session, max(0, n))
    finally:
        if own:
            store.close()

