"""The vector table of a PostgreSQL store (chunks of a code or notes namespace, blocks of
the history): pgvector vectors keyed by the hash of the text embedded, in `{s}.vectors`, and
per item row `has_vec`. Ranked by the database (stores.contracts.VectorTable with
`ranks_vectors`): top-k by inner product on unit vectors, HNSW once the namespace holds
ANN_MIN_ROWS vectors, exact below that, for small scopes and while a vector load defers the
index. One implementation, mixed into each PostgreSQL store.

Vectors are written by COPY (binary, through a session-local staging table, so a hash
already kept is skipped) once a write holds COPY_MIN of them. A vector load (many vectors
into a namespace: a first index's, a re-embedding's after `clear_vectors`) defers the HNSW
index: maintained row by row it costs more than the load itself, built once at the end it
is one parallel pass. Meta `vector_load` marks a deferred index, set in the transaction
that drops it, and cleared in the one that builds it, so a namespace never claims an index
it lacks; searches meanwhile rank exactly. A loader that says so (`vector_load_begin`, a
bench, a copy) holds a session advisory lock and builds the index at `vector_load_end`;
a load begun by a first index's bulk load (stores/postgres/bulk.py) or by `clear_vectors`
has no owner, and whoever writes the vectors that drain its backlog builds it. A loader
killed mid-load leaves the mark with its lock free: the next writer or loader carries on.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...core.errors import StoreError
from . import util as pg_util

ANN_MIN_ROWS = 20_000  # below this many vectors an exact scan is as fast as the index
# At 1M real-shaped vectors (the shipped model's real sample and perturbed copies,
# bench/scale_pg.py --real-vectors), the store's k=10 query kept 0.38 of the exact top 10 at
# ef_search 100, 0.67 at 400 and 0.81 at 1000 (3, 5 and 10 ms) on a graph built with
# ef_construction 64 (in 170 s); built with 128 (in 273 s), 0.86 at 400 and 0.96 at 1000
# (6 and 11 ms). So the graph is built with 128, and every index query searches with
# pgvector's widest beam: less than a tenth of the lexical query it runs beside.
HNSW = "WITH (m = 16, ef_construction = 128)"
EF_SEARCH = 1000
COPY_MIN = 128  # a write of this many vectors or more goes through COPY
LOAD_KEY = "vector_load"  # meta: the HNSW index is deferred until a vector load ends
# A deferred index is built once the items waiting for a vector are this few: the rest are
# added to the built graph one by one.
LOAD_SLACK = 1024
# The build's memory (maintenance_work_mem): the whole graph, so pgvector builds it in
# memory rather than on disk (about 4 bytes a dimension plus 1 KB of links a vector, and a
# margin), never below the server's setting, and at most this many MB.
BUILD_MEM_MAX_MB = 4096
_STAGE = "pg_temp.dshr_vec_in"


def build_mem_mb(n: int, dim: int) -> int:
    """maintenance_work_mem (MB) for an HNSW build over n vectors of `dim` dimensions."""
    return max(64, min(BUILD_MEM_MAX_MB, math.ceil(n * (4 * dim + 1024) * 1.25 / 2**20)))


def vector_bytes(mat: np.ndarray) -> list[bytes]:
    """pgvector's binary form of each row (dimension, a reserved int16, big-endian float4)."""
    head = struct.pack(">HH", mat.shape[1], 0)
    return [head + row.tobytes() for row in np.asarray(mat, dtype=">f4")]


class PgVectorTable:
    """Vectors of one PostgreSQL store's items; the store sets `conn`, `s` (its schema) and
    the class attributes below."""

    ranks_vectors = True  # vector_search is done by the database (services/vectors.py asks)
    auto_ann = True  # build the HNSW index once enough vectors arrived (and no load defers it)
    # Parallel workers for an HNSW build (max_parallel_maintenance_workers); None: the
    # server's setting, which its administrator sizes to its cores.
    ann_build_workers: int | None = None
    _VEC_ITEMS = "chunks"  # the items table: id, embed_hash, has_vec
    _VEC_PENDING = "NOT has_vec"  # an item waiting for a vector (an indexed condition)
    # What discarding every vector does to the item rows (the history forgets its embed
    # hashes too), and statements run after it in the same transaction.
    _VEC_CLEAR = "UPDATE {s}.chunks SET has_vec = false WHERE has_vec"
    _VEC_CLEAR_AFTER: tuple[str, ...] = ()
    _DIM_ERROR = "vectors of dimension {dim} in an index of dimension {have}"

    conn: Any  # a psycopg connection (psycopg is imported in util only)
    s: str
    _loading = False  # this store holds the vector load lock (vector_load_begin)

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
        have = self._dim()
        if have is None:
            self._set_dim(dim)
            have = self._dim()
        if have != dim:
            raise StoreError(self._DIM_ERROR.format(dim=dim, have=have))
        hashes = [h for h, _ in rows]
        with self.conn.transaction():
            if len(rows) >= COPY_MIN:
                self._copy_vectors(hashes, np.vstack([v for _, v in rows]))
            else:
                with self.conn.cursor() as cur:
                    cur.executemany(f"INSERT INTO {self.s}.vectors(hash, vec) VALUES (%s, %s) "
                                    "ON CONFLICT (hash) DO NOTHING", rows)
            # Rows a concurrent writer is replacing are skipped, never waited for: their
            # replacements look the vector up when they are inserted (or stay pending).
            t = self._VEC_ITEMS
            self._q(f"UPDATE {{s}}.{t} SET has_vec = true WHERE id IN (SELECT id FROM {{s}}.{t} "
                    "WHERE embed_hash = ANY(%s) AND NOT has_vec ORDER BY id FOR UPDATE SKIP LOCKED)",
                    (hashes,))
        if self.auto_ann:
            self.maybe_build_ann()

    def _copy_vectors(self, hashes: list[str], mat: np.ndarray) -> None:
        """COPY (binary) into the session's staging table, then into the vectors table, a
        hash already kept skipped; in the caller's transaction."""
        with self.conn.cursor() as cur:
            # In every write's transaction: a pooler may hand each transaction another
            # session. Quietly: "already exists, skipping" is the usual answer.
            cur.execute("SET LOCAL client_min_messages = warning")
            cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE.split('.')[1]} "
                        "(hash TEXT NOT NULL, vec vector NOT NULL) ON COMMIT DELETE ROWS")
            with cur.copy(f"COPY {_STAGE} (hash, vec) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(["text", "bytea"])  # bytea sends our bytes as they are: vector_recv reads them
                for row in zip(hashes, vector_bytes(mat)):
                    cp.write_row(row)
            cur.execute(f"INSERT INTO {self.s}.vectors(hash, vec) SELECT hash, vec FROM {_STAGE} "
                        "ORDER BY hash ON CONFLICT (hash) DO NOTHING")

    # -- the HNSW index and vector loads ---------------------------------------------------
    def _backlog(self, limit: int) -> int:
        """How many items wait for a vector, counted up to `limit` (a bounded walk)."""
        t = self._VEC_ITEMS
        return int(self._q(f"SELECT count(*) FROM (SELECT 1 FROM {{s}}.{t} WHERE {self._VEC_PENDING} "
                           "LIMIT %s) x", (limit,)).fetchone()[0])

    def _at_least(self, table: str, n: int) -> bool:
        return bool(self._q(f"SELECT count(*) FROM (SELECT 1 FROM {{s}}.{table} LIMIT %s) x",
                            (n,)).fetchone()[0] >= n)

    def _lock_key(self) -> str:
        return self.s + ":vectors"

    def _defer_ann(self) -> None:
        """In the caller's transaction (holding the `:dim` lock): drop the index and mark
        the load (see the module docstring)."""
        self._q("DROP INDEX IF EXISTS {s}.vectors_hnsw")
        self._q("DELETE FROM {s}.meta WHERE key = 'ann'")
        self.set_meta(LOAD_KEY, str(time.time()))

    def vector_load_begin(self) -> bool:
        """Begin a load of many vectors: the HNSW index is dropped and built once by
        `vector_load_end`; put_vectors meanwhile only writes. False when another process is
        loading this namespace (its index is deferred already: write as usual)."""
        if self._loading:
            return True
        if not self._q("SELECT pg_try_advisory_lock(hashtext(%s))", (self._lock_key(),)).fetchone()[0]:
            return False
        try:
            with self.conn.transaction():
                self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s + ":dim",))
                self._defer_ann()
        except BaseException:
            self._q("SELECT pg_advisory_unlock(hashtext(%s))", (self._lock_key(),))
            raise
        self._loading = True
        return True

    def vector_load_end(self) -> None:
        """Build the HNSW index once (when the namespace holds ANN_MIN_ROWS vectors), clear
        the mark in the same transaction, let the lock go. A failed build (cancelled,
        killed) leaves the mark: searches stay exact and the next writer or load retries."""
        try:
            self._build(force_end=True)
        finally:
            self.vector_load_release()

    def vector_load_release(self) -> None:
        """Let this store's load lock go without building (the store closes mid-load): the
        mark stays, and the next writer or loader carries the load on."""
        if self._loading:
            self._loading = False
            if not self.conn.closed:
                self._q("SELECT pg_advisory_unlock(hashtext(%s))", (self._lock_key(),))

    def vector_load_interrupted(self) -> bool:
        """A load's index is deferred and no live loader owns it (one was killed, or the
        load was begun by a bulk load or clear_vectors): the next writer carries it on."""
        if self._loading or self.get_meta(LOAD_KEY) is None:
            return False
        with self.conn.transaction():
            return bool(self._q("SELECT pg_try_advisory_xact_lock(hashtext(%s))",
                                (self._lock_key(),)).fetchone()[0])

    def maybe_build_ann(self) -> None:
        """Build the index when it is due: ANN_MIN_ROWS vectors and no load defers it (a
        load without a live owner ends once its backlog is down to LOAD_SLACK)."""
        if self._loading or self.get_meta("ann") is not None:
            return
        if self.get_meta(LOAD_KEY) is not None:
            if self._backlog(LOAD_SLACK + 1) > LOAD_SLACK:
                return
            self._build(force_end=False)
        elif self._at_least("vectors", ANN_MIN_ROWS):
            self.build_ann_index()

    def build_ann_index(self) -> None:
        """The HNSW index over the vectors (inner product; our vectors are unit length),
        now, whatever their number; a load in progress elsewhere still defers it."""
        self._build(force_end=False, min_rows=0)

    def _build(self, force_end: bool, min_rows: int | None = None) -> None:
        """Build the index, then set meta 'ann' and clear the load mark in one transaction.
        `force_end`: this store owns the load. Otherwise a live owner elsewhere keeps the
        index deferred.

        The build runs CONCURRENTLY, outside any transaction, under a session lock that
        keeps a second builder out: a plain CREATE INDEX blocked every writer of the
        namespace for the whole build (13 minutes at 1M vectors). A build that failed
        leaves an invalid index, dropped by the next one; until an index is valid and meta
        'ann' says so, searches rank exactly."""
        need = ANN_MIN_ROWS if min_rows is None else min_rows
        with self.conn.transaction():
            self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s + ":dim",))
            marked = self.get_meta(LOAD_KEY) is not None
            if marked and not force_end and not self._q(
                    "SELECT pg_try_advisory_xact_lock(hashtext(%s))", (self._lock_key(),)).fetchone()[0]:
                return  # its loader is alive and builds at its end
            dim = self._dim()
            if dim is None or self.get_meta("ann") is not None \
                    or not self._at_least("vectors", max(1, need)):  # not due
                if marked:
                    self._q("DELETE FROM {s}.meta WHERE key = %s", (LOAD_KEY,))
                return
        key = self.s + ":build"
        if not self._q("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
            return  # another process is building it now
        try:
            if self._index_valid() is False:  # a build killed midway
                self._q("DROP INDEX CONCURRENTLY IF EXISTS {s}.vectors_hnsw")
            mem = build_mem_mb(self.vector_count(), dim)
            if mem * 1024 > int(self._q("SELECT setting::bigint FROM pg_settings "
                                        "WHERE name = 'maintenance_work_mem'").fetchone()[0]):
                self._q(f"SET maintenance_work_mem = '{mem}MB'")
            if self.ann_build_workers is not None:
                self._q(f"SET max_parallel_maintenance_workers = {int(self.ann_build_workers)}")
            try:
                self._q(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS vectors_hnsw ON {{s}}.vectors "
                        f"USING hnsw (vec vector_ip_ops) {HNSW}")
            finally:
                self._q("RESET maintenance_work_mem")
                self._q("RESET max_parallel_maintenance_workers")
            with self.conn.transaction():
                self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s + ":dim",))
                # A load begun meanwhile dropped the index and marked itself: leave both.
                if self._index_valid():
                    self.set_meta("ann", "hnsw")
                    if marked:
                        self._q("DELETE FROM {s}.meta WHERE key = %s", (LOAD_KEY,))
        finally:
            if not self.conn.closed:
                self._q("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def _index_valid(self) -> bool | None:
        """Whether the HNSW index is valid (None: there is none)."""
        row = self._q("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = "
                      "to_regclass(%s)", (f"{self.s}.vectors_hnsw",)).fetchone()
        return None if row is None else bool(row[0])

    def clear_vectors(self) -> None:
        """Forget every vector (a new embedder). A namespace of ANN_MIN_ROWS items or more
        is marked for a vector load: its vectors come back in bulk."""
        with self.conn.transaction():
            self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s + ":dim",))
            # Item rows before the vectors table: a writer replacing rows holds them and
            # may need to read the vectors table; this order never waits in a circle.
            self._q(self._VEC_CLEAR)
            self._q("DROP INDEX IF EXISTS {s}.vectors_hnsw")
            self._q("TRUNCATE {s}.vectors")
            self._q("ALTER TABLE {s}.vectors ALTER COLUMN vec TYPE vector")
            self._q("DELETE FROM {s}.meta WHERE key IN ('dim', 'ann')")
            if self._at_least(self._VEC_ITEMS, ANN_MIN_ROWS):
                self._defer_ann()
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
        while True:
            with self.conn.transaction():
                self._q(f"SET LOCAL hnsw.ef_search = {EF_SEARCH}")
                rows = self._q(
                    "SELECT t.id, -n.d AS s FROM (SELECT hash, vec <#> %(q)s AS d FROM {s}.vectors "
                    f"ORDER BY vec <#> %(q)s LIMIT %(m)s) n JOIN {{s}}.{t} t ON t.embed_hash = n.hash "
                    "ORDER BY n.d, t.id LIMIT %(k)s", {**params, "m": m}).fetchall()
            # Counted only when short: count(*) reads the whole table (seconds at 1M).
            if len(rows) >= k or m >= self.vector_count():
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
