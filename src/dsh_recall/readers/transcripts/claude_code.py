"""Claude Code project transcripts: `~/.claude/projects/<mangled cwd>/<uuid>.jsonl`.

Records `{type, uuid, sessionId, timestamp, cwd, message, isMeta, isCompactSummary}`; the
assistant's content holds `text`, `thinking` and `tool_use` blocks, the user's `text` and
`tool_result` blocks. A compaction writes a user record with `isCompactSummary: true`;
`{"type": "summary", "summary"}` records carry a title. Records have no seq, so the line
number within the file is the seq (stable, since the file only grows).
"""

from __future__ import annotations

from pathlib import Path

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

SOURCE = "claude-code"


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read the records added to a Claude Code transcript since `offset`."""
    raw = read_lines(path, offset, ctx.line_no)
    res = ReadResult.start(raw)
    default_sid = ctx.session or path.stem
    calls = dict(ctx.call_tools)
    titles: list[str] = []
    each_record(raw, res, lambda n, obj: _record(n, obj, ctx, default_sid, calls, titles, res))
    if titles:  # a summary record names no session, so its title is the file's
        for meta in res.sessions.values():
            meta.title = titles[-1]
        if not res.sessions and ctx.session:
            res.session(ctx.session, SOURCE).title = titles[-1]
    return res


def _record(n: int, obj: dict, ctx: ReadContext, default_sid: str, calls: dict[str, str],
            titles: list[str], res: ReadResult) -> None:
    rtype = obj.get("type")
    if rtype == "summary":
        summary = obj.get("summary")
        if isinstance(summary, str) and summary.strip():
            titles.append(summary.strip())
        return
    sid = opt_str(obj.get("sessionId")) or default_sid
    meta = res.session(sid, SOURCE)
    cwd = opt_str(obj.get("cwd"))
    if cwd:
        meta.workspace = cwd
    elif ctx.workspace and not meta.workspace:
        meta.workspace = ctx.workspace
    if rtype not in ("user", "assistant") or obj.get("isMeta"):
        res.ignored += 1
        return
    msg = obj.get("message")
    if not isinstance(msg, dict):
        res.skip(n, "message is not an object")
        return
    time_ms = iso_to_ms(obj.get("timestamp"))
    if meta.created_ms is None:
        meta.created_ms = time_ms
    content = msg.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    pieces: list[Piece] = []
    call_id = None
    flags: tuple[str, ...] = ()
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            pieces.append(Piece("summary" if obj.get("isCompactSummary") else "text", block["text"]))
        elif btype == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
            pieces.append(Piece("reasoning", block["thinking"]))
        elif btype == "tool_use":
            name = opt_str(block.get("name")) or "tool"
            bid = opt_str(block.get("id"))
            if bid:
                calls[bid] = name
                call_id = bid
            pieces.append(Piece("tool_call", f"{name} {as_text(block.get('input', ''))}", tool=name))
        elif btype == "tool_result":
            call_id = opt_str(block.get("tool_use_id")) or None
            text = as_text(block.get("content", ""))
            if text.strip():
                pieces.append(Piece("tool_result", text, tool=calls.get(call_id or "")))
            if block.get("is_error"):
                flags = ("error",)
    if not pieces:
        return
    if obj.get("isCompactSummary"):
        role = "summary"
    elif all(p.kind == "tool_result" for p in pieces):
        role = "tool"
    else:
        role = opt_str(msg.get("role")) or str(rtype)
    if meta.title is None and not ctx.line_no and role == "user" and pieces[0].kind == "text":
        meta.title = cut_title(pieces[0].text, 80, first_line=True)
    res.events.append(TranscriptEvent(sid, n, role, tuple(pieces), time_ms=time_ms,
                                      message_id=opt_str(obj.get("uuid")), call_id=call_id, flags=flags))
