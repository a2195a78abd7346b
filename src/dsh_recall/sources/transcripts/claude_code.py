"""Claude Code project transcripts: `~/.claude/projects/<mangled cwd>/<uuid>.jsonl`.

Records `{type, uuid, sessionId, timestamp, cwd, message, isMeta, isCompactSummary}`; the
assistant's content holds `text`, `thinking` and `tool_use` blocks, the user's `text` and
`tool_result` blocks. A compaction writes a user record with `isCompactSummary: true`;
`{"type": "summary", "summary"}` records carry a title. Records have no seq, so the line
number within the file is the seq (stable, since the file only grows).
"""

from __future__ import annotations

from pathlib import Path

from .base import Piece, ReadContext, ReadResult, TranscriptEvent, as_text, iso_to_ms, parse_json_lines, read_lines

SOURCE = "claude-code"


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read the records added to a Claude Code transcript since `offset`."""
    raw = read_lines(path, offset, ctx.line_no)
    res = ReadResult(offset=raw.offset, line_no=raw.line_no, notes=list(raw.notes))
    default_sid = ctx.session or path.stem
    calls = dict(ctx.call_tools)
    summary_title = None
    for n, obj in parse_json_lines(raw, res):
        rtype = obj.get("type")
        if rtype == "summary":  # a title record; it names no session, so it is the file's
            if isinstance(obj.get("summary"), str) and obj["summary"].strip():
                summary_title = obj["summary"].strip()
            continue
        sid = str(obj.get("sessionId") or default_sid)
        meta = res.session(sid, SOURCE)
        if obj.get("cwd"):
            meta.workspace = str(obj["cwd"])
        elif ctx.workspace and not meta.workspace:
            meta.workspace = ctx.workspace
        if rtype not in ("user", "assistant") or obj.get("isMeta"):
            res.ignored += 1
            continue
        msg = obj.get("message")
        if not isinstance(msg, dict):
            res.skipped += 1
            continue
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
            if btype == "text" and str(block.get("text", "")).strip():
                pieces.append(Piece("summary" if obj.get("isCompactSummary") else "text", block["text"]))
            elif btype == "thinking" and str(block.get("thinking", "")).strip():
                pieces.append(Piece("reasoning", block["thinking"]))
            elif btype == "tool_use":
                name = str(block.get("name") or "tool")
                if block.get("id"):
                    calls[str(block["id"])] = name
                    call_id = str(block["id"])
                pieces.append(Piece("tool_call", f"{name} {as_text(block.get('input', ''))}", tool=name))
            elif btype == "tool_result":
                call_id = str(block.get("tool_use_id") or "") or None
                text = as_text(block.get("content", ""))
                if text.strip():
                    pieces.append(Piece("tool_result", text, tool=calls.get(call_id or "")))
                if block.get("is_error"):
                    flags = ("error",)
        if not pieces:
            continue
        if obj.get("isCompactSummary"):
            role = "summary"
        elif all(p.kind == "tool_result" for p in pieces):
            role = "tool"
        else:
            role = str(msg.get("role") or rtype)
        if meta.title is None and not ctx.line_no and role == "user" and pieces[0].kind == "text":
            meta.title = pieces[0].text.strip().splitlines()[0][:80] if pieces[0].text.strip() else None
        res.events.append(TranscriptEvent(sid, n, role, tuple(pieces), time_ms=time_ms,
                                          message_id=obj.get("uuid"), call_id=call_id, flags=flags))
    if summary_title:
        for meta in res.sessions.values():
            meta.title = summary_title
        if not res.sessions and ctx.session:
            res.session(ctx.session, SOURCE).title = summary_title
    return res
