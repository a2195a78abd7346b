"""OpenCode sessions: `~/.local/share/opencode/opencode.db` (`$XDG_DATA_HOME/opencode`).

OpenCode keeps sessions in SQLite (packages/opencode/src/storage/db.ts: `opencode.db`, or
`opencode-<channel>.db` for other release channels) with the tables of
packages/core/src/session/sql.ts: `session(id, directory, title, parent_id, time_created,
...)`, `message(id, session_id, time_created, data)` and `part(id, message_id, session_id,
time_created, data)`, `data` being the JSON of the message or part without its ids
(packages/opencode/src/session/message-v2.ts). A message is `{role: "user" | "assistant",
time: {created}, summary?, ...}` (an assistant message with `summary: true` is a compaction
summary); parts are `text {text, synthetic?, ignored?}`, `reasoning {text}`, `tool {callID,
tool, state: {status, input, output | error}}`, and `file`, `step-start`, `step-finish`,
`snapshot`, `patch`, `agent`, `retry`, `compaction`, `subtask` (not indexed). The JSON files
of older releases (`storage/session|message|part/...`) are moved into this database by
OpenCode itself on its first start (storage/json-migration.ts).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .base import Piece, ReadContext, ReadResult, TranscriptEvent, as_text, opt_ms, opt_str
from .document import Numberer, add, guard, json_value, obj, open_sqlite, require, skip, tables

SOURCE = "opencode"
_NEEDED = {"session": {"id", "directory", "title", "time_created"},
           "message": {"id", "session_id", "time_created", "data"},
           "part": {"id", "message_id", "data"}}


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read every session of an OpenCode database, whole."""
    res = ReadResult()
    with open_sqlite(path) as conn:
        require(tables(conn), _NEEDED, "OpenCode database")
        try:
            for sid, directory, title, created in conn.execute(
                    "SELECT id, directory, title, time_created FROM session"):
                meta = res.session(str(sid), SOURCE)
                meta.workspace = opt_str(directory)
                meta.title = (opt_str(title) or "").strip()[:200] or None
                meta.created_ms = opt_ms(created)
            parts: dict[str, list[Any]] = {}
            for mid, data in conn.execute("SELECT message_id, data FROM part ORDER BY message_id, id"):
                parts.setdefault(str(mid), []).append(data)
            numbers = Numberer()
            rows = conn.execute("SELECT id, session_id, time_created, data FROM message "
                                "ORDER BY session_id, time_created, id")
            for mid, sid, created, data in rows:
                with guard(res, f"message {str(mid)[:60]}"):
                    _message(res, str(sid), str(mid), opt_ms(created), json_value(data),
                             parts.get(str(mid), []), numbers)
        except sqlite3.DatabaseError as e:
            raise OSError(f"OpenCode database: {e}") from None
    return res


def _message(res: ReadResult, sid: str, mid: str, created: int | None, info: Any,
             raw_parts: list[Any], numbers: Numberer) -> None:
    if not isinstance(info, dict) or info.get("role") not in ("user", "assistant"):
        skip(res, f"message {mid[:60]}", "data needs role user or assistant")
        return
    if sid not in res.sessions:
        res.session(sid, SOURCE)
    role = info["role"]
    time = obj(info.get("time"))
    time_ms = opt_ms(time.get("created")) or created
    pieces: list[Piece] = []
    results: list[TranscriptEvent] = []
    call_id = None
    for raw in raw_parts:
        try:
            part = json_value(raw)
        except (ValueError, RecursionError):
            skip(res, f"message {mid[:60]}", "a part is not JSON")
            continue
        if not isinstance(part, dict):
            continue
        ptype = part.get("type")
        text = part.get("text")
        if ptype == "text" and isinstance(text, str) and text.strip() and not part.get("synthetic") \
                and not part.get("ignored"):
            pieces.append(Piece("summary" if info.get("summary") is True else "text", text))
        elif ptype == "reasoning" and isinstance(text, str) and text.strip():
            pieces.append(Piece("reasoning", text))
        elif ptype == "tool":
            name = opt_str(part.get("tool")) or "tool"
            cid = opt_str(part.get("callID"))
            call_id = call_id or cid
            state = obj(part.get("state"))
            pieces.append(Piece("tool_call", f"{name} {as_text(state.get('input', {}))}", tool=name))
            out = state.get("output") if state.get("status") == "completed" else state.get("error")
            if isinstance(out, str) and out.strip():
                results.append(TranscriptEvent(sid, 0, "tool", (Piece("tool_result", out, tool=name),),
                                               time_ms=time_ms, call_id=cid,
                                               flags=("error",) if state.get("status") == "error" else ()))
    if pieces:
        out_role = "summary" if info.get("summary") is True else role
        add(res, TranscriptEvent(sid, numbers.take(sid), out_role, tuple(pieces), time_ms=time_ms,
                                 message_id=mid, call_id=call_id))
    for ev in results:
        add(res, TranscriptEvent(ev.session, numbers.take(sid), ev.role, ev.pieces, time_ms=ev.time_ms,
                                 call_id=ev.call_id, flags=ev.flags))
