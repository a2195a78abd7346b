"""The bulk load of a first index into an empty PostgreSQL chunk namespace
(stores.contracts.ChunkStore: bulk_begin, bulk_end, bulk_interrupted, bulk_discard; mixed
into stores/postgres/chunks.py).

While a first index loads, each batch of files is one transaction: the file rows in one
statement, their chunks through COPY. The chunk table's indexes (the GIN term index above
all) are dropped and built once at the end, and the shared counters (document frequencies,
the statistics row) are summed in the loader and added once at the end: counters are
additive, so a writer of the same namespace meanwhile (another machine) keeps its own
deltas exact. The loader holds a session advisory lock for the whole load, and meta
`bulk_load` marks it: a search sees a partial index and says so; an indexer that finds the
mark while the lock is free knows the loader died (its session ended) and starts again from
an empty namespace, so a half index is never taken for a complete one. A first index of
ANN_MIN_ROWS chunks or more ends by marking a vector load (stores/postgres/vectors.py):
the HNSW index is built once its vectors are in.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...core.errors import StoreError
from ..contracts import BM25_WEIGHTS, FileRow, IndexedChunk
from . import util as pg_util
from . import vectors

BULK_KEY = "bulk_load"
INDEXES = (("chunks_file", "chunks(file_id)"), ("chunks_path", '''chunks((path COLLATE "C"))'''),
           ("chunks_embed", "chunks(embed_hash)"), ("chunks_pending", "chunks(id) WHERE NOT has_vec"),
           ("chunks_terms", "chunks USING gin(terms)"))
COPY_COLS = ("file_id, path, start_line, end_line, language, symbols, text, embed_hash, terms, "
             "dl, has_vec")



def chunk_terms(ic: IndexedChunk) -> tuple[list[str], list[str], int]:
    """A chunk's term map, from the same token strings SQLite's FTS5 columns hold, weighted
    as its bm25 weighs body, symbols and path."""
    tok = pg_util.unicode61
    return pg_util.term_map([(BM25_WEIGHTS[0], tok(ic.lexical, True)),
                             (BM25_WEIGHTS[1], tok(ic.symbols_lexical, True)),
                             (BM25_WEIGHTS[2], tok(ic.path_lexical, True))])

class PgBulkLoad:
    """The bulk-load half of the PostgreSQL chunk store; the store sets `conn`, `s`."""

    conn: Any
    s: str
    _bulk: Counter | None = None  # the load's document frequencies while one runs
    _bulk_rows: tuple[int, int] = (0, 0)  # (chunks, tokens) written by the load

    if TYPE_CHECKING:  # provided by the store
        def _q(self, sql: str, params: Any = None) -> Any: ...
        def get_meta(self, key: str) -> str | None: ...
        def set_meta(self, key: str, value: str) -> None: ...
        def clear(self) -> None: ...
        def file_count(self) -> int: ...
        def _backlog(self, limit: int) -> int: ...
        def _defer_ann(self) -> None: ...
        def maybe_build_ann(self) -> None: ...
        auto_ann: bool

    def _bulk_lock(self) -> bool:
        return bool(self._q("SELECT pg_try_advisory_lock(hashtext(%s))", (self.s + ":bulk",)).fetchone()[0])

    def _bulk_unlock(self) -> None:
        self._q("SELECT pg_advisory_unlock(hashtext(%s))", (self.s + ":bulk",))

    def bulk_interrupted(self) -> bool:
        return self._bulk is None and self.get_meta(BULK_KEY) is not None

    def bulk_begin(self) -> bool:
        if self._bulk is not None:
            return True
        if self.file_count() or not self._bulk_lock():
            return False  # not empty, or another process is loading it
        try:
            with self.conn.transaction():
                if self._q("SELECT 1 FROM {s}.files LIMIT 1").fetchone() is not None:
                    raise _NotEmpty
                self.set_meta(BULK_KEY, str(time.time()))
                for name, _ in INDEXES:
                    self._q(f"DROP INDEX IF EXISTS {{s}}.{name}")
        except _NotEmpty:
            self._bulk_unlock()
            return False
        except BaseException:
            self._bulk_unlock()
            raise
        self._bulk, self._bulk_rows = Counter(), (0, 0)
        return True

    def _bulk_write(self, batch: Sequence[tuple[FileRow, Sequence[IndexedChunk]]]) -> None:
        """New files and their chunks, one transaction for the batch, chunks by COPY."""
        assert self._bulk is not None
        rows: list[tuple] = []
        n, tokens = self._bulk_rows
        for row, chunks in batch:
            for ic in chunks:
                keys, values, dl = chunk_terms(ic)
                self._bulk.update(keys)
                c = ic.chunk
                rows.append((row.path, c.start_line, c.end_line, c.language,
                             json.dumps(list(c.symbols)), c.text, ic.embed_hash,
                             pg_util.hstore_literal(keys, values), dl))
                n, tokens = n + 1, tokens + dl
        files = [r for r, _ in batch]
        with self.conn.transaction():
            ids = dict(self._q(
                "INSERT INTO {s}.files(path, abs_path, root, hash, size, mtime_ns, chars) "
                "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::bigint[], "
                "%s::bigint[], %s::bigint[]) RETURNING path, id",
                tuple(list(col) for col in zip(*[(f.path, f.abs_path, f.root, f.hash, f.size,
                                                  f.mtime_ns, f.chars) for f in files]))).fetchall())
            if rows:
                with self.conn.cursor() as cur, cur.copy(
                        f"COPY {self.s}.chunks ({COPY_COLS}) FROM STDIN") as cp:
                    for r in rows:
                        cp.write_row((ids[r[0]], *r, False))
        self._bulk_rows = (n, tokens)

    def bulk_end(self) -> None:
        """Build the indexes, give chunks the vectors the namespace already holds, add the
        load's counters, clear the mark, and let the lock go."""
        assert self._bulk is not None
        n, tokens = self._bulk_rows
        defer = False
        try:
            with self.conn.transaction():
                big = n >= vectors.ANN_MIN_ROWS
                if big:  # first, as clear_vectors and the HNSW build take it: no wait in a circle
                    self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s + ":dim",))
                self._q("SET LOCAL maintenance_work_mem = '512MB'")
                # Before the indexes: each row the update rewrites would add an entry to
                # every one of them (the GIN index: one per term).
                self._q("UPDATE {s}.chunks c SET has_vec = true FROM {s}.vectors v "
                        "WHERE v.hash = c.embed_hash AND NOT c.has_vec")
                for name, on in INDEXES:
                    self._q(f"CREATE INDEX IF NOT EXISTS {name} ON {{s}}.{on}")
                pg_util.apply_term_deltas(self.conn, f"{self.s}.terms", self._bulk)
                self._q("UPDATE {s}.stats SET n = n + %s, total = total + %s WHERE layer = 'chunks'",
                        (n, tokens))
                # Vectors for this many chunks are a vector load (stores/postgres/vectors.py):
                # the HNSW index is built once they are in, not maintained as they arrive.
                defer = big and self._backlog(vectors.LOAD_SLACK + 1) > vectors.LOAD_SLACK
                if defer:
                    self._defer_ann()
                self._q("DELETE FROM {s}.meta WHERE key = %s", (BULK_KEY,))
            self._q("ANALYZE {s}.chunks")
        finally:
            self._bulk = None
            self._bulk_unlock()
        if not defer and self.auto_ann:
            self.maybe_build_ann()

    def bulk_discard(self) -> None:
        """Empty a namespace whose load died (its lock is free), indexes whole again."""
        if not self._bulk_lock():
            raise StoreError("another indexer is loading this namespace; try again later")
        try:
            self.clear()
            with self.conn.transaction():
                for name, on in INDEXES:
                    self._q(f"CREATE INDEX IF NOT EXISTS {name} ON {{s}}.{on}")
                self._q("DELETE FROM {s}.meta WHERE key = %s", (BULK_KEY,))
        finally:
            self._bulk_unlock()


class _NotEmpty(Exception):
    pass
