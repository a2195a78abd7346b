"""The chunk store on PostgreSQL + pgvector, for an index shared by a team (see
docs/postgres.md). Same contract as stores/sqlite/chunks.py (stores/contracts/), plus vector search
as a store operation: top-k by inner product on unit vectors, HNSW once the namespace holds
ANN_MIN_ROWS vectors, exact below that and for small scopes.

Each namespace (one code workspace, one notes index) is its own schema. Each file is
replaced in one transaction under an advisory lock on its path, so several indexers (other
processes, other machines) may write one namespace at once: readers see a file's old
chunks or its new ones, never half; a path is never held twice.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from ..contracts import ChunkRow, FileRow, IndexedChunk, prefix_bounds
from . import migrations
from . import util as pg_util
from .bulk import PgBulkLoad, chunk_terms
from .vectors import PgVectorTable

SCHEMA_VERSION = migrations.latest(migrations.CHUNKS)  # stores/postgres/migrations.py

class PgChunkStore(PgVectorTable, PgBulkLoad):
    """Chunk store in one namespace of a PostgreSQL database (see stores.contracts.ChunkStore)."""

    _VEC_ITEMS = "chunks"
    _VEC_CLEAR = "UPDATE {s}.chunks SET has_vec = false WHERE has_vec"
    _VEC_CLEAR_AFTER = ("SELECT nextval('{s}.vec_seq')",)
    _DIM_ERROR = ("vectors of dimension {dim} in an index of dimension {have}; "
                  "the embedder changed without clearing the vectors")
    # Document frequencies are exact in every write (terms, stats): nothing to suspend or
    # fill again; no cached score lists to warm.
    keeps_term_df = False
    warm_behind = False

    def __init__(self, url: str, namespace: str):
        self.url, self.namespace = url, namespace
        self.conn = pg_util.connect(url)
        self.s = migrations.ensure_namespace(self.conn, namespace, "chunks", migrations.CHUNKS)
        self._df_cache: dict[str, int] = {}
        self._df_key: tuple | None = None

    @property
    def path(self) -> str:
        """Where the index lives, for status output (the URL without a password)."""
        return f"{pg_util.redact(self.url)}#{self.namespace}"

    def reopen(self) -> PgChunkStore:
        """A store on its own connection (for a worker thread)."""
        return PgChunkStore(self.url, self.namespace)

    # -- files --------------------------------------------------------------
    _FILE_COLS = "path, abs_path, root, hash, size, mtime_ns, chars"
    # Path prefixes are code point ranges (stores.sqlite.prefix_bounds), so path comparisons
    # use the C collation whatever the database's default is.

    def files(self) -> dict[str, FileRow]:
        return {r[0]: FileRow(*r) for r in self._q(f"SELECT {self._FILE_COLS} FROM {{s}}.files")}

    def file(self, path: str) -> FileRow | None:
        r = self._q(f"SELECT {self._FILE_COLS} FROM {{s}}.files WHERE path = %s", (path,)).fetchone()
        return FileRow(*r) if r else None

    def _lock_paths(self, paths: Iterable[str]) -> None:
        # Sorted, so two writers taking several paths never wait on each other in a circle.
        for p in sorted(set(paths)):
            self._q("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (self.s, p))

    def _delete_rows(self, paths: Sequence[str], delta: Counter) -> tuple[int, int]:
        """Delete files with their chunks, in one statement; their terms go into `delta`
        (negative) and (chunks, tokens) removed are returned, for the caller to apply last.
        No row lock is taken in id order first: the only other writer of chunk rows,
        put_vectors, skips locked rows and never waits on them."""
        n, total, keys, counts = self._q(
            "WITH gone AS (DELETE FROM {s}.chunks WHERE path = ANY(%(p)s) RETURNING terms, dl), "
            "t AS (SELECT k, count(*) AS c FROM gone CROSS JOIN LATERAL skeys(gone.terms) k GROUP BY k) "
            "SELECT (SELECT count(*) FROM gone), (SELECT coalesce(sum(dl), 0) FROM gone), "
            "(SELECT array_agg(k) FROM t), (SELECT array_agg(c) FROM t)", {"p": list(paths)}).fetchone()
        if keys:
            delta.subtract(dict(zip(keys, (int(c) for c in counts))))
        self._q("DELETE FROM {s}.files WHERE path = ANY(%s)", (list(paths),))
        return int(n), int(total)

    def _apply(self, delta: Counter, dn: int, dtotal: int) -> None:
        # Term counters first (sorted), the stats row last: see pg_util.apply_term_deltas.
        pg_util.apply_term_deltas(self.conn, f"{self.s}.terms", delta)
        if dn or dtotal:
            self._q("UPDATE {s}.stats SET n = n + %s, total = total + %s WHERE layer = 'chunks'",
                    (dn, dtotal))

    def replace_file(self, row: FileRow, chunks: Sequence[IndexedChunk]) -> None:
        rows: list[list[Any]] = []
        delta: Counter[str] = Counter()
        for ic in chunks:  # built before the transaction: it holds its locks for less time
            keys, values, dl = chunk_terms(ic)
            delta.update(keys)
            c = ic.chunk
            rows.append([None, row.path, c.start_line, c.end_line, c.language,
                         json.dumps(list(c.symbols)), c.text, ic.embed_hash, keys, values, dl])
        with self.conn.transaction():
            self._lock_paths([row.path])
            old_n, old_total = self._delete_rows([row.path], delta)
            file_id = self._q(
                "INSERT INTO {s}.files(path, abs_path, root, hash, size, mtime_ns, chars) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (row.path, row.abs_path, row.root, row.hash, row.size, row.mtime_ns,
                 row.chars)).fetchone()[0]
            if rows:
                # One statement for the whole file; a chunk whose text was embedded before
                # carries its vector at once.
                cols = list(zip(*rows))
                self._q(
                    "INSERT INTO {s}.chunks(file_id, path, start_line, end_line, language, symbols, "
                    "text, embed_hash, terms, dl, has_vec) SELECT %(f)s, %(path)s, x.s, x.e, x.l, x.y, "
                    "x.t, x.h, x.m::hstore, x.d, EXISTS (SELECT 1 FROM {s}.vectors v WHERE v.hash = x.h) "
                    "FROM unnest(%(s)s::int[], %(e)s::int[], %(l)s::text[], %(y)s::text[], %(t)s::text[], "
                    "%(h)s::text[], %(m)s::text[], %(d)s::int[]) WITH ORDINALITY AS x(s, e, l, y, t, h, m, d, o) "
                    "ORDER BY x.o",
                    {"f": file_id, "path": row.path, "s": list(cols[2]), "e": list(cols[3]),
                     "l": list(cols[4]), "y": list(cols[5]), "t": list(cols[6]), "h": list(cols[7]),
                     "m": [pg_util.hstore_literal(k, v) for k, v in zip(cols[8], cols[9])],
                     "d": list(cols[10])})
            self._apply(delta, len(rows) - old_n, sum(r[-1] for r in rows) - old_total)

    def replace_files(self, batch: Sequence[tuple[FileRow, Sequence[IndexedChunk]]]) -> None:
        """One transaction per file: each takes its own path lock, so several indexers
        writing one namespace never hold many paths at once; a bulk load (stores/postgres/bulk.py)
        writes new files a batch per transaction, chunks by COPY."""
        if self._bulk is not None:
            return self._bulk_write(batch)
        for row, chunks in batch:
            self.replace_file(row, chunks)

    def update_stat(self, path: str, size: int, mtime_ns: int) -> None:
        self._q("UPDATE {s}.files SET size = %s, mtime_ns = %s WHERE path = %s",
                (size, mtime_ns, path))

    def delete_files(self, paths: Iterable[str]) -> None:
        paths = sorted(set(paths))
        for i in range(0, len(paths), 500):  # bounded transactions
            part = paths[i:i + 500]
            with self.conn.transaction():
                self._lock_paths(part)
                delta: Counter[str] = Counter()
                n, total = self._delete_rows(part, delta)
                self._apply(delta, -n, -total)

    def clear(self) -> None:
        with self.conn.transaction():
            self._q("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.s,))
            self._q("LOCK TABLE {s}.files, {s}.chunks, {s}.terms, {s}.stats IN EXCLUSIVE MODE")
            self._q("TRUNCATE {s}.chunks, {s}.files, {s}.terms")
            self._q("UPDATE {s}.stats SET n = 0, total = 0")

    # -- lexical ------------------------------------------------------------
    def _stats(self) -> tuple[int, int]:
        n, total = self._q("SELECT n, total FROM {s}.stats WHERE layer = 'chunks'").fetchone()
        return int(n), int(total)

    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        terms = [t for t in dict.fromkeys(terms) if t]
        if not terms:
            return {}
        return {t: int(d) for t, d in self._q(
            "SELECT lexeme, df FROM {s}.terms WHERE lexeme = ANY(%s) AND df > 0", (terms,))}

    def lexical(self, match: str, limit: int, path_prefix: str | None = None) -> list[tuple[int, float]]:
        terms = [t for p in pg_util.fts5_terms(match) for t in pg_util.unicode61(p, True)]
        n, total = self._stats()
        params = pg_util.bm25_params(terms, self.doc_freqs(terms), n, total, limit)
        if params is None:
            return []
        where = ""
        if path_prefix:
            lo, hi = prefix_bounds(path_prefix)
            where = " AND t.path COLLATE \"C\" >= %(lo)s AND t.path COLLATE \"C\" < %(hi)s"
            params.update(lo=lo, hi=hi)
        sql = pg_util.bm25_sql(f"{self.s}.chunks", "terms", "dl", where)
        return [(int(i), float(s)) for i, s in self.conn.execute(sql, params)]

    def chunk_count(self) -> int:
        return self._stats()[0]

    def file_count(self) -> int:
        return self._q("SELECT count(*) FROM {s}.files").fetchone()[0]

    def count_files_outside(self, hash_prefix: str) -> int:
        """See stores.sqlite.SqliteChunkStore.count_files_outside."""
        return self._q("SELECT count(*) FROM {s}.files WHERE left(hash, %s) <> %s",
                       (len(hash_prefix), hash_prefix)).fetchone()[0]

    def chunks_by_id(self, ids: Sequence[int], with_text: bool = True) -> dict[int, ChunkRow]:
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        text = "c.text" if with_text else "''"
        rows = self._q(f"SELECT c.id, c.path, f.abs_path, c.start_line, c.end_line, {text}, "
                       "c.language, c.symbols, c.embed_hash FROM {s}.chunks c JOIN {s}.files f "
                       "ON f.id = c.file_id WHERE c.id = ANY(%s)", (ids,))
        return {r[0]: ChunkRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], tuple(json.loads(r[7])),
                               r[8]) for r in rows}

    def chunk_ids_for_paths(self, paths: Sequence[str]) -> list[int]:
        return [r[0] for r in self._q("SELECT id FROM {s}.chunks WHERE path = ANY(%s)",
                                      (list(paths),))]

    def chunk_ids_under(self, path_prefix: str) -> np.ndarray:
        lo, hi = prefix_bounds(path_prefix)
        rows = self._q('SELECT id FROM {s}.chunks WHERE path COLLATE "C" >= %s AND path COLLATE "C" < %s', (lo, hi)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    # -- vectors ------------------------------------------------------------
    def pending(self, limit: int) -> list[tuple[str, int]]:
        """(embed_hash, the first chunk id carrying it) for up to `limit` chunks without a
        vector, in id order: a walk of the pending index that stops at `limit` (a GROUP BY
        over every pending chunk cost seconds per batch at 1M chunks)."""
        first: dict[str, int] = {}
        for h, i in self._q("SELECT embed_hash, id FROM {s}.chunks WHERE NOT has_vec "
                            "ORDER BY id LIMIT %s", (limit,)):
            first.setdefault(h, int(i))
        return list(first.items())

    def pending_count(self) -> int:
        return self._q("SELECT count(*) FROM {s}.chunks WHERE NOT has_vec").fetchone()[0]

    def prune_vectors(self) -> None:
        """Drop vectors no chunk refers to any more."""
        self._q("DELETE FROM {s}.vectors v WHERE NOT EXISTS "
                "(SELECT 1 FROM {s}.chunks c WHERE c.embed_hash = v.hash)")

    def scrubbing(self) -> AbstractContextManager[None]:
        """Deletes are the database's: its VACUUM reclaims their rows (nothing to do here)."""
        return nullcontext()

    def vector_matrix(self, path_prefix: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        sql = "SELECT c.id, v.vec FROM {s}.chunks c JOIN {s}.vectors v ON v.hash = c.embed_hash"
        params: list = []
        if path_prefix:
            sql += ' WHERE c.path COLLATE "C" >= %s AND c.path COLLATE "C" < %s'
            params.extend(prefix_bounds(path_prefix))
        return self._rows(sql + " ORDER BY c.id", params)

    def vector_search(self, query: np.ndarray, k: int, path_prefix: str | None = None,
                      allowed: set[int] | None = None,
                      keep: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best (chunk id, cosine), best first, among chunks under `path_prefix`, in
        `allowed` and in `keep` (None = no restriction). Scores are exact inner products."""
        q = np.asarray(query, dtype=np.float32)
        if self._dim() != len(q) or k <= 0:
            return []
        conds: list[str] = []
        params: dict[str, Any] = {}
        if path_prefix:
            conds.append('t.path COLLATE "C" >= %(lo)s AND t.path COLLATE "C" < %(hi)s')
            params["lo"], params["hi"] = prefix_bounds(path_prefix)
        for n, ids in enumerate((allowed, keep)):
            if ids is not None:
                conds.append(f"t.id = ANY(%(ids{n})s)")
                params[f"ids{n}"] = [int(i) for i in ids]
        return self._vector_top(q, k, conds, params)

    # -- what the SQLite store keeps and this one need not (stores.contracts.ChunkStore) --
    def suspend_term_df(self) -> None:
        pass

    def ensure_term_df(self) -> bool:
        return False

    def warm_common(self, budget_s: float, skip: frozenset[str] = frozenset()) -> int:
        return 0

    def size_bytes(self) -> int:
        return int(self._q("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                           "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                           "AND c.relkind IN ('r', 'm')", (self.s,)).fetchone()[0])

    def close(self) -> None:
        self.vector_load_release()  # a pooled connection must not keep a load's lock
        pg_util.release(self.url, self.conn)
