"""Shared by the history service modules: where the database lives, how to open it, the
layer names and the session variable. Kept tiny so the use-case modules (history,
history_import, history_semantic, history_detail) import it without importing each other.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ...core.config import Config, load_config
from ...core.paths import recall_home
from ...stores import registry
from ...stores.sqlite.history import HistoryStore

LAYERS = ("literal", "fuzzy", "semantic")
SESSION_ENV = "DSH_RECALL_SESSION"


def db_path() -> Path:
    """The history database under the recall home."""
    return recall_home() / "history.sqlite"


def open_store(path: Path | None = None, cfg: Config | None = None) -> HistoryStore:
    """Open the history store: the SQLite file `path` when given, else the configured store
    (`store`: the recall home's history.sqlite, or the history namespace of PostgreSQL)."""
    if path is not None:
        return HistoryStore(path)
    return registry.history_store((cfg or load_config()).store, db_path())


def _cfg(cfg: Config | None) -> Config:
    return cfg if cfg is not None else load_config()


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
