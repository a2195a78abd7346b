"""What a running dsh worker and the plugin left for other processes: the worker's counts
and ledger snapshot (`worker-status.json`) and the plugin's view of its health
(`plugin-status.json`), read by MCP `status` and `dsh-recall status` (`last_status`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...core.paths import recall_home


def status_path() -> Path:
    """Where the running worker keeps its counts for other processes."""
    return recall_home() / "dsh" / "worker-status.json"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def last_status() -> dict[str, Any] | None:
    """The last worker's counts and the plugin's view of its health, or None when neither a
    worker nor the plugin ran under this home. `running` is whether that worker's process is
    alive now; `health` ("ready", "slow", "hung", "starting", "dead", "disabled") and
    `reason` are the plugin's last word on it, and `warnings` its last messages."""
    data = _read_json(status_path())
    plugin = _read_json(status_path().with_name("plugin-status.json"))
    if data is None and plugin is None:
        return None
    out: dict[str, Any] = dict(data or {})
    out["running"] = _alive(out.get("pid"))
    if plugin is not None:
        out["health"] = plugin.get("state")
        out["reason"] = plugin.get("reason")
        out["warnings"] = [w.get("message") for w in plugin.get("warnings") or []
                           if isinstance(w, dict)][-5:]
        out["dsh_running"] = _alive(plugin.get("dsh_pid"))
    if not out["running"] and not out.get("reason"):
        out["reason"] = ("no worker has run under this recall home" if data is None
                         else "the worker is not running (dsh exited, or it was stopped)")
    return out
