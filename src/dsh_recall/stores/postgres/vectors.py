"""The vector table of a PostgreSQL store (chunks of a code or notes namespace, blocks of
the history): pgvector vectors keyed by the hash of the text embedded, in `{s}.vectors`, and
per item row `has_vec`. Ranked by the database (stores.contracts.VectorTable with
`ranks_vectors`): top-k by inner product on unit vectors, HNSW once the namespace holds
ANN_MIN_ROWS vectors, exact below that and for small scopes. One implementation, mixed into
each PostgreSQL store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...core.errors import StoreError
from . import util as pg_util

ANN_MIN_ROWS = 20_000  # below this many vectors an exact scan is as fast as the index
HNSW = "WITH (m = 16, ef_construction = 64)"


class PgVectorTable:
    """Vectors of one PostgreSQL store's items; the store sets `conn`, `s` (its schema) and
    the class attributes below."""

    ranks_vectors = True  # vector_search is done by the database (services/vectors.py asks)
    auto_ann = True  # build the HNSW index once enough vectors arrived (a bulk copy defers it)
    _VEC_ITEMS = "chunks"  # the items table: id, embed_hash, has_vec
    # What discarding every vector does to the item rows (the history forgets its embed
    # hashes too), and statements run after it in the same transaction.
    _VEC_CLEAR = "UPDATE {s}.chunks SET has_vec = false WHERE has_vec"
    _VEC_CLEAR_AFTER: tuple[str, ...] = ()
    _DIM_ERROR = "vectors of dimension {dim} in an index of dimension {have}"

    conn: Any  # a psycopg connection (psycopg is imported in util only)
    s: str

    def _q(self, sql: str, params: Any = None) -> Any:
        return self.conn.execute(sql.replace("{s}", self.s), params)

    def get_meta(self, key: str) -> str | None:
        row = self._q("SELECT value FROM {s}.meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self._q("INSERT INTO {s}.meta(key, value) VALUES (%s, %s) ON CONFLICT (key) "
                "DO UPDATE SET value = excluded.value", (key, value))

    def _dim(self) -> int | None:
        d = self.get_meta("dim")
        return int(d) if d else None

    def _set_dim(self, dim: int) -> None:
        with self.conn.transaction():
            self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s + ":dim",))
            if self._dim() is None:
                self._q(f"ALTER TABLE {{s}}.vectors ALTER COLUMN vec TYPE vector({int(dim)})")
                self.set_meta("dim", str(dim))

    def put_vectors(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Keep these vectors by text hash; every item waiting for one of them gets it."""
        if not items:
            return
        rows = sorted({h: np.asarray(v, dtype=np.float32) for h, v in items}.items())
        dim = len(rows[0][1])
        if self._dim() is None:
            self._set_dim(dim)
        if self._dim() != dim:
            raise StoreError(self._DIM_ERROR.format(dim=dim, have=self._dim()))
        with self.conn.transaction():
            with self.conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {self.s}.vectors(hash, vec) VALUES (%s, %s) "
                                "ON CONFLICT (hash) DO NOTHING", rows)
            # Rows a concurrent writer is replacing are skipped, never waited for: their
            # replacements look the vector up when they are inserted (or stay pending).
            t = self._VEC_ITEMS
            self._q(f"UPDATE {{s}}.{t} SET has_vec = true WHERE id IN (SELECT id FROM {{s}}.{t} "
                    "WHERE embed_hash = ANY(%s) AND NOT has_vec ORDER BY id FOR UPDATE SKIP LOCKED)",
                    ([h for h, _ in rows],))
        if self.auto_ann:
            self.maybe_build_ann()

    def maybe_build_ann(self) -> None:
        if self.get_meta("ann") is None and self.vector_count() >= ANN_MIN_ROWS:
            self.build_ann_index()

    def build_ann_index(self) -> None:
        """The HNSW index over the vectors (inner product; our vectors are unit length)."""
        with self.conn.transaction():
            self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s + ":dim",))
            if self.get_meta("ann") is None and self._dim() is not None:
                self._q("SET LOCAL maintenance_work_mem = '512MB'")
                self._q(f"CREATE INDEX IF NOT EXISTS vectors_hnsw ON {{s}}.vectors "
                        f"USING hnsw (vec vector_ip_ops) {HNSW}")
                self.set_meta("ann", "hnsw")

    def clear_vectors(self) -> None:
        """Forget every vector (a new embedder)."""
        with self.conn.transaction():
            self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s + ":dim",))
            # Item rows before the vectors table: a writer replacing rows holds them and
            # may need to read the vectors table; this order never waits in a circle.
            self._q(self._VEC_CLEAR)
            self._q("DROP INDEX IF EXISTS {s}.vectors_hnsw")
            self._q("TRUNCATE {s}.vectors")
            self._q("ALTER TABLE {s}.vectors ALTER COLUMN vec TYPE vector")
            self._q("DELETE FROM {s}.meta WHERE key IN ('dim', 'ann')")
            for stmt in self._VEC_CLEAR_AFTER:
                self._q(stmt)

    def vector_count(self) -> int:
        return int(self._q("SELECT count(*) FROM {s}.vectors").fetchone()[0])

    def _rows(self, sql: str, params: Any) -> tuple[np.ndarray, np.ndarray]:
        rows = self._q(sql, params).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ids, np.vstack([pg_util.as_array(r[1]) for r in rows])

    def vectors_of(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(item ids, exact vectors) of those of `ids` that still exist and have a vector."""
        return self._rows(f"SELECT t.id, v.vec FROM {{s}}.{self._VEC_ITEMS} t JOIN {{s}}.vectors v "
                          "ON v.hash = t.embed_hash WHERE t.id = ANY(%s) ORDER BY t.id",
                          ([int(i) for i in ids],))

    def vector_ids(self, upto_seq: int = 0) -> np.ndarray:
        """Ids of the items that have a vector (there is no vector file: every one)."""
        rows = self._q(f"SELECT id FROM {{s}}.{self._VEC_ITEMS} WHERE has_vec").fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    # No memory-mapped vector file to keep in step: the database ranks its vectors.
    @property
    def vector_dir(self) -> Path:
        raise StoreError("a PostgreSQL store keeps no vector file (ranks_vectors is True)")

    def vector_state(self) -> tuple[int, int]:
        return 0, 0

    def vector_delta(self, after_seq: int, upto_seq: int | None = None, limit: int | None = None,
                     after_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)

    def all_vectors(self, upto_seq: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return iter(())

    def vector_covered(self, upto_seq: int) -> int:
        return 0

    def _vector_top(self, q: np.ndarray, k: int, conds: Sequence[str],
                    params: dict[str, Any]) -> list[tuple[int, float]]:
        """The k best (item id, cosine), best first, among items (alias t) meeting `conds`
        (none: every item). Scores are exact inner products."""
        t = self._VEC_ITEMS
        params = {**params, "q": q, "k": int(k)}
        if conds:  # a scope: exact over its items (a GIN / btree lookup, then a scan)
            sql = (f"SELECT t.id, -(v.vec <#> %(q)s) AS s FROM {{s}}.{t} t JOIN {{s}}.vectors v "
                   "ON v.hash = t.embed_hash WHERE " + " AND ".join(conds) +
                   " ORDER BY s DESC, t.id LIMIT %(k)s")
            return [(int(i), float(s)) for i, s in self._q(sql, params)]
        # Every item: nearest texts by the index (exact scan while small), then their items;
        # a text whose items are all gone is skipped, so ask for more if short.
        m = max(2 * k, 64)
        total = self.vector_count()
        while True:
            with self.conn.transaction():
                self._q(f"SET LOCAL hnsw.ef_search = {min(1000, max(100, m))}")
                rows = self._q(
                    "SELECT t.id, -n.d AS s FROM (SELECT hash, vec <#> %(q)s AS d FROM {s}.vectors "
                    f"ORDER BY vec <#> %(q)s LIMIT %(m)s) n JOIN {{s}}.{t} t ON t.embed_hash = n.hash "
                    "ORDER BY n.d, t.id LIMIT %(k)s", {**params, "m": m}).fetchall()
            if len(rows) >= k or m >= total:
                return [(int(i), float(s)) for i, s in rows]
            m *= 4

    def mean_cosine(self, query: np.ndarray, keep: np.ndarray | None = None) -> float:
        """Mean cosine of the query to every item vector (in `keep`): the query against the
        mean vector, which the database sums."""
        q = np.asarray(query, dtype=np.float32)
        sql = (f"SELECT avg(v.vec) FROM {{s}}.{self._VEC_ITEMS} t JOIN {{s}}.vectors v "
               "ON v.hash = t.embed_hash")
        args: dict[str, Any] = {}
        if keep is not None:
            sql += " WHERE t.id = ANY(%(ids)s)"
            args["ids"] = [int(i) for i in keep]
        row = self._q(sql, args).fetchone()
        if row is None or row[0] is None:
            return 0.0
        mean = pg_util.as_array(row[0])
        return float(mean @ q) if len(mean) == len(q) else 0.0
