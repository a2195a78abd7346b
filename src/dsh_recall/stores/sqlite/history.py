"""The history store: one SQLite file for every imported session (recall_home()/history.sqlite).

Tables: sessions, files (how far each transcript was read), events (original text of each
message-like event, with compaction flags), blocks (the indexable pieces of events), three
FTS5 indexes over blocks (literal words; trigrams; CJK character bigrams) and vectors keyed
by the hash of the text actually embedded (`blocks.embed_hash`: a block's text with its
context, set by the service; NULL until then). SQL only: ranking policy lives in services/history/.
WAL + busy timeout so an import and a search can run at the same time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ...core.errors import LexicalQueryError, RowDataError, StoreError
from ...core.lazy import np
from ...core.text import fts_quote
from .. import vec_codec
from ..contracts import BlockIn, BlockRow
from . import migrations
from .util import connect as sqlite_connect
from .vectors import SqliteVectorTable

APPLICATION_ID = 0x44524848  # "DRHH": marks a dsh-recall history store
# The schema and its numbered migrations: stores/sqlite/migrations.py (HISTORY).
SCHEMA_VERSION = str(migrations.latest(migrations.HISTORY))


FTS_TABLES = {"literal": "fts_literal", "trigram": "fts_trigram", "cjk": "fts_cjk"}


def scope_clause(sessions: Sequence[str] | None, alias: str = "b") -> tuple[str, list[str]]:
    """SQL restricting blocks to the given sessions (None = every session)."""
    if sessions is None:
        return "", []
    return f" AND {alias}.session IN ({','.join('?' * len(sessions))})", list(sessions)


def fts_sql(table: str, sessions: Sequence[str] | None) -> tuple[str, list[str]]:
    if sessions is None:
        # Every session: no join to blocks (its row lookups doubled a query that matched
        # most of 100k blocks). FTS rows and blocks share ids and are written together.
        return (f"SELECT rowid, bm25({table}) AS s FROM {table} WHERE {table} MATCH ? "
                f"ORDER BY s LIMIT ?"), []
    where, args = scope_clause(sessions)
    sql = (f"SELECT f.rowid, bm25({table}) AS s FROM {table} f JOIN blocks b ON b.id = f.rowid "
           f"WHERE {table} MATCH ?{where} ORDER BY s LIMIT ?")
    return sql, args


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the history database; refuse a file that is not ours."""
    return sqlite_connect(path, APPLICATION_ID, "dsh-recall history database", "re-import")


# Up to this many sessions, `pending` reads their own blocks; past it, the waiting ones.
# Measured on 100k waiting blocks in 1,000 sessions of 100: by session 0.4 / 16 / 66 ms for
# 1 / 50 / 200 sessions, by the waiting index 137 / 3.2 / 1.0 ms.
PENDING_BY_SESSION_MAX = 20
# Errors that say "this row's data", not "this database" (write_batch: RowDataError).
_ROW_ERRORS = (sqlite3.InterfaceError, sqlite3.ProgrammingError, sqlite3.DataError,
               sqlite3.IntegrityError)


class HistoryStore(SqliteVectorTable):
    """SQL access to the history database. One instance per process/thread of use."""

    _VEC_ITEMS = "blocks"
    # The embed hashes go too: they depend on the embed text (a new embedder may change it).
    _VEC_CLEAR = ("UPDATE {t} SET embed_hash = NULL, vec_seq = NULL "
                  "WHERE embed_hash IS NOT NULL OR vec_seq IS NOT NULL")

    def __init__(self, path: Path):
        self.path = Path(path)
        self.conn = connect(self.path)
        if migrations.recorded(self.conn) != migrations.latest(migrations.HISTORY):
            try:
                with self._vec_tx() as conn:
                    migrations.apply(conn, migrations.HISTORY, migrations.history_create)
            except sqlite3.DatabaseError as e:
                raise StoreError(f"cannot initialise {self.path}: {e}") from e

    def close(self) -> None:
        self.conn.close()

    # -- meta -----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- files ----------------------------------------------------------------
    def file(self, path: str) -> dict | None:
        cur = self.conn.execute("SELECT * FROM files WHERE path = ?", (path,))
        row = cur.fetchone()
        return dict(zip([c[0] for c in cur.description], row)) if row else None

    def forget_file(self, path: str) -> list[str]:
        """Drop a rewritten file and every session it held; returns those session ids."""
        sids = [r[0] for r in self.conn.execute("SELECT id FROM sessions WHERE path = ?", (path,))]
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            for sid in sids:
                self._delete_session(sid)
            self.conn.execute("DELETE FROM files WHERE path = ?", (path,))
        return sids

    def _delete_session(self, sid: str) -> None:
        ids = [r[0] for r in self.conn.execute("SELECT id FROM blocks WHERE session = ?", (sid,))]
        for table in FTS_TABLES.values():
            self.conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(i,) for i in ids])
        self.conn.execute("DELETE FROM blocks WHERE session = ?", (sid,))
        self.conn.execute("DELETE FROM events WHERE session = ?", (sid,))
        self.conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))

    def call_tools(self, session: str) -> dict[str, str]:
        """call id -> tool name for a session's recorded tool calls."""
        rows = self.conn.execute(
            "SELECT e.call_id, b.tool FROM events e JOIN blocks b ON b.session = e.session AND b.seq = e.seq "
            "WHERE e.session = ? AND e.call_id IS NOT NULL AND b.kind = 'tool_call'", (session,))
        return {r[0]: r[1] for r in rows if r[0] and r[1]}

    # -- writing --------------------------------------------------------------
    def write_batch(
        self,
        sessions: Iterable[dict],
        events: Iterable[dict],
        blocks: Sequence[BlockIn],
        marks: Iterable[tuple[str, int, str]],
        file_row: dict | None,
    ) -> int:
        """Write one file's new content in one transaction; returns blocks added.

        Events and blocks already present (same session and seq) are kept as they are:
        re-reading an unfinished tail is harmless.
        """
        try:
            return self._write_batch(sessions, events, blocks, marks, file_row)
        except _ROW_ERRORS as e:
            raise RowDataError(f"{type(e).__name__}: {e}") from e
        except sqlite3.Error as e:
            raise StoreError(f"{type(e).__name__}: {e}") from e

    def _write_batch(self, sessions: Iterable[dict], events: Iterable[dict], blocks: Sequence[BlockIn],
                     marks: Iterable[tuple[str, int, str]], file_row: dict | None) -> int:
        added = 0
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            for s in sessions:
                # The channel that produced a session sticks; an import that does not know it
                # keeps it; two channels claiming one session make it the owner's (NULL).
                self.conn.execute(
                    "INSERT INTO sessions(id, source, workspace, title, created_ms, updated_ms, path, channel) "
                    "VALUES (:id, :source, :workspace, :title, :created_ms, :updated_ms, :path, :channel) "
                    "ON CONFLICT(id) DO UPDATE SET workspace = coalesce(excluded.workspace, workspace), "
                    "title = coalesce(excluded.title, title), created_ms = coalesce(created_ms, excluded.created_ms), "
                    "updated_ms = max(coalesce(updated_ms, 0), coalesce(excluded.updated_ms, 0)), "
                    "path = coalesce(path, excluded.path), "
                    "channel = CASE WHEN excluded.channel IS NULL OR excluded.channel = channel "
                    "THEN channel ELSE NULL END", {**s, "channel": s.get("channel")})
            for e in events:
                self.conn.execute(
                    "INSERT OR IGNORE INTO events(session, seq, role, time_ms, time, message_id, call_id, flags, text) "
                    "VALUES (:session, :seq, :role, :time_ms, :time, :message_id, :call_id, :flags, :text)", e)
            next_ord: dict[str, int] = {}
            for b in blocks:
                if b.session not in next_ord:
                    row = self.conn.execute("SELECT max(ord) FROM blocks WHERE session = ?", (b.session,)).fetchone()
                    next_ord[b.session] = (row[0] + 1) if row[0] is not None else 0
                cur = self.conn.execute(
                    "INSERT OR IGNORE INTO blocks(session, seq, part, ord, role, kind, tool, text, hash) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (b.session, b.seq, b.part, next_ord[b.session], b.role, b.kind, b.tool, b.text, b.hash))
                if cur.rowcount == 0:
                    continue
                next_ord[b.session] += 1
                bid = cur.lastrowid
                self.conn.execute("INSERT INTO fts_literal(rowid, body) VALUES (?, ?)", (bid, b.literal))
                self.conn.execute("INSERT INTO fts_trigram(rowid, body) VALUES (?, ?)", (bid, b.trigram))
                if b.cjk:
                    self.conn.execute("INSERT INTO fts_cjk(rowid, body) VALUES (?, ?)", (bid, b.cjk))
                added += 1
            for sid, seq, flag in marks:
                self.conn.execute(
                    "UPDATE events SET flags = trim(flags || ' ' || ?) WHERE session = ? AND seq = ? "
                    "AND (' ' || flags || ' ') NOT LIKE ('% ' || ? || ' %')", (flag, sid, seq, flag))
            if file_row is not None:
                self.conn.execute(
                    "INSERT OR REPLACE INTO files(path, format, size, mtime_ns, offset, line_no, head_hash, session) "
                    "VALUES (:path, :format, :size, :mtime_ns, :offset, :line_no, :head_hash, :session)", file_row)
        return added

    # -- reading --------------------------------------------------------------
    def sessions(self, ids: Sequence[str] | None = None, workspace: str | None = None) -> list[dict]:
        sql, args = "SELECT * FROM sessions WHERE 1", []
        if ids is not None:
            sql += f" AND id IN ({','.join('?' * len(ids))})"
            args += list(ids)
        if workspace is not None:
            sql += " AND (workspace = ? OR workspace LIKE ?)"
            args += [workspace, "%/" + workspace.strip("/")]
        cur = self.conn.execute(sql + " ORDER BY coalesce(updated_ms, created_ms) DESC", args)
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    def fts(self, layer: str, match: str, sessions: Sequence[str] | None, limit: int) -> list[tuple[int, float]]:
        """Block ids matching an FTS5 query in one of the three tables, best first."""
        sql, args = fts_sql(FTS_TABLES[layer], sessions)
        try:
            return [(r[0], r[1]) for r in self.conn.execute(sql, [match, *args, limit])]
        except sqlite3.OperationalError as e:  # FTS5 syntax it refuses: the layer degrades
            raise LexicalQueryError(f"{layer} layer: {e}") from e

    # Blocks sampled for term_shares: the newest, enough to tell 10% from 1% in a few ms.
    SHARE_SAMPLE = 4000

    def term_shares(self, layer: str, terms: Sequence[str], min_blocks: int) -> dict[str, float] | None:
        """Term -> the share of blocks holding it, or None below `min_blocks` blocks.
        Estimated over the newest SHARE_SAMPLE blocks (FTS5 seeks each term's rows by id
        range), since counting a common term over every block costs what a search does."""
        top = self.conn.execute("SELECT max(id) FROM blocks").fetchone()[0] or 0
        if top < min_blocks or not terms:  # ids only grow: max(id) bounds the count
            return None
        table, sample = FTS_TABLES[layer], min(self.SHARE_SAMPLE, top)
        sql = f"SELECT count(*) FROM {table} WHERE {table} MATCH ? AND rowid > ?"
        try:
            return {t: self.conn.execute(sql, (fts_quote(t), top - sample)).fetchone()[0] / sample
                    for t in dict.fromkeys(terms)}
        except sqlite3.OperationalError as e:
            raise LexicalQueryError(f"{layer} layer: {e}") from e

    def neighbours(self, ids: Sequence[int]) -> dict[int, list[int]]:
        """Block id -> the ids of the blocks just before and after it in its session."""
        out: dict[int, list[int]] = {}
        for i in range(0, len(ids), 500):
            chunk = list(ids[i:i + 500])
            cur = self.conn.execute(
                f"SELECT b.id, n.id FROM blocks b JOIN blocks n ON n.session = b.session "
                f"AND n.ord IN (b.ord - 1, b.ord + 1) WHERE b.id IN ({','.join('?' * len(chunk))})", chunk)
            for a, n in cur:
                out.setdefault(a, []).append(n)
        return out

    def blocks(self, ids: Sequence[int]) -> dict[int, BlockRow]:
        out: dict[int, BlockRow] = {}
        for i in range(0, len(ids), 500):
            chunk = list(ids[i:i + 500])
            cur = self.conn.execute(
                f"SELECT id, session, seq, part, ord, role, kind, tool, text FROM blocks "
                f"WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            out.update({r[0]: BlockRow(*r) for r in cur})
        return out

    def events(self, session: str, seqs: Sequence[int] | None = None, lo: int | None = None,
               hi: int | None = None, offset: int = 0, limit: int = -1) -> list[dict]:
        sql = "SELECT * FROM events WHERE session = ?"
        args: list[Any] = [session]
        if seqs is not None:
            sql += f" AND seq IN ({','.join('?' * len(seqs))})"
            args += list(seqs)
        if lo is not None:
            sql += " AND seq >= ?"
            args.append(lo)
        if hi is not None:
            sql += " AND seq <= ?"
            args.append(hi)
        cur = self.conn.execute(sql + " ORDER BY seq LIMIT ? OFFSET ?", [*args, limit, offset])
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    def event_count(self, session: str) -> int:
        return self.conn.execute("SELECT count(*) FROM events WHERE session = ?", (session,)).fetchone()[0]

    def event_chars(self, session: str) -> int:
        """Characters of the session's events (what recalling it whole would cost)."""
        return int(self.conn.execute("SELECT coalesce(sum(length(text)), 0) FROM events "
                                     "WHERE session = ?", (session,)).fetchone()[0])

    def events_before(self, session: str, seq: int) -> int:
        """How many events of the session have a seq below `seq` (an event's index)."""
        return self.conn.execute("SELECT count(*) FROM events WHERE session = ? AND seq < ?",
                                 (session, seq)).fetchone()[0]

    def last_events(self, session: str, n: int) -> list[dict]:
        """The session's last `n` events, in seq order."""
        cur = self.conn.execute("SELECT * FROM events WHERE session = ? ORDER BY seq DESC LIMIT ?", (session, n))
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in reversed(cur.fetchall())]

    def event_seqs_near(self, session: str, seq: int, window: int) -> tuple[int, int]:
        """The seq range covering `window` indexed events before and after `seq`."""
        before = self.conn.execute(
            "SELECT seq FROM events WHERE session = ? AND seq < ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (session, seq, max(0, window - 1))).fetchone()
        after = self.conn.execute(
            "SELECT seq FROM events WHERE session = ? AND seq > ? ORDER BY seq LIMIT 1 OFFSET ?",
            (session, seq, max(0, window - 1))).fetchone()
        lo = before[0] if before else -(2**62)
        hi = after[0] if after else 2**62
        return lo, hi

    def latest_summary(self, session: str) -> dict | None:
        cur = self.conn.execute(
            "SELECT * FROM events WHERE session = ? AND role = 'summary' ORDER BY seq DESC LIMIT 1", (session,))
        row = cur.fetchone()
        return dict(zip([c[0] for c in cur.description], row)) if row else None

    def flagged_events(self, session: str, flag: str, limit: int) -> list[dict]:
        cur = self.conn.execute(
            "SELECT * FROM events WHERE session = ? AND (' ' || flags || ' ') LIKE ? ORDER BY seq LIMIT ?",
            (session, f"% {flag} %", limit))
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    # -- vectors --------------------------------------------------------------
    def block_count(self, sessions: Sequence[str] | None = None) -> int:
        where, args = scope_clause(sessions)
        return self.conn.execute(f"SELECT count(*) FROM blocks b WHERE 1{where}", args).fetchone()[0]

    def embedded_count(self, sessions: Sequence[str] | None = None) -> int:
        # vec_seq is set exactly while the block's embed hash has a vector (put_vectors,
        # set_embed_hashes; clear_vectors resets both): counted by index, not by a join of
        # every block to the vectors (35 ms at 100k blocks, on every semantic search).
        where, args = scope_clause(sessions)
        return self.conn.execute(
            f"SELECT count(*) FROM blocks b WHERE b.vec_seq IS NOT NULL{where}", args).fetchone()[0]

    def unhashed(self, sessions: Sequence[str] | None, limit: int) -> list[tuple[int, str, str | None]]:
        """(id, text, text of the block before it in its session) of blocks whose
        embed_hash is not set yet."""
        where, args = scope_clause(sessions)
        cur = self.conn.execute(
            f"SELECT b.id, b.text, p.text FROM blocks b LEFT JOIN blocks p ON p.session = b.session "
            f"AND p.ord = b.ord - 1 WHERE b.embed_hash IS NULL{where} LIMIT ?", [*args, limit])
        return [(r[0], r[1], r[2]) for r in cur]

    def set_embed_hashes(self, items: Sequence[tuple[int, str]]) -> None:
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany("UPDATE blocks SET embed_hash = ? WHERE id = ?", [(h, i) for i, h in items])
            seq = self._next_vec_seq(self.conn)  # blocks whose text was embedded before have a vector now
            self.conn.executemany("UPDATE blocks SET vec_seq = ? WHERE id = ? AND embed_hash IN "
                                  "(SELECT hash FROM vectors)", [(seq, i) for i, _ in items])

    def pending(self, sessions: Sequence[str] | None, limit: int) -> list[tuple[str, str, str | None]]:
        """(embed_hash, text, previous block's text) of hashed blocks without a vector,
        one per embed_hash. Read from the blocks_pending index (vec_seq is NULL exactly
        while a block's hash has no vector: embedded_count), so a history with nothing
        waiting answers at once instead of walking every block's hash (64 ms at 100k)."""
        where, args = scope_clause(sessions)
        # A few sessions: their own blocks (blocks_ord) beat walking a backlog of other
        # sessions' blocks; more: the index of what waits, read until enough are found.
        # Named, not left to the planner: without statistics it took the vec_seq index
        # and read every waiting block (3.5 s for 3 sessions in a 100k backlog, cold).
        few = sessions is not None and len(sessions) <= PENDING_BY_SESSION_MAX
        hint = "INDEXED BY blocks_ord " if few else "INDEXED BY blocks_pending "
        cur = self.conn.execute(
            f"SELECT b.embed_hash, b.text, p.text FROM blocks b {hint}"
            f"LEFT JOIN vectors v ON v.hash = b.embed_hash "
            f"LEFT JOIN blocks p ON p.session = b.session AND p.ord = b.ord - 1 "
            f"WHERE b.vec_seq IS NULL AND b.embed_hash IS NOT NULL AND v.hash IS NULL{where} "
            f"GROUP BY b.embed_hash LIMIT ?", [*args, limit])
        return [(r[0], r[1], r[2]) for r in cur]

    def block_ids(self, sessions: Sequence[str]) -> np.ndarray:
        where, args = scope_clause(sessions)
        rows = self.conn.execute(f"SELECT b.id FROM blocks b WHERE 1{where}", args).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vector_matrix(self, sessions: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]:
        """(block ids, unit vectors) of the embedded blocks in scope."""
        where, args = scope_clause(sessions)
        rows = self.conn.execute(
            f"SELECT b.id, v.vec FROM blocks b JOIN vectors v ON v.hash = b.embed_hash WHERE 1{where}", args).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        return ids, vec_codec.decode_many([r[1] for r in rows])

    def stats(self) -> dict:
        return {t: int(self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in ("sessions", "events", "blocks", "vectors", "files")}


def dumps_flags(flags: Sequence[str]) -> str:
    return " ".join(flags)


def loads_flags(flags: str) -> list[str]:
    return [f for f in (flags or "").split() if f]


__all__ = ["HistoryStore", "BlockIn", "BlockRow", "fts_sql", "scope_clause", "dumps_flags", "loads_flags"]
