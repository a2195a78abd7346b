"""OpenAI Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl[.zst]`.

Lines `{timestamp, type, payload}`: `session_meta` (id, cwd), `response_item` (message,
reasoning, function_call, function_call_output, custom tool calls), `compacted` (a summary).
`event_msg` and `turn_context` repeat what response items say and are not indexed. The line
number is the seq.
"""

from __future__ import annotations

import re
from pathlib import Path

from .base import Piece, ReadContext, ReadResult, TranscriptEvent, as_text, content_texts, iso_to_ms, parse_json_lines, read_lines

SOURCE = "codex"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Context the CLI injects as user messages; not something the user said.
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md")


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read the lines added to a Codex rollout since `offset`."""
    raw = read_lines(path, offset, ctx.line_no)
    res = ReadResult(offset=raw.offset, line_no=raw.line_no, notes=list(raw.notes))
    m = _UUID.search(path.name)
    sid = ctx.session or (m.group(0) if m else path.name.split(".")[0])
    calls = dict(ctx.call_tools)
    for n, obj in parse_json_lines(raw, res):
        rtype, payload = obj.get("type"), obj.get("payload")
        if not isinstance(payload, dict):
            res.skipped += 1
            continue
        time_ms = iso_to_ms(obj.get("timestamp"))
        if rtype == "session_meta":
            sid = str(payload.get("id") or sid)
            meta = res.session(sid, SOURCE)
            meta.workspace = payload.get("cwd") or meta.workspace
            meta.created_ms = iso_to_ms(payload.get("timestamp")) or time_ms
            continue
        meta = res.session(sid, SOURCE)
        if ctx.workspace and not meta.workspace:
            meta.workspace = ctx.workspace
        if rtype == "compacted":
            text = payload.get("message")
            if isinstance(text, str) and text.strip():
                res.events.append(TranscriptEvent(sid, n, "summary", (Piece("summary", text),), time_ms=time_ms))
            continue
        if rtype != "response_item":
            res.ignored += 1
            continue
        ev = _item(sid, n, payload, time_ms, calls)
        if ev is None:
            res.ignored += 1
            continue
        if meta.title is None and not ctx.line_no and ev.role == "user":
            meta.title = ev.pieces[0].text.strip().splitlines()[0][:80]
        res.events.append(ev)
    return res


def _item(sid: str, n: int, p: dict, time_ms: int | None, calls: dict[str, str]) -> TranscriptEvent | None:
    ptype = p.get("type")
    if ptype == "message":
        role = str(p.get("role") or "assistant")
        if role in ("system", "developer"):
            return None
        texts = [t for t in content_texts(p.get("content"), ("input_text", "output_text", "text"))
                 if not t.lstrip().startswith(_INJECTED)]
        if not texts:
            return None
        return TranscriptEvent(sid, n, role, tuple(Piece("text", t) for t in texts), time_ms=time_ms,
                               message_id=p.get("id"))
    if ptype == "reasoning":
        texts = content_texts(p.get("summary"), ("summary_text",)) + content_texts(p.get("content"), ("reasoning_text", "text"))
        if not texts:
            return None
        return TranscriptEvent(sid, n, "assistant", tuple(Piece("reasoning", t) for t in texts), time_ms=time_ms)
    if ptype in ("function_call", "custom_tool_call", "local_shell_call"):
        name = str(p.get("name") or ptype)
        call_id = p.get("call_id")
        if call_id:
            calls[str(call_id)] = name
        args = p.get("arguments", p.get("input", p.get("action", "")))
        return TranscriptEvent(sid, n, "assistant", (Piece("tool_call", f"{name} {as_text(args)}", tool=name),),
                               time_ms=time_ms, call_id=call_id)
    if ptype in ("function_call_output", "custom_tool_call_output"):
        call_id = p.get("call_id")
        out = p.get("output")
        if isinstance(out, dict) and "content" in out:
            out = out["content"]
        text = as_text(out)
        if not text.strip():
            return None
        return TranscriptEvent(sid, n, "tool", (Piece("tool_result", text, tool=calls.get(str(call_id))),),
                               time_ms=time_ms, call_id=call_id)
    return None
