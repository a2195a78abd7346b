"""What every history importer writes: an event's row and blocks (restored, scrubbed,
chunked), a session's row, the skipped-record notes, and a batch written whole or, when the
store refuses one of its rows, one by one. Shared by the transcript importer (importer.py)
and the document importer (documents.py).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...chunkers.transcript import MAX_RESULT_BLOCKS, event_blocks
from ...core.clean import clean_int, clean_text
from ...core.config import Config
from ...core.errors import RowDataError
from ...core.text import index_text
from ...policy.offload import NOTE_MARKER
from ...policy.restore import restore_notes
from ...policy.scrub import scrub_text
from ...rank import history_query as hq
from ...readers.transcripts.base import MAX_SKIP_NOTES, Piece, SessionMeta, TranscriptEvent, opt_str
from ...stores.sqlite.history import BlockIn, HistoryStore, dumps_flags

if TYPE_CHECKING:
    from ..objects import ObjectService

EVENT_TEXT_CAP = 262_144  # chars of one event's original text kept for `show`
# A tool result the conversation only points to (offloaded) is indexed up to the text
# `show` keeps: history is then the one place a middle line can be found by words.
RESTORED_RESULT_BLOCKS = 64
# Errors that say "this row's data", not "this database": the rows are then written one
# by one and the refused ones skipped. Anything else (locked, disk full) fails the file,
# which keeps its old offset and is read again by the next import.
_DATA_ERRORS = (RowDataError, sqlite3.InterfaceError, sqlite3.ProgrammingError, sqlite3.DataError,
                sqlite3.IntegrityError, OverflowError, TypeError, ValueError)


def _one_line(e: BaseException) -> str:
    text = clean_text(str(e)).replace("\n", " ")
    return f"{type(e).__name__}: {text[:200]}"


class _Skips:
    """Records skipped after reading (at write time), added to the reader's count."""

    def __init__(self, already: int, notes: list[str]):
        self.count = 0
        self.already = already
        self.notes = notes

    def add(self, what: str, e: BaseException) -> None:
        self.count += 1
        if self.already + self.count <= MAX_SKIP_NOTES:
            self.notes.append(f"{what}: {_one_line(e)}; skipped")


def _event_text(ev: TranscriptEvent) -> str:
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


def _scrubbed(ev: TranscriptEvent, cfg: Config) -> TranscriptEvent:
    """`ev` with credentials in its pieces replaced (secrets never stored: docs/security.md)."""
    pieces = tuple(dataclasses.replace(p, text=scrub_text(p.text, cfg.scrub)) for p in ev.pieces)
    return ev if pieces == ev.pieces else dataclasses.replace(ev, pieces=pieces)


def _session_row(m: SessionMeta, key: str, updated: int | None, channel: str | None,
                 cfg: Config) -> dict[str, Any]:
    # The readers type these already; this is the boundary to the store, so check again.
    title = opt_str(m.title)
    return {"id": clean_text(str(m.id)), "source": clean_text(str(m.source)),
            "workspace": opt_str(m.workspace), "title": scrub_text(title, cfg.scrub) if title else title,
            "created_ms": clean_int(m.created_ms), "updated_ms": clean_int(updated or m.created_ms),
            "path": key, "channel": channel}


def _event_row(e: TranscriptEvent) -> dict[str, Any]:
    return {"session": e.session, "seq": e.seq, "role": e.role, "time_ms": e.time_ms, "time": e.time,
            "message_id": e.message_id, "call_id": e.call_id, "flags": dumps_flags(e.flags),
            "text": _event_text(e)}


def _blocks(ev: TranscriptEvent, block_chars: int) -> list[BlockIn]:
    restored = any(f.startswith("offloaded:") for f in ev.flags)
    return [BlockIn(b.session, b.seq, b.part, b.role, b.kind, b.tool, b.text, b.hash,
                    literal=index_text(b.text), trigram=b.text, cjk=hq.cjk_body(b.text))
            for b in event_blocks([ev], block_chars,
                                  RESTORED_RESULT_BLOCKS if restored else MAX_RESULT_BLOCKS)]


class _Originals:
    """Offloaded tool output put back into the events that point to it (search.restore):
    only objects the same session stored through the same channel."""

    def __init__(self, channel: str | None):
        self.channel = channel
        self.svc: ObjectService | None = None

    def _lookup(self, session: str) -> Callable[[str], str | None]:
        def find(obj_id: str) -> str | None:
            if self.svc is None:
                from ..objects import ObjectService, default_path
                if not default_path().is_file():
                    return None
                self.svc = ObjectService()
            return self.svc.original(obj_id, session, self.channel)
        return find

    def event(self, ev: TranscriptEvent) -> TranscriptEvent:
        """`ev` with its offloaded output put back; `ev` itself when there is none or the
        object store cannot answer (the pointer form is then indexed, as before)."""
        if ev.role != "tool" or not any(NOTE_MARKER in p.text for p in ev.pieces):
            return ev
        pieces: list[Piece] = []
        ids: list[str] = []
        try:
            for p in ev.pieces:
                r = restore_notes(p.text, self._lookup(ev.session))
                pieces.append(dataclasses.replace(p, text=r.text) if r.ids else p)
                ids += r.ids
        except Exception:  # noqa: BLE001 - a broken object store must not cost the event
            return ev
        if not ids:
            return ev
        return dataclasses.replace(ev, pieces=tuple(pieces),
                                   flags=ev.flags + ("offloaded:" + ",".join(ids),))

    def close(self) -> None:
        if self.svc is not None:
            self.svc.close()


def _write_each(store: HistoryStore, sessions: list[dict], rows: list[tuple[dict, list[BlockIn]]],
                marks: list, file_row: dict, skips: _Skips) -> tuple[int, int]:
    """Write a batch the store refused row by row, skipping (and counting) the refused rows.

    Returns (blocks added, events written)."""
    ok: set[str] = set()
    for s in sessions:
        try:
            store.write_batch([s], [], [], [], None)
            ok.add(s["id"])
        except _DATA_ERRORS as e:
            skips.add(f"session {str(s.get('id'))[:60]}", e)
    added = written = 0
    for event, blocks in rows:
        try:
            if event["session"] not in ok:
                raise ValueError("its session was refused")
            added += store.write_batch([], [event], blocks, [], None)
            written += 1
        except _DATA_ERRORS as e:
            skips.add(f"event {event['session'][:60]}:{event['seq']}", e)
    try:
        store.write_batch([], [], [], marks, None)
    except _DATA_ERRORS as e:
        skips.add("compaction marks", e)
    store.write_batch([], [], [], [], file_row)
    return added, written
