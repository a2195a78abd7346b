"""Gemini CLI chat recordings: `~/.gemini/tmp/<project>/chats/session-*.jsonl` (and `.json`).

Since v0.39 (chatRecordingService.ts, "migrate chat recording to JSONL streaming") a session
is JSONL: a first metadata line `{sessionId, projectHash, startTime, lastUpdated, kind?}`,
then message records `{id, timestamp, type, content, toolCalls?, thoughts?}`; a message
updated later is appended again with the same id (the last one wins), `{"$rewindTo": id}`
drops that message and the ones after it, and `{"$set": {...}}` updates metadata (with
`messages` it replaces the whole list). Earlier versions wrote one JSON document
`{sessionId, projectHash, startTime, lastUpdated, messages: [...]}` (`session-*.json`);
the CLI's own loader reads both, and so do we. Types: `user`, `gemini` (the model: text,
`thoughts` [{subject, description}], `toolCalls` [{id, name, args, result, status}]), and
`info` / `error` / `warning` (the CLI's own notices, not indexed). The project folder holds
a `.project_root` file with the workspace path (projectRegistry.ts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import (
    Piece,
    ReadContext,
    ReadResult,
    TranscriptEvent,
    as_text,
    cut_title,
    iso_to_ms,
    opt_str,
    parse_record,
    read_lines,
)
from .document import FormatError, Numberer, add, guard, read_document, side_text, skip

SOURCE = "gemini"


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read a whole Gemini CLI session file (either layout) as its current messages."""
    res = ReadResult()
    if path.suffix == ".json":
        doc = read_document(path, "Gemini CLI session")
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            raise FormatError("not a Gemini CLI session (no messages list); not imported")
        meta: dict[str, Any] = {k: v for k, v in doc.items() if k != "messages"}
        messages = {}
        for i, m in enumerate(doc["messages"]):
            if isinstance(m, dict) and isinstance(m.get("id"), str):
                messages[m["id"]] = m
            else:
                skip(res, f"message {i + 1}", "no id")
    else:
        meta, messages = _replay(path, res)
    sid = opt_str(meta.get("sessionId")) or path.stem
    session = res.session(sid, SOURCE)
    session.created_ms = iso_to_ms(meta.get("startTime"))
    summary = meta.get("summary")
    if isinstance(summary, str) and summary.strip():
        session.title = cut_title(summary, 200)
    session.workspace = _workspace(path)
    numbers = Numberer()
    for mid, msg in messages.items():
        with guard(res, f"message {mid[:60]}"):
            _message(sid, msg, numbers, res)
    return res


def _replay(path: Path, res: ReadResult) -> tuple[dict[str, Any], dict[str, dict]]:
    """The metadata and the live messages of a JSONL session, as the CLI's loader sees them."""
    meta: dict[str, Any] = {}
    messages: dict[str, dict] = {}
    offset = line_no = 0
    while True:  # the whole file, in the bounded parts read_lines gives
        raw = read_lines(path, offset, line_no)
        res.skipped += raw.skipped
        res.notes += raw.notes
        for n, line in raw.lines:
            if not line.strip():
                continue
            try:
                rec = parse_record(line)
            except (ValueError, RecursionError):
                res.skip(n, "not JSON")
                continue
            if not isinstance(rec, dict):
                res.skip(n, "not a JSON object")
                continue
            if isinstance(rec.get("$rewindTo"), str):
                ids = list(messages)
                cut = ids.index(rec["$rewindTo"]) if rec["$rewindTo"] in ids else 0
                for gone in ids[cut:]:
                    del messages[gone]
            elif isinstance(rec.get("id"), str):
                messages[rec["id"]] = rec  # an update keeps the message's first position
            elif isinstance(rec.get("$set"), dict):
                update = rec["$set"]
                if isinstance(update.get("messages"), list):
                    messages = {m["id"]: m for m in update["messages"]
                                if isinstance(m, dict) and isinstance(m.get("id"), str)}
                meta.update({k: v for k, v in update.items() if k != "messages"})
            elif isinstance(rec.get("sessionId"), str) and isinstance(rec.get("projectHash"), str):
                meta.update({k: v for k, v in rec.items() if k != "messages"})
            else:
                res.ignored += 1
        if not raw.more:
            break
        offset, line_no = raw.offset, raw.line_no
    if not meta:
        raise FormatError("not a Gemini CLI session (no sessionId/projectHash record); not imported")
    return meta, messages


def _workspace(path: Path) -> str | None:
    # tmp/<project>/chats/<file> or, for a subagent, tmp/<project>/chats/<parent>/<file>
    for project in (path.parent.parent, path.parent.parent.parent):
        text = side_text(project / ".project_root")
        if text and text.strip():
            return text.strip().splitlines()[0]
    return None


def _texts(content: Any) -> list[str]:
    """Texts of a PartListUnion: a string, one part or a list of parts ({text} counts)."""
    if isinstance(content, str):
        return [content] if content.strip() else []
    parts = content if isinstance(content, list) else [content]
    out = []
    for p in parts:
        if isinstance(p, str) and p.strip():
            out.append(p)
        elif isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"].strip() and not p.get("thought"):
            out.append(p["text"])
    return out


def _result_text(result: Any) -> str:
    texts = _texts(result)
    parts = result if isinstance(result, list) else [result]
    for p in parts:
        resp = p.get("functionResponse") if isinstance(p, dict) else None
        if isinstance(resp, dict) and "response" in resp:
            r = resp["response"]
            if isinstance(r, dict) and len(r) == 1 and isinstance(next(iter(r.values())), str):
                r = next(iter(r.values()))  # {"output": "..."} or {"error": "..."}
            texts.append(as_text(r))
    return "\n".join(t for t in texts if t.strip())


def _message(sid: str, msg: dict, numbers: Numberer, res: ReadResult) -> None:
    mtype = msg.get("type")
    time_ms = iso_to_ms(msg.get("timestamp"))
    mid = opt_str(msg.get("id"))
    if mtype == "user":
        texts = _texts(msg.get("content"))
        if texts:
            add(res, TranscriptEvent(sid, numbers.take(sid), "user", tuple(Piece("text", t) for t in texts),
                                     time_ms=time_ms, message_id=mid))
        return
    if mtype != "gemini":
        res.ignored += 1  # info / error / warning: the CLI's notices
        return
    pieces = [Piece("reasoning", f"{t.get('subject', '')}: {t.get('description', '')}".strip(": "))
              for t in msg.get("thoughts") or [] if isinstance(t, dict)]
    pieces += [Piece("text", t) for t in _texts(msg.get("content"))]
    calls = [c for c in msg.get("toolCalls") or [] if isinstance(c, dict)]
    for c in calls:
        name = opt_str(c.get("name")) or "tool"
        pieces.append(Piece("tool_call", f"{name} {as_text(c.get('args', {}))}", tool=name))
    pieces = [p for p in pieces if p.text.strip()]
    if pieces:
        add(res, TranscriptEvent(sid, numbers.take(sid), "assistant", tuple(pieces), time_ms=time_ms,
                                 message_id=mid, call_id=opt_str(calls[0].get("id")) if calls else None))
    for c in calls:
        text = _result_text(c.get("result"))
        if not text.strip():
            continue
        name = opt_str(c.get("name")) or "tool"
        flags = ("error",) if c.get("status") == "error" else ()
        add(res, TranscriptEvent(sid, numbers.take(sid), "tool", (Piece("tool_result", text, tool=name),),
                                 time_ms=iso_to_ms(c.get("timestamp")) or time_ms, call_id=opt_str(c.get("id")),
                                 flags=flags))
