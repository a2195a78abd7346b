"""`CodeService.status`: the index as it stands, for `status`, MCP `code_index` and the
dashboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.config import Config
from ...core.errors import InputError
from ...core.paths import ensure_dir, recall_home, workspace_dir
from ...readers.workspace import check_workspace_root, parse_source_roots

if TYPE_CHECKING:
    from .view import CodeView


def status_of(svc: CodeView, probe: bool = True) -> dict[str, Any]:
    """The index as it stands: files, chunks, vectors pending, roots, the last job, and
    the embedder (with `probe`, a remote endpoint is asked whether it answers)."""
    last = json.loads(svc.store.get_meta("last_index") or "{}")
    roots, problems = parse_source_roots(svc.cfg.source_roots, svc.workspace)
    paths = list(svc.store.files())
    scopes = svc.scopes(paths)
    chunks = svc.store.chunk_count()
    pending = svc.store.pending_count()
    out: dict[str, Any] = {
        "workspace": str(svc.workspace), "database": str(svc.store.path),
        "indexed": bool(last), "last_indexed": last.get("time"),
        "files": len(paths), "chunks": chunks, "vectors": chunks - pending, "pending": pending,
        "index_bytes": svc.store.size_bytes(),
        "fingerprint": {"embedder": svc.store.get_meta("embedder"),
                        "chunker": svc.store.get_meta("chunker")},
        "embedder": {"name": svc.cfg.embedder.name},
        "roots": [{"label": "", "path": str(svc.workspace), "ok": True}]
                 + [{"label": r.label, "path": str(r.path), "ok": True} for r in roots],
        "problems": problems, "skipped": last.get("skipped", {}), "scopes": scopes,
        "job": svc.job(),
    }
    emb = svc.embedder()
    if emb is None:
        out["embedder"]["error"] = svc._embedder_error
    elif emb.remote:
        if probe:
            ok, msg = emb.probe(min(10.0, svc.cfg.embedder.timeout_s))
            out["embedder"]["endpoint_ok"] = ok
            out["embedder"]["endpoint"] = msg
            if ok:
                out["embedder"]["fingerprint"] = emb.fingerprint
    else:
        out["embedder"]["fingerprint"] = emb.fingerprint
    return out


def has_index(workspace: Path, home: Path | None = None) -> bool:
    """Whether `workspace` was ever indexed (or an index job started for it): its folder
    under the recall home exists. Opening a CodeService creates that folder and an empty
    index, so a command that only looks asks this first."""
    return workspace_dir(Path(workspace).resolve(), home).is_dir()


def unindexed_status(workspace: Path, cfg: Config, home: Path | None = None) -> dict[str, Any]:
    """`status_of`'s answer for a workspace with no index, made without creating one. The
    recall home itself is made (as every command does), so an unusable one is an error here
    as it is anywhere."""
    if not workspace.is_dir():  # as CodeService refuses it
        raise InputError(f"workspace {workspace} is not a directory")
    check_workspace_root(workspace)
    ensure_dir(home or recall_home())
    roots, problems = parse_source_roots(cfg.source_roots, workspace)
    return {
        "workspace": str(workspace), "database": str(workspace_dir(workspace, home) / "index.sqlite"),
        "indexed": False, "last_indexed": None, "files": 0, "chunks": 0, "vectors": 0,
        "pending": 0, "index_bytes": 0, "fingerprint": {"embedder": None, "chunker": None},
        "embedder": {"name": cfg.embedder.name},
        "roots": [{"label": "", "path": str(workspace), "ok": True}]
                 + [{"label": r.label, "path": str(r.path), "ok": True} for r in roots],
        "problems": problems, "skipped": {}, "scopes": [], "job": {"state": "idle"},
    }
