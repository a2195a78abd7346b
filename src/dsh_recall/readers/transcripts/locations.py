"""Where Cursor, Gemini CLI, OpenCode, Aider, Cline / Roo Code and Goose keep their sessions
(Linux and macOS defaults; docs/history.md cites each), and how their files are recognised
by name. Only these fixed locations are read by a default import; anything else must be
named on the command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# VS Code forks that can host the Cline and Roo Code extensions (their globalStorage).
_EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
_EXTENSIONS = {"cline": "saoudrizwan.claude-dev", "roo-code": "rooveterinaryinc.roo-cline"}
TASK_FILE = "api_conversation_history.json"
AIDER_FILE = ".aider.chat.history.md"


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def _user_dirs() -> list[Path]:
    """VS Code-style user data folders' parents: ~/.config (Linux), Application Support (macOS)."""
    home = Path.home()
    out = [_env_path("XDG_CONFIG_HOME") or home / ".config"]
    if sys.platform == "darwin":
        out.append(home / "Library" / "Application Support")
    return out


def _cursor() -> list[Path]:
    return [d / "Cursor" / "User" / "globalStorage" / "state.vscdb" for d in _user_dirs()]


def _gemini() -> list[Path]:
    root = (_env_path("GEMINI_CLI_HOME") or Path.home()) / ".gemini" / "tmp"
    if not root.is_dir():
        return []
    found: list[Path] = []
    for pattern in ("*/chats/session-*.json", "*/chats/session-*.jsonl", "*/chats/*/*.jsonl"):
        found += root.glob(pattern)
    return found


def _opencode() -> list[Path]:
    data = (_env_path("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "opencode"
    return sorted(data.glob("opencode*.db")) if data.is_dir() else []


def _tasks(fmt: str) -> list[Path]:
    roots = [d / editor / "User" / "globalStorage" / _EXTENSIONS[fmt] / "tasks"
             for d in _user_dirs() for editor in _EDITORS]
    found: list[Path] = []
    if fmt == "cline":  # the Cline CLI and the SDK-era extension: CLINE_DATA_DIR > CLINE_DIR/data > ~/.cline/data
        data = _env_path("CLINE_DATA_DIR") or (_env_path("CLINE_DIR") or Path.home() / ".cline") / "data"
        roots.append(data / "tasks")
        sessions = _env_path("CLINE_SESSION_DATA_DIR") or data / "sessions"
        if sessions.is_dir():
            found += sessions.glob("*/*.messages.json")
    for root in roots:
        if root.is_dir():
            found += root.glob(f"*/{TASK_FILE}")
    return found


def _goose() -> list[Path]:
    roots = []
    base = _env_path("GOOSE_PATH_ROOT")
    if base is not None and base.is_absolute():
        roots.append(base / "data" / "sessions")
    roots.append((_env_path("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "goose" / "sessions")
    if sys.platform == "darwin":
        roots.append(Path.home() / "Library" / "Application Support" / "Block" / "goose" / "sessions")
    found: list[Path] = []
    for root in roots:
        if root.is_dir():
            found += [root / "sessions.db"] + sorted(root.glob("*.jsonl"))
    return found


def _aider() -> list[Path]:
    """Aider writes into the project (the git root), not a home folder: only the current
    directory and its git root are looked at."""
    try:
        cwd = Path.cwd()
    except OSError:  # the current directory was removed
        return []
    out = [cwd / AIDER_FILE]
    for d in (cwd, *cwd.parents):
        if (d / ".git").exists():
            out.append(d / AIDER_FILE)
            break
    return out


def defaults() -> list[tuple[Path, str]]:
    """Every session document of these harnesses at its default location, as (path, format)."""
    out: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for fmt, found in (("cursor", _cursor()), ("gemini", _gemini()), ("opencode", _opencode()),
                       ("cline", _tasks("cline")), ("roo-code", _tasks("roo-code")), ("goose", _goose()),
                       ("aider", _aider())):
        for p in sorted(found):
            if p not in seen and p.is_file():
                seen.add(p)
                out.append((p, fmt))
    return out


def by_name(path: Path) -> str | None:
    """The format of a file these harnesses name distinctively, else None."""
    name, parts = path.name, path.parts
    if name == AIDER_FILE:
        return "aider"
    if name == TASK_FILE:
        return "roo-code" if _EXTENSIONS["roo-code"] in parts else "cline"
    if name.endswith(".messages.json") and len(parts) >= 3 and parts[-3] == "sessions":
        return "cline"  # the Cline SDK: sessions/<id>/<id>.messages.json
    if name == "state.vscdb":
        return "cursor"
    if name == "sessions.db" and "goose" in parts:
        return "goose"
    if name.startswith("opencode") and name.endswith(".db"):
        return "opencode"
    if (name.startswith("session-") or ("chats" in parts and ".gemini" in parts)) \
            and (name.endswith(".json") or name.endswith(".jsonl")):
        return "gemini"
    if name.endswith(".jsonl") and "goose" in parts and "sessions" in parts:
        return "goose"
    return None
