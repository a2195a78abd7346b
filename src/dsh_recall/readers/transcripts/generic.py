"""Generic JSONL: one message per line, so any other tool's history can be imported.

    {"session": "s1", "seq": 0, "role": "user", "text": "...",
     "id": "m-1", "time": "2024-05-01T10:00:00Z", "title": "...", "workspace": "proj"}

`session`, `role` and `text` are required; `seq` orders messages within a session (the line
number is used when it is missing); `time` may be ISO-8601, epoch seconds/ms or free text.
One file may hold many sessions.
"""

from __future__ import annotations

from pathlib import Path

from ...core.clean import clean_int
from .base import (
    Piece,
    ReadContext,
    ReadResult,
    TranscriptEvent,
    cut_title,
    each_record,
    iso_to_ms,
    opt_str,
    read_lines,
)

SOURCE = "generic"
TITLE_CHARS = 200


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read the messages added to a generic JSONL file since `offset`."""
    raw = read_lines(path, offset, ctx.line_no)
    res = ReadResult.start(raw)
    each_record(raw, res, lambda n, obj: _record(n, obj, res))
    return res


def _record(n: int, obj: dict, res: ReadResult) -> None:
    sid, role, text = opt_str(obj.get("session")), obj.get("role"), obj.get("text")
    if not sid or not isinstance(text, str) or not isinstance(role, str):
        res.skip(n, "needs session, role and text")
        return
    seq = clean_int(obj.get("seq"))
    if seq is None:
        seq = n
    meta = res.session(sid, SOURCE)
    title = obj.get("title")
    if isinstance(title, str) and title.strip():
        meta.title = cut_title(title, TITLE_CHARS)
    workspace = opt_str(obj.get("workspace"))
    if workspace is not None:
        meta.workspace = workspace
    raw_time = obj.get("time")
    time_ms = iso_to_ms(raw_time)
    if meta.created_ms is None and time_ms is not None:
        meta.created_ms = time_ms
    if not text.strip():
        return
    res.events.append(TranscriptEvent(
        sid, seq, role, (Piece("text", text),), time_ms=time_ms,
        time=raw_time if isinstance(raw_time, str) and time_ms is None else None,
        message_id=opt_str(obj.get("id")),
    ))
