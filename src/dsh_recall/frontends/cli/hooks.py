"""`dsh-recall hook <harness> <event>`: harness hooks reading a JSON payload on stdin.

A hook must never break the harness: on any failure it prints nothing and exits 0, so the
harness carries on with its original data. Add an event by writing a handler
`(payload, config) -> answer | None` and one command that calls `run_hook` with it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ...core.clean import clean_json, clean_text
from ...core.config import Config, load_config
from ..hooks import MAX_PAYLOAD_BYTES

Handler = Callable[[dict[str, Any], Config], "dict[str, Any] | None"]


def read_payload(stream: Any, limit: int = MAX_PAYLOAD_BYTES) -> dict[str, Any] | None:
    """The hook payload as a dict of clean strings, or None (too big, not a JSON object).

    Invalid UTF-8 bytes and lone surrogates (legal as JSON escapes) become U+FFFD, so no
    handler ever sees text SQLite or a JSON encoder would refuse.
    """
    raw = stream.read(limit + 1)
    if len(raw) > limit:
        return None
    payload = json.loads(clean_text(raw))
    return clean_json(payload) if isinstance(payload, dict) else None


def run_hook(ctx: click.Context, handler: Handler) -> None:
    """Read the payload, load config for its cwd, run `handler`, print its JSON answer."""
    try:
        payload = read_payload(sys.stdin.buffer)
        if payload is None:
            return
        cwd = payload.get("cwd")
        workspace = Path(cwd) if isinstance(cwd, str) and "\x00" not in cwd and Path(cwd).is_dir() else None
        root = ctx.find_root()
        cfg_file = root.params.get("config_file") if root.params else None
        cfg = load_config(workspace=workspace, config_file=cfg_file)
        answer = handler(payload, cfg)
        if answer is not None:
            # ASCII JSON: stdout never fails, whatever its encoding.
            out = json.dumps(answer, ensure_ascii=True)
            sys.stdout.write(out + "\n")
            sys.stdout.flush()
    except Exception as e:  # noqa: BLE001 - a hook must never break the harness
        # ...but it says why it did nothing (a harness shows a hook's stderr in its log).
        try:
            msg = " ".join(str(e).split())[:400] or type(e).__name__
            sys.stderr.write(f"dsh-recall hook: did nothing: {msg}\n")
        except Exception:  # noqa: BLE001 - not even a stderr line may break the harness
            pass
        return


@click.group("hook")
def hook() -> None:
    """Harness hooks (read the hook payload on stdin, answer on stdout)."""


@hook.group("claude-code")
def claude_code() -> None:
    """Claude Code hooks; see docs/objects.md for the settings.json entries."""


@claude_code.command("post-tool-use")
@click.pass_context
def post_tool_use_cmd(ctx: click.Context) -> None:
    """PostToolUse: offload a big tool result, leaving head + note + tail."""
    from ..hooks.claude_code import handle_post_tool_use

    run_hook(ctx, handle_post_tool_use)


@claude_code.command("user-prompt-submit")
@click.pass_context
def user_prompt_submit_cmd(ctx: click.Context) -> None:
    """UserPromptSubmit: run the auto-recall gate; inject recalled history when it fires."""
    from ..hooks.claude_code_recall import handle_user_prompt_submit

    run_hook(ctx, handle_user_prompt_submit)


@claude_code.command("session-start")
@click.pass_context
def session_start_cmd(ctx: click.Context) -> None:
    """SessionStart: after a compaction, inject the anchor (summary + key fragments)."""
    from ..hooks.claude_code_recall import handle_session_start

    run_hook(ctx, handle_session_start)
