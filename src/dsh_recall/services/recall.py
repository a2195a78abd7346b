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
from ..policy.anchor import ANCHOR_TTL_TURNS, pointer
from ..policy.gate import GateState, gate, referring_segments
from . import history
from .access.channel import Viewer, channel_key_from_env

RECENT_IN_CONTEXT = 2  # events this close to the end are still in the model's context
CONTEXT_BUDGET_CHARS = 2400
MAX_HITS = 3  # turns an auto-recall block quotes


def _regular(path: str) -> bool:
    from ..readers.workspace import stat_regular

    try:
        stat_regular(path)
        return True
    except OSError:
        return False


# Flags of an event a compaction took out of the model's context (readers/transcripts: dsh's
# compaction/prune and compaction/summary, Cline's condensed messages).
SHADOWED = frozenset({"pruned", "summarized"})


def in_context(hit: dict[str, Any], session: str, since: int | None) -> bool:
    """Whether the model still has this hit's event: one of this session not shadowed by a
    compaction and not before its latest summary (a harness that marks no shadowed events,
    as Claude Code, drops everything before it). Quoting it again only repeats it."""
    if hit.get("session", session) != session or SHADOWED & set(hit.get("flags") or ()):
        return False
    return since is None or int(hit.get("start_seq", -1)) >= since

class RecallService:
    """Decides per user message whether to inject history; builds anchors after compactions."""

    def __init__(self, cfg: Config, home: Path | None = None, embed_imports: bool = True,
                 viewer: Viewer | None = None):
        """`embed_imports=False` for a process that lives for one hook call: loading the
        model to embed a prompt's few new blocks would cost the prompt about half a second;
        a search, the MCP server or the dsh worker embeds them instead. `viewer`: the
        caller's channel as a long-lived front end resolved it once (None: from
        `$DSH_RECALL_CHANNEL` against `cfg`, as a hook's one process does)."""
        self.cfg = cfg
        self.viewer = viewer
        self.embed_imports = embed_imports
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
        if transcript and _regular(transcript):
            # Sessions a hook imports belong to the channel the harness runs the hook for.
            # A prompt waits for this: only this session's new blocks are embedded here,
            # and none by a process that would load the model for them.
            history.import_paths([transcript], cfg=self.cfg, channel=channel_key_from_env(),
                                 backlog=False, embed_budget_s=None if self.embed_imports else 0)

    # -- auto-recall ----------------------------------------------------------------------
    def on_user_prompt(self, session: str, prompt: str, transcript: str | None = None) -> dict[str, Any]:
        """Run the gate for a new user message; returns {fire, reason, context?}."""
        st = self.state(session)
        turn = int(st.get("turn", 0)) + 1
        self._set(session, turn=turn)
        self.refresh(transcript)
        store = history.open_store()
        try:
            events = history.recent_events(session, max(4, RECENT_IN_CONTEXT), store=store)
            if not events:
                return {"fire": False, "reason": "session not in history yet", "turn": turn}
            recent = events[-RECENT_IN_CONTEXT:]
            summary = store.latest_summary(session)
            older = history.OlderTurns(session, recent[0]["seq"] if recent else None, store)
            prev = " ".join(e["text"] for e in events[-4:] if e["role"] in ("user", "assistant"))
            d = gate(prompt, older, referring_segments(prev)[:12],
                     GateState(turn, st.get("live_until")))
        finally:
            store.close()
        out: dict[str, Any] = {"fire": d.fire, "reason": d.reason, "kind": d.kind, "turn": turn}
        if d.fire and d.kind == "process" and turn <= int(st.get("anchor_until") or -1):
            # "continue" right after a compaction: the live anchor already restores the work.
            # A question about the past still fires (the summary may have lost its answer).
            return {**out, "fire": False, "reason": "the compaction anchor is live"}
        if not d.fire:
            return out
        key = channel_key_from_env()
        viewer = self.viewer or (Viewer(self.cfg, key) if key else None)
        # The question itself ranks the turns that answer it (a decision, its reason); the
        # gate's terms alone found the turns that merely mention them. One hit per event,
        # the best few, none of those still in the model's context, and none rated weak when
        # another is strong (an unrelated log fragment under the decision that answers).
        query = prompt if d.kind == "past_reference" else " ".join(d.query_terms)
        found = history.search(query, session=session, cfg=self.cfg, viewer=viewer,
                               detail=True, limit=MAX_HITS + RECENT_IN_CONTEXT + 8)
        recent_seqs = {int(e["seq"]) for e in recent}
        since = int(summary["seq"]) if summary else None
        hits = [h for h in found.get("hits") or []
                if int(h.get("start_seq", -1)) not in recent_seqs and not in_context(h, session, since)]
        if any(h.get("match") == "strong" for h in hits):
            hits = [h for h in hits if h.get("match") == "strong"]
        found["hits"] = hits[:MAX_HITS]
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
        lines.append(pointer("Exact text", session))
        text = "\n".join(lines)
        return text[:CONTEXT_BUDGET_CHARS]

    # -- compaction anchor ----------------------------------------------------------------
    def anchor(self, session: str, transcript: str | None = None) -> dict[str, Any] | None:
        """The anchor for the session's latest compaction (None without one); goes live."""
        self.refresh(transcript)
        try:
            a = history.compaction_anchor(session, budget_chars=CONTEXT_BUDGET_CHARS)
        except history.InputError:  # a session not in history has no compaction to anchor
            return None
        if a["summary"] is None:
            return None
        turn = int(self.state(session).get("turn", 0))
        # Its own lifetime: the gate's `live_until` stays free, so a question about what the
        # summary lost still fires history recall while the anchor is live.
        self._set(session, anchor_until=turn + ANCHOR_TTL_TURNS)
        return {"session": session, "summary": a["summary"]["text"], "ttl": a["ttl"],
                "fragments": a["fragments"], "context": a["context"]}
