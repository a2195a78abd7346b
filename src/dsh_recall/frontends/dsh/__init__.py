"""dsh-recall inside DeepSeek Harness (dsh): the native plugin and the worker it talks to.

`plugin.mjs` (a plain ESM file, no dependencies) is mounted by a cordis patch
(`dsh-recall integrate dsh patch`). It hooks dsh's `tools/post-execute` (the reaper),
`system-prompt/assemble` (auto-recall, notes, compaction anchor), `agent/pre-step` (the
replay-safe reclaim of results already seen) and `session/event`, and asks one long-lived
`dsh-recall worker` (JSON lines over stdio) for every decision. Python stays the engine:
`worker.Worker` calls the same services as the Claude Code hooks and the MCP server.
"""

from __future__ import annotations

from pathlib import Path

PLUGIN_PATH = Path(__file__).resolve().parent / "plugin.mjs"
PLUGIN_ID = "recall-native"
# The browser half (client/client.js) is declared by the package.json beside plugin.mjs.
# A resolve hook for dsh 0.2.1rc2's web profile, which fails to load plugins as shipped
# (docs/integrations.md): NODE_OPTIONS=--require=<this file>.
WEB_FIX_PATH = Path(__file__).resolve().parent / "web_resolve_fix.cjs"

__all__ = ["PLUGIN_PATH", "PLUGIN_ID", "WEB_FIX_PATH"]
