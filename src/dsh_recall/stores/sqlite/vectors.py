"""The vector table of a SQLite store (chunks of a code or notes index, blocks of the
history): vectors (float16 blobs, or float32 of earlier releases: stores/vec_codec.py) keyed by the hash of the text embedded, in table `vectors`, and
per item row `vec_seq`, the sequence number of the write that gave it a vector (NULL: none
yet). One implementation, mixed into each SQLite store (stores.contracts.VectorTable).

The items table (`_VEC_ITEMS`) has columns id, embed_hash and vec_seq, with an index
`<items>_vec_seq`; meta holds `vec_seq` (the last vector write) and `vec_epoch` (bumped when
every vector is discarded: a vector file built before is of another vector space). The
memory-mapped vector file beside the store (stores/sqlite/vector_file.py, kept by
services/vectors.py) reads what arrived since it was written from here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...core.errors import StoreError
from ...core.lazy import np
from .. import vec_codec
from .vector_file import scan_vectors


def matrix(rows: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, float32 matrix) of (id, vector blob) rows."""
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return ids, vec_codec.decode_many([r[1] for r in rows])


class SqliteVectorTable:
    """Vectors of one SQLite store's items; the store sets `conn`, `path` and the class
    attributes below."""

    ranks_vectors = False  # ranked by services/vectors.py over the memory-mapped file
    _VEC_ITEMS = "chunks"  # the items table
    # What discarding every vector does to the item rows (the history forgets its embed
    # hashes too: they depend on the embed text).
    _VEC_CLEAR = "UPDATE {t} SET vec_seq = NULL WHERE vec_seq IS NOT NULL"

    conn: sqlite3.Connection
    path: Path

    @contextmanager
    def _vec_tx(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    @staticmethod
    def _next_vec_seq(conn: sqlite3.Connection) -> int:
        """The number of this vector write (inside its write transaction)."""
        conn.execute("INSERT INTO meta(key, value) VALUES('vec_seq', '1') ON CONFLICT(key) "
                     "DO UPDATE SET value = CAST(value AS INTEGER) + 1")
        return int(conn.execute("SELECT value FROM meta WHERE key = 'vec_seq'").fetchone()[0])

    def put_vectors(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Keep these vectors by text hash; every item waiting for one of them gets it."""
        t = self._VEC_ITEMS
        with self._vec_tx() as conn:
            conn.executemany("INSERT OR REPLACE INTO vectors(hash, vec) VALUES(?, ?)",
                             [(h, vec_codec.encode(v)) for h, v in items])
            seq = self._next_vec_seq(conn)
            hashes = [h for h, _ in items]
            for i in range(0, len(hashes), 500):
                part = hashes[i:i + 500]
                # `+vec_seq`: found by embed hash. Without statistics SQLite took the vec_seq
                # index for `IS NULL` and walked every pending row per statement: a first
                # embedding of 1M chunks ran at a few hundred chunks/s.
                conn.execute(f"UPDATE {t} SET vec_seq = ? WHERE +vec_seq IS NULL AND embed_hash "
                             f"IN ({','.join('?' * len(part))})", [seq, *part])

    def clear_vectors(self) -> None:
        """Forget every vector (a new embedder): a new vector epoch."""
        with self._vec_tx() as conn:
            conn.execute("DELETE FROM vectors")
            conn.execute(self._VEC_CLEAR.format(t=self._VEC_ITEMS))
            conn.execute("INSERT INTO meta(key, value) VALUES('vec_epoch', '1') ON CONFLICT(key) "
                         "DO UPDATE SET value = CAST(value AS INTEGER) + 1")

    def vector_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM vectors").fetchone()[0])

    @property
    def vector_dir(self) -> Path:
        """Folder of the memory-mapped vector file (stores/sqlite/vector_file.py)."""
        return self.path.with_suffix(".vectors")

    def vector_state(self) -> tuple[int, int]:
        """(epoch, seq): the vector space's epoch and the last vector write's number."""
        rows = dict(self.conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('vec_epoch', 'vec_seq')").fetchall())
        return int(rows.get("vec_epoch", 0)), int(rows.get("vec_seq", 0))

    def vector_delta(self, after_seq: int, upto_seq: int | None = None,
                     limit: int | None = None, after_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(item ids, vectors) of items whose vector arrived after `after_seq` (and at or
        before `upto_seq`), by item id from `after_id` on, at most `limit` rows."""
        t = self._VEC_ITEMS
        # A delta is a short range of the vec_seq index; only a full read (after_seq < 0)
        # should walk the table, and ORDER BY id would otherwise make SQLite walk it always.
        hint = f" INDEXED BY {t}_vec_seq" if after_seq >= 0 else ""
        sql = f"SELECT x.id, v.vec FROM {t} x{hint} JOIN vectors v ON v.hash = x.embed_hash WHERE x.vec_seq > ?"
        params: list[Any] = [after_seq]
        if upto_seq is not None:
            sql += " AND x.vec_seq <= ?"
            params.append(upto_seq)
        if after_id:
            sql += " AND x.id > ?"
            params.append(after_id)
        if limit or after_id:
            sql += " ORDER BY x.id"
        if limit:
            sql += " LIMIT ?"
            params.append(limit)
        return matrix(self.conn.execute(sql, params).fetchall())

    def all_vectors(self, upto_seq: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(item ids, vectors) in batches, every item whose vector arrived by `upto_seq`."""
        return scan_vectors(self.conn, f"SELECT id, embed_hash FROM {self._VEC_ITEMS} WHERE vec_seq <= ?",
                            (upto_seq,))

    def vector_covered(self, upto_seq: int) -> int:
        """Items whose vector arrived at or before `upto_seq` (alive rows of a vector file)."""
        return int(self.conn.execute(f"SELECT count(*) FROM {self._VEC_ITEMS} WHERE vec_seq <= ?",
                                     (upto_seq,)).fetchone()[0])

    def vector_ids(self, upto_seq: int) -> np.ndarray:
        """Ids of the items whose vector arrived at or before `upto_seq`."""
        rows = self.conn.execute(f"SELECT id FROM {self._VEC_ITEMS} WHERE vec_seq <= ?",
                                 (upto_seq,)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vectors_of(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(item ids, exact vectors) of those of `ids` that still exist and have a vector."""
        t = self._VEC_ITEMS
        rows: list[Any] = []
        want = [int(i) for i in ids]
        for i in range(0, len(want), 500):
            part = want[i:i + 500]
            rows += self.conn.execute(
                f"SELECT x.id, v.vec FROM {t} x JOIN vectors v ON v.hash = x.embed_hash "
                f"WHERE x.id IN ({','.join('?' * len(part))})", part).fetchall()
        return matrix(rows)

    # SQLite does not rank its own vectors (ranks_vectors is False): services/vectors.py
    # ranks them over the memory-mapped file.
    def vector_search(self, query: np.ndarray, k: int, path_prefix: str | None = None,
                      allowed: set[int] | None = None,
                      keep: np.ndarray | None = None) -> list[tuple[int, float]]:
        raise StoreError("a SQLite store does not rank its vectors (ranks_vectors is False); "
                         "services/vectors.VectorIndex ranks them")

    def mean_cosine(self, query: np.ndarray, keep: np.ndarray | None = None) -> float:
        raise StoreError("a SQLite store does not rank its vectors (ranks_vectors is False); "
                         "services/vectors.VectorIndex ranks them")
