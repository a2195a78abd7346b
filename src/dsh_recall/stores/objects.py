"""The object store: one SQLite database per user for offloaded tool results. SQL only.

Tables: `objects` (one row per offloaded result; an evicted one keeps its row as a tombstone
with `sha` NULL), `blobs` (zlib payloads keyed by the SHA-256 of the raw text, stored once),
`counters` (recalls). Everything else is derived by query, so two processes never disagree.
Every write is one `BEGIN IMMEDIATE` transaction: a process killed mid-put leaves nothing.
"""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from ..core.errors import StoreError
from .sqlite_util import set_wal

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
        payload BLOB NOT NULL)""",
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
        UNIQUE (session, seq))""",
    "CREATE INDEX objects_created ON objects(created)",
    "CREATE INDEX objects_sha ON objects(sha)",
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT INTO counters(name, value) VALUES ('recalls', 0)",
]

_OBJECT_COLS = ("id, session, seq, tool, chars, tokens, inline_chars, inline_tokens, "
                "raw_bytes, created, sha, evicted")


@dataclass(frozen=True)
class ObjectRow:
    id: str
    session: str
    seq: int
    tool: str | None
    chars: int
    tokens: int
    inline_chars: int
    inline_tokens: int
    raw_bytes: int
    created: float
    sha: str | None
    evicted: float | None


def encode_text(text: str) -> bytes:
    """UTF-8 that keeps lone surrogates (they round-trip instead of failing)."""
    return text.encode("utf-8", "surrogatepass")


def text_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def insert_object_sql() -> str:
    return f"INSERT INTO objects ({_OBJECT_COLS}) VALUES ({', '.join('?' * 12)})"


class ObjectStore:
    """SQLite access for objects; open with `ObjectStore(path)`, close with `.close()`."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
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

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "ObjectStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -----------------------------------------------------------------------------

    def _begin(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def _end(self, ok: bool) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT" if ok else "ROLLBACK")

    def put(self, row: ObjectRow, data: bytes,
            id_for: Callable[[int, int], str]) -> tuple[ObjectRow, bool]:
        """Insert `row` and its payload in one transaction; returns (row, created).

        `row.seq < 0` asks for the session's next seq. The id is `id_for(seq, attempt)` for
        the first attempt not already taken (collision handling under the write lock). If
        (session, seq) is already stored nothing is written and the stored row is returned.
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
            self._insert_blob(row.sha or "", data)
            self._insert_object(row)
            ok = True
            return row, True
        finally:
            self._end(ok)

    def _insert_blob(self, sha: str, data: bytes) -> None:
        if self.db.execute("SELECT 1 FROM blobs WHERE sha = ?", (sha,)).fetchone():
            return  # same text already stored: dedupe
        payload = zlib.compress(data, 6)
        self.db.execute(
            "INSERT INTO blobs(sha, raw_bytes, stored_bytes, payload) VALUES (?, ?, ?, ?)",
            (sha, len(data), len(payload), payload),
        )

    def _insert_object(self, row: ObjectRow) -> None:
        self.db.execute(insert_object_sql(), (
            row.id, row.session, row.seq, row.tool, row.chars, row.tokens, row.inline_chars,
            row.inline_tokens, row.raw_bytes, row.created, row.sha, row.evicted))

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

    def offloaded_seqs(self, session: str) -> set[int]:
        """Every seq of `session` the store has offloaded (evicted ones included)."""
        return {r[0] for r in self.db.execute("SELECT seq FROM objects WHERE session = ?",
                                              (session,))}

    def payload(self, sha: str) -> bytes | None:
        r = self.db.execute("SELECT payload FROM blobs WHERE sha = ?", (sha,)).fetchone()
        return zlib.decompress(r[0]) if r else None

    def counter(self, name: str) -> int:
        r = self.db.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
        return r[0] if r else 0

    def live(self) -> list[tuple[str, float, str, int]]:
        """(id, created, sha, stored_bytes) of every live object, oldest first."""
        return list(self.db.execute(
            "SELECT o.id, o.created, o.sha, b.stored_bytes FROM objects o "
            "JOIN blobs b ON b.sha = o.sha ORDER BY o.created, o.id"))

    def totals(self) -> dict[str, int]:
        """Aggregates for stats, all derived by query."""
        r = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(chars), 0), COALESCE(SUM(chars - inline_chars), 0), "
            "COALESCE(SUM(tokens - inline_tokens), 0), COALESCE(SUM(raw_bytes), 0), "
            "COALESCE(SUM(evicted IS NOT NULL), 0) FROM objects").fetchone()
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

    def recent(self, n: int) -> list[ObjectRow]:
        return [ObjectRow(*r) for r in self.db.execute(
            f"SELECT {_OBJECT_COLS} FROM objects ORDER BY created DESC, id DESC LIMIT ?", (n,))]

    def integrity(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]
