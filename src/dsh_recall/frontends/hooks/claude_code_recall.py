"""Claude Code hooks for recall: UserPromptSubmit (auto-recall gate) and SessionStart
(the compaction anchor). Handlers take the hook payload and config, return the hook's JSON
answer or None (nothing to add). They never raise into the harness: run_hook guards them.
"""

from __future__ import annotations

from typing import Any

from ...core.config import Config
from ...services.recall import RecallService


def _answer(event: str, context: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}


def handle_user_prompt_submit(payload: dict[str, Any], cfg: Config) -> dict[str, Any] | None:
    """Inject recalled history when the gate fires for this prompt."""
    session, prompt = payload.get("session_id"), payload.get("prompt")
    if not isinstance(session, str) or not isinstance(prompt, str):
        return None
    res = RecallService(cfg).on_user_prompt(session, prompt, payload.get("transcript_path"))
    if not res.get("fire") or not res.get("context"):
        return None
    return _answer("UserPromptSubmit", res["context"])


def handle_session_start(payload: dict[str, Any], cfg: Config) -> dict[str, Any] | None:
    """After a compaction (source "compact"), inject the anchor."""
    session = payload.get("session_id")
    if payload.get("source") != "compact" or not isinstance(session, str):
        return None
    anchor = RecallService(cfg).anchor(session, payload.get("transcript_path"))
    if anchor is None:
        return None
    return _answer("SessionStart", anchor["context"])
