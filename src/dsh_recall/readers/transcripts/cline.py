"""Cline and Roo Code task folders: `.../tasks/<taskId>/api_conversation_history.json`.

The file is one JSON array of Anthropic `MessageParam`s `{role, content}` (a string or
blocks: `text`, `tool_use {id, name, input}`, `tool_result {tool_use_id, content,
is_error}`, `thinking`, `image`), rewritten whole after every turn (cline: core/storage/
disk.ts, the legacy layout the SDK still reads in apps/vscode/src/sdk/legacy-state-reader.ts;
Roo Code: src/core/task-persistence/apiMessages.ts). Roo Code adds per message `ts` (epoch
ms), `isSummary` (a condensed summary), `condenseParent` / `truncationParent` (the message
is hidden behind a summary or a truncation marker but kept), `isTruncationMarker`, and
`type: "reasoning"` items. The Cline SDK (the CLI and newer extensions) keeps the same
messages, with `ts` and `id`, in `<data>/sessions/<id>/<id>.messages.json` (an array or
`{messages: [...]}`; sdk/packages/shared/src/llms/messages.ts, runtime-host-support.ts,
services/session-artifacts.ts) beside a manifest `<id>.json` whose `cwd` is the workspace. The harness injects `<environment_details>` into user turns; that
block is dropped (Roo Code's names the workspace: `# Current Workspace Directory (/p) Files`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .base import Piece, ReadContext, ReadResult, TranscriptEvent, as_text, cut_title, opt_ms, opt_str
from .document import FormatError, Numberer, add, each_item, obj, read_document, side_text, skip

_ENV = re.compile(r"<environment_details>.*?(?:</environment_details>|\Z)", re.S)
_CWD = re.compile(r"# Current (?:Workspace|Working) Directory \((.+?)\) Files")
_TASK = re.compile(r"<task>\s*(.*?)\s*</task>", re.S)
SDK_SUFFIX = ".messages.json"


def reader(source: str):  # noqa: ANN201 - a Reader (discover.Reader), typed there
    def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
        return _read(path, source)
    read.__doc__ = f"Read a whole {source} task conversation (api_conversation_history.json)."
    return read


def _read(path: Path, source: str) -> ReadResult:
    doc = read_document(path, f"{source} {path.name}")
    sdk = path.name.endswith(SDK_SUFFIX)
    if doc is None:
        doc = []
    if sdk and isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        doc = doc["messages"]  # the SDK's reader takes either shape (runtime-host-support.ts)
    if not isinstance(doc, list):
        raise FormatError(f"{source} conversation is not a JSON array of messages; not imported")
    res = ReadResult()
    sid = f"{source}:{path.name[:-len(SDK_SUFFIX)] if sdk else path.parent.name}"
    meta = res.session(sid, source)
    if sdk:  # the session's manifest <id>.json beside it names the working directory
        manifest = side_text(path.parent / f"{path.parent.name}.json")
        try:
            cwd = obj(json.loads(manifest)).get("cwd") if manifest else None
        except ValueError:
            cwd = None
        meta.workspace = opt_str(cwd)
    numbers = Numberer()
    calls: dict[str, str] = {}
    each_item(doc, res, lambda i, m: _message(sid, i, m, numbers, calls, res))
    return res


def _strip(text: str, res: ReadResult, sid: str) -> str:
    meta = res.sessions[sid]
    m = _CWD.search(text)
    if m and not meta.workspace:
        meta.workspace = m.group(1)
    return _ENV.sub("", text).strip()


def _message(sid: str, i: int, msg: Any, numbers: Numberer, calls: dict[str, str], res: ReadResult) -> None:
    if not isinstance(msg, dict):
        skip(res, f"message {i + 1}", "not an object")
        return
    if msg.get("isTruncationMarker"):
        res.ignored += 1
        return
    time_ms = opt_ms(msg.get("ts"))
    meta = res.sessions[sid]
    if meta.created_ms is None and time_ms is not None:
        meta.created_ms = time_ms
    role = opt_str(msg.get("role"))
    content = msg.get("content")
    if msg.get("type") == "reasoning":  # Roo Code: a reasoning item, text or summary blocks
        texts = [opt_str(msg.get("text")) or ""] + [as_text(b.get("text", "")) for b in msg.get("summary") or []
                                                     if isinstance(b, dict)]
        pieces = [Piece("reasoning", t) for t in texts if t.strip()]
        role = "assistant"
    else:
        if role not in ("user", "assistant"):
            skip(res, f"message {i + 1}", "needs role user or assistant")
            return
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            skip(res, f"message {i + 1}", "content is not text or a list of blocks")
            return
        pieces = _pieces(content, calls, res, sid)
        reasoning = opt_str(msg.get("reasoning_content"))
        if reasoning and reasoning.strip():
            pieces.insert(0, Piece("reasoning", reasoning))
    if not pieces:
        return
    flags: tuple[str, ...] = ()
    if msg.get("condenseParent") or msg.get("truncationParent"):
        flags = ("summarized",) if msg.get("condenseParent") else ("pruned",)
    blocks = content if isinstance(content, list) else []
    errors = any(isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error") for b in blocks)
    if msg.get("isSummary"):
        role, pieces = "summary", [Piece("summary", p.text) if p.kind == "text" else p for p in pieces]
    elif all(p.kind == "tool_result" for p in pieces):
        role = "tool"
    call_id = next((b.get("id") or b.get("tool_use_id") for b in blocks if isinstance(b, dict)
                    and b.get("type") in ("tool_use", "tool_result")), None)
    if role == "user" and meta.title is None:
        task = _TASK.search(pieces[0].text)
        if task:
            meta.title = cut_title(task.group(1), 80, first_line=True)
    add(res, TranscriptEvent(sid, numbers.take(sid), role, tuple(pieces), time_ms=time_ms,
                             message_id=opt_str(msg.get("id")), call_id=opt_str(call_id),
                             flags=flags + (("error",) if errors else ())))


def _pieces(content: list, calls: dict[str, str], res: ReadResult, sid: str) -> list[Piece]:
    pieces: list[Piece] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text" and isinstance(block.get("text"), str):
            text = _strip(block["text"], res, sid)
            if text:
                pieces.append(Piece("text", text))
        elif btype == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
            pieces.append(Piece("reasoning", block["thinking"]))
        elif btype == "tool_use":
            name = opt_str(block.get("name")) or "tool"
            bid = opt_str(block.get("id"))
            if bid:
                calls[bid] = name
            pieces.append(Piece("tool_call", f"{name} {as_text(block.get('input', ''))}", tool=name))
        elif btype == "tool_result":
            text = _strip(as_text(block.get("content", "")), res, sid)
            if text:
                pieces.append(Piece("tool_result", text, tool=calls.get(opt_str(block.get("tool_use_id")) or "")))
    return pieces
