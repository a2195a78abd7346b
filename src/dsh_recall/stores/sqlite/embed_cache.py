"""The embedding cache every workspace of a user shares (recall_home()/embed-cache.sqlite).

Table `vecs`: a rowid table, one row per (embedder fingerprint, text hash), the
fingerprint kept once in `fps` and the vector as a float16 blob (stores/vec_codec.py), with
a unique index on (fp id, hash). About 0.85 KB a vector of 384 dimensions. Earlier releases
kept `cache(fp, hash, vec)` WITHOUT ROWID with float32 blobs: rows of 1.5 KB in a
WITHOUT ROWID table each spill to an overflow page, 4.7 KB a vector. Such a table is still
read (a miss in `vecs` looks there) and forgotten from by `drop`, never written: each `put`
moves some of its rows into `vecs` (`DRAIN_ROWS`), and it is dropped once empty, so its
pages are reused as the cache grows instead of the file growing beside them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ...core.lazy import np
from .. import vec_codec
from .util import connect, scrubbing

APPLICATION_ID = 0x44524332  # "DRC2": one past the chunk store's "DRC1"
DRAIN_ROWS = 2_000  # rows of an earlier release's table moved per put (about 10 MB of it)


class EmbedCache:
    """Vectors shared by every workspace of a user, keyed by (fingerprint, text hash), so a
    second checkout, a branch switch or a re-index never pays for the same embedding twice."""

    def __init__(self, path: Path) -> None:
        self.conn = connect(Path(path), APPLICATION_ID)
        self.conn.execute("CREATE TABLE IF NOT EXISTS fps (id INTEGER PRIMARY KEY, fp TEXT NOT NULL UNIQUE)")
        self.conn.execute("CREATE TABLE IF NOT EXISTS vecs (id INTEGER PRIMARY KEY, fp INTEGER NOT NULL, "
                          "hash TEXT NOT NULL, vec BLOB NOT NULL)")
        self.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS vecs_key ON vecs(fp, hash)")
        self._old = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cache'").fetchone() is not None
        self._fp_ids: dict[str, int] = {}

    def _fp_id(self, fp: str, create: bool) -> int | None:
        if fp not in self._fp_ids:
            row = self.conn.execute("SELECT id FROM fps WHERE fp = ?", (fp,)).fetchone()
            if row is None:
                if not create:
                    return None
                row = (self.conn.execute("INSERT INTO fps(fp) VALUES(?)", (fp,)).lastrowid,)
            self._fp_ids[fp] = int(row[0])
        return self._fp_ids[fp]

    def get(self, fp: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        hashes = list(hashes)
        fid = self._fp_id(fp, create=False)
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            q = ",".join("?" * len(part))
            if fid is not None:
                for h, v in self.conn.execute(
                        f"SELECT hash, vec FROM vecs WHERE fp = ? AND hash IN ({q})", [fid, *part]):
                    out[h] = vec_codec.decode(v)
            rest = [h for h in part if h not in out] if self._old else []
            if rest:  # an earlier release's table: what is not in the new one
                for h, v in self._old_rows(
                        f"SELECT hash, vec FROM cache WHERE fp = ? AND hash IN ({','.join('?' * len(rest))})",
                        [fp, *rest]):
                    out[h] = vec_codec.decode(v)
        return out

    def put(self, fp: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            fid = self._fp_id(fp, create=True)
            self.conn.executemany("INSERT OR REPLACE INTO vecs(fp, hash, vec) VALUES(?,?,?)",
                                  [(fid, h, vec_codec.encode(v)) for h, v in items])
            if self._old:
                self._drain()
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            self._fp_ids.clear()  # rows made inside may have gone with the transaction
            self._old = self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cache'").fetchone() is not None
            raise

    def _old_rows(self, sql: str, args: Sequence) -> list:
        """Rows of an earlier release's table; none once another process dropped it."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                raise
            self._old = False
            return []

    def _drain(self) -> None:
        """Move up to DRAIN_ROWS rows of an earlier release's table into `vecs` (inside the
        caller's write transaction); drop the table once it is empty."""
        rows = self._old_rows("SELECT fp, hash, vec FROM cache LIMIT ?", (DRAIN_ROWS,))
        if not self._old:
            return
        moved = [(self._fp_id(fp, create=True), h, vec_codec.encode(vec_codec.decode(v))) for fp, h, v in rows]
        self.conn.executemany("INSERT OR IGNORE INTO vecs(fp, hash, vec) VALUES(?,?,?)", moved)
        self.conn.executemany("DELETE FROM cache WHERE fp = ? AND hash = ?", [(fp, h) for fp, h, _ in rows])
        if len(rows) < DRAIN_ROWS:
            self.conn.execute("DROP TABLE cache")
            self._old = False

    def drop(self, hashes: Sequence[str]) -> None:
        """Forget these texts' vectors under every fingerprint, their bytes overwritten (a
        note the user forgot)."""
        hashes = list(hashes)
        with scrubbing(self.conn):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                for i in range(0, len(hashes), 500):
                    part = hashes[i:i + 500]
                    q = ",".join("?" * len(part))
                    # by the (fp, hash) index: every fingerprint, these hashes
                    self.conn.execute(f"DELETE FROM vecs WHERE fp IN (SELECT id FROM fps) AND hash IN ({q})", part)
                    if self._old:
                        self._old_rows(f"DELETE FROM cache WHERE hash IN ({q})", part)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self.conn.close()
