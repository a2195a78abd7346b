"""History import: read transcript files incrementally into the history store, then embed
what the budget allows (through the semantic layer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from ..chunkers.transcript import event_blocks
from ..core.config import Config
from ..core.text import index_text
from ..search import history_query as hq
from ..sources.transcripts import ReadContext, discover_default, expand, reader
from ..stores.history import BlockIn, HistoryStore, dumps_flags
from .history_common import _cfg, open_store
from .history_semantic import SemanticLayer

EVENT_TEXT_CAP = 262_144  # chars of one event's original text kept for `show`
_HEAD = 4096


def _head_hash(path: Path, n: int) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.sha256(f.read(min(n, _HEAD))).hexdigest()


def _event_text(ev) -> str:
    parts = []
    for p in ev.pieces:
        label = {"reasoning": "[reasoning] ", "tool_call": "[tool call] ", "summary": ""}.get(p.kind, "")
        if p.kind == "tool_result":
            label = f"[{p.tool or 'tool'} result] "
        parts.append(label + p.text)
    text = "\n".join(parts)
    if len(text) > EVENT_TEXT_CAP:
        text = text[:EVENT_TEXT_CAP] + f"\n[... {len(text) - EVENT_TEXT_CAP} more chars in the source file ...]"
    return text


def import_file(store: HistoryStore, path: Path, fmt: str, cfg: Config,
                channel: str | None = None) -> dict[str, Any]:
    """Import what is new in one transcript file; a rewritten or shrunk file is re-imported.

    `channel`: the access channel key that produced the file's sessions, when known (a hook
    run for that channel); None leaves a session the owner's (services/channel.py)."""
    key = str(path.resolve())
    report: dict[str, Any] = {"path": str(path), "format": fmt, "events": 0, "blocks": 0,
                              "skipped": 0, "ignored": 0, "notes": []}
    try:
        st = path.stat()
        row = store.file(key)
        if row is not None:
            if st.st_size < row["offset"] or _head_hash(path, row["offset"]) != row["head_hash"]:
                gone = store.forget_file(key)
                report["notes"].append(f"file was rewritten; re-imported ({len(gone)} sessions replaced)")
                row = None
            elif st.st_size == row["offset"] and st.st_mtime_ns == row["mtime_ns"]:
                report["status"] = "unchanged"
                return report
        ctx = ReadContext()
        if row is not None:
            sess = store.sessions([row["session"]]) if row["session"] else []
            ctx = ReadContext(session=row["session"], workspace=sess[0]["workspace"] if sess else None,
                              line_no=row["line_no"], call_tools=store.call_tools(row["session"]) if row["session"] else {})
        res = reader(fmt)(path, row["offset"] if row else 0, ctx)
    except OSError as e:
        report["status"] = "error"
        report["notes"].append(f"cannot read: {e}")
        return report
    last_time: dict[str, int] = {}
    for ev in res.events:
        if ev.time_ms:
            last_time[ev.session] = max(last_time.get(ev.session, 0), ev.time_ms)
    sessions = [{"id": m.id, "source": m.source, "workspace": m.workspace, "title": m.title,
                 "created_ms": m.created_ms, "updated_ms": last_time.get(m.id) or m.created_ms, "path": key,
                 "channel": channel}
                for m in res.sessions.values()]
    events = [{"session": e.session, "seq": e.seq, "role": e.role, "time_ms": e.time_ms, "time": e.time,
               "message_id": e.message_id, "call_id": e.call_id, "flags": dumps_flags(e.flags),
               "text": _event_text(e)} for e in res.events]
    blocks = [BlockIn(b.session, b.seq, b.part, b.role, b.kind, b.tool, b.text, b.hash,
                      literal=index_text(b.text), trigram=b.text, cjk=hq.cjk_body(b.text))
              for b in event_blocks(res.events, cfg.history.result_block_chars)]
    file_session = next(iter(res.sessions)) if len(res.sessions) == 1 else (row["session"] if row else None)
    file_row = {"path": key, "format": fmt, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                "offset": res.offset, "line_no": res.line_no, "head_hash": _head_hash(path, res.offset),
                "session": file_session}
    report["blocks"] = store.write_batch(sessions, events, blocks, res.marks, file_row)
    report.update(status="imported", events=len(res.events), skipped=res.skipped, ignored=res.ignored,
                  sessions=sorted(res.sessions), notes=report["notes"] + res.notes)
    return report


def import_paths(
    paths: Sequence[str] | None = None,
    fmt: str | None = None,
    cfg: Config | None = None,
    embed: bool = False,
    store: HistoryStore | None = None,
    progress: Callable[[str], None] | None = None,
    channel: str | None = None,
) -> dict[str, Any]:
    """Import transcripts (explicit files/folders, or the default locations when none).
    `channel` tags new sessions with the access channel that produced them.

    Lexical indexes are written first; then blocks are embedded: all of them with
    `embed=True`, else as many as fit in `embed_budget_s`. Embedding never fails an import.
    """
    cfg = _cfg(cfg)
    own = store is None
    store = store or open_store()
    try:
        files = expand(list(paths), fmt) if paths else discover_default()
        reports = []
        for path, f in files:
            if progress:
                progress(str(path))
            reports.append(import_file(store, path, f, cfg, channel))
        sem = SemanticLayer(store, cfg)
        budget = None if embed else cfg.embed_budget_s
        embedded = sem.fill(None, budget)
        totals = {k: sum(r.get(k, 0) for r in reports) for k in ("events", "blocks", "skipped", "ignored")}
        return {"files": reports, **totals, "embedded": embedded, "semantic": sem.status, "index": store.stats()}
    finally:
        if own:
            store.close()

