"""History import of documents: transcripts a harness rewrites whole or keeps in SQLite
(Cursor, Gemini CLI, OpenCode, Aider, Cline / Roo Code, Goose: readers/transcripts/document.py).

There is no byte offset to resume at, so a changed document is read whole; what is written
is decided per session. Each session of a document has its own row in the files table,
keyed `<document path>#<session id>`, holding how many events were written and a hash of
them. A session whose events hash the same is skipped; one whose first N events are the
ones written before (it grew) only adds the new ones; one that changed otherwise (a rewind,
a restored checkpoint, an edit) is dropped and written again. The document's own row
records its size and mtime (with an SQLite write-ahead log counted), so an unchanged
document is not even opened. Events take the same path as every other importer's: the
offloaded-output restore, the secret scrubber, the transcript chunker.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ...core.clean import clean_text
from ...core.config import Config
from ...core.errors import StoreError
from ...readers.transcripts import ReadContext, reader
from ...readers.transcripts.base import TranscriptEvent
from ...readers.transcripts.document import FormatError, stamp
from ...stores.sqlite.history import BlockIn, HistoryStore
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

GROWTH = 16  # a document adds at most this many chars per byte of its own (plus the floor)
GROWTH_FLOOR = 4 << 20
# An event costs a row, an FTS entry and a block whatever its length (about 100 us to write):
# each is charged at least this many chars against the room above, so a document holds at
# most one event per EVENT_CHARS / GROWTH bytes of its own (64), plus 4,096. Real chats
# average far more per message; a file of one-line messages stops there.
EVENT_CHARS = 1024


def _digests(events: list[TranscriptEvent]) -> list[str]:
    """The running hash after each event (element i covers events[:i + 1])."""
    h = hashlib.sha256()
    out = []
    for ev in events:
        h.update(repr((ev.seq, ev.role, ev.pieces, ev.time_ms, ev.time, ev.message_id, ev.call_id,
                       ev.flags)).encode("utf-8", errors="replace"))
        out.append(h.hexdigest())
    return out


def import_document(store: HistoryStore, path: Path, fmt: str, cfg: Config,
                    channel: str | None = None) -> dict[str, Any]:
    """Import what changed in one document (see the module docstring)."""
    key = str(path.resolve())
    report: dict[str, Any] = {"path": clean_text(str(path)), "format": fmt, "events": 0, "blocks": 0,
                              "skipped": 0, "ignored": 0, "notes": []}
    try:
        size, mtime = stamp(path)
        row = store.file(key)
        if row is not None and row["size"] == size and row["mtime_ns"] == mtime:
            report["status"] = "unchanged"
            return report
        res = reader(fmt)(path, 0, ReadContext())
    except (OSError, FormatError) as e:
        report["status"] = "error"
        report["notes"].append(f"cannot read: {clean_text(str(e))}")
        return report
    notes = report["notes"] + res.notes
    skips = _Skips(res.skipped, notes)
    by_session: dict[str, list[TranscriptEvent]] = {sid: [] for sid in res.sessions}
    for ev in res.events:
        by_session.setdefault(ev.session, []).append(ev)
    marks: dict[str, list] = {}
    for m in res.marks:
        marks.setdefault(m[0], []).append(m)
    written = blocks = 0
    touched: list[str] = []
    originals = _Originals(channel)
    # What one document may add to the store: a chat database repeats itself (a message
    # quoting the thread before it), and a hostile one of 0.9 MB grew a 951 MB store.
    room = GROWTH * size + GROWTH_FLOOR
    full = False
    try:
        for sid, events in by_session.items():
            if not events:
                continue  # an empty chat: nothing to find
            events.sort(key=lambda e: e.seq)
            digests = _digests(events)
            vkey = f"{key}#{sid}"
            prev = store.file(vkey)
            if prev is not None and len(events) == prev["line_no"] and digests[-1] == prev["head_hash"]:
                continue  # this session did not change
            if prev is not None and not (0 < prev["line_no"] <= len(events)
                                         and digests[prev["line_no"] - 1] == prev["head_hash"]):
                store.forget_file(vkey)  # changed before its end: write it again
                prev = None
            fresh = events[prev["line_no"]:] if prev is not None else events
            rows: list[tuple[dict, list[BlockIn]]] = []
            if full:
                break
            for ev in fresh:
                room -= max(EVENT_CHARS, sum(len(p.text) for p in ev.pieces))
                if room < 0:  # the rest of this document stays out; it is said once
                    full = True
                    notes.append(f"stopped after {written + len(rows):,} events: this document would "
                                 f"add over {GROWTH}x its own size ({size:,} bytes) to the history "
                                 f"store (an event counts as {EVENT_CHARS:,} chars at least)")
                    break
                try:
                    ev = _scrubbed(originals.event(ev), cfg)
                    rows.append((_event_row(ev), _blocks(ev, cfg.history.result_block_chars)))
                except Exception as e:  # noqa: BLE001 - one event must never stop the document
                    skips.add(f"event {ev.session[:60]}:{ev.seq}", e)
            times = [ev.time_ms for ev in events if ev.time_ms]
            meta = res.sessions.get(sid) or res.session(sid, fmt)
            session = _session_row(meta, vkey, max(times) if times else None, channel, cfg)
            file_row = {"path": vkey, "format": fmt, "size": 0, "mtime_ns": 0, "offset": 0,
                        "line_no": len(events), "head_hash": digests[-1], "session": sid}
            try:
                blocks += store.write_batch([session], [r[0] for r in rows], [b for r in rows for b in r[1]],
                                            marks.get(sid, []), file_row)
                written += len(rows)
            except _DATA_ERRORS:
                added, ok = _write_each(store, [session], rows, marks.get(sid, []), file_row, skips)
                blocks += added
                written += ok
            touched.append(sid)
        store.write_batch([], [], [], [], {"path": key, "format": fmt, "size": size, "mtime_ns": mtime,
                                           "offset": size, "line_no": 0, "head_hash": "", "session": None})
    except StoreError as e:
        report.update(status="error", notes=notes + [f"cannot write: {_one_line(e)}"])
        return report
    finally:
        originals.close()
    report.update(status="imported", events=written, blocks=blocks, skipped=res.skipped + skips.count,
                  ignored=res.ignored, sessions=sorted(touched), notes=notes)
    return report
