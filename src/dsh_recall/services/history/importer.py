"""History import: read transcript files incrementally into the history store, then embed
what the budget allows (through the semantic layer).

A bad record is skipped and counted (`skipped`, the first few reasons in `notes`), never
the file; a file that cannot be read or written is reported with a one-line error, never
the folder. Readers clean and type every field; a record the store still refuses is
found by writing the file's events one by one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...core.clean import clean_text
from ...core.config import Config
from ...core.errors import StoreError
from ...readers.transcripts import DOCUMENTS, ReadContext, discover_default, expand, reader
from ...readers.workspace import read_regular
from ...stores.sqlite.history import BlockIn, HistoryStore
from ..base import backlog_item
from .common import _cfg, open_store
from .rows import (
    _DATA_ERRORS,
    _blocks,
    _event_row,
    _one_line,
    _Originals,
    _scrubbed,
    _session_row,
    _Skips,
    _write_each,
)
from .semantic import EMBED_COMMAND, EMBED_HINT, EMBED_JOB, SemanticLayer

_HEAD = 4096


def _head_hash(path: Path, n: int) -> str:
    return hashlib.sha256(read_regular(path, min(n, _HEAD), follow_symlinks=True)).hexdigest()


def import_file(store: HistoryStore, path: Path, fmt: str, cfg: Config,
                channel: str | None = None) -> dict[str, Any]:
    """Import what is new in one transcript file; a rewritten or shrunk file is re-imported.

    `channel`: the access channel key that produced the file's sessions, when known (a hook
    run for that channel); None leaves a session the owner's (services/access/channel.py).
    Bad records are skipped and counted; a file that cannot be read or written gets
    `status: "error"` and a one-line note, and keeps its previous state. A big file is
    read and written in bounded parts (MAX_READ_BYTES each), all in this one call.
    A document (a whole JSON file or a harness database) is imported per session instead:
    services/history/documents.py."""
    if fmt in DOCUMENTS:
        from .documents import import_document
        return import_document(store, path, fmt, cfg, channel)
    report, more = _import_part(store, path, fmt, cfg, channel)
    while more:
        part, more = _import_part(store, path, fmt, cfg, channel)
        if part.get("status") == "unchanged":
            break
        for k in ("events", "blocks", "skipped", "ignored"):
            report[k] = report.get(k, 0) + part.get(k, 0)
        report["sessions"] = sorted(set(report.get("sessions", [])) | set(part.get("sessions", [])))
        report["notes"] = report["notes"] + part["notes"]
        if part["status"] == "error":
            report["status"] = "error"
    return report


def _import_part(store: HistoryStore, path: Path, fmt: str, cfg: Config,
                 channel: str | None) -> tuple[dict[str, Any], bool]:
    """One bounded read and write of a file; True when the file holds more to read."""
    key = str(path.resolve())
    report: dict[str, Any] = {"path": clean_text(str(path)), "format": fmt, "events": 0, "blocks": 0,
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
                return report, False
        ctx = ReadContext()
        if row is not None:
            sess = store.sessions([row["session"]]) if row["session"] else []
            ctx = ReadContext(session=row["session"], workspace=sess[0]["workspace"] if sess else None,
                              line_no=row["line_no"], call_tools=store.call_tools(row["session"]) if row["session"] else {})
        res = reader(fmt)(path, row["offset"] if row else 0, ctx)
        head_hash = _head_hash(path, res.offset)
    except OSError as e:
        report["status"] = "error"
        report["notes"].append(f"cannot read: {clean_text(str(e))}")
        return report, False
    notes = report["notes"] + res.notes
    skips = _Skips(res.skipped, notes)
    rows: list[tuple[dict, list[BlockIn]]] = []
    last_time: dict[str, int] = {}
    originals = _Originals(channel)
    for ev in res.events:
        try:
            ev = _scrubbed(originals.event(ev), cfg)
            rows.append((_event_row(ev), _blocks(ev, cfg.history.result_block_chars)))
        except Exception as e:  # noqa: BLE001 - one event must never stop the file
            skips.add(f"event {ev.session[:60]}:{ev.seq}", e)
            continue
        if ev.time_ms:
            last_time[ev.session] = max(last_time.get(ev.session, 0), ev.time_ms)
    originals.close()
    sessions = [_session_row(m, key, last_time.get(m.id), channel, cfg) for m in res.sessions.values()]
    file_session = next(iter(res.sessions)) if len(res.sessions) == 1 else (row["session"] if row else None)
    file_row = {"path": key, "format": fmt, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                "offset": res.offset, "line_no": res.line_no, "head_hash": head_hash,
                "session": file_session}
    written = len(rows)
    try:
        try:
            report["blocks"] = store.write_batch(sessions, [r[0] for r in rows],
                                                 [b for r in rows for b in r[1]], res.marks, file_row)
        except _DATA_ERRORS:
            report["blocks"], written = _write_each(store, sessions, rows, res.marks, file_row, skips)
    except StoreError as e:
        report.update(status="error", notes=notes + [f"cannot write: {_one_line(e)}"])
        return report, False
    report.update(status="imported", events=written, skipped=res.skipped + skips.count, ignored=res.ignored,
                  sessions=sorted(res.sessions), notes=notes)
    return report, res.more


# What `history import` (the CLI) may spend embedding after it wrote the lexical indexes,
# at least: a person waits for it once, unlike a search (`embed_budget_s`), so it embeds a
# few thousand blocks at a local model's rate and leaves a bigger backlog to
# `history import --embed` or a long-lived process's background job (`EMBED_JOB`).
IMPORT_EMBED_BUDGET_S = 10.0


def import_budget(cfg: Config) -> float:
    """The embedding budget of a CLI import: `IMPORT_EMBED_BUDGET_S`, or `embed_budget_s`
    when the config gives searches more."""
    return max(IMPORT_EMBED_BUDGET_S, cfg.embed_budget_s)


def pending_note(pending: int, total: int, rate: float | None, gate: float) -> str:
    """What a person should know while blocks wait for vectors; ends with EMBED_HINT."""
    done = total - pending
    eta = f", about {max(1, round(pending / rate))} s at this embedder's last rate" if rate else ""
    state = ("the semantic layer is partial: searches answer by words only until "
             f"{gate:.0%} are embedded" if total and done / total < gate else
             "searches rank by vectors already; these are left out of them")
    return f"{pending} of {total} blocks wait for vectors ({state}{eta}); {EMBED_HINT}"


def import_paths(
    paths: Sequence[str] | None = None,
    fmt: str | None = None,
    cfg: Config | None = None,
    embed: bool = False,
    store: HistoryStore | None = None,
    progress: Callable[[str], None] | None = None,
    channel: str | None = None,
    backlog: bool = True,
    embed_budget_s: float | None = None,
) -> dict[str, Any]:
    """Import transcripts (explicit files/folders, or the default locations when none).
    `channel` tags new sessions with the access channel that produced them.
    `backlog=False` (a hook importing the current session on every prompt): the budget
    embeds only the sessions this import touched, never older blocks still waiting.
    `embed_budget_s` overrides the config's budget; 0 embeds nothing and does not even load
    the embedder (a process that lives for one hook call).

    Lexical indexes are written first; then blocks are embedded: all of them with
    `embed=True`, else as many as fit in `embed_budget_s`. Embedding never fails an import.
    What still waits for a vector is `pending`; while any does (and the embedder works)
    the answer's `backlog` names the job that fills it (services/base.Backlog) and a note
    says so, ending with the hint for a person.
    """
    cfg = _cfg(cfg)
    own = store is None
    store = store or open_store(cfg=cfg)
    try:
        files = expand(list(paths), fmt) if paths else discover_default()
        reports = []
        for path, f in files:
            if progress:
                progress(str(path))
            try:
                reports.append(import_file(store, path, f, cfg, channel))
            except Exception as e:  # noqa: BLE001 - one file must never stop the folder
                reports.append({"path": clean_text(str(path)), "format": f, "status": "error",
                                "events": 0, "blocks": 0, "skipped": 0, "ignored": 0,
                                "notes": [f"cannot import: {_one_line(e)}"]})
        touched = sorted({s for r in reports for s in r.get("sessions", [])})
        totals = {k: sum(r.get(k, 0) for r in reports) for k in ("events", "blocks", "skipped", "ignored")}
        budget = None if embed else (cfg.embed_budget_s if embed_budget_s is None else embed_budget_s)
        embedded, semantic = 0, "not embedded here (no budget): a search or a server embeds them"
        works = True
        if budget is None or budget > 0:  # no budget: not even the embedder is loaded
            sem = SemanticLayer(store, cfg)
            if embed or backlog:
                embedded = sem.fill(None, budget)
            elif touched:
                embedded = sem.fill(touched, budget)
            semantic, works = sem.status, sem.status == "ok"
            rate = sem.known_rate()
        else:
            rate = None
        out: dict[str, Any] = {"files": reports, **totals, "embedded": embedded, "semantic": semantic,
                               "index": store.stats()}
        total = out["index"]["blocks"]
        out["pending"] = pending = max(0, total - store.embedded_count(None))
        out["notes"], out["backlog"] = [], []
        if pending and works:
            out["notes"].append(pending_note(pending, total, rate, cfg.history.coverage_gate))
            out["backlog"].append(backlog_item("history", "vectors", pending, EMBED_COMMAND, EMBED_JOB,
                                               hint=EMBED_HINT))
        return out
    finally:
        if own:
            store.close()

