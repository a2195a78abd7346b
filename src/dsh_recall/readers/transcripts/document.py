"""Shared parts of the readers whose harness rewrites a whole document or a database.

Cursor, Gemini CLI, OpenCode, Aider, Cline / Roo Code and Goose do not keep an append-only
log we could resume at a byte offset: they rewrite a JSON file, append records that replace
earlier ones, or update an SQLite database. Their readers therefore read the whole document
each time it changed and return every session in it; the history importer
(`services/history/documents.py`) then writes only the sessions whose events changed.

A document in a layout these readers do not know raises `FormatError`: the import reports
it as one line and the file keeps its previous state, so nothing is lost and a later reader
can import it. A malformed record inside a known layout is skipped and counted as usual.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ...core.clean import clean_text
from ..workspace import open_regular, read_fd, read_regular
from .base import MAX_READ_BYTES, ReadResult, TranscriptEvent, cut_title, parse_record

# A small file beside a document (Gemini's .project_root, a Cline task's metadata).
SIDE_FILE_BYTES = 64 << 10


class FormatError(ValueError):
    """A document in a layout or version this reader does not know (or cannot read whole)."""


def read_document(path: Path, what: str) -> Any:
    """A whole JSON file as a cleaned value; FormatError when it is not JSON or too big."""
    fd, st = open_regular(path, follow_symlinks=True)
    try:
        if st.st_size > MAX_READ_BYTES:
            raise FormatError(f"{what} is {st.st_size} bytes, over the {MAX_READ_BYTES} bytes read at once; "
                              "not imported")
        data = read_fd(fd, st.st_size, 0)
    finally:
        os.close(fd)
    if not data.strip():
        return None
    try:
        return parse_record(data)
    except (ValueError, RecursionError) as e:
        raise FormatError(f"{what} is not JSON ({type(e).__name__}); not imported") from None


def side_text(path: Path) -> str | None:
    """The text of a small regular file beside a document, or None."""
    try:
        return read_regular(path, SIDE_FILE_BYTES, follow_symlinks=True).decode("utf-8", errors="replace")
    except OSError:
        return None


def obj(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def json_value(raw: Any) -> Any:
    """A JSON column (TEXT or BLOB) of a harness database as a cleaned value; ValueError if not JSON."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = raw.encode("utf-8", errors="replace")
    if not isinstance(raw, bytes):
        raise ValueError("not a JSON text")
    return parse_record(raw)


@contextmanager
def open_sqlite(path: Path) -> Iterator[sqlite3.Connection]:
    """A harness database opened read-only (never created, never written, WAL content seen).

    Only a regular file is opened (the same check as every transcript read)."""
    fd, _ = open_regular(path, follow_symlinks=True)
    os.close(fd)
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0, check_same_thread=False)
    except sqlite3.Error as e:
        raise OSError(f"cannot open database: {e}") from None
    try:
        conn.execute("PRAGMA query_only = 1")
        yield conn
    finally:
        conn.close()


def tables(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Table name -> its column names."""
    out: dict[str, set[str]] = {}
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for name in names:
            out[name] = {r[1] for r in conn.execute(f"PRAGMA table_info(\"{name.replace(chr(34), '')}\")")}
    except sqlite3.DatabaseError as e:
        raise FormatError(f"not a readable SQLite database ({clean_text(str(e))[:120]}); not imported") from None
    return out


def require(found: dict[str, set[str]], needed: dict[str, set[str]], what: str) -> None:
    """FormatError naming what is missing when a database lacks the tables/columns read."""
    missing = []
    for table, cols in needed.items():
        if table not in found:
            missing.append(f"table {table}")
        else:
            missing += [f"{table}.{c}" for c in sorted(cols - found[table])]
    if missing:
        raise FormatError(f"{what}: unknown layout (no {', '.join(missing)}); not imported")


def stamp(path: Path) -> tuple[int, int]:
    """(size, mtime_ns) that change whenever the document does: an SQLite database's
    write-ahead log counts, since new rows sit there until a checkpoint."""
    st = os.stat(path)
    size, mtime = st.st_size, st.st_mtime_ns
    wal = path.with_name(path.name + "-wal")
    try:
        w = os.stat(wal)
        size, mtime = size + w.st_size, max(mtime, w.st_mtime_ns)
    except OSError:
        pass
    return size, mtime


class Numberer:
    """Seqs for one session's events in document order (a whole document is re-read each
    time, so the same content always gets the same seqs)."""

    def __init__(self) -> None:
        self.next: dict[str, int] = {}
        self.calls: dict[str, str] = {}  # tool call id -> tool name, to name later results

    def take(self, sid: str) -> int:
        n = self.next.get(sid, 0)
        self.next[sid] = n + 1
        return n


def skip(res: ReadResult, where: str, reason: str) -> None:
    """Count one skipped record of a document; `where` names it (a message, a row, a key)."""
    res.skip(None, f"{where}: {reason}")


@contextmanager
def guard(res: ReadResult, where: str) -> Iterator[None]:
    """Handle one record of a document; an exception skips and counts that record only."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - one record must never stop the document
        skip(res, where, f"{type(e).__name__}: {clean_text(str(e))[:120]}")


def each_item(items: list[Any], res: ReadResult, handle: Callable[[int, Any], None]) -> None:
    """Hand every item of a document to `handle(index, item)`; one that raises is skipped and
    counted, never the document."""
    for i, item in enumerate(items):
        with guard(res, f"message {i + 1}"):
            handle(i, item)


# What one document may yield: events are held in memory until the import writes them
# (about 1.7 KB each), and a hostile file of one-line messages (a 4 MB Aider history: 325k
# events, 550 MB, 33 s) must not take the import's memory and time with it.
MAX_DOCUMENT_EVENTS = 200_000


def add(res: ReadResult, ev: TranscriptEvent, title_from_user: bool = True) -> None:
    """Append `ev`; the first user text becomes the session's title when it has none. Past
    MAX_DOCUMENT_EVENTS the rest of the document is left out, said once in the notes."""
    if len(res.events) >= MAX_DOCUMENT_EVENTS:
        if not res.capped:
            res.capped = True
            res.notes.append(f"stopped reading after {MAX_DOCUMENT_EVENTS:,} events; the rest of "
                             "this document is not imported")
        return
    res.events.append(ev)
    meta = res.sessions.get(ev.session)
    if title_from_user and meta is not None and meta.title is None and ev.role == "user":
        first = next((p.text for p in ev.pieces if p.kind == "text" and p.text.strip()), "")
        meta.title = cut_title(first, 80, first_line=True)
