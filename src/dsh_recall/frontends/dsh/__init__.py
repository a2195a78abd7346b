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

__all__ = ["PLUGIN_PATH", "PLUGIN_ID"]
