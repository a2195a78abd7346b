"""History recall: import transcripts, search them in three layers, show original text.

The source is `HistoryService` (service.py): index(), search() -> Answer, status(), close(),
taking the caller as one `Viewer`. The module-level functions below are the same pipeline
for callers that hold no service (the CLI, hooks, the auto-recall gate): `import_paths`,
`search`, `show`, `compaction_anchor`, `status`, and for the gate `known_terms` /
`OlderTurns` / `recent_events`. Each subject has its module: search.py (ranking and the
coarse answer), importer.py, semantic.py (vectors), detail.py (original text, anchors, gate
look-ups), rank.py (turn rules), common.py (where the store is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...core.config import Config
from ...core.errors import InputError
from ...stores.sqlite.history import HistoryStore
from .common import LAYERS, SESSION_ENV, db_path, open_store
from .detail import OlderTurns, compaction_anchor, known_terms, recent_events, require_session, show
from .search import COARSE_MIN_SHARE, LAYER_WEIGHTS, answer_tokens, fuse_layers, resolve_scope, search
from .semantic import EMBED_COMMAND, EMBED_HINT, EMBED_JOB, SemanticLayer, backfill
from .service import HistoryAnswer, HistoryService

__all__ = [
    "LAYERS", "LAYER_WEIGHTS", "SESSION_ENV", "COARSE_MIN_SHARE", "InputError",
    "HistoryService", "HistoryAnswer", "HistoryStore",
    "db_path", "open_store", "status",
    "import_file", "import_paths",
    "EMBED_COMMAND", "EMBED_HINT", "EMBED_JOB", "SemanticLayer", "backfill",
    "resolve_scope", "fuse_layers", "search", "answer_tokens",
    "show", "require_session", "compaction_anchor", "known_terms", "OlderTurns", "recent_events",
]


def status(store: HistoryStore | None = None) -> dict[str, Any]:
    """Where the history database is and what it holds (counts of sessions, events, blocks, vectors, files)."""
    own = store is None
    store = store or open_store()
    try:
        return {"db": str(store.path), **store.stats()}
    finally:
        if own:
            store.close()


# Importing pulls in every transcript reader and the offload rules; a search needs none of
# them (a cold CLI history search paid about 30 ms for them), so these two import the
# importer when called.

def import_paths(paths: Sequence[str] | None = None, fmt: str | None = None,
                 cfg: Config | None = None, embed: bool = False, store: HistoryStore | None = None,
                 progress: Callable[[str], None] | None = None, channel: str | None = None,
                 backlog: bool = True, embed_budget_s: float | None = None) -> dict[str, Any]:
    """Import transcripts (explicit files/folders, or the default locations): importer.import_paths."""
    from . import importer

    return importer.import_paths(paths, fmt, cfg, embed, store, progress, channel, backlog,
                                 embed_budget_s)


def import_file(store: HistoryStore, path: Path, fmt: str, cfg: Config,
                channel: str | None = None) -> dict[str, Any]:
    """Import what is new in one transcript file: importer.import_file."""
    from . import importer

    return importer.import_file(store, path, fmt, cfg, channel)
