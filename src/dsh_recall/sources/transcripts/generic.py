"""Generic JSONL: one message per line, so any other tool's history can be imported.

    {"session": "s1", "seq": 0, "role": "user", "text": "...",
     "id": "m-1", "time": "2024-05-01T10:00:00Z", "title": "...", "workspace": "proj"}

`session`, `role` and `text` are required; `seq` orders messages within a session (the line
number is used when it is missing); `time` may be ISO-8601, epoch seconds/ms or free text.
One file may hold many sessions.
"""

from __future__ import annotations

from pathlib import Path

from .base import Piece, ReadContext, ReadResult, TranscriptEvent, iso_to_ms, parse_json_lines, read_lines

SOURCE = "generic"


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read the messages added to a generic JSONL file since `offset`."""
    raw = read_lines(path, offset, ctx.line_no)
    res = ReadResult(offset=raw.offset, line_no=raw.line_no, notes=list(raw.notes))
    for n, obj in parse_json_lines(raw, res):
        sid, role, text = obj.get("session"), obj.get("role"), obj.get("text")
        if sid is None or not isinstance(text, str) or not isinstance(role, str):
            res.skipped += 1
            if res.skipped <= 3:
                res.notes.append(f"line {n + 1}: needs session, role and text; skipped")
            continue
        sid = str(sid)
        seq = obj.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            seq = n
        meta = res.session(sid, SOURCE)
        if isinstance(obj.get("title"), str) and obj["title"].strip():
            meta.title = obj["title"].strip()
        if obj.get("workspace") is not None:
            meta.workspace = str(obj["workspace"])
        raw_time = obj.get("time")
        time_ms = iso_to_ms(raw_time)
        if meta.created_ms is None and time_ms is not None:
            meta.created_ms = time_ms
        if not text.strip():
            continue
        res.events.append(TranscriptEvent(
            sid, seq, role, (Piece("text", text),), time_ms=time_ms,
            time=raw_time if isinstance(raw_time, str) and time_ms is None else None,
            message_id=str(obj["id"]) if obj.get("id") is not None else None,
        ))
    return res
