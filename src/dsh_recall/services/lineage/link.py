"""Which agent session produced a commit: a session whose text names the commit's hash (the
`git commit` it ran printed it), or one that edited the file near the commit's time.

Read through the history store's contract only (its trigram layer finds the hash or the
path inside any block; blocks and events give the tool, the kind and the time), and only
sessions the viewer's channel may see, decided exactly as history search decides
(services/access/channel.Viewer). The answer is bounded: a few sessions, a few turns each, each
turn cut to `turn_chars`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import StoreError
from ...core.text import fts_quote
from ...stores.contracts import CommitRow
from ...stores.sqlite.history import HistoryStore  # the type services/history uses too
from ..access.channel import Viewer
from .common import iso

# Tool names (lower case) that write a file; any name holding one of EDIT_WORDS counts too.
EDIT_TOOLS = frozenset({"edit", "write", "multiedit", "notebookedit", "apply_patch", "patch",
                        "str_replace_editor", "str_replace_based_edit_tool", "create_file",
                        "write_file", "edit_file", "replace", "insert"})
EDIT_WORDS = ("edit", "write", "patch", "replace")
NOT_EDITS = ("todo", "memory")  # TodoWrite and friends write no file of the repository
AFTER_COMMIT_S = 3600  # an edit this long after the commit's time still counts
HASH_PREFIX = 7
CANDIDATES = 200  # blocks read from one trigram query
MAX_SESSIONS = 2


def is_edit_tool(name: str | None) -> bool:
    """Whether a tool call of this name writes a file (pure)."""
    if not name:
        return False
    low = name.lower()
    if any(w in low for w in NOT_EDITS):
        return False
    return low in EDIT_TOOLS or any(w in low for w in EDIT_WORDS)


# A shell call that applies a patch (Codex writes files through `apply_patch` in a shell).
_PATCH_MARKS = ("*** Update File: ", "*** Add File: ", "apply_patch")


def is_edit_call(tool: str | None, text: str) -> bool:
    """Whether a tool call writes a file: an edit tool, or a shell call applying a patch."""
    return is_edit_tool(tool) or any(m in text for m in _PATCH_MARKS)


def holds_line(text: str, line: str) -> bool:
    """Whether a tool call's text holds the line, as written or JSON-escaped (a tool input
    is stored as its JSON)."""
    return bool(line) and (line in text or json.dumps(line, ensure_ascii=False)[1:-1] in text)


def names_commit(text: str, sha: str) -> bool:
    """Whether `text` writes the commit's hash (7 hex digits or more of it, whole)."""
    for m in re.finditer(r"(?<![0-9a-f])" + re.escape(sha[:HASH_PREFIX]) + r"[0-9a-f]*(?![0-9a-f])",
                         text):
        if sha.startswith(m.group(0)):
            return True
    return False


@dataclass
class Candidate:
    session: str
    score: float = 0.0
    why: set[str] = field(default_factory=set)  # "commit" (names the hash), "edit", "line"
    seqs: dict[int, str] = field(default_factory=dict)  # event seq -> what it shows
    gap_s: float = float("inf")  # the closest edit's distance from the commit's time


def _visible(store: HistoryStore, viewer: Viewer | None, ids: Sequence[str] | None = None
             ) -> dict[str, dict[str, Any]]:
    rows = store.sessions(list(ids)) if ids is not None else store.sessions()
    return {s["id"]: s for s in rows if viewer is None or viewer.unfiltered
            or viewer.can_see(s.get("channel"))}


def _event_times(store: HistoryStore, session: str, seqs: Sequence[int]) -> dict[int, int | None]:
    return {e["seq"]: e.get("time_ms") for e in store.events(session, seqs=sorted(set(seqs)))}


def find_sessions(store: HistoryStore, commit: CommitRow, rel: str, line_text: str, *,
                  viewer: Viewer | None, window_s: int) -> list[Candidate]:
    """Sessions that produced `commit`'s change of `rel`, best first (at most MAX_SESSIONS)."""
    found: dict[str, Candidate] = {}

    def cand(sid: str) -> Candidate:
        return found.setdefault(sid, Candidate(sid))

    # 1. The commit's hash in a session's text (the output of the `git commit` it ran).
    try:
        hits = store.fts("trigram", fts_quote(commit.hash[:HASH_PREFIX]), None, CANDIDATES)
    except StoreError:
        hits = []
    blocks = store.blocks([i for i, _ in hits])
    seen = _visible(store, viewer, sorted({b.session for b in blocks.values()}))
    for b in blocks.values():
        if b.session in seen and names_commit(b.text, commit.hash):
            c = cand(b.session)
            if "commit" not in c.why:
                c.score += 10
            c.why.add("commit")
            c.seqs.setdefault(b.seq, "commit")

    # 2. An edit of the file by a session that was open around the commit's time.
    lo_ms = (commit.author_time - window_s) * 1000
    hi_ms = (max(commit.author_time, commit.committer_time) + AFTER_COMMIT_S) * 1000
    near = [sid for sid, s in _visible(store, viewer).items()
            if (s.get("updated_ms") or s.get("created_ms") or 0) >= lo_ms
            and (s.get("created_ms") or s.get("updated_ms") or hi_ms + 1) <= hi_ms]
    line = line_text.strip()
    if near:
        for needle, need_line in ((rel, False), (rel.rsplit("/", 1)[-1], True)):
            if len(needle) < 3 or (need_line and len(line) < 8):
                continue
            try:
                hits = store.fts("trigram", fts_quote(needle), near, CANDIDATES)
            except StoreError:
                continue
            edits = [b for b in store.blocks([i for i, _ in hits]).values()
                     if b.kind == "tool_call" and is_edit_call(b.tool, b.text) and needle in b.text
                     and (not need_line or holds_line(b.text, line))]
            by_session: dict[str, list[int]] = {}
            for b in edits:
                by_session.setdefault(b.session, []).append(b.seq)
            for sid, seqs in by_session.items():
                times = _event_times(store, sid, seqs)
                for b in edits:
                    t = times.get(b.seq) if b.session == sid else None
                    if b.session != sid or t is None or not lo_ms <= t <= hi_ms:
                        continue
                    c = cand(sid)
                    has_line = len(line) >= 4 and holds_line(b.text, line)
                    if "edit" not in c.why:
                        c.score += 2
                    if has_line and "line" not in c.why:
                        c.score += 5
                    c.why.add("edit")
                    if has_line:
                        c.why.add("line")
                    c.gap_s = min(c.gap_s, abs(commit.author_time - t / 1000))
                    c.seqs[b.seq] = "line" if has_line else c.seqs.get(b.seq, "edit")
            if found and any("edit" in c.why for c in found.values()):
                break
    return sorted(found.values(), key=lambda c: (-c.score, c.gap_s, c.session))[:MAX_SESSIONS]


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def turns(store: HistoryStore, cand: Candidate, *, max_turns: int, turn_chars: int
          ) -> list[dict[str, Any]]:
    """The session's relevant turns, in order: the user's request before the change, the
    edit that made it (the one holding the line first), and the turn naming the commit."""
    ranked = sorted(cand.seqs.items(), key=lambda kv: ({"line": 0, "commit": 1}.get(kv[1], 2), kv[0]))
    picked: dict[int, str] = {}
    for seq, what in ranked:
        if len(picked) >= max(1, max_turns - 1):
            break
        picked[seq] = what
    first = min(picked) if picked else 0
    before = store.events(cand.session, lo=max(0, first - 60), hi=first)
    ask = [e for e in before if e.get("role") == "user" and e["seq"] < first]
    if ask and len(picked) < max_turns:
        picked[ask[-1]["seq"]] = "request"
    events = {e["seq"]: e for e in store.events(cand.session, seqs=sorted(picked))}
    out = []
    for seq in sorted(picked):
        e = events.get(seq)
        if e is None:
            continue
        out.append({"seq": seq, "role": e.get("role") or "", "time": iso((e.get("time_ms") or 0) / 1000),
                    "shows": picked[seq], "text": _cut(e.get("text") or "", turn_chars)})
    return out


def linked_sessions(store: HistoryStore, commit: CommitRow, rel: str, line_text: str, *,
                    viewer: Viewer | None, window_s: int, max_turns: int,
                    turn_chars: int) -> list[dict[str, Any]]:
    """The sessions behind `commit`'s change of `rel` with their relevant turns."""
    out = []
    for c in find_sessions(store, commit, rel, line_text, viewer=viewer, window_s=window_s):
        meta = (store.sessions([c.session]) or [{}])[0]
        out.append({
            "session": c.session, "title": meta.get("title") or "", "source": meta.get("source") or "",
            "workspace": meta.get("workspace") or "",
            "match": sorted(c.why, key=["commit", "line", "edit"].index),
            "turns": turns(store, c, max_turns=max_turns, turn_chars=turn_chars)})
    return out
