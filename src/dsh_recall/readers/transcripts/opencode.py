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
OpenCode itself on its first start (storage/json-migration.ts). Newer releases also keep a
`session_message(id, session_id, type, seq, data)` log; a session found only there is read
from it (`_read_v2`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .base import Piece, ReadContext, ReadResult, TranscriptEvent, as_text, cut_title, opt_ms, opt_str
from .document import Numberer, add, guard, json_value, obj, open_sqlite, require, skip, tables

SOURCE = "opencode"
_V2 = {"id", "session_id", "type", "seq", "data"}
_NEEDED = {"session": {"id", "directory", "title", "time_created"},
           "message": {"id", "session_id", "time_created", "data"},
           "part": {"id", "message_id", "data"}}


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read every session of an OpenCode database, whole."""
    res = ReadResult()
    with open_sqlite(path) as conn:
        found = tables(conn)
        require(found, _NEEDED, "OpenCode database")
        try:
            for sid, directory, title, created in conn.execute(
                    "SELECT id, directory, title, time_created FROM session"):
                meta = res.session(str(sid), SOURCE)
                meta.workspace = opt_str(directory)
                meta.title = cut_title(opt_str(title), 200)
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
            if _V2 <= found.get("session_message", set()):
                _read_v2(conn, res, numbers)
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


def _read_v2(conn: sqlite3.Connection, res: ReadResult, numbers: Numberer) -> None:
    """Sessions kept only in the newer `session_message` log (packages/core/src/session/
    message.ts): `type` user {text}, assistant {content: [text | reasoning | tool {name, id,
    state: {status, input, content, error}}]}, compaction {summary}, shell {command, output};
    synthetic, system and agent / model switches are the harness's own. A session that has
    `message` rows is read from those only, never twice."""
    done = set(numbers.next)
    rows = conn.execute("SELECT id, session_id, type, seq, time_created, data FROM session_message "
                        "ORDER BY session_id, seq")
    for mid, sid, mtype, _seq, created, data in rows:
        sid = str(sid)
        if sid in done:
            continue
        with guard(res, f"session_message {str(mid)[:60]}"):
            _message_v2(res, sid, str(mid), str(mtype), opt_ms(created), json_value(data), numbers)


def _message_v2(res: ReadResult, sid: str, mid: str, mtype: str, created: int | None, data: Any,
                numbers: Numberer) -> None:
    if not isinstance(data, dict):
        skip(res, f"session_message {mid[:60]}", "data is not an object")
        return
    if sid not in res.sessions:
        res.session(sid, SOURCE)
    time_ms = opt_ms(obj(data.get("time")).get("created")) or created
    if mtype == "user" and isinstance(data.get("text"), str) and data["text"].strip():
        add(res, TranscriptEvent(sid, numbers.take(sid), "user", (Piece("text", data["text"]),), time_ms=time_ms,
                                 message_id=mid))
    elif mtype == "compaction" and isinstance(data.get("summary"), str) and data["summary"].strip():
        add(res, TranscriptEvent(sid, numbers.take(sid), "summary", (Piece("summary", data["summary"]),),
                                 time_ms=time_ms, message_id=mid))
    elif mtype == "shell":
        text = f"{opt_str(data.get('command')) or ''}\n{opt_str(data.get('output')) or ''}".strip()
        if text:
            add(res, TranscriptEvent(sid, numbers.take(sid), "tool", (Piece("tool_result", text, tool="shell"),),
                                     time_ms=time_ms, message_id=mid))
    elif mtype == "assistant":
        pieces: list[Piece] = []
        results: list[tuple[Piece, str | None, bool]] = []
        for item in data.get("content") or []:
            c = obj(item)
            body = c.get("text")
            if c.get("type") == "text" and isinstance(body, str) and body.strip() and not c.get("synthetic") \
                    and not c.get("ignored"):
                pieces.append(Piece("text", body))
            elif c.get("type") == "reasoning" and isinstance(body, str) and body.strip():
                pieces.append(Piece("reasoning", body))
            elif c.get("type") == "tool":
                name = opt_str(c.get("name")) or "tool"
                state = obj(c.get("state"))
                pieces.append(Piece("tool_call", f"{name} {as_text(state.get('input', {}))}", tool=name))
                error = state.get("status") == "error"
                out = as_text(state.get("content") or "") or (as_text(state.get("error")) if error else "")
                if out.strip():
                    results.append((Piece("tool_result", out, tool=name), opt_str(c.get("id")), error))
        if pieces:
            add(res, TranscriptEvent(sid, numbers.take(sid), "assistant", tuple(pieces), time_ms=time_ms,
                                     message_id=mid))
        for piece, cid, error in results:
            add(res, TranscriptEvent(sid, numbers.take(sid), "tool", (piece,), time_ms=time_ms, call_id=cid,
                                     flags=("error",) if error else ()))
    else:
        res.ignored += 1
