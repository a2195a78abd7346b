"""The embedded default chunk store: one SQLite file per workspace, FTS5 for lexical search
(its strings derived from the chunk rows, not kept twice; a chunk's text deflated:
stores/sqlite/lexical.py), vectors as float16 blobs keyed by the hash of the embedded text
(stores/vec_codec.py). WAL + busy timeout so two processes can share it; every file is
replaced in one transaction, so a kill -9 leaves the previous state or the new one, never
half of a file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ...core.errors import LexicalQueryError, StoreError
from ...core.lazy import np
from ...core.process import long_lived
from .. import fts5
from ..contracts import BM25_WEIGHTS, ChunkRow, FileRow, IndexedChunk, prefix_bounds
from . import impacts as impacts_mod
from . import lexical, migrations, split
from .bulk import SqliteBulkLoad
from .embed_cache import EmbedCache as EmbedCache  # re-exported: services/vectors.py
from .split import split_match as split_match  # re-exported: tests
from .terms import ONE_TOKEN as _ONE_TOKEN
from .terms import TermCounts
from .util import connect, parse_symbols
from .util import scrubbing as util_scrubbing
from .vectors import SqliteVectorTable, matrix

APPLICATION_ID = 0x44524331  # "DRC1": marks a dsh-recall chunk store
# The schema and its numbered migrations: stores/sqlite/migrations.py (CHUNKS).
SCHEMA_VERSION = str(migrations.latest(migrations.CHUNKS))

# chunks.vec_seq: NULL while the chunk has no vector, else the sequence number of the write
# that gave it one. It makes `pending` an index lookup instead of a join over every chunk,
# and tells the memory-mapped vector file (stores/sqlite/vector_file.py) what it is missing.

# SQL is built here, apart from running it, so it can be read and tested on its own.


def lexical_sql(with_prefix: bool) -> str:
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    if not with_prefix:  # FTS rows are chunks one to one: no join (it doubled the cost)
        return (f"SELECT rowid, bm25(chunks_fts, {w}) AS s FROM chunks_fts "
                f"WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?")
    return (
        f"SELECT chunks_fts.rowid, bm25(chunks_fts, {w}) AS s FROM chunks_fts "
        f"JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id "
        f"WHERE chunks_fts MATCH ? AND f.path >= ? AND f.path < ? ORDER BY s LIMIT ?"
    )


# Score lists missing or stale are computed (or patched) before answering while that costs
# at most about this many rows (about 5 ms), or less than FTS5 would: scoring a list
# costs about 2.5 us a row, FTS5 about 0.3-1 us for each row of each of its terms (its
# long-query path less), so an eighth of the query's rows; else FTS5 answers
# (stores/sqlite/impacts.py). IMPACT_TERM_ROWS: what one more statement costs, in rows.
IMPACT_SYNC_ROWS = 2_000
IMPACT_FTS5_SHARE = 1 / 8
IMPACT_TERM_ROWS = 100
# The WAL kept on disk between writes (SQLite's default keeps its largest size for good).
WAL_KEEP_BYTES = 4 << 20
# warm_common looks at most at this many of the commonest terms.
WARM_COMMON_TERMS = 2_000


class SqliteChunkStore(TermCounts, SqliteVectorTable, SqliteBulkLoad):
    """Chunk store over one SQLite file (see stores.contracts.ChunkStore)."""

    keeps_term_df = True  # term_df: suspended by a bulk write, filled by ensure_term_df

    def __init__(self, path: Path):
        self.path = Path(path)
        self.conn = connect(self.path, APPLICATION_ID)
        lexical.register(self.conn)  # the view FTS5 reads its strings from
        # A checkpoint that empties the WAL also cuts it back to this: a large write (a first
        # index, a vector batch) no longer leaves its whole size on disk beside the index.
        self.conn.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")
        self._lex_checked = False
        self._df_cache: dict[str, int] = {}
        self._df_cache_gen: str | None = None
        self._count: int = 0
        self._count_gen: str | None = None
        self._avg, self._avg_gen = (0, 0.0), None
        self._stats: dict[str, tuple[int, int]] = {}
        self._stats_gen: str | None = None
        self._stats_complete = False
        self._impacts: impacts_mod.ImpactCache | None = None
        # A long-lived process computes missing score lists behind the answer (see
        # _lexical_impacts): every store a daemon opens (core.process.long_lived), or one
        # service's store (CodeService.keep_warm: the MCP server, the web viewer); a
        # one-shot CLI leaves them (its process ends with the answer).
        self.warm_behind = long_lived()
        self.use_impacts = True  # False: FTS5 answers every query (tests of that path)
        self._owns_impacts = True
        self._origin = None  # set on a copy (reopen)
        self._spares = []
        self._closed = False
        self._init_schema()

    def _init_schema(self) -> None:
        try:  # an index of this schema already: nothing to write (no write lock either)
            if self.get_meta("schema") == SCHEMA_VERSION:
                return
        except sqlite3.OperationalError:
            pass  # a new file: no meta table yet
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            if migrations.apply(self.conn, migrations.CHUNKS, migrations.chunks_create):
                self._after_migration()
            self.conn.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise StoreError(f"cannot initialise {self.path}: {e}") from e

    def _after_migration(self) -> None:
        # Any other schema wrote here last (an older release keeps no term generations):
        # every term counts as changed now, so no cached score list outlives it.
        self.conn.execute("UPDATE term_df SET gen = ?", (self._write_generation(self.conn),))
        self.conn.execute("DELETE FROM chunk_log")
        self.set_meta("log_from", str(self._write_generation(self.conn)))
        if self.get_meta("uid") is None:  # tells this index's cached scores from another's
            self.set_meta("uid", os.urandom(8).hex())
        self._bump(self.conn)
        if self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0:
            self.set_meta("term_df", "1")  # empty: the table is complete as it is

    class _Tx:
        def __init__(self, conn: sqlite3.Connection):
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, exc_type, exc, tb) -> None:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")

    def _tx(self) -> _Tx:
        return SqliteChunkStore._Tx(self.conn)

    # -- meta ---------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) "
                          "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))

    # -- files --------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        rows = self.conn.execute(
            "SELECT path, abs_path, root, hash, size, mtime_ns, chars FROM files").fetchall()
        return {r[0]: FileRow(*r) for r in rows}

    def file(self, path: str) -> FileRow | None:
        r = self.conn.execute("SELECT path, abs_path, root, hash, size, mtime_ns, chars "
                              "FROM files WHERE path = ?", (path,)).fetchone()
        return FileRow(*r) if r else None

    def _check_lexical(self, conn: sqlite3.Connection) -> None:
        """Before this process's first delete: the view still derives what FTS5 indexed
        (stores/sqlite/lexical.py), else FTS5 is rebuilt from it and the term counts with it."""
        if self._lex_checked:
            return
        self._lex_checked = True
        if lexical.stale(conn):
            lexical.rebuild(conn)
            conn.execute("DELETE FROM term_df")
            self.set_meta("term_df", "0")  # refilled by ensure_term_df, fts5vocab meanwhile
            self._after_migration()

    def _delete_file_rows(self, conn: sqlite3.Connection, path: str, df_gen: int | None) -> None:
        if conn.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone() is None:
            return  # a new file: the delete below would cost more than a first index's insert
        self._check_lexical(conn)
        if df_gen is not None:
            rows = conn.execute("SELECT rowid, body, symbols, path FROM chunks_fts WHERE rowid IN "
                                "(SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id "
                                "WHERE f.path = ?)", (path,)).fetchall()
            self._add_term_df(conn, [" ".join(r[1:]) for r in rows], -1, df_gen)
            conn.executemany("INSERT INTO chunk_log(gen, id, inserted) VALUES(?, ?, 0)",
                             [(df_gen, r[0]) for r in rows])
        conn.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT c.id FROM chunks c "
                     "JOIN files f ON f.id = c.file_id WHERE f.path = ?)", (path,))
        conn.execute("DELETE FROM files WHERE path = ?", (path,))  # cascades to chunks

    def replace_file(self, row: FileRow, chunks: Sequence[IndexedChunk]) -> None:
        self.replace_files([(row, chunks)])

    def replace_files(self, batch: Sequence[tuple[FileRow, Sequence[IndexedChunk]]]) -> None:
        """Replace several files in one transaction: all of them or none. FTS5 writes a new
        segment (and merges old ones) at every commit, so a commit per file cost more than
        tokenizing the file did."""
        if not batch:
            return
        with self._tx() as conn:
            df_gen = self._term_df_gen(conn)
            for row, chunks in batch:
                self._replace_in(conn, row, chunks, df_gen)
            self._trim_log(conn, df_gen)
            self._bump(conn)

    def _replace_in(self, conn: sqlite3.Connection, row: FileRow, chunks: Sequence[IndexedChunk],
                    df_gen: int | None) -> None:
        if not self._bulk:  # a bulk load (stores/sqlite/bulk.py) writes only new files
            self._delete_file_rows(conn, row.path, df_gen)
        # The lexical strings are kept once, in the rows FTS5's view derives them from: a
        # chunk keeps its own only where they differ from the derived (stores/sqlite/lexical.py).
        path_lex = lexical.file_path_lex(chunks)
        over = [lexical.overrides(ic, path_lex) for ic in chunks]
        cur = conn.execute(
            "INSERT INTO files(path, abs_path, root, hash, size, mtime_ns, chars, lex_path) "
            "VALUES(?,?,?,?,?,?,?,?)",
            (row.path, row.abs_path, row.root, row.hash, row.size, row.mtime_ns, row.chars, path_lex))
        file_id = cur.lastrowid
        # Ids handed out here, so both tables are filled by one executemany each.
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0]
        conn.executemany(
            "INSERT INTO chunks(id, file_id, start_line, end_line, language, symbols, text, "
            "embed_hash, lex_body, lex_symbols, lex_path) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
            [(first + n, file_id, ic.chunk.start_line, ic.chunk.end_line, ic.chunk.language,
              json.dumps(list(ic.chunk.symbols)), lexical.pack_text(ic.chunk.text), ic.embed_hash, *over[n])
             for n, ic in enumerate(chunks)])
        conn.executemany("INSERT INTO chunks_fts(rowid, body, symbols, path) VALUES(?,?,?,?)",
                         [(first + n, ic.lexical, ic.symbols_lexical, ic.path_lexical)
                          for n, ic in enumerate(chunks)])
        if df_gen is not None:
            self._add_term_df(conn, [f"{ic.lexical} {ic.symbols_lexical} {ic.path_lexical}"
                                     for ic in chunks], 1, df_gen)
            conn.executemany("INSERT INTO chunk_log(gen, id, inserted) VALUES(?, ?, 1)",
                             [(df_gen, first + n) for n in range(len(chunks))])
        # Chunks whose text was embedded before carry its vector at once.
        if chunks and not self._bulk and conn.execute(
                "SELECT 1 FROM chunks c JOIN vectors v ON v.hash = c.embed_hash "
                "WHERE c.file_id = ? LIMIT 1", (file_id,)).fetchone():
            conn.execute("UPDATE chunks SET vec_seq = ? WHERE file_id = ? AND embed_hash IN "
                         "(SELECT hash FROM vectors)", (self._next_vec_seq(conn), file_id))

    def update_stat(self, path: str, size: int, mtime_ns: int) -> None:
        self.conn.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?",
                          (size, mtime_ns, path))

    def delete_files(self, paths: Iterable[str]) -> None:
        with self._tx() as conn:
            df_gen = self._term_df_gen(conn)
            for p in paths:
                self._delete_file_rows(conn, p, df_gen)
            self._trim_log(conn, df_gen)
            self._bump(conn)

    def clear(self) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM chunks")
            conn.execute("DELETE FROM files")
            # Emptied: chunks_fts made anew over the view (an earlier release's table kept
            # its own content), empty as the rows it derives from.
            lexical.remake_external(conn)
            conn.execute("DELETE FROM term_df")
            self.set_meta("term_df", "1")
            conn.execute("DELETE FROM chunk_log")  # every row went: no list is patched across
            self.set_meta("log_from", str(self._write_generation(conn)))
            self._bump(conn)

    # -- lexical ------------------------------------------------------------
    def _bm25(self, match: str, limit: int, path_prefix: str | None) -> list[tuple[int, float]]:
        params: list = [match]
        if path_prefix:
            params.extend(prefix_bounds(path_prefix))
        params.append(limit)
        rows = self.conn.execute(lexical_sql(bool(path_prefix)), params).fetchall()
        return [(r[0], -r[1]) for r in rows]  # bm25() is lower-is-better; flip it

    def lexical(self, match: str, limit: int, path_prefix: str | None = None) -> list[tuple[int, float]]:
        """The `limit` best chunks by FTS5 bm25 for `match` (see `_lexical`); a MATCH FTS5
        refuses is a LexicalQueryError."""
        try:
            with self.impacts.foreground():
                return self._lexical(match, limit, path_prefix)
        except sqlite3.OperationalError as e:
            raise LexicalQueryError(f"lexical query refused: {e}") from e

    def _lexical(self, match: str, limit: int, path_prefix: str | None) -> list[tuple[int, float]]:
        """The `limit` best chunks by FTS5 bm25 for `match`, as one full query ranks them:
        summed from cached single-term scores when every term has one (stores/sqlite/impacts.py),
        else from FTS5, cheaper when the query mixes rare and common terms (stores/sqlite/split.py)."""
        if not path_prefix and self.use_impacts:
            hits = self._lexical_impacts(match, limit)
            if hits is not None:
                return hits
        return split.answer(match, limit, path_prefix, self._bm25, self.doc_freqs, self.chunk_count)

    def _lexical_impacts(self, match: str, limit: int) -> list[tuple[int, float]] | None:
        """The answer from cached single-term scores, or None for FTS5 to answer: a phrase
        of several tokens or a non-ASCII one, term_df incomplete, or lists to compute or
        patch first that would cost more than FTS5 itself (a long-lived process computes
        those behind the answer, when `warm_behind` is set)."""
        words = fts5.fts5_terms(match)
        if not words or not all(w.isascii() and _ONE_TOKEN.fullmatch(w) for w in words):
            return None
        weights = Counter(w.lower() for w in words)
        stats = self._term_stats(list(weights))
        if stats is None:
            return None
        if not stats:
            return []  # no row holds any of the terms
        nrow, avgdl = self._averages()
        if not nrow:
            return None
        self.impacts.fit(nrow)
        found, stale, missing = self.impacts.lookup(stats, avgdl)
        todo = list(stale) + missing
        if todo:
            # Rows to read before answering: every row of a missing term, a tenth of a stale
            # one's (the log's rows and FTS5's count of the term), and a little per query.
            cost = (sum(stats[t][0] for t in missing) + sum(stats[t][0] // 10 for t in stale)
                    + IMPACT_TERM_ROWS * len(todo))
            if cost > max(IMPACT_SYNC_ROWS, IMPACT_FTS5_SHARE * sum(df for df, _ in stats.values())):
                if self.warm_behind:
                    self.impacts.warm(todo, self._warm_conn, self._warm_one)
                return None
            fresh = self._refresh_lists(todo, stale)
            if len(fresh) < len(todo):
                return None
            found.update(fresh)
        return impacts_mod.top([(found[t], float(w)) for t, w in weights.items() if t in found],
                               nrow, limit)

    def warm_common(self, budget_s: float, skip: frozenset[str] = frozenset()) -> int:
        """After a large index run: bring the score lists of the commonest terms up to date,
        commonest first, until the budget runs out; returns how many were brought up to date
        (a failing database: StoreError; the lists are only a cache).

        Those are the terms a one-shot CLI never computes a list for (a list costs more than
        its row share of one FTS5 query), so without this every CLI query holding one was
        answered by FTS5 in full. Terms in `skip` (stopwords a query drops) are left out."""
        try:
            return self._warm_common(budget_s, skip)
        except sqlite3.Error as e:
            raise StoreError(f"cannot warm score lists of {self.path}: {e}") from e

    def _warm_common(self, budget_s: float, skip: frozenset[str]) -> int:
        if self.get_meta("term_df") != "1":
            return 0
        terms = [t for (t,) in self.conn.execute(
            "SELECT term FROM term_df WHERE df > ? ORDER BY df DESC LIMIT ?",
            (IMPACT_SYNC_ROWS, WARM_COMMON_TERMS)) if t not in skip]
        if not terms:
            return 0
        stats = self._term_stats([t for t in terms if t.isascii() and _ONE_TOKEN.fullmatch(t)])
        if not stats:
            return 0
        found, stale, missing = self.impacts.lookup(stats, self._averages()[1])
        todo = [t for t in stats if t not in found]
        fresh = self._refresh_lists(todo, stale, time.monotonic() + budget_s)
        return len(fresh)

    def chunk_count(self) -> int:
        gen = self.get_meta("generation")
        if self._count_gen != gen or gen is None:
            self._count = self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            self._count_gen = gen
        return self._count

    def file_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM files").fetchone()[0]

    def count_files_outside(self, hash_prefix: str) -> int:
        """Files whose hash column does not start with `hash_prefix` (notes keep their
        chunker spec there): one count, not every row loaded."""
        return self.conn.execute("SELECT count(*) FROM files WHERE substr(hash, 1, ?) != ?",
                                 (len(hash_prefix), hash_prefix)).fetchone()[0]

    def chunks_by_id(self, ids: Sequence[int], with_text: bool = True) -> dict[int, ChunkRow]:
        """Rows of these chunk ids that exist. `with_text=False` leaves `text` empty: ranking
        needs paths and symbols for a few hundred candidates, the text only for the answer."""
        out: dict[int, ChunkRow] = {}
        ids = list(ids)
        text = "c.text" if with_text else "''"
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            q = ",".join("?" * len(part))
            for r in self.conn.execute(
                    f"SELECT c.id, f.path, f.abs_path, c.start_line, c.end_line, {text}, "
                    f"c.language, c.symbols, c.embed_hash FROM chunks c JOIN files f "
                    f"ON f.id = c.file_id WHERE c.id IN ({q})", part):
                out[r[0]] = ChunkRow(r[0], r[1], r[2], r[3], r[4], lexical.unpack_text(r[5]), r[6],
                                     parse_symbols(r[7]), r[8])
        return out

    def chunk_ids_for_paths(self, paths: Sequence[str]) -> list[int]:
        out: list[int] = []
        for i in range(0, len(paths), 500):
            part = list(paths[i:i + 500])
            q = ",".join("?" * len(part))
            out += [r[0] for r in self.conn.execute(
                f"SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path IN ({q})",
                part)]
        return out

    # -- vectors ------------------------------------------------------------
    def pending(self, limit: int) -> list[tuple[str, int]]:
        """(embed_hash, the first chunk id carrying it) for up to `limit` chunks whose vector
        is missing: code chunks in id order, then the rest (prose, configuration) in id order. A walk of the vec_seq index that stops at `limit` (grouping
        every pending chunk per batch made a first embedding quadratic)."""
        first: dict[str, int] = {}
        # Code first (the partial index of pending code chunks), then prose and configuration:
        # a first search asks for code, and a killed job's vectors should be code's.
        rows = self.conn.execute(
            f"SELECT embed_hash, id FROM chunks INDEXED BY chunks_pending_code WHERE "
            f"{migrations.PENDING_CODE_WHERE} ORDER BY id LIMIT ?", (limit,)).fetchall()
        if len(rows) < limit:
            rows += self.conn.execute(
                "SELECT embed_hash, id FROM chunks INDEXED BY chunks_vec_seq WHERE vec_seq IS NULL "
                "ORDER BY id LIMIT ?", (limit,)).fetchall()
        for h, cid in rows:
            first.setdefault(h, cid)
        return list(first.items())[:limit]

    def pending_count(self) -> int:
        """Chunks without a vector: an index range, not a join over every chunk."""
        return self.conn.execute("SELECT count(*) FROM chunks WHERE vec_seq IS NULL").fetchone()[0]

    def prune_vectors(self) -> None:
        """Drop vectors no chunk refers to any more."""
        self.conn.execute("DELETE FROM vectors WHERE hash NOT IN (SELECT embed_hash FROM chunks)")

    @contextmanager
    def scrubbing(self) -> Iterator[None]:
        """What is deleted inside is overwritten, in the index, its WAL and its score-list
        cache (util.scrubbing; the lists are all dropped): for a note the user forgot."""
        with util_scrubbing(self.conn, ("chunks_fts",)):
            yield
        self.impacts.clear(scrub=True)

    def vector_matrix(self, path_prefix: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(chunk ids, matrix of unit vectors) for every chunk that has a vector, read from
        SQLite: the exact reference the memory-mapped file is checked against."""
        sql = ("SELECT c.id, v.vec FROM chunks c JOIN vectors v ON v.hash = c.embed_hash "
               "JOIN files f ON f.id = c.file_id")
        params: list = []
        if path_prefix:
            sql += " WHERE f.path >= ? AND f.path < ?"
            params.extend(prefix_bounds(path_prefix))
        return matrix(self.conn.execute(sql, params).fetchall())

    def chunk_ids_under(self, path_prefix: str) -> np.ndarray:
        """Ids of the chunks of files under a directory prefix."""
        rows = self.conn.execute(
            "SELECT c.id FROM files f JOIN chunks c ON c.file_id = f.id "
            "WHERE f.path >= ? AND f.path < ?", prefix_bounds(path_prefix)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def size_bytes(self) -> int:
        total = 0
        for p in (self.path, Path(str(self.path) + "-wal"), self.impacts_path):
            if p.exists():
                total += p.stat().st_size
        if self.vector_dir.is_dir():
            total += sum(p.stat().st_size for p in self.vector_dir.iterdir() if p.is_file())
        return total

    def close(self) -> None:
        if self._origin is not None and self._origin._park(self):
            return  # a copy (reopen), kept for the next one
        self._end_copies()
        if self._impacts is not None and self._owns_impacts:
            self._impacts.close()
        self.conn.close()

