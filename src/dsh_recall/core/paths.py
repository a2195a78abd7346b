"""Where dsh-recall keeps its data: the recall home, never inside the user's repository."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path


def recall_home() -> Path:
    """`$DSH_RECALL_HOME`, else `$DSH_HOME/dsh-recall`, else `~/.dsh/dsh-recall`."""
    env = os.environ.get("DSH_RECALL_HOME")
    if env:
        return Path(env).expanduser()
    dsh_home = os.environ.get("DSH_HOME")
    if dsh_home:
        return Path(dsh_home).expanduser() / "dsh-recall"
    return Path.home() / ".dsh" / "dsh-recall"


def stable_key(label: str, identity: str) -> str:
    """A readable, stable directory or file name: a cleaned label plus a hash of identity."""
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-") or "root"
    return f"{name[:40]}-{digest}"


def workspace_key(workspace: Path) -> str:
    """A stable directory name for a workspace, keyed by its resolved path."""
    resolved = str(Path(workspace).resolve())
    return stable_key(Path(resolved).name, resolved)


def workspace_dir(workspace: Path, home: Path | None = None) -> Path:
    """The per-workspace data folder (holds index.sqlite and its lock)."""
    return (home or recall_home()) / "workspaces" / workspace_key(workspace)


def ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
