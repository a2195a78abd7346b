"""Claude Code hooks for recall: UserPromptSubmit (auto-recall gate) and SessionStart
(the compaction anchor). Handlers take the hook payload and config, return the hook's JSON
answer or None (nothing to add). They never raise into the harness: run_hook guards them.
"""

from __future__ import annotations

from typing import Any

from ...core.clean import cap_query, clean_text
from ...core.config import Config
from ...readers.workspace import is_pseudo_fs, stat_regular
from ...services.recall import RecallService


def _answer(event: str, context: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}


def transcript_path(payload: dict[str, Any]) -> str | None:
    """The payload's transcript, when it names a regular file on a real filesystem.

    Anything else (a FIFO, a device, /proc/kmsg, a path with NUL) is ignored rather than
    opened: reading it could block the harness, which waits for the hook.
    """
    path = payload.get("transcript_path")
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    path = clean_text(path)
    try:
        if is_pseudo_fs(path):
            return None
        stat_regular(path, follow_symlinks=True)
    except (OSError, ValueError):
        return None
    return path


def handle_user_prompt_submit(payload: dict[str, Any], cfg: Config) -> dict[str, Any] | None:
    """Inject recalled history when the gate fires for this prompt."""
    session, prompt = payload.get("session_id"), payload.get("prompt")
    if not isinstance(session, str) or not isinstance(prompt, str) or not session:
        return None
    # A hook is a process per call: its import leaves embedding to a search or the MCP
    # server (RecallService.embed_imports), which have the model loaded anyway.
    svc = RecallService(cfg, embed_imports=False)
    res = svc.on_user_prompt(clean_text(session), cap_query(clean_text(prompt)), transcript_path(payload))
    if not res.get("fire") or not res.get("context"):
        return None
    return _answer("UserPromptSubmit", res["context"])


def handle_session_start(payload: dict[str, Any], cfg: Config) -> dict[str, Any] | None:
    """After a compaction (source "compact"), inject the anchor."""
    session = payload.get("session_id")
    if payload.get("source") != "compact" or not isinstance(session, str) or not session:
        return None
    anchor = RecallService(cfg, embed_imports=False).anchor(clean_text(session), transcript_path(payload))
    if anchor is None:
        return None
    return _answer("SessionStart", anchor["context"])
