"""The history source: past agent transcripts behind the one source contract (services/base.py).

`HistoryService` holds one open history store for its life: `index()` imports transcripts,
`search()` answers with a `HistoryAnswer`, `show()` gives a session's original text,
`status()` says what the store holds, `close()` lets the store go. The caller is one
`Viewer` (None: the user, unfiltered, as the module-level functions have always been).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from ...core.config import Config
from ...stores.sqlite.history import HistoryStore
from ..access.channel import Viewer
from ..base import Answer
from . import detail
from .common import _cfg, open_store
from .search import search as _search
from .semantic import backfill


class HistoryAnswer(Answer, total=False):
    """A history search's answer: the common keys plus history's own.

    `hits` are events (coarse: grouped per session within the token budget) or event seqs
    (`detail`); `has_more` / `next_offset` page them; `layer_status` says what each layer
    did; `sessions` (coarse) titles and dates the sessions the hits came from; `tokens` is
    the answer's own size estimate (coarse)."""

    scope: dict[str, Any]
    hits: list[dict[str, Any]]
    has_more: bool
    layer_status: dict[str, str]
    rerank: str
    sessions: dict[str, dict[str, Any]]
    tokens: int


class HistoryService:
    """History as a source. Opens its store on first need (a given `store` is the caller's
    and is not closed here); `path` opens that SQLite file instead of the configured store."""

    name = "history"

    def __init__(self, cfg: Config | None = None, *, store: HistoryStore | None = None,
                 path: Path | None = None):
        self.cfg = _cfg(cfg)
        self._path = path
        self._store = store
        self._own = store is None

    @property
    def store(self) -> HistoryStore:
        if self._store is None:
            self._store = open_store(self._path, cfg=self.cfg)
        return self._store

    def index(self, paths: Sequence[str] | None = None, *, fmt: str | None = None,
              embed: bool = False, progress: Callable[[str], None] | None = None,
              channel: str | None = None, backlog: bool = True,
              embed_budget_s: float | None = None) -> dict[str, Any]:
        """Import transcripts (the default locations when `paths` is None), lexical first,
        then embed within the budget (all with `embed=True`): importer.import_paths. The
        answer's `pending` and `backlog` say what still waits for vectors."""
        from .importer import import_paths

        return import_paths(paths, fmt, self.cfg, embed, self.store, progress, channel, backlog,
                            embed_budget_s)

    def search(self, query: str, *, viewer: Viewer | None = None, limit: int | None = None,
               offset: int = 0, session: str | None = None, workspace: str | None = None,
               all_sessions: bool = False, layers: Sequence[str] | None = None,
               detail: bool = False, cwd: str | None = None) -> HistoryAnswer:
        """Ranked history the viewer may see (search.search): the scope is `session`, else
        `workspace`, else every session with `all_sessions`, else $DSH_RECALL_SESSION or the
        cwd's workspace. A semantic layer gated behind more blocks than a search may embed
        puts them in `backlog` and says so in `notes`. `match` (and each hit's) says how
        sure the answer is (confidence.py)."""
        data = _search(query, session=session, workspace=workspace,
                       all_sessions=all_sessions, limit=limit, layers=layers, detail=detail,
                       cfg=self.cfg, store=self.store, cwd=cwd, offset=offset, viewer=viewer)
        # The contract's common keys beside history's own: `results` is the same list as
        # `hits` (the front ends' renderers read `hits`), `notes` what a person should know.
        data.setdefault("results", data.get("hits", []))
        data.setdefault("notes", [])
        return cast(HistoryAnswer, data)

    def show(self, session: str, *, viewer: Viewer | None = None, around: int | None = None,
             window: int = 3, page: int | None = None, page_size: int = 20,
             max_chars: int = 20000, offset: int | None = None) -> dict[str, Any]:
        """The exact original text of a session's events (detail.show)."""
        return detail.show(session, around=around, window=window, page=page, page_size=page_size,
                           max_chars=max_chars, store=self.store, offset=offset, viewer=viewer)

    def backfill(self, stop: threading.Event) -> int:
        """Embed every block still waiting until none is left or `stop` (a threading.Event)
        is set: the background job `history.embed` (semantic.backfill)."""
        return backfill(self.cfg, stop)

    def status(self) -> dict[str, Any]:
        """Where the history database is and what it holds."""
        return {"db": str(self.store.path), **self.store.stats()}

    def close(self) -> None:
        if self._store is not None and self._own:
            self._store.close()
        self._store = None if self._own else self._store

    def __enter__(self) -> HistoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
