"""Claude Code hooks. `post_tool_use` offloads big tool results (head + note + tail stay).

The answer keeps the shape of the original output: Claude Code only accepts an
`updatedToolOutput` for a built-in tool when it has that tool's output shape (Bash
`{stdout, stderr, interrupted, isImage}`, Grep `{mode, content, ...}`, ...), so only big text
leaves are replaced and every other field is passed back as it came. MCP results (a list of
content blocks, or `{content: [...]}`) go back as `updatedMCPToolOutput`; image and other
non-text blocks are untouched.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...core.clean import clean_text
from ...core.config import Config
from ...services.access.channel import channel_key_from_env
from ...services.objects import ObjectService

# Tools whose output the agent needs verbatim to edit files (Read feeds Edit's exact-match
# strings; the others answer with what was written). Their output passes through.
PASS_THROUGH = frozenset({"Read", "Edit", "MultiEdit", "Write", "NotebookEdit", "TodoWrite"})
# Keys holding identifiers, not output: never offloaded however long.
_KEEP_KEYS = frozenset({"filePath", "file_path", "path", "url", "command", "type", "mode",
                        "description", "mimeType", "uri"})
_MAX_DEPTH = 4


class _Rewriter:
    def __init__(self, service: ObjectService, session: str, tool: str, call_id: str | None):
        self.service = service
        self.session = session
        self.tool = tool
        self.call_id = call_id
        self.changed = False

    def _seq(self, where: str) -> int | None:
        # The same tool call offloaded twice (a retried hook) maps to the same (session, seq).
        if not self.call_id:
            return None
        digest = hashlib.sha256(f"{self.call_id}\x00{where}".encode("utf-8", "surrogatepass")).hexdigest()
        return int(digest[:12], 16)

    def text(self, value: str, where: str) -> str:
        if len(value) <= self.service.cfg.threshold_chars:
            return value
        res = self.service.put(clean_text(value), session=self.session, seq=self._seq(where), tool=self.tool,
                               channel=channel_key_from_env())
        if res.offloaded and res.inline != value:
            self.changed = True
            return res.inline
        return value

    def walk(self, value: Any, where: str = "", depth: int = 0) -> Any:
        if isinstance(value, str):
            return self.text(value, where)
        if depth >= _MAX_DEPTH:
            return value
        if isinstance(value, list):
            return [self.walk(v, f"{where}/{i}", depth + 1) for i, v in enumerate(value)]
        if isinstance(value, dict):
            if "type" in value and value.get("type") != "text":
                return value  # image, audio, resource blocks pass through
            return {k: (v if k in _KEEP_KEYS else self.walk(v, f"{where}/{k}", depth + 1))
                    for k, v in value.items()}
        return value


def post_tool_use(payload: dict[str, Any], service: ObjectService) -> dict[str, Any] | None:
    """The hook answer for one PostToolUse payload, or None to leave the output alone."""
    if payload.get("hook_event_name", "PostToolUse") != "PostToolUse":
        return None
    tool = clean_text(str(payload.get("tool_name") or ""))
    if not tool or tool in PASS_THROUGH or "tool_response" not in payload:
        return None
    session = clean_text(str(payload.get("session_id") or "claude-code"))
    call_id = payload.get("tool_use_id")
    rw = _Rewriter(service, session, tool, clean_text(str(call_id)) if call_id else None)
    response = payload["tool_response"]
    if isinstance(response, dict) and response.get("isImage"):
        return None
    new = rw.walk(response)
    if not rw.changed:
        return None
    key = "updatedMCPToolOutput" if tool.startswith("mcp__") else "updatedToolOutput"
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", key: new}}


def handle_post_tool_use(payload: dict[str, Any], cfg: Config) -> dict[str, Any] | None:
    """Open the object store with the effective config and answer one payload."""
    with ObjectService(cfg.objects, scrub=cfg.scrub) as service:
        return post_tool_use(payload, service)
