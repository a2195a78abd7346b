"""Dropping one workspace's code index (`dsh-recall index --drop PATH`), e.g. after an index
of a parent folder by mistake: its folder under the recall home (the SQLite index, vectors,
job file, logs) goes, and on a PostgreSQL store its namespace is emptied. The embedding
cache stays: a later index of the same files reuses its vectors."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ...core.config import Config
from ...core.errors import RecallError
from ...core.paths import workspace_dir
from ...stores import registry
from ..vectors import file_lock


def _folder_bytes(folder: Path) -> int:
    total = 0
    for p in folder.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def drop_index(workspace: Path, cfg: Config, home: Path | None = None) -> dict[str, Any]:
    """Remove `workspace`'s code index; returns what it held and the bytes freed (0 and
    `dropped: False` when there was none). Refused while an indexer works on it."""
    folder = workspace_dir(workspace, home)
    out: dict[str, Any] = {"workspace": str(workspace), "folder": str(folder), "dropped": False,
                           "files": 0, "chunks": 0, "freed_bytes": 0, "store": "sqlite"}
    if not folder.is_dir():
        return out
    with file_lock(folder / "index.lock", 0) as free:
        if not free:
            raise RecallError(f"an indexer is at work on {workspace} (`dsh-recall status` shows "
                              "it); wait for it to finish, then drop the index")
        store = registry.chunk_store(cfg.store, registry.code_namespace(folder.name),
                                     folder / "index.sqlite")
        try:
            out["files"], out["chunks"] = store.file_count(), store.chunk_count()
            if cfg.store:  # a shared database: empty this workspace's namespace there
                out["store"] = "postgresql"
                before = store.size_bytes()
                store.clear()
                out["freed_bytes"] += max(0, before - store.size_bytes())
        finally:
            store.close()
        out["freed_bytes"] += _folder_bytes(folder)
        shutil.rmtree(folder)
    out["dropped"] = True
    return out
