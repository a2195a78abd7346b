"""The embedding cache of a shared PostgreSQL store: one per database, for every user and
every namespace in it (stores.contracts.EmbedCacheStore, as stores/sqlite/embed_cache.py is
for one user's recall home).

Keyed by (embedder fingerprint, hash of the text embedded) -> float32 vector, so a teammate
indexing the same commit, a second checkout at another path or a branch switch reuses every
vector already computed and embeds only texts nobody embedded before. It holds vectors and
hashes, never text: a vector is found only by a caller who already has the text it came
from, so what a channel may read is still decided where the text lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.errors import StoreError
from . import migrations
from . import util as pg_util

NAMESPACE = "embed-cache"
KIND = "embed_cache"
BATCH = 2000  # hashes per lookup, rows per COPY


class PgEmbedCache:
    """The database-wide embedding cache (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn = pg_util.connect(url)
        try:
            self.s = migrations.ensure_namespace(self.conn, NAMESPACE, KIND, migrations.EMBED_CACHE)
        except BaseException:
            self.conn.close()
            raise

    def _error(self, what: str, e: Exception) -> StoreError:
        return StoreError(f"{pg_util.redact(self.url)}: embedding cache {what} failed: {str(e).strip()}")

    def get(self, fp: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of those of `hashes` embedded before by fingerprint `fp`."""
        out: dict[str, np.ndarray] = {}
        want = list(dict.fromkeys(hashes))
        try:
            for i in range(0, len(want), BATCH):
                rows = self.conn.execute(
                    f"SELECT hash, vec FROM {self.s}.cache WHERE fp = %s AND hash = ANY(%s)",
                    (fp, want[i:i + BATCH])).fetchall()
                for h, v in rows:
                    out[h] = np.frombuffer(bytes(v), dtype=np.float32)
        except Exception as e:  # noqa: BLE001 - psycopg's errors are imported in util only
            raise self._error("lookup", e) from e
        return out

    def put(self, fp: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Keep these vectors (a hash already cached keeps its first vector: the same text
        under the same fingerprint embeds the same)."""
        rows = sorted({h: np.asarray(v, np.float32).tobytes() for h, v in items}.items())
        if not rows:
            return
        try:
            with self.conn.transaction():
                # COPY into a scratch table, then one insert that skips what another writer
                # cached first: no row-by-row round trips, never a unique violation.
                self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS embed_cache_in "
                                  "(hash TEXT, vec BYTEA) ON COMMIT DELETE ROWS")
                for i in range(0, len(rows), BATCH):
                    with self.conn.cursor() as cur, cur.copy(
                            "COPY embed_cache_in (hash, vec) FROM STDIN") as cp:
                        for h, v in rows[i:i + BATCH]:
                            cp.write_row((h, v))
                self.conn.execute(
                    f"INSERT INTO {self.s}.cache (fp, hash, vec) SELECT %s, hash, vec "
                    "FROM embed_cache_in ORDER BY hash ON CONFLICT (fp, hash) DO NOTHING", (fp,))
        except Exception as e:  # noqa: BLE001 - psycopg's errors are imported in util only
            raise self._error("write", e) from e

    def count(self, fp: str | None = None) -> int:
        """Vectors cached (under fingerprint `fp`, or all)."""
        sql: Any = f"SELECT count(*) FROM {self.s}.cache" + (" WHERE fp = %s" if fp else "")
        return int(self.conn.execute(sql, (fp,) if fp else None).fetchone()[0])

    def drop(self, hashes: Sequence[str]) -> None:
        """Forget these texts' vectors under every fingerprint (a note the user forgot;
        the database's VACUUM reclaims the rows)."""
        try:
            with self.conn.transaction():
                self.conn.execute(f"DELETE FROM {self.s}.cache WHERE hash = ANY(%s)", (list(hashes),))
        except Exception as e:  # noqa: BLE001 - psycopg's errors are imported in util only
            raise self._error("delete", e) from e

    def close(self) -> None:
        pg_util.release(self.url, self.conn)
