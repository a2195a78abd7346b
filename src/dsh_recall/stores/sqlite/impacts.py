"""Per-term bm25 impacts: an OR query's FTS5 score, summed from cached single-term scores.

FTS5's bm25() of an OR query is a sum over its phrases, and a phrase's share of a row's
score depends only on that phrase, the row, the row count and the average row length:

    idf(N, n_t) * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avglen))

So the single-term query `"t"` gives, for every row holding t, exactly what t adds to that
row's score in any query. An entry keeps that score over the idf (the row's weight for t),
and a query multiplies it by the idf of today's row count. FTS5 pays bm25() on every row a query matches, plus a walk of each
phrase's whole posting list for its idf: 25-100 ms at 100k chunks for a query with a common
word, hundreds for a pasted issue. The cached scores of a term are summed with numpy in
about 1 ms per 50k rows, for the same ranking (scores agree to about 1e-12).

An entry is valid while no write has touched its term since it was computed: term_df keeps,
per term, the index generation of the last write that added or removed a row holding it
(stores/sqlite/chunks.py). Writes that leave the term alone change only the row count and average
length: the idf follows the row count exactly, and an entry whose average length has moved
by more than AVGDL_TOLERANCE is computed again. An entry older than a write that touched its
term is patched from the index's change log (`patch`): the changed rows dropped, the added
ones scored, which costs a few rows instead of every row holding the term.

Entries live in memory (bounded) and in a cache file beside the index, so a cold CLI reads
what the server computed. The file is only a cache: any failure to open, read or write it
leaves the answer to memory or to FTS5.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from ...core.lazy import np
from ...core.text import fts_quote
from .. import fts5
from . import util
from .impact_sum import Entry, top  # noqa: F401  (callers use impacts.Entry and impacts.top)
from .util import private_db

AVGDL_TOLERANCE = 1e-3  # relative drift of the average row length an entry tolerates
MEMORY_POSTINGS = 4_000_000  # rows held in memory over all terms (12 bytes each)...
# ...or this many per chunk of the index, if more: at 1M chunks one pasted issue's lists hold
# about a million rows, and a server answering a few of them read every list back from the
# cache file each time (10 ms a query). At 8 a chunk, 20 queries in turn (10 pasted issues)
# still re-read lists every query: 7 ms each, and after a ripgrep scan of the tree had pushed
# the cache file out of the page cache, API p50 42 ms; 16 a chunk (192 MB at 1M): 32 ms.
MEMORY_PER_CHUNK = 16
# The longest the background warmer waits for the queries answering now before its next term.
WARM_YIELD_S = 1.0
FILE_BYTES = 1 << 30  # past this the cache file is emptied (checked every 32 writes)
CACHE_APPLICATION_ID = 0x44524349  # "DRCI"
FORMAT = 2  # entries hold weights (bm25 over idf); 1 held scores


def averages(conn: sqlite3.Connection, fts: str) -> tuple[int, float]:
    """FTS5's row count and average row length (all columns), as its bm25() reads them:
    the averages record of the FTS table (rowid 1 of its _data table)."""
    row = conn.execute(f"SELECT block FROM {fts}_data WHERE id = 1").fetchone()
    vals = _varints(row[0]) if row and row[0] else []
    if not vals or not vals[0]:
        return 0, 0.0
    return vals[0], sum(vals[1:]) / vals[0]


def _varints(b: bytes) -> list[int]:
    """SQLite's varints (FTS5 writes its averages record with them)."""
    out, i = [], 0
    while i < len(b):
        v = 0
        for k in range(9):
            x = b[i]
            i += 1
            if k == 8:
                v = (v << 8) | x
                break
            v = (v << 7) | (x & 0x7F)
            if not x & 0x80:
                break
        out.append(v)
    return out


def compute(conn: sqlite3.Connection, term: str, score_sql: str, fts: str) -> Entry | None:
    """One term's entry, read in one snapshot: the generation first, so an entry never
    claims a newer generation than the rows it holds. None if the rows do not fit."""
    own_tx = not conn.in_transaction
    if own_tx:
        conn.execute("BEGIN")
    try:
        gen = int(_meta(conn).get("generation") or 0)
        nrow, avgdl = averages(conn, fts)
        rows = conn.execute(score_sql, (fts_quote(term),)).fetchall()
    finally:
        if own_tx:
            conn.execute("COMMIT")
    ids, weights = _rows(rows, fts5.idf(nrow, len(rows)))
    if ids is None:
        return None
    return Entry(gen, nrow, avgdl, ids, weights)


def _rows(rows: list, idf: float) -> tuple[np.ndarray | None, np.ndarray]:
    """(int32 ids, weights) of (rowid, bm25()) rows; None ids when a rowid does not fit."""
    if not rows:
        return np.zeros(0, np.int32), np.zeros(0, np.float64)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    if ids.max() >= 2**31 or ids.min() < 0:
        return None, np.zeros(0)
    weights = -np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows)) / idf
    return ids.astype(np.int32), weights


PATCH_ROWS = 2_000  # a log longer than this (or than half the list) since the entry: compute


def patch(conn: sqlite3.Connection, term: str, e: Entry, score_sql: str, fts: str) -> Entry | None:
    """Bring `e` up to date from the change log (stores/sqlite/chunks.py chunk_log), or None when
    it cannot be: the log does not reach back to it, it is long, or the average row length
    has moved past the tolerance."""
    own_tx = not conn.in_transaction
    if own_tx:
        conn.execute("BEGIN")
    try:
        meta = _meta(conn)
        gen = int(meta.get("generation") or 0)
        if meta.get("log_from") is None or e.gen < int(meta["log_from"]):
            return None
        nrow, avgdl = averages(conn, fts)
        if abs(e.avgdl - avgdl) > AVGDL_TOLERANCE * avgdl:
            return None
        log = conn.execute("SELECT id, inserted FROM chunk_log WHERE gen > ? LIMIT ?",
                           (e.gen, max(PATCH_ROWS, e.n // 2) + 1)).fetchall()
        if len(log) > max(PATCH_ROWS, e.n // 2):
            return None
        added = sorted({i for i, ins in log if ins})
        rows: list = []
        if added:
            lo, hi = added[0], added[-1]
            if hi - lo < 4 * len(added) + 1_000:  # new rows sit together at the end: a range
                got = conn.execute(score_sql + " AND rowid BETWEEN ? AND ?",
                                   (fts_quote(term), lo, hi)).fetchall()
            else:
                q = ",".join("?" * len(added[:500]))
                if len(added) > 500:
                    return None
                got = conn.execute(score_sql + f" AND rowid IN ({q})",
                                   (fts_quote(term), *added)).fetchall()
            keep_added = set(added)
            rows = [r for r in got if r[0] in keep_added]
    finally:
        if own_tx:
            conn.execute("COMMIT")
    changed = np.fromiter((i for i, _ in log), dtype=np.int64, count=len(log))
    kept = ~np.isin(e.ids, changed) if len(changed) else np.ones(e.n, dtype=bool)
    n = int(kept.sum()) + len(rows)
    ids, weights = _rows(rows, fts5.idf(nrow, n))
    if ids is None:
        return None
    return Entry(gen, nrow, e.avgdl, np.concatenate([e.ids[kept], ids]),
                 np.concatenate([e.weights[kept], weights]))


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    """The index's generation and the generation its change log starts after."""
    return dict(conn.execute("SELECT key, value FROM meta WHERE key IN "
                             "('generation', 'log_from')").fetchall())


class ImpactCache:
    """Entries in memory (least recently used out past `budget` rows) over a cache file.
    Thread-safe; a background warmer may fill it (`warm`)."""

    def __init__(self, path: Path | None, index_uid: str = ""):
        self.path = path
        self.budget = MEMORY_POSTINGS  # rows; `fit` raises it for a large index
        self.index_uid = index_uid  # entries of another index (same path, made anew) go
        self._mem: OrderedDict[str, Entry] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._local = threading.local()
        self._file_ok = path is not None
        self._queue: list[str] = []
        self._queued: set[str] = set()
        self._warmer: threading.Thread | None = None
        self._closed = False
        self._writes = 0
        self._busy = 0  # queries answering now: the warmer waits for them (`foreground`)
        self._idle = threading.Condition(self._lock)

    # -- the cache file -----------------------------------------------------------
    def _file(self) -> sqlite3.Connection | None:
        if not self._file_ok:
            return None
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        conn = None
        if self.path is None:
            return None
        try:
            private_db(self.path)
            conn = sqlite3.connect(str(self.path), timeout=0.2, isolation_level=None,
                                   check_same_thread=False)
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            if app not in (0, CACHE_APPLICATION_ID):
                raise sqlite3.DatabaseError("not an impact cache")
            if app == 0:
                conn.execute(f"PRAGMA application_id = {CACHE_APPLICATION_ID}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = OFF")  # a cache: a lost write is recomputed
            conn.execute("CREATE TABLE IF NOT EXISTS impact (term TEXT PRIMARY KEY, "
                         "gen INTEGER NOT NULL, nrow INTEGER NOT NULL, avgdl REAL NOT NULL, "
                         "ids BLOB NOT NULL, scores BLOB NOT NULL)")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'index'").fetchone()
            if row is None or row[0] != f"{self.index_uid}:{FORMAT}":
                # Generations count from 1 again in an index made anew at the same path.
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM impact")
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('index', ?)",
                             (f"{self.index_uid}:{FORMAT}",))
                conn.execute("COMMIT")
        except (sqlite3.Error, OSError):
            self._file_ok = False  # memory only for this process
            if conn is not None:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            return None
        self._local.conn = conn
        return conn

    def _read_file(self, terms: list[str]) -> dict[str, Entry]:
        conn = self._file()
        if conn is None or not terms:
            return {}
        out: dict[str, Entry] = {}
        try:
            for i in range(0, len(terms), 500):
                part = terms[i:i + 500]
                q = ",".join("?" * len(part))
                for t, gen, nrow, avgdl, ids, scores in conn.execute(
                        f"SELECT term, gen, nrow, avgdl, ids, scores FROM impact "
                        f"WHERE term IN ({q})", part):
                    a = np.frombuffer(ids, dtype=np.int32)
                    s = np.frombuffer(scores, dtype=np.float64)
                    if len(a) == len(s):
                        out[t] = Entry(gen, nrow, avgdl, a, s)
        except sqlite3.Error:
            return out
        return out

    def _write_file(self, items: list[tuple[str, Entry]]) -> None:
        conn = self._file()
        if conn is None or not items:
            return
        try:
            self._writes += 1
            if self._writes % 32 == 0:
                pages = conn.execute("PRAGMA page_count").fetchone()[0]
                if pages * conn.execute("PRAGMA page_size").fetchone()[0] > FILE_BYTES:
                    conn.execute("DELETE FROM impact")  # its pages are reused from here on
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT OR REPLACE INTO impact(term, gen, nrow, avgdl, ids, scores) "
                "VALUES(?,?,?,?,?,?)",
                [(t, e.gen, e.nrow, e.avgdl, e.ids.tobytes(), e.weights.tobytes())
                 for t, e in items])
            conn.execute("COMMIT")
        except sqlite3.Error:  # busy, full, read-only: the entries stay in memory
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    # -- lookups --------------------------------------------------------------
    def lookup(self, stats: dict[str, tuple[int, int]],
               avgdl: float) -> tuple[dict[str, Entry], dict[str, Entry], list[str]]:
        """For these terms ({term: (df, term generation)}): the valid entries, the stale
        ones (a write touched the term since; `patch` may bring them up to date), and the
        terms with none."""
        found: dict[str, Entry] = {}
        stale: dict[str, Entry] = {}
        with self._lock:
            for t, (df, tgen) in stats.items():
                e = self._mem.get(t)
                if e is not None:
                    self._mem.move_to_end(t)
                    (found if e.valid(tgen, df, avgdl, AVGDL_TOLERANCE) else stale)[t] = e
        rest = [t for t in stats if t not in found and t not in stale]
        if rest:
            for t, e in self._read_file(rest).items():
                self._remember(t, e)
                (found if e.valid(stats[t][1], stats[t][0], avgdl, AVGDL_TOLERANCE) else stale)[t] = e
        return found, stale, [t for t in stats if t not in found and t not in stale]

    def fit(self, index_rows: int) -> None:
        """Hold up to MEMORY_PER_CHUNK rows per row of an index this large."""
        self.budget = max(MEMORY_POSTINGS, MEMORY_PER_CHUNK * index_rows)

    def peek(self, term: str) -> Entry | None:
        """The entry held in memory for a term, valid or not."""
        with self._lock:
            return self._mem.get(term)

    def _remember(self, term: str, e: Entry) -> None:
        with self._lock:
            old = self._mem.pop(term, None)
            if old is not None:
                self._held -= old.n
            self._mem[term] = e
            self._held += e.n
            while self._held > self.budget and len(self._mem) > 1:
                _, gone = self._mem.popitem(last=False)
                self._held -= gone.n

    def store(self, items: list[tuple[str, Entry]]) -> None:
        for t, e in items:
            self._remember(t, e)
        self._write_file(items)

    # -- background warming (long-lived processes) ----------------------------------
    def warm(self, terms: list[str], make_conn, compute_one) -> None:
        """Compute these terms' entries on a background thread with its own connection
        (`make_conn()`); `compute_one(conn, term)` returns an Entry or None."""
        with self._lock:
            if self._closed:
                return
            for t in terms:
                if t not in self._queued:
                    self._queued.add(t)
                    self._queue.append(t)
            if self._warmer is not None and self._warmer.is_alive():
                return
            self._warmer = threading.Thread(target=self._warm_loop, args=(make_conn, compute_one),
                                            name="dsh-recall-impacts", daemon=True)
            self._warmer.start()

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """While a query answers, the warmer starts no new term: on two cores a list
        computed behind the answer took a core from the FTS5 query it was meant to spare."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                if not self._busy:
                    self._idle.notify_all()

    def _warm_loop(self, make_conn, compute_one) -> None:
        try:
            conn = make_conn()
        except Exception:  # noqa: BLE001 - a cache: the query path answers without it
            with self._lock:
                self._queue.clear()
                self._queued.clear()
            return
        try:
            while True:
                with self._lock:
                    # Queries asked back to back without a pause still let it go on.
                    self._idle.wait_for(lambda: not self._busy or self._closed, WARM_YIELD_S)
                    if self._closed or not self._queue:
                        self._queue.clear()
                        self._queued.clear()
                        return
                    term = self._queue.pop(0)
                try:
                    e = compute_one(conn, term)
                except sqlite3.Error:
                    e = None
                with self._lock:
                    self._queued.discard(term)
                if e is not None:
                    self.store([(term, e)])
        finally:
            conn.close()

    def clear(self, scrub: bool = False) -> None:
        """Forget every entry, here and in the file (benches measure first sight); `scrub`:
        the file's deleted pages overwritten too (a note the user forgot named its terms)."""
        with self._lock:
            self._mem.clear()
            self._held = 0
        conn = self._file()
        if conn is not None:
            try:
                with util.scrubbing(conn) if scrub else nullcontext():
                    conn.execute("DELETE FROM impact")
            except sqlite3.Error:
                pass

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Tests and benches: until the warmer has emptied its queue."""
        w = self._warmer
        if w is not None:
            w.join(timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._queue.clear()
            self._idle.notify_all()  # a warmer waiting on a query stops now
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass
            self._local.conn = None


_SHARED: dict[tuple[str, str], ImpactCache] = {}  # (cache file, index uid) -> its cache
_SHARED_LOCK = threading.Lock()
SHARED_MAX = 8


def shared(path: Path, index_uid: str) -> ImpactCache:
    """One cache per index in this process (at most SHARED_MAX; the oldest is closed), for a
    long-lived process that opens a store per request (the CLI daemon): its lists stay in
    memory from one request to the next, under one budget and one warmer. With a cache per
    store, each request read its lists back from the file, and each closed store's warmer
    went on with its term: at 1M chunks the daemon's memory grew by about 20 MB a request."""
    key = (str(Path(path).resolve()), index_uid)
    with _SHARED_LOCK:
        cache = _SHARED.pop(key, None)
        if cache is None or cache._closed:
            cache = ImpactCache(path, index_uid)
            if len(_SHARED) >= SHARED_MAX:
                _SHARED.pop(next(iter(_SHARED))).close()
        _SHARED[key] = cache  # the newest last
        return cache

