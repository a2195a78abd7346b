"""Cursor chats (Composer / Agent): `<Cursor user dir>/globalStorage/state.vscdb`.

Cursor is closed source; this layout is the one independent tools document from reading
their own databases (docs/history.md cites them). The database is VS Code's key-value
store: tables `ItemTable` and `cursorDiskKV`, both `(key TEXT UNIQUE, value BLOB)` holding
JSON. A chat is `composerData:<composerId>` in `cursorDiskKV`: `{_v, composerId, name?,
createdAt (epoch ms), lastUpdatedAt?, ...}` with its messages ("bubbles") either inline in
`conversation: [bubble]` (older versions) or, in newer ones, listed in
`fullConversationHeadersOnly: [{bubbleId, type}]` and stored one per key as
`bubbleId:<composerId>:<bubbleId>`. A bubble is `{type: 1 (user) | 2 (assistant), text,
thinking?: {text}, createdAt?}`. A composer in neither layout is counted as skipped with
its `_v` named, so a new Cursor version is visible, never silently empty.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .base import Piece, ReadContext, ReadResult, TranscriptEvent, cut_title, iso_to_ms, opt_ms, opt_str
from .document import Numberer, add, guard, json_value, open_sqlite, require, skip, tables

SOURCE = "cursor"
_ROLES = {1: "user", 2: "assistant"}


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read every Composer chat of a Cursor state.vscdb, whole."""
    res = ReadResult()
    with open_sqlite(path) as conn:
        require(tables(conn), {"cursorDiskKV": {"key", "value"}}, "Cursor state.vscdb")
        numbers = Numberer()
        try:
            rows = conn.execute("SELECT key, value FROM cursorDiskKV WHERE key LIKE 'composerData:%' ORDER BY key")
            for key, value in rows.fetchall():
                with guard(res, str(key)[:80]):
                    _composer(conn, res, str(key), json_value(value), numbers)
        except sqlite3.DatabaseError as e:
            raise OSError(f"Cursor state.vscdb: {e}") from None
    return res


def _composer(conn: sqlite3.Connection, res: ReadResult, key: str, data: Any, numbers: Numberer) -> None:
    if not isinstance(data, dict):
        skip(res, key[:80], "not an object")
        return
    cid = opt_str(data.get("composerId")) or key.split(":", 1)[1]
    headers = data.get("fullConversationHeadersOnly")
    inline = data.get("conversation")
    if isinstance(headers, list) and headers:
        bubbles = [_bubble(conn, cid, h) for h in headers if isinstance(h, dict)]
    elif isinstance(inline, list) and inline:
        bubbles = inline
    elif isinstance(headers, list) or isinstance(inline, list):
        res.ignored += 1  # an opened chat nobody wrote in
        return
    else:
        skip(res, key[:80], f"unknown layout (_v {opt_str(data.get('_v'))})")
        return
    meta = res.session(cid, SOURCE)
    meta.title = cut_title(opt_str(data.get("name")), 200)
    meta.created_ms = opt_ms(data.get("createdAt"))
    for bubble in bubbles:
        if not isinstance(bubble, dict):
            continue
        btype = bubble.get("type")
        role = _ROLES.get(btype) if isinstance(btype, int) else None
        if role is None:
            res.ignored += 1
            continue
        pieces = []
        thinking = bubble.get("thinking")
        if isinstance(thinking, dict) and isinstance(thinking.get("text"), str) and thinking["text"].strip():
            pieces.append(Piece("reasoning", thinking["text"]))
        text = bubble.get("text")
        if isinstance(text, str) and text.strip():
            pieces.append(Piece("text", text))
        if not pieces:
            continue
        add(res, TranscriptEvent(cid, numbers.take(cid), role, tuple(pieces),
                                 time_ms=iso_to_ms(bubble.get("createdAt")),
                                 message_id=opt_str(bubble.get("bubbleId"))))


def _bubble(conn: sqlite3.Connection, cid: str, header: dict) -> Any:
    bid = opt_str(header.get("bubbleId"))
    if not bid:
        return None
    row = conn.execute("SELECT value FROM cursorDiskKV WHERE key = ?", (f"bubbleId:{cid}:{bid}",)).fetchone()
    if row is None:
        return None
    try:
        bubble = json_value(row[0])
    except (ValueError, RecursionError):
        return None
    if isinstance(bubble, dict) and "type" not in bubble:
        bubble["type"] = header.get("type")
    return bubble
