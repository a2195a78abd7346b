"""OpenAI Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl[.zst]`.

Lines `{timestamp, type, payload}`: `session_meta` (id, cwd), `response_item` (message,
reasoning, function_call, function_call_output, custom tool calls), `compacted` (a summary).
`event_msg` and `turn_context` repeat what response items say and are not indexed. The line
number is the seq.
"""

from __future__ import annotations

import re
from pathlib import Path

from .base import (
    Piece,
    ReadContext,
    ReadResult,
    TranscriptEvent,
    as_text,
    content_texts,
    cut_title,
    each_record,
    iso_to_ms,
    opt_str,
    read_lines,
)

SOURCE = "codex"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Context the CLI injects as user messages; not something the user said.
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md")


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read the lines added to a Codex rollout since `offset`."""
    raw = read_lines(path, offset, ctx.line_no)
    res = ReadResult.start(raw)
    m = _UUID.search(path.name)
    state = {"sid": ctx.session or (m.group(0) if m else path.name.split(".")[0])}
    calls = dict(ctx.call_tools)
    each_record(raw, res, lambda n, obj: _record(n, obj, ctx, state, calls, res))
    return res


def _record(n: int, obj: dict, ctx: ReadContext, state: dict[str, str], calls: dict[str, str],
            res: ReadResult) -> None:
    rtype, payload = obj.get("type"), obj.get("payload")
    if not isinstance(payload, dict):
        res.skip(n, "payload is not an object")
        return
    time_ms = iso_to_ms(obj.get("timestamp"))
    if rtype == "session_meta":
        state["sid"] = opt_str(payload.get("id")) or state["sid"]
        meta = res.session(state["sid"], SOURCE)
        meta.workspace = opt_str(payload.get("cwd")) or meta.workspace
        meta.created_ms = iso_to_ms(payload.get("timestamp")) or time_ms
        return
    sid = state["sid"]
    meta = res.session(sid, SOURCE)
    if ctx.workspace and not meta.workspace:
        meta.workspace = ctx.workspace
    if rtype == "compacted":
        text = payload.get("message")
        if isinstance(text, str) and text.strip():
            res.events.append(TranscriptEvent(sid, n, "summary", (Piece("summary", text),), time_ms=time_ms))
        return
    if rtype != "response_item":
        res.ignored += 1
        return
    ev = _item(sid, n, payload, time_ms, calls)
    if ev is None:
        res.ignored += 1
        return
    if meta.title is None and not ctx.line_no and ev.role == "user":
        meta.title = cut_title(ev.pieces[0].text, 80, first_line=True)
    res.events.append(ev)


def _item(sid: str, n: int, p: dict, time_ms: int | None, calls: dict[str, str]) -> TranscriptEvent | None:
    ptype = p.get("type")
    if ptype == "message":
        role = opt_str(p.get("role")) or "assistant"
        if role in ("system", "developer"):
            return None
        texts = [t for t in content_texts(p.get("content"), ("input_text", "output_text", "text"))
                 if not t.lstrip().startswith(_INJECTED)]
        if not texts:
            return None
        return TranscriptEvent(sid, n, role, tuple(Piece("text", t) for t in texts), time_ms=time_ms,
                               message_id=opt_str(p.get("id")))
    if ptype == "reasoning":
        texts = content_texts(p.get("summary"), ("summary_text",)) + content_texts(p.get("content"), ("reasoning_text", "text"))
        if not texts:
            return None
        return TranscriptEvent(sid, n, "assistant", tuple(Piece("reasoning", t) for t in texts), time_ms=time_ms)
    if ptype in ("function_call", "custom_tool_call", "local_shell_call"):
        name = opt_str(p.get("name")) or str(ptype)
        call_id = opt_str(p.get("call_id"))
        if call_id:
            calls[call_id] = name
        args = p.get("arguments", p.get("input", p.get("action", "")))
        return TranscriptEvent(sid, n, "assistant", (Piece("tool_call", f"{name} {as_text(args)}", tool=name),),
                               time_ms=time_ms, call_id=call_id)
    if ptype in ("function_call_output", "custom_tool_call_output"):
        call_id = opt_str(p.get("call_id"))
        out = p.get("output")
        if isinstance(out, dict) and "content" in out:
            out = out["content"]
        text = as_text(out)
        if not text.strip():
            return None
        return TranscriptEvent(sid, n, "tool", (Piece("tool_result", text, tool=calls.get(call_id or "")),),
                               time_ms=time_ms, call_id=call_id)
    return None
