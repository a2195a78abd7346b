"""Goose sessions: `~/.local/share/goose/sessions/sessions.db`, or older `<name>.jsonl` files.

Current releases (crates/goose/src/session/session_storage.rs) keep sessions in SQLite:
`sessions(id, name, description, working_dir, created_at, ...)` and `messages(id,
session_id, role, content_json, created_timestamp, metadata_json, ...)`, migrated by
`schema_version` (migrations.rs; v13 when this reader was written). Earlier releases wrote
one JSONL file per session, which goose still reads to migrate them (legacy.rs): a metadata
line `{working_dir, description, ...}` and then one message `{role, created, content}` a line. Either way a
message's content is a list of `MessageContent` tagged by `type` (conversation/message.rs):
`text`, `thinking`, `toolRequest {id, toolCall: {status, value: {name, arguments}}}`,
`toolResponse {id, toolResult: {status, value | error}}` (the value is a CallToolResult
`{content: [...]}` or, in older sessions, the content list itself: tool_result_serde.rs),
`image`, `redactedThinking`, `systemNotification` (not indexed).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .base import (
    Piece,
    ReadContext,
    ReadResult,
    TranscriptEvent,
    as_text,
    cut_title,
    each_record,
    iso_to_ms,
    opt_str,
    read_lines,
)
from .document import Numberer, add, guard, json_value, obj, open_sqlite, require, skip, tables

SOURCE = "goose"
KNOWN_SCHEMA = 13
_NEEDED = {"sessions": {"id", "working_dir", "created_at"},
           "messages": {"session_id", "role", "content_json", "created_timestamp"}}


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read every session of a Goose sessions.db, or one legacy session .jsonl, whole."""
    return _read_jsonl(path) if path.suffix == ".jsonl" else _read_db(path)


def _read_db(path: Path) -> ReadResult:
    res = ReadResult()
    with open_sqlite(path) as conn:
        found = tables(conn)
        version = None
        if "schema_version" in found:
            version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        require(found, _NEEDED, f"goose sessions.db (schema v{version})")
        if isinstance(version, int) and version > KNOWN_SCHEMA:
            res.notes.append(f"schema v{version} is newer than v{KNOWN_SCHEMA} this reader knows; "
                             "read by column names")
        cols = found["sessions"]
        name = "name" if "name" in cols else "''"
        desc = "description" if "description" in cols else "''"
        try:
            for sid, wd, title, description, created in conn.execute(
                    f"SELECT id, working_dir, {name}, {desc}, created_at FROM sessions"):
                meta = res.session(f"goose:{sid}", SOURCE)
                meta.workspace = opt_str(wd)
                meta.title = cut_title(opt_str(title) or opt_str(description), 200)
                meta.created_ms = iso_to_ms(opt_str(created))
            numbers = Numberer()
            rows = conn.execute("SELECT session_id, role, content_json, created_timestamp FROM messages "
                                "ORDER BY session_id, created_timestamp, id")
            for n, (sid, role, content, created) in enumerate(rows):
                with guard(res, f"messages row {n + 1} (session {str(sid)[:40]})"):
                    _message(res, f"messages row {n + 1}", f"goose:{sid}", role, json_value(content), created,
                             numbers)
        except sqlite3.DatabaseError as e:
            raise OSError(f"goose sessions.db: {e}") from None
    return res


def _read_jsonl(path: Path) -> ReadResult:
    res = ReadResult()
    sid = f"goose:{path.stem}"
    meta = res.session(sid, SOURCE)
    numbers = Numberer()
    offset = line_no = 0
    while True:
        raw = read_lines(path, offset, line_no)
        res.skipped += raw.skipped
        res.notes += raw.notes

        def handle(n: int, obj: dict) -> None:
            if "role" not in obj and "content" not in obj:  # the metadata line
                meta.workspace = opt_str(obj.get("working_dir")) or meta.workspace
                meta.title = cut_title(opt_str(obj.get("description")), 200) or meta.title
                return
            _message(res, f"line {n + 1}", sid, obj.get("role"), obj.get("content"), obj.get("created"), numbers)
        each_record(raw, res, handle)
        if not raw.more:
            break
        offset, line_no = raw.offset, raw.line_no
    return res


def _message(res: ReadResult, where: str, sid: str, role: Any, content: Any, created: Any, numbers: Numberer) -> None:
    if role not in ("user", "assistant"):
        skip(res, where, "needs role user or assistant")
        return
    if not isinstance(content, list):
        skip(res, where, "content is not a list")
        return
    if sid not in res.sessions:
        res.session(sid, SOURCE)
    time_ms = iso_to_ms(created)
    meta = res.sessions[sid]
    if meta.created_ms is None:
        meta.created_ms = time_ms
    pieces: list[Piece] = []
    results: list[tuple[Piece, str | None, bool]] = []
    call_id = None
    for c in content:
        if not isinstance(c, dict):
            continue
        ctype = c.get("type")
        if ctype == "text" and isinstance(c.get("text"), str) and c["text"].strip():
            pieces.append(Piece("text", c["text"]))
        elif ctype == "thinking" and isinstance(c.get("thinking"), str) and c["thinking"].strip():
            pieces.append(Piece("reasoning", c["thinking"]))
        elif ctype in ("toolRequest", "frontendToolRequest"):
            call = obj(obj(c.get("toolCall")).get("value"))
            name = opt_str(call.get("name")) or "tool"
            call_id = opt_str(c.get("id")) or call_id
            if call_id:
                numbers.calls[call_id] = name
            pieces.append(Piece("tool_call", f"{name} {as_text(call.get('arguments', {}))}", tool=name))
        elif ctype == "toolResponse":
            result = obj(c.get("toolResult"))
            value = result.get("value")
            if isinstance(value, dict) and "content" in value:
                value = value["content"]
            error = result.get("status") == "error"
            text = as_text(result.get("error", "")) if error else (as_text(value) if value is not None else "")
            if text.strip():
                rid = opt_str(c.get("id"))
                results.append((Piece("tool_result", text, tool=numbers.calls.get(rid or "")), rid, error or bool(
                    obj(result.get("value")).get("isError"))))
        # image, redactedThinking, systemNotification: nothing to search
    if pieces:
        add(res, TranscriptEvent(sid, numbers.take(sid), role, tuple(pieces), time_ms=time_ms, call_id=call_id))
    for piece, rid, error in results:
        add(res, TranscriptEvent(sid, numbers.take(sid), "tool", (piece,), time_ms=time_ms, call_id=rid,
                                 flags=("error",) if error else ()))

