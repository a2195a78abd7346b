"""The object store: one SQLite database per user for offloaded tool results. SQL only.

Tables: `objects` (one row per offloaded result, with the access channel that produced it;
an evicted one keeps its row as a tombstone with `sha` NULL), `blobs` (zlib payloads keyed by
the SHA-256 of the raw text, stored once, with what a line search needs: the text without
terminal escapes when it has any, and its line index), `counters` (recalls).
Everything else is derived by query, so two processes never disagree. Every write is one
`BEGIN IMMEDIATE` transaction: a process killed mid-put leaves nothing.

Columns added after schema 1 first shipped (`objects.channel`, `blobs.view`,
`blobs.line_index`, `blobs.escapes`) are added on open when missing; older rows keep NULL
there (no channel; a search index built and stored on first search).
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...core.errors import StoreError
from ..contracts import BlobParts, ObjectRow, SearchParts
from .util import private_db, set_wal

# 'DSHO' as a big-endian int32: marks the file as a dsh-recall object store.
APPLICATION_ID = 0x4453484F
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 10_000

SCHEMA = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE blobs (
        sha TEXT PRIMARY KEY,
        raw_bytes INTEGER NOT NULL,
        stored_bytes INTEGER NOT NULL,
        payload BLOB NOT NULL,
        view BLOB,
        line_index BLOB,
        escapes BLOB)""",
    """CREATE TABLE objects (
        id TEXT PRIMARY KEY,
        session TEXT NOT NULL,
        seq INTEGER NOT NULL,
        tool TEXT,
        chars INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        inline_chars INTEGER NOT NULL,
        inline_tokens INTEGER NOT NULL,
        raw_bytes INTEGER NOT NULL,
        created REAL NOT NULL,
        sha TEXT REFERENCES blobs(sha),
        evicted REAL,
        channel TEXT,
        UNIQUE (session, seq))""",
    "CREATE INDEX objects_created ON objects(created)",
    "CREATE INDEX objects_sha ON objects(sha)",
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT INTO counters(name, value) VALUES ('recalls', 0)",
]

_OBJECT_COLS = ("id, session, seq, tool, chars, tokens, inline_chars, inline_tokens, "
                "raw_bytes, created, sha, evicted, channel")
# (table, column, type) added since schema 1 first shipped: added on open when missing.
_ADDED_COLUMNS = (("objects", "channel", "TEXT"), ("blobs", "view", "BLOB"),
                  ("blobs", "line_index", "BLOB"), ("blobs", "escapes", "BLOB"))


_INDEX_HEAD = struct.Struct("<BcI")


def pack_index(version: int, arrays: Sequence[Sequence[int]]) -> bytes:
    """Non-negative int arrays as one zlib blob: a header (version, item type, count,
    lengths), then the machine arrays (uint32 when every value fits)."""
    code = "I" if all(not a or max(a) < 2**32 for a in arrays) else "q"
    head = _INDEX_HEAD.pack(version, code.encode(), len(arrays))
    head += struct.pack(f"<{len(arrays)}Q", *(len(a) for a in arrays))
    return zlib.compress(head + b"".join(array(code, a).tobytes() for a in arrays), 6)


def unpack_index(data: bytes) -> tuple[int, list[array]]:
    raw = zlib.decompress(data)
    version, code, n = _INDEX_HEAD.unpack_from(raw)
    lens = struct.unpack_from(f"<{n}Q", raw, _INDEX_HEAD.size)
    off = _INDEX_HEAD.size + 8 * n
    out = []
    for length in lens:
        arr = array(code.decode())
        arr.frombytes(raw[off:off + length * arr.itemsize])
        off += length * arr.itemsize
        out.append(arr)
    return version, out


def pack_escapes(esc_at: Sequence[int], esc_cum: Sequence[int]) -> bytes | None:
    """The escape map as an 8-byte header (item type) and the two arrays, uncompressed:
    integers barely compress and inflating them was most of a search's fixed cost."""
    if not esc_at:
        return None
    code = "I" if max(esc_at[-1], esc_cum[-1]) < 2**32 else "q"
    head = code.encode().ljust(8, b"\0")  # 8 bytes keep the arrays aligned
    return head + array(code, esc_at).tobytes() + array(code, esc_cum).tobytes()


def unpack_escapes(data: bytes | None) -> tuple[Sequence[int], Sequence[int]]:
    """The two halves of a packed escape map, as views into `data` (no copy)."""
    if not data:
        return (), ()
    fmt: Any = data[:1].decode()  # the array typecode packed in the first byte ('i' or 'q')
    mv = memoryview(data)[8:].cast(fmt)
    half = len(mv) // 2
    return mv[:half], mv[half:]


def blob_parts(data: bytes | None, view: str | None, version: int,
               arrays: Sequence[Sequence[int]], esc_at: Sequence[int] = (),
               esc_cum: Sequence[int] = ()) -> BlobParts:
    """Compress a payload and its search index for `ObjectStore.put` (`data` None: the
    index alone, for `set_search_parts`)."""
    return BlobParts(
        payload=b"" if data is None else zlib.compress(data, 6),
        view=None if view is None else zlib.compress(encode_text(view), 6),
        line_index=pack_index(version, arrays),
        escapes=pack_escapes(esc_at, esc_cum),
    )


def encode_text(text: str) -> bytes:
    """UTF-8 that keeps lone surrogates (they round-trip instead of failing)."""
    return text.encode("utf-8", "surrogatepass")


def text_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def insert_object_sql() -> str:
    return f"INSERT INTO objects ({_OBJECT_COLS}) VALUES ({', '.join('?' * 13)})"


def channel_filter(channels: Sequence[str | None] | None) -> tuple[str, tuple]:
    """SQL condition (and its arguments) keeping objects whose channel is in `channels`;
    None keeps every object."""
    if channels is None:
        return "1", ()
    named = tuple(c for c in channels if c is not None)
    parts = [f"channel IN ({', '.join('?' * len(named))})"] if named else []
    if None in channels:
        parts.append("channel IS NULL")
    return ("(" + " OR ".join(parts) + ")") if parts else "0", named


class ObjectStore:
    """SQLite access for objects; open with `ObjectStore(path)`, close with `.close()`."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        try:
            private_db(self.path)
            self.db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000,
                                      isolation_level=None, check_same_thread=False)
            self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._init()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open object store {self.path}: {e}") from e
        except OSError as e:
            raise StoreError(f"cannot create object store {self.path}: {e}") from e

    # -- setup ------------------------------------------------------------------------------

    def _init(self) -> None:
        db = self.db
        # Both reads in one snapshot: another process may be creating the store right now.
        db.execute("BEGIN")
        try:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            db.execute("COMMIT")
        if app_id == APPLICATION_ID:
            self._set_wal()
            self._check_version()
            self._add_columns()
            return
        if app_id != 0 or tables:
            raise StoreError(
                f"{self.path} is not a dsh-recall object store (application_id {app_id}, "
                f"tables {sorted(tables)[:5]}); refusing to write into it. Move it away or set "
                "DSH_RECALL_HOME to another folder."
            )
        db.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: another process may have created it meanwhile.
            if db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
                db.execute("COMMIT")
            else:
                # auto_vacuum must be chosen before the first table exists.
                db.execute("PRAGMA auto_vacuum = INCREMENTAL")
                for stmt in SCHEMA:
                    db.execute(stmt)
                db.execute("INSERT INTO meta(key, value) VALUES ('kind', 'dsh-recall objects')")
                db.execute("INSERT INTO meta(key, value) VALUES ('schema', ?)",
                           (str(SCHEMA_VERSION),))
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        self._set_wal()

    def _set_wal(self) -> None:
        set_wal(self.db)
        self.db.execute("PRAGMA synchronous = NORMAL")

    def _check_version(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise StoreError(f"{self.path} has object-store schema {row and row[0]}, "
                             f"this version reads {SCHEMA_VERSION}; move the file away.")

    def _missing_columns(self) -> list[tuple[str, str, str]]:
        have = {t: {r[1] for r in self.db.execute(f"PRAGMA table_info({t})")}
                for t in ("objects", "blobs")}
        return [c for c in _ADDED_COLUMNS if c[1] not in have[c[0]]]

    def _add_columns(self) -> None:
        """Bring a store written by an older version up to date (existing rows get NULL)."""
        if not self._missing_columns():
            return
        self._begin()
        ok = False
        try:
            for table, column, kind in self._missing_columns():  # again, under the lock
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            ok = True
        finally:
            self._end(ok)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ObjectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -----------------------------------------------------------------------------

    def _begin(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def _end(self, ok: bool) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT" if ok else "ROLLBACK")

    def put(self, row: ObjectRow, data: bytes, id_for: Callable[[int, int], str],
            parts: BlobParts | None = None) -> tuple[ObjectRow, bool]:
        """Insert `row` and its payload in one transaction; returns (row, created).

        `row.seq < 0` asks for the session's next seq. The id is `id_for(seq, attempt)` for
        the first attempt not already taken (collision handling under the write lock). If
        (session, seq) is already stored nothing is written and the stored row is returned.
        `parts` is the payload compressed with its search index (built outside the lock);
        without it the payload is compressed here and its index is built on first search.
        """
        self._begin()
        ok = False
        try:
            seq = row.seq if row.seq >= 0 else self.next_seq(row.session)
            existing = self.by_session_seq(row.session, seq)
            if existing is not None:
                ok = True
                return existing, False
            attempt = 0
            while self.id_taken(obj_id := id_for(seq, attempt)):
                attempt += 1
            row = replace(row, id=obj_id, seq=seq)
            self._insert_blob(row.sha or "", data, parts)
            self._insert_object(row)
            ok = True
            return row, True
        finally:
            self._end(ok)

    def has_blob(self, sha: str) -> bool:
        return self.db.execute("SELECT 1 FROM blobs WHERE sha = ?", (sha,)).fetchone() is not None

    def _insert_blob(self, sha: str, data: bytes, parts: BlobParts | None) -> None:
        if self.has_blob(sha):
            return  # same text already stored: dedupe
        if parts is None:
            parts = BlobParts(zlib.compress(data, 6), None, None)
        self.db.execute(
            "INSERT INTO blobs(sha, raw_bytes, stored_bytes, payload, view, line_index, "
            "escapes) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sha, len(data), parts.stored_bytes, parts.payload, parts.view, parts.line_index,
             parts.escapes),
        )

    def set_search_parts(self, sha: str, parts: BlobParts) -> bool:
        """Store the search index of a blob written without one, or with an index of
        another version (by an older dsh-recall): it replaces that one.
        Best effort: a read-only or busy store just answers without keeping it (False)."""
        try:
            self._begin()
        except sqlite3.OperationalError:
            return False
        ok = False
        try:
            self.db.execute(
                "UPDATE blobs SET stored_bytes = stored_bytes - COALESCE(LENGTH(view), 0) "
                "- COALESCE(LENGTH(line_index), 0) - COALESCE(LENGTH(escapes), 0) + ?, "
                "view = ?, line_index = ?, escapes = ? WHERE sha = ?",
                (parts.stored_bytes - len(parts.payload), parts.view, parts.line_index,
                 parts.escapes, sha))
            ok = True
        except sqlite3.OperationalError:
            return False
        finally:
            self._end(ok)
        return True

    def _insert_object(self, row: ObjectRow) -> None:
        self.db.execute(insert_object_sql(), (
            row.id, row.session, row.seq, row.tool, row.chars, row.tokens, row.inline_chars,
            row.inline_tokens, row.raw_bytes, row.created, row.sha, row.evicted, row.channel))

    def next_seq(self, session: str) -> int:
        """One past the highest seq stored for `session` (0 for a new session)."""
        r = self.db.execute("SELECT MAX(seq) FROM objects WHERE session = ?", (session,))
        top = r.fetchone()[0]
        return 0 if top is None else top + 1

    def id_taken(self, obj_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM objects WHERE id = ?", (obj_id,)).fetchone() is not None

    def bump(self, name: str, by: int = 1) -> None:
        """Atomically add `by` to a counter."""
        self.db.execute(
            "INSERT INTO counters(name, value) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
            (name, by),
        )

    def evict(self, ids: Iterable[str], when: float) -> int:
        """Turn objects into tombstones, drop blobs nobody references, give pages back."""
        ids = list(ids)
        if not ids:
            return 0
        self._begin()
        ok = False
        try:
            n = 0
            for obj_id in ids:
                n += self.db.execute(
                    "UPDATE objects SET sha = NULL, evicted = ? WHERE id = ? AND sha IS NOT NULL",
                    (when, obj_id)).rowcount
            self.db.execute("DELETE FROM blobs WHERE sha NOT IN "
                            "(SELECT sha FROM objects WHERE sha IS NOT NULL)")
            ok = True
        finally:
            self._end(ok)
        self.db.execute("PRAGMA incremental_vacuum")
        return n

    # -- reads ------------------------------------------------------------------------------

    def _row(self, where: str, args: tuple) -> ObjectRow | None:
        r = self.db.execute(f"SELECT {_OBJECT_COLS} FROM objects WHERE {where}", args).fetchone()
        return ObjectRow(*r) if r else None

    def get(self, obj_id: str) -> ObjectRow | None:
        return self._row("id = ?", (obj_id,))

    def by_session_seq(self, session: str, seq: int) -> ObjectRow | None:
        return self._row("session = ? AND seq = ?", (session, seq))

    def offloaded_seqs(self, session: str,
                       channels: Sequence[str | None] | None = None) -> set[int]:
        """Every seq of `session` the store has offloaded (evicted ones included), of objects
        in `channels` (None: all)."""
        cond, args = channel_filter(channels)
        return {r[0] for r in self.db.execute(
            f"SELECT seq FROM objects WHERE session = ? AND {cond}", (session, *args))}

    def channels(self) -> list[str | None]:
        """Every channel objects were stored with (None for objects without one)."""
        return [r[0] for r in self.db.execute("SELECT DISTINCT channel FROM objects")]

    def payload(self, sha: str) -> bytes | None:
        r = self.db.execute("SELECT payload FROM blobs WHERE sha = ?", (sha,)).fetchone()
        return zlib.decompress(r[0]) if r else None

    def search_parts(self, sha: str) -> SearchParts | None:
        """The stored search index of a blob, or None when it has none yet."""
        r = self.db.execute("SELECT view, line_index, escapes FROM blobs WHERE sha = ?",
                            (sha,)).fetchone()
        if r is None or r[1] is None:
            return None
        version, arrays = unpack_index(r[1])
        return SearchParts(None if r[0] is None else zlib.decompress(r[0]), version, arrays,
                           *unpack_escapes(r[2]))

    def counter(self, name: str) -> int:
        r = self.db.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
        return r[0] if r else 0

    def live(self) -> list[tuple[str, float, str, int, str | None]]:
        """(id, created, sha, stored_bytes, channel) of every live object, oldest first."""
        return list(self.db.execute(
            "SELECT o.id, o.created, o.sha, b.stored_bytes, o.channel FROM objects o "
            "JOIN blobs b ON b.sha = o.sha ORDER BY o.created, o.id"))

    def totals(self, channels: Sequence[str | None] | None = None) -> dict[str, int]:
        """Aggregates for stats, all derived by query; object counts only over `channels`
        (None: all), payload and disk figures store-wide."""
        cond, args = channel_filter(channels)
        r = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(chars), 0), COALESCE(SUM(chars - inline_chars), 0), "
            "COALESCE(SUM(tokens - inline_tokens), 0), COALESCE(SUM(raw_bytes), 0), "
            f"COALESCE(SUM(evicted IS NOT NULL), 0) FROM objects WHERE {cond}", args).fetchone()
        b = self.db.execute("SELECT COUNT(*), COALESCE(SUM(raw_bytes), 0), "
                            "COALESCE(SUM(stored_bytes), 0) FROM blobs").fetchone()
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        page_size = self.db.execute("PRAGMA page_size").fetchone()[0]
        return {
            "objects": r[0], "chars": r[1], "chars_kept_out": r[2], "tokens_kept_out": r[3],
            "raw_bytes": r[4], "evicted": r[5], "blobs": b[0], "blob_raw_bytes": b[1],
            "blob_stored_bytes": b[2], "db_bytes": pages * page_size,
            "recalls": self.counter("recalls"),
        }

    def recent(self, n: int, channels: Sequence[str | None] | None = None) -> list[ObjectRow]:
        """The newest `n` objects of `channels` (None: all), newest first."""
        cond, args = channel_filter(channels)
        return [ObjectRow(*r) for r in self.db.execute(
            f"SELECT {_OBJECT_COLS} FROM objects WHERE {cond} ORDER BY created DESC, id DESC "
            "LIMIT ?", (*args, n))]

    def integrity(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]
