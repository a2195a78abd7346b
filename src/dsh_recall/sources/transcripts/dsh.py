"""DeepSeek Harness (dsh) v4 session logs: `session.v4.jsonl` or `.jsonl.zstd`.

Line 1 is a header `{"type": "session", "id", "cwd", "createdAt"}`; every other line is an
event `{type, seq, time, data, surfaceOp?}`. Compaction never deletes: `compaction/prune`
and `compaction/summary` name the seqs they shadow, and a `tool/result` with
`surfaceOp: {op: "replace"}` stands in for an earlier one. We index the originals, the
replacements and the summaries, and mark shadowed events so answers can say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import Piece, ReadContext, ReadResult, TranscriptEvent, as_text, content_texts, parse_json_lines, read_lines

SOURCE = "dsh"
# User messages the harness writes itself: repeated boilerplate, or a copy of a summary
# that is indexed from its `compaction/summary` event.
_SKIP_USER_KINDS = {"runtime-context", "compact-checkpoint"}


def _session_from_path(path: Path) -> str:
    # $DSH_HOME/sessions/--<cwd>--/<session-id>/session.v4.jsonl[.zstd]
    return path.parent.name if path.name.startswith("session.") else path.name.split(".")[0]


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read the events added to a dsh session file since `offset`."""
    raw = read_lines(path, offset, ctx.line_no)
    res = ReadResult(offset=raw.offset, line_no=raw.line_no, notes=list(raw.notes))
    sid = ctx.session or _session_from_path(path)
    calls = dict(ctx.call_tools)
    for _n, obj in parse_json_lines(raw, res):
        etype = obj.get("type")
        if etype == "session":
            sid = str(obj.get("id") or sid)
            meta = res.session(sid, SOURCE)
            meta.workspace = obj.get("cwd") or meta.workspace
            created = obj.get("createdAt")
            meta.created_ms = created if isinstance(created, int) else None
            continue
        seq = obj.get("seq")
        data = obj.get("data")
        if not isinstance(seq, int) or not isinstance(data, dict) or not isinstance(etype, str):
            res.skipped += 1
            continue
        meta = res.session(sid, SOURCE)
        if ctx.workspace and not meta.workspace:
            meta.workspace = ctx.workspace
        ev = _event(sid, seq, etype, obj, data, calls, res)
        if ev is not None:
            res.events.append(ev)
    return res


def _event(sid: str, seq: int, etype: str, obj: dict, data: dict[str, Any], calls: dict[str, str],
           res: ReadResult) -> TranscriptEvent | None:
    time_ms = obj.get("time") if isinstance(obj.get("time"), int) else None
    if etype == "session/title":
        title = data.get("title")
        if isinstance(title, str) and title.strip():
            res.session(sid, SOURCE).title = title.strip()
        return None
    if etype == "compaction/prune":
        for s in data.get("shadowedSeqs") or []:
            if isinstance(s, int):
                res.marks.append((sid, s, "pruned"))
        return None
    if etype == "compaction/summary":
        for s in data.get("shadowedSeqs") or []:
            if isinstance(s, int):
                res.marks.append((sid, s, "summarized"))
        texts = content_texts(data.get("summary"))
        if not texts:
            return None
        rng = data.get("shadowedRange") or {}
        flags = (f"summary-of:{rng.get('start')}-{rng.get('end')}",) if rng else ()
        return TranscriptEvent(sid, seq, "summary", tuple(Piece("summary", t) for t in texts),
                               time_ms=time_ms, message_id=data.get("compactionId"), flags=flags)
    if etype == "user/message":
        source = data.get("source") or {}
        if isinstance(source, dict) and source.get("kind") in _SKIP_USER_KINDS:
            return None
        texts = content_texts(data.get("content"))
        if not texts:
            return None
        return TranscriptEvent(sid, seq, "user", tuple(Piece("text", t) for t in texts),
                               time_ms=time_ms, message_id=data.get("id"))
    if etype == "assistant/message":
        msg = data.get("message") or {}
        pieces: list[Piece] = []
        call_id = None
        for block in msg.get("content") or []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype in ("text", "reasoning") and isinstance(block.get("text"), str) and block["text"].strip():
                pieces.append(Piece("text" if btype == "text" else "reasoning", block["text"]))
            elif btype == "tool-call":
                name = str(block.get("name") or "tool")
                call_id = block.get("id") or call_id
                if block.get("id"):
                    calls[str(block["id"])] = name
                pieces.append(Piece("tool_call", f"{name} {as_text(block.get('arguments', ''))}", tool=name))
        if not pieces:
            return None
        return TranscriptEvent(sid, seq, "assistant", tuple(pieces), time_ms=time_ms,
                               message_id=msg.get("id"), call_id=call_id)
    if etype == "tool/result":
        msg = data.get("message") or {}
        call_id = msg.get("toolCallId") or (msg.get("source") or {}).get("callId")
        tool = calls.get(str(call_id)) if call_id else None
        texts = content_texts(msg.get("content"))
        if not texts:
            return None
        flags: list[str] = []
        op = obj.get("surfaceOp")
        if isinstance(op, dict) and op.get("op") == "replace":
            flags.append(f"replaces:{op.get('startSeq')}-{op.get('endSeq')}")
        if msg.get("isError"):
            flags.append("error")
        return TranscriptEvent(sid, seq, "tool", (Piece("tool_result", "\n".join(texts), tool=tool),),
                               time_ms=time_ms, message_id=msg.get("id"), call_id=call_id, flags=tuple(flags))
    res.ignored += 1  # bookkeeping and unknown event types: nothing a person said
    return None
