"""Plain-dict entry points for the MCP server, hooks and the Python API, and the backfill a
long-lived process runs for passages a search left waiting."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core.config import Config, load_config
from ..base import Answer, Viewer
from .service import LAYERS, NotesService


def backfill(cfg: Config, workspace: Path | None, stop: threading.Event,
             slice_s: float = 2.0) -> int:
    """Embed every passage still waiting, slice by slice under the index lock, until none
    is left, another process holds the lock (an indexer embeds them) or `stop` is set.
    For long-lived processes (the MCP server) after a search left passages waiting."""
    svc = NotesService(cfg, workspace=workspace)
    total = 0
    try:
        while not stop.is_set():
            with svc._lock(0) as got:
                if not got:
                    break
                n = svc.embed_pending(slice_s)
            total += n
            if not n:
                break
        return total
    finally:
        svc.close()


def _service(config: Config | None, roots: Sequence[str | Path] | None,
             workspace: Path | None) -> NotesService:
    cfg = config or load_config(workspace=workspace)
    return NotesService(cfg, roots=roots, workspace=workspace)


def index_notes(roots: Sequence[str | Path] | None = None, *, accept_spec_change: bool = False,
                embed: bool = True, config: Config | None = None,
                workspace: Path | None = None) -> dict[str, Any]:
    """Index the note roots (config's when none given); returns the index report."""
    svc = _service(config, roots, workspace)
    try:
        return svc.index(accept_spec_change=accept_spec_change, embed=embed)
    finally:
        svc.close()


def search_notes(query: str, *, viewer: Viewer | None = None, limit: int | None = None,
                 roots: Sequence[str | Path] | None = None, config: Config | None = None,
                 workspace: Path | None = None) -> Answer:
    """memory_search: {"results": [{path, start_line, end_line, heading, level, score, text}],
    "layers": [...], ...}. With a session map configured, pass the caller's Viewer."""
    svc = _service(config, roots, workspace)
    try:
        return svc.search(query, viewer=viewer, limit=limit)
    finally:
        svc.close()


def auto_recall(message: str, *, viewer: Viewer | None = None, limit: int | None = None,
                budget_chars: int | None = None, roots: Sequence[str | Path] | None = None,
                config: Config | None = None, workspace: Path | None = None) -> str:
    """A bounded block of relevant notes for a system prompt; "" when nothing is relevant."""
    svc = _service(config, roots, workspace)
    try:
        return svc.auto_recall(message, viewer=viewer, limit=limit, budget_chars=budget_chars)
    finally:
        svc.close()


def notes_status(roots: Sequence[str | Path] | None = None, *, config: Config | None = None,
                 workspace: Path | None = None) -> dict[str, Any]:
    svc = _service(config, roots, workspace)
    try:
        return svc.status()
    finally:
        svc.close()


def eval_notes(cases: str | Path, roots: Sequence[str | Path] | None = None, *,
               layers: Sequence[str] = LAYERS, config: Config | None = None,
               workspace: Path | None = None) -> dict[str, Any]:
    """Top-1/3/5 hit rates of the user's own cases file."""
    svc = _service(config, roots, workspace)
    try:
        return svc.evaluate(cases, layers=layers)
    finally:
        svc.close()
