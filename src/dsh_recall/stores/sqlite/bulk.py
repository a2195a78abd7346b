"""The bulk load of a first index into an empty SQLite chunk store (stores.contracts
ChunkStore: bulk_begin, bulk_end, bulk_interrupted; mixed into stores/sqlite/chunks.py).

While a first index loads, the chunk table's secondary indexes by file and by embed hash
are dropped and built once at the end, a file's rows are written without
looking for old rows or known vectors (there are none), batches are larger and FTS5 merges
its segments less often. Meta `bulk_load` marks the load from its first write to its last:
a search sees it (the index is partial, and says so), and the next indexer, which holds
the index lock, finds a load that was killed and starts the index again from empty, so a
half index is never taken for a complete one.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING

from .util import CACHE_KIB

BULK_KEY = "bulk_load"
# chunks_vec_seq stays: queries name it (INDEXED BY), and a search may run during the load.
SECONDARY = (("chunks_file", "chunks(file_id)"), ("chunks_embed", "chunks(embed_hash)"))
LOAD_AUTOMERGE = 16  # FTS5 merges 16 segments of a level at once while loading (default 4)
AUTOMERGE = 4
LOAD_CACHE_KB = 262_144  # page cache of the loading connection (util.CACHE_KIB otherwise)


class SqliteBulkLoad:
    """The bulk-load half of the SQLite chunk store; the store sets `conn` and `_bulk`."""

    conn: sqlite3.Connection
    _bulk: bool = False

    if TYPE_CHECKING:  # provided by the store
        def get_meta(self, key: str) -> str | None: ...
        def set_meta(self, key: str, value: str) -> None: ...
        def clear(self) -> None: ...

    def bulk_interrupted(self) -> bool:
        """A bulk load began and never ended (its process was killed), or is running in
        another process: the rows here are part of a first index only."""
        return self.get_meta(BULK_KEY) is not None and not self._bulk

    def bulk_begin(self) -> bool:
        """Start a bulk load when the store holds no file and no other load's mark; False
        (nothing changed) else. The caller holds the index lock and writes only new files
        until `bulk_end`."""
        if self._bulk:
            return True
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if (self.conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None
                    or self.get_meta(BULK_KEY) is not None):  # not empty, or another load's
                self.conn.execute("ROLLBACK")
                return False
            self.set_meta(BULK_KEY, str(time.time()))
            for name, _ in SECONDARY:
                self.conn.execute(f"DROP INDEX IF EXISTS {name}")
            self.conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('automerge', ?)",
                              (LOAD_AUTOMERGE,))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute(f"PRAGMA cache_size = -{LOAD_CACHE_KB}")
        self._bulk = True
        return True

    def bulk_end(self) -> None:
        """Build what the load deferred (the indexes; known vectors onto their chunks) and
        clear the mark, in one transaction."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._restore_indexes()
            if self.conn.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is not None:
                # Vectors kept from before (a re-chunked index): their chunks have them now.
                self.conn.execute("INSERT INTO meta(key, value) VALUES('vec_seq', '1') ON CONFLICT(key) "
                                  "DO UPDATE SET value = CAST(value AS INTEGER) + 1")
                self.conn.execute("UPDATE chunks SET vec_seq = (SELECT CAST(value AS INTEGER) FROM "
                                  "meta WHERE key = 'vec_seq') WHERE vec_seq IS NULL AND embed_hash "
                                  "IN (SELECT hash FROM vectors)")
            self.conn.execute("DELETE FROM meta WHERE key = ?", (BULK_KEY,))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        self._bulk = False

    def bulk_discard(self) -> None:
        """After a load that never ended: every row goes (the caller holds the index lock,
        so no load is running) and the indexes are whole again; the next run starts over."""
        self.clear()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._restore_indexes()
            self.conn.execute("DELETE FROM meta WHERE key = ?", (BULK_KEY,))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _restore_indexes(self) -> None:
        for name, on in SECONDARY:
            self.conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {on}")
        self.conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('automerge', ?)",
                          (AUTOMERGE,))
