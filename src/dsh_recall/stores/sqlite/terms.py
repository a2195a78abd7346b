"""What the SQLite chunk store keeps per term, beside FTS5: document frequencies (term_df),
the log of the rows each write changed (chunk_log), and the upkeep of the cached
single-term score lists (stores/sqlite/impacts.py) made from them. Mixed into
SqliteChunkStore (stores/sqlite/chunks.py), which runs the queries that read them.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.process import long_lived
from .. import fts5
from ..contracts import BM25_WEIGHTS
from . import impacts as impacts_mod

# term_df: the chunks holding each ASCII term (what fts5vocab counts by walking the term's
# whole posting list: 15-25 ms for a pasted issue's terms at 100k chunks), kept by every
# write in the same transaction. Meta 'term_df' = '1' once it is complete: an index made
# before it has the table filled by its next indexer (`ensure_term_df`); until then, and
# for non-ASCII terms (FTS5 folds their diacritics), fts5vocab answers.
# term_df.gen: the index generation of the last write that added or removed a row holding
# the term. A cached single-term score list (stores/sqlite/impacts.py) computed at that generation
# or later is still that term's, row for row.
# chunk_log: the chunk ids each write removed or added, by generation, from meta 'log_from'
# on (writes while term_df is suspended are not logged). A score list older than a write
# that touched its term is brought up to date from it (`_patch_impact`): drop the changed
# rows, score the added ones, instead of scoring every row holding the term again. Kept to
# about LOG_ROWS rows.
LOG_ROWS = 200_000

# One unicode61 token (tokenchars '_'): letters, digits, '_' and non-ASCII word characters.
ONE_TOKEN = re.compile(r"[\w]+")

# reopen: closed copies kept per store for the next worker thread (a search's vector layer
# and title ranking each take one).
SPARE_COPIES = 2
_SPARE_LOCK = threading.Lock()


class TermCounts:
    """Per-term upkeep of a SQLite chunk store (state set up by SqliteChunkStore)."""

    conn: sqlite3.Connection
    path: Path
    _impacts: impacts_mod.ImpactCache | None
    _owns_impacts: bool
    warm_behind: bool
    use_impacts: bool
    _df_cache: dict[str, int]
    _df_cache_gen: str | None
    _avg: tuple[int, float]
    _avg_gen: str | None
    _stats: dict[str, tuple[int, int]]
    _stats_gen: str | None
    _stats_complete: bool
    _origin: TermCounts | None  # the store this one is a copy of (reopen)
    _spares: list[TermCounts]  # closed copies kept for the next reopen
    _closed: bool

    if TYPE_CHECKING:  # the store's own calls these use
        def get_meta(self, key: str) -> str | None: ...
        def set_meta(self, key: str, value: str) -> None: ...
        def _tx(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def _term_df_gen(self, conn: sqlite3.Connection) -> int | None:
        """The generation this write transaction stamps on the terms it counts, or None
        while term_df is not kept. Read inside each write transaction: another process may
        have completed the table since this one opened the index."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'term_df'").fetchone()
        return self._write_generation(conn) if row and row[0] == "1" else None

    def _trim_log(self, conn: sqlite3.Connection, gen: int | None) -> None:
        """Every 64 writes, keep the newest half of the log once it passes LOG_ROWS rows."""
        if gen is None or gen % 64:
            return
        if conn.execute("SELECT count(*) FROM chunk_log").fetchone()[0] <= LOG_ROWS:
            return
        cut = conn.execute("SELECT gen FROM chunk_log ORDER BY gen DESC LIMIT 1 OFFSET ?",
                           (LOG_ROWS // 2,)).fetchone()[0]
        conn.execute("DELETE FROM chunk_log WHERE gen <= ?", (cut,))
        self.set_meta("log_from", str(cut))

    @staticmethod
    def _write_generation(conn: sqlite3.Connection) -> int:
        """The generation the current write transaction ends at (`_bump` runs last)."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) + 1 if row else 1

    @staticmethod
    def _add_term_df(conn: sqlite3.Connection, texts: Sequence[str], sign: int, gen: int) -> None:
        """Count each ASCII term once per chunk text (all its columns, space-separated),
        as FTS5's unicode61 makes terms of it, and stamp it with this write's generation."""
        counts: Counter[str] = Counter()
        for text in texts:
            terms = set(text.split())
            if not text.isascii():  # FTS5 splits and folds these itself: "naïve" -> "naive"
                odd = {t for t in terms if not t.isascii()}
                terms = (terms - odd) | {u for t in odd for u in fts5.unicode61(t, True)}
            counts.update(t for t in terms if t.isascii())
        if not counts:
            return
        conn.executemany("INSERT INTO term_df(term, df, gen) VALUES(?, ?, ?) ON CONFLICT(term) "
                         "DO UPDATE SET df = df + excluded.df, gen = excluded.gen",
                         [(t, sign * n, gen) for t, n in counts.items()])
        if sign < 0:
            conn.executemany("DELETE FROM term_df WHERE term = ? AND df <= 0",
                             [(t,) for t in counts])

    def suspend_term_df(self) -> None:
        """Before many files are written: counting every chunk's terms costs a first index
        about a third more than refilling the table from fts5vocab once at the end
        (`ensure_term_df`); fts5vocab answers meanwhile, and after a kill."""
        with self._tx() as conn:
            self.set_meta("term_df", "0")
            self._bump(conn)  # a new generation: no process keeps reading the table

    def ensure_term_df(self) -> bool:
        """Fill term_df from fts5vocab once, for an index made before it. The caller holds
        the indexer lock. Returns True when it filled it."""
        if self.get_meta("term_df") == "1":
            return False
        with self._tx() as conn:
            conn.execute("DELETE FROM term_df")
            rows = conn.execute("SELECT term, doc FROM chunks_vocab").fetchall()
            gen = self._write_generation(conn)  # writes went uncounted: every term changed
            conn.executemany("INSERT INTO term_df(term, df, gen) VALUES(?, ?, ?)",
                             [(t, d, gen) for t, d in rows if t.isascii()])
            self.set_meta("term_df", "1")
            conn.execute("DELETE FROM chunk_log")  # the writes since were not logged
            self.set_meta("log_from", str(gen))
            self._bump(conn)
        return True

    def _bump(self, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO meta(key, value) VALUES('generation', '1') ON CONFLICT(key) "
                     "DO UPDATE SET value = CAST(value AS INTEGER) + 1")

    def reopen(self) -> Any:
        """The same index on a connection of its own (a worker thread's), sharing this
        store's score lists (the cache is thread-safe; closing the copy leaves it open).

        A copy closed while this store is open is kept for the next reopen (SPARE_COPIES
        at most; `close` ends them with this store): its connection keeps the schema it
        parsed and its page cache. A new connection's first statement reads the whole
        schema and every page again: 8 of the 11 ms the vector layer of a search took at
        5k chunks (its exact rescoring read, vectors_of, on a new connection)."""
        with _SPARE_LOCK:
            other = self._spares.pop() if self._spares else None
        if other is None:
            other = type(self)(self.path)  # type: ignore[call-arg]  # the store's own init
            other._origin = self
        other._impacts, other._owns_impacts = self.impacts, False
        other.warm_behind, other.use_impacts = self.warm_behind, self.use_impacts
        return other

    def _park(self, copy: TermCounts) -> bool:
        """Keep a closed copy for the next reopen (False: this store is closed, or keeps
        enough, or the copy is inside a transaction: the caller closes it)."""
        with _SPARE_LOCK:
            if self._closed or len(self._spares) >= SPARE_COPIES or copy.conn.in_transaction:
                return False
            self._spares.append(copy)
            return True

    def _end_copies(self) -> None:
        """This store closes: so do its kept copies (one in use closes when it is done)."""
        with _SPARE_LOCK:
            self._closed = True
            spares, self._spares = self._spares, []
        for s in spares:
            s.conn.close()

    def lists_ready(self, terms: Sequence[str]) -> bool:
        """Are these terms' score lists in memory (a query of them is summed, not FTS5's)?"""
        return all(self.impacts.peek(t) is not None for t in terms)

    @property
    def impacts(self) -> impacts_mod.ImpactCache:
        if self._impacts is None:
            uid = self.get_meta("uid") or ""
            if long_lived():  # a store per request: one cache for the process (`shared`)
                self._impacts, self._owns_impacts = impacts_mod.shared(self.impacts_path, uid), False
            else:
                self._impacts = impacts_mod.ImpactCache(self.impacts_path, uid)
        return self._impacts

    @property
    def impacts_path(self) -> Path:
        # Not "*.sqlite": the notes folder is listed by that pattern.
        return self.path.with_name(self.path.name + "-impacts")

    def _term_stats(self, terms: Sequence[str]) -> dict[str, tuple[int, int]] | None:
        """{term: (rows holding it, generation of its last change)} for the terms in some
        row, from term_df, or None while it is incomplete. Remembered until the index
        changes: a search asks for its document frequencies, then for its score lists."""
        gen = self.get_meta("generation")
        if self._stats_gen != gen or gen is None:
            self._stats, self._stats_gen = {}, gen
            self._stats_complete = self.get_meta("term_df") == "1"
        if not self._stats_complete:
            return None
        missing = [t for t in dict.fromkeys(terms) if t not in self._stats]
        if len(self._stats) + len(missing) > 50_000:
            self._stats = {}
        for i in range(0, len(missing), 500):
            part = missing[i:i + 500]
            q = ",".join("?" * len(part))
            found = {t: (df, g) for t, df, g in self.conn.execute(
                f"SELECT term, df, gen FROM term_df WHERE term IN ({q})", part)}
            for t in part:
                self._stats[t] = found.get(t, (0, 0))
        return {t: v for t in terms if (v := self._stats.get(t, (0, 0)))[0] > 0}

    def _averages(self) -> tuple[int, float]:
        gen = self.get_meta("generation")
        if self._avg_gen != gen or gen is None:
            self._avg = impacts_mod.averages(self.conn, "chunks_fts")
            self._avg_gen = gen
        return self._avg

    def _score_sql(self) -> str:
        w = ", ".join(str(x) for x in BM25_WEIGHTS)
        return f"SELECT rowid, bm25(chunks_fts, {w}) FROM chunks_fts WHERE chunks_fts MATCH ?"

    def _compute_impact(self, conn: sqlite3.Connection, term: str,
                        stale: impacts_mod.Entry | None = None) -> impacts_mod.Entry | None:
        """A term's entry: `stale` patched from the change log when it can be, else scored
        anew from every row holding the term."""
        if stale is not None:
            e = impacts_mod.patch(conn, term, stale, self._score_sql(), "chunks_fts")
            if e is not None:
                return e
        return impacts_mod.compute(conn, term, self._score_sql(), "chunks_fts")

    def _warm_conn(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
        return conn

    def _refresh_lists(self, terms: Sequence[str], stale: Mapping[str, impacts_mod.Entry],
                       deadline: float | None = None) -> dict[str, impacts_mod.Entry]:
        """Compute (or patch, from `stale`) these terms' lists in order, until one cannot
        be made or the deadline passes; keep them and return them."""
        fresh: dict[str, impacts_mod.Entry] = {}
        for t in terms:
            if deadline is not None and time.monotonic() > deadline:
                break
            e = self._compute_impact(self.conn, t, stale.get(t))
            if e is None:
                break
            fresh[t] = e
        self.impacts.store(list(fresh.items()))
        return fresh

    def warm_terms(self, terms: Sequence[str], budget_s: float | None = None) -> int:
        """Bring the score lists of these terms up to date now, in order, until the budget
        runs out; returns how many are up to date (tests and benches call it)."""
        stats = self._term_stats([t for t in dict.fromkeys(terms)
                                  if t.isascii() and ONE_TOKEN.fullmatch(t)])
        if not stats:
            return 0
        found, stale, missing = self.impacts.lookup(stats, self._averages()[1])
        deadline = None if budget_s is None else time.monotonic() + budget_s
        fresh = self._refresh_lists([t for t in stats if t not in found], stale, deadline)
        return len(found) + len(fresh)

    def _warm_one(self, conn: sqlite3.Connection, term: str) -> impacts_mod.Entry | None:
        return self._compute_impact(conn, term, self.impacts.peek(term))

    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        """Rows holding each term (terms in no row are left out), remembered until the index
        changes: a search asks twice (see `_vocab_doc_freqs` for where they come from)."""
        gen = self.get_meta("generation")
        if self._df_cache_gen != gen:
            self._df_cache, self._df_cache_gen = {}, gen
        missing = [t for t in terms if t not in self._df_cache]
        if missing:
            found = self._vocab_doc_freqs(missing)
            for t in missing:
                self._df_cache[t] = found.get(t, 0)
            if len(self._df_cache) > 50_000:
                self._df_cache = {t: self._df_cache[t] for t in terms}
        return {t: self._df_cache[t] for t in terms if self._df_cache[t]}

    def _vocab_doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        """From term_df when it is complete (ASCII terms); else from fts5vocab, which walks
        a term's whole posting list, so a common term costs as much as a search."""
        if not terms:
            return {}
        out: dict[str, int] = {}
        kept = self._term_stats([t for t in terms if t.isascii()])
        if kept is not None:  # ASCII terms from the kept table: index lookups
            out = {t: df for t, (df, _) in kept.items()}
            terms = [t for t in terms if not t.isascii()]
            if not terms:
                return out
        for i in range(0, len(terms), 500):
            part = list(terms[i:i + 500])
            q = ",".join("?" * len(part))
            for term, doc in self.conn.execute(
                    f"SELECT term, doc FROM chunks_vocab WHERE term IN ({q})", part):
                out[term] = doc
        return out
