"""Auto-recall and compaction anchors: the gate plus history, with live-injection state.

State (per session: the turn counter and until which turn an injection is live) is a small
JSON file under the recall home, so separate hook processes agree on it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ..core.config import Config
from ..core.paths import ensure_dir, recall_home
from ..core.text import fts_quote
from ..search.anchor import ANCHOR_TTL_TURNS, build_anchor
from ..search.gate import GateState, gate, referring_segments
from . import history

RECENT_IN_CONTEXT = 2  # events this close to the end are still in the model's context
CONTEXT_BUDGET_CHARS = 2400


class _OlderTurns:
    """`term in older`: does the term hit the session's older events (literal, then fuzzy)?"""

    def __init__(self, store: history.HistoryStore, session: str, before_seq: int | None):
        self.store, self.session, self.before = store, session, before_seq
        self._memo: dict[str, bool] = {}

    def __contains__(self, term: object) -> bool:
        if not isinstance(term, str):
            return False
        if term not in self._memo:
            found = False
            for layer, match in (("literal", fts_quote(term)),
                                 ("cjk", history.hq.cjk_match(term)),
                                 ("trigram", history.hq.trigram_match(term))):
                if not match:
                    continue
                try:
                    ids = [i for i, _ in self.store.fts(layer, match, [self.session], 20)]
                except Exception:  # noqa: BLE001 - an FTS syntax edge must not break recall
                    continue
                rows = self.store.blocks(ids)
                if any(self.before is None or r.seq < self.before for r in rows.values()):
                    found = True
                    break
            self._memo[term] = found
        return self._memo[term]


class RecallService:
    """Decides per user message whether to inject history; builds anchors after compactions."""

    def __init__(self, cfg: Config, home: Path | None = None):
        self.cfg = cfg
        self.dir = ensure_dir((home or recall_home()) / "recall")
        self.state_path = self.dir / "live.json"

    # -- state ----------------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def _save(self, data: dict[str, Any]) -> None:
        # Keep the file small: forget sessions idle for a week.
        cutoff = time.time() - 7 * 86400
        data = {k: v for k, v in data.items() if v.get("updated", 0) >= cutoff}
        tmp = self.state_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, self.state_path)

    def state(self, session: str) -> dict[str, Any]:
        return self._load().get(session, {"turn": 0, "live_until": None})

    def _set(self, session: str, **kw: Any) -> None:
        data = self._load()
        cur = data.get(session, {"turn": 0, "live_until": None})
        cur.update(kw, updated=time.time())
        data[session] = cur
        self._save(data)

    # -- import -------------------------------------------------------------------------------
    def refresh(self, transcript: str | None) -> None:
        """Bring the session's transcript into history (incremental, append-only)."""
        if transcript and Path(transcript).is_file():
            history.import_paths([transcript], cfg=self.cfg)

    # -- auto-recall ----------------------------------------------------------------------
    def on_user_prompt(self, session: str, prompt: str, transcript: str | None = None) -> dict[str, Any]:
        """Run the gate for a new user message; returns {fire, reason, context?}."""
        st = self.state(session)
        turn = int(st.get("turn", 0)) + 1
        self._set(session, turn=turn)
        self.refresh(transcript)
        store = history.open_store()
        try:
            events = store.events(session)
            if not events:
                return {"fire": False, "reason": "session not in history yet", "turn": turn}
            recent = events[-RECENT_IN_CONTEXT:]
            older = _OlderTurns(store, session, recent[0]["seq"] if recent else None)
            prev = " ".join(e["text"] for e in events[-4:] if e["role"] in ("user", "assistant"))
            d = gate(prompt, older, referring_segments(prev)[:12],
                     GateState(turn, st.get("live_until")))
        finally:
            store.close()
        out: dict[str, Any] = {"fire": d.fire, "reason": d.reason, "kind": d.kind, "turn": turn}
        if not d.fire:
            return out
        found = history.search(" ".join(d.query_terms), session=session, cfg=self.cfg)
        text = self._render_hits(session, d.reason, found)
        if not text:
            return {**out, "fire": False, "reason": d.reason + "; but history found nothing"}
        self._set(session, live_until=d.expires_after(turn))
        return {**out, "context": text, "live_until": d.expires_after(turn)}

    def _render_hits(self, session: str, reason: str, found: dict[str, Any]) -> str:
        hits = found.get("hits") or []
        if not hits:
            return ""
        lines = [f"[dsh-recall] Earlier in this session (auto-recall: {reason}):"]
        for h in hits:
            lines.append(f"- seq {h['start_seq']}-{h['end_seq']} {h['role']}: {h['snippet']}")
        lines.append(f"Exact text: history_detail(session=\"{session}\", around=<seq>).")
        text = "\n".join(lines)
        return text[:CONTEXT_BUDGET_CHARS]

    # -- compaction anchor ----------------------------------------------------------------
    def anchor(self, session: str, transcript: str | None = None) -> dict[str, Any] | None:
        """The anchor for the session's latest compaction (None without one); goes live."""
        self.refresh(transcript)
        store = history.open_store()
        try:
            summ = store.latest_summary(session)
            if summ is None:
                return None
            shadowed = (store.flagged_events(session, "summarized", 500)
                        + store.flagged_events(session, "pruned", 500))
            seen: set[int] = set()
            events = [e for e in shadowed if not (e["seq"] in seen or seen.add(e["seq"]))]
        finally:
            store.close()
        a = build_anchor(session, summ["text"], events, budget_chars=CONTEXT_BUDGET_CHARS)
        turn = int(self.state(session).get("turn", 0))
        self._set(session, live_until=turn + ANCHOR_TTL_TURNS)
        return {**a.as_dict(), "context": a.render()}
