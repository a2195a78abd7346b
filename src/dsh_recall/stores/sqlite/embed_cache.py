"""The embedding cache every workspace of a user shares (recall_home()/embed-cache.sqlite)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...core.lazy import np
from .util import connect, scrubbing

APPLICATION_ID = 0x44524332  # "DRC2": one past the chunk store's "DRC1"


class EmbedCache:
    """Vectors shared by every workspace of a user, keyed by (fingerprint, text hash), so a
    second checkout, a branch switch or a re-index never pays for the same embedding twice."""

    def __init__(self, path: Path) -> None:
        self.conn = connect(Path(path), APPLICATION_ID)
        self.conn.execute("CREATE TABLE IF NOT EXISTS cache (fp TEXT NOT NULL, hash TEXT NOT NULL, "
                          "vec BLOB NOT NULL, PRIMARY KEY(fp, hash)) WITHOUT ROWID")

    def get(self, fp: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        hashes = list(hashes)
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            q = ",".join("?" * len(part))
            for h, v in self.conn.execute(
                    f"SELECT hash, vec FROM cache WHERE fp = ? AND hash IN ({q})", [fp, *part]):
                out[h] = np.frombuffer(v, dtype=np.float32)
        return out

    def put(self, fp: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany("INSERT OR REPLACE INTO cache(fp, hash, vec) VALUES(?,?,?)",
                                  [(fp, h, np.asarray(v, np.float32).tobytes()) for h, v in items])
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def drop(self, hashes: Sequence[str]) -> None:
        """Forget these texts' vectors under every fingerprint, their bytes overwritten (a
        note the user forgot)."""
        hashes = list(hashes)
        with scrubbing(self.conn):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                for i in range(0, len(hashes), 500):
                    part = hashes[i:i + 500]
                    self.conn.execute(f"DELETE FROM cache WHERE hash IN ({','.join('?' * len(part))})", part)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self.conn.close()
