"""The history store on PostgreSQL + pgvector: a team's sessions in one database (see
docs/postgres.md). Same calls as stores/sqlite/history.py, so the history services run on either.

The three word layers are FTS5's, rebuilt from our own tokenizers (stores/postgres/util.py):
literal (unicode61 + Porter stems), trigram (every three characters) and CJK bigrams, each a
term map with a GIN index, scored by FTS5's bm25. Sessions keep the access channel that
produced them (services/access/channel.py) and the user who imported them. Writes of one session
are serialised by an advisory lock on its id; vectors are looked up by text hash, searched
by the database (HNSW once large).
"""

from __future__ import annotations

import getpass
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ...core.errors import LexicalQueryError, RowDataError, StoreError
from ...core.text import fts_quote
from ..contracts import BlockIn, BlockRow
from . import migrations
from . import util as pg_util
from .vectors import PgVectorTable

LAYERS = ("literal", "trigram", "cjk")

SCHEMA_VERSION = migrations.latest(migrations.HISTORY)  # stores/postgres/migrations.py


def layer_tokens(layer: str, text: str) -> list[str]:
    """A block body's tokens in one layer, as FTS5 would cut them."""
    if layer == "literal":
        return pg_util.porter(pg_util.unicode61(text))
    if layer == "trigram":
        return pg_util.trigram_tokens(text)
    return pg_util.unicode61(text)


def _query_tokens(layer: str, match: str) -> list[str]:
    return [t for p in pg_util.fts5_terms(match) for t in
            (pg_util.trigram_tokens(p) if layer == "trigram" else layer_tokens(layer, p))]


def _scope(sessions: Sequence[str] | None, alias: str = "b") -> tuple[str, dict]:
    if sessions is None:
        return "", {}
    return f" AND {alias}.session = ANY(%(scope)s)", {"scope": list(sessions)}


class PgHistoryStore(PgVectorTable):
    """History in one namespace of a PostgreSQL database (see stores.contracts.HistoryStore)."""

    _VEC_ITEMS = "blocks"
    _VEC_PENDING = "embed_hash IS NOT NULL AND NOT has_vec"  # the blocks_pending index
    _VEC_CLEAR = ("UPDATE {s}.blocks SET embed_hash = NULL, has_vec = false "
                  "WHERE embed_hash IS NOT NULL OR has_vec")
    _DIM_ERROR = "vectors of dimension {dim} in a history of dimension {have}"

    def __init__(self, url: str, namespace: str = "history"):
        self.url, self.namespace = url, namespace
        self.conn = pg_util.connect(url)
        self.s = migrations.ensure_namespace(self.conn, namespace, "history", migrations.HISTORY)
        self.user: str | None
        try:
            self.user = getpass.getuser()
        except (KeyError, OSError):
            self.user = None

    @property
    def path(self) -> str:
        return f"{pg_util.redact(self.url)}#{self.namespace}"

    def reopen(self) -> PgHistoryStore:
        return PgHistoryStore(self.url, self.namespace)

    def close(self) -> None:
        self.vector_load_release()  # a pooled connection must not keep a load's lock
        pg_util.release(self.url, self.conn)

    def _dicts(self, sql: str, params=None) -> list[dict]:
        from psycopg.rows import dict_row

        with self.conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql.replace("{s}", self.s), params)
            return list(cur.fetchall())

    # -- files ----------------------------------------------------------------
    def file(self, path: str) -> dict | None:
        rows = self._dicts("SELECT * FROM {s}.files WHERE path = %s", (path,))
        return rows[0] if rows else None

    def _lock_sessions(self, sids: Iterable[str]) -> None:
        for sid in sorted(set(sids)):
            self._q("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (self.s, sid))

    def forget_file(self, path: str) -> list[str]:
        """Drop a rewritten file and every session it held; returns those session ids."""
        with self.conn.transaction():
            sids = [r[0] for r in self._q("SELECT id FROM {s}.sessions WHERE path = %s", (path,))]
            self._lock_sessions(sids)
            deltas: dict[str, Counter[str]] = {layer: Counter() for layer in LAYERS}
            stats: Counter[str] = Counter()
            ids = [r[0] for r in self._q("SELECT id FROM {s}.blocks WHERE session = ANY(%s) "
                                         "ORDER BY id FOR UPDATE", (sids,))]
            if ids:
                for layer in LAYERS:
                    deltas[layer].subtract(pg_util.lexeme_counts(
                        self.conn, f"{self.s}.blocks", f"tf_{layer}", ids))
                    n, total = self._q(f"SELECT count(tf_{layer}), coalesce(sum(dl_{layer}), 0) "
                                       "FROM {s}.blocks WHERE id = ANY(%s)", (ids,)).fetchone()
                    stats[layer + ":n"] -= n
                    stats[layer + ":total"] -= total
            self._q("DELETE FROM {s}.blocks WHERE session = ANY(%s)", (sids,))
            self._q("DELETE FROM {s}.events WHERE session = ANY(%s)", (sids,))
            self._q("DELETE FROM {s}.sessions WHERE id = ANY(%s)", (sids,))
            self._q("DELETE FROM {s}.files WHERE path = %s", (path,))
            self._apply(deltas, stats)
        return sids

    def _apply(self, deltas: dict[str, Counter], stats: Counter) -> None:
        for layer in LAYERS:  # fixed order; the stats rows last
            pg_util.apply_term_deltas(self.conn, f"{self.s}.terms_{layer}", deltas[layer])
        for layer in LAYERS:
            n, total = stats[layer + ":n"], stats[layer + ":total"]
            if n or total:
                self._q("UPDATE {s}.stats SET n = n + %s, total = total + %s WHERE layer = %s",
                        (n, total, layer))

    def call_tools(self, session: str) -> dict[str, str]:
        rows = self._q(
            "SELECT e.call_id, b.tool FROM {s}.events e JOIN {s}.blocks b ON b.session = e.session "
            "AND b.seq = e.seq WHERE e.session = %s AND e.call_id IS NOT NULL AND b.kind = 'tool_call'",
            (session,))
        return {r[0]: r[1] for r in rows if r[0] and r[1]}

    # -- writing --------------------------------------------------------------
    def write_batch(self, sessions: Iterable[dict], events: Iterable[dict], blocks: Sequence[BlockIn],
                    marks: Iterable[tuple[str, int, str]], file_row: dict | None) -> int:
        """Write one file's new content in one transaction; returns blocks added. Events and
        blocks already present (same session and seq) are kept as they are."""
        psycopg, _ = pg_util._psycopg()
        try:
            return self._write_batch(sessions, events, blocks, marks, file_row)
        except (psycopg.DataError, psycopg.IntegrityError, psycopg.ProgrammingError) as e:
            raise RowDataError(f"{type(e).__name__}: {str(e).strip()}") from e
        except psycopg.Error as e:
            raise StoreError(f"{type(e).__name__}: {str(e).strip()}") from e

    def _write_batch(self, sessions: Iterable[dict], events: Iterable[dict], blocks: Sequence[BlockIn],
                     marks: Iterable[tuple[str, int, str]], file_row: dict | None) -> int:
        sessions, events, marks = list(sessions), list(events), list(marks)
        prepared = []
        deltas: dict[str, Counter[str]] = {layer: Counter() for layer in LAYERS}
        for b in blocks:  # tokenised before the transaction: locks are held for less time
            # layer -> (terms, frequencies, length); no CJK text: (None, None, 0)
            vecs: dict[str, tuple[list[str] | None, list[str] | None, int]] = {}
            for layer, body in (("literal", b.literal), ("trigram", b.trigram), ("cjk", b.cjk)):
                if layer == "cjk" and not body:
                    vecs[layer] = (None, None, 0)
                    continue
                vecs[layer] = pg_util.term_map([(1.0, layer_tokens(layer, body))])
            prepared.append((b, vecs))
        touched = {s["id"] for s in sessions} | {e["session"] for e in events} | \
                  {b.session for b in blocks} | {m[0] for m in marks}
        added = 0
        stats: Counter[str] = Counter()
        with self.conn.transaction():
            self._lock_sessions(touched)
            for s in sessions:
                # The channel that produced a session sticks; an import that does not know
                # it keeps it; two channels claiming one session make it the owner's (NULL).
                self._q(
                    "INSERT INTO {s}.sessions(id, source, workspace, title, created_ms, updated_ms, "
                    "path, channel, user_name) VALUES (%(id)s, %(source)s, %(workspace)s, %(title)s, "
                    "%(created_ms)s, %(updated_ms)s, %(path)s, %(channel)s, %(user)s) "
                    "ON CONFLICT (id) DO UPDATE SET workspace = coalesce(excluded.workspace, "
                    "sessions.workspace), title = coalesce(excluded.title, sessions.title), "
                    "created_ms = coalesce(sessions.created_ms, excluded.created_ms), "
                    "updated_ms = greatest(coalesce(sessions.updated_ms, 0), "
                    "coalesce(excluded.updated_ms, 0)), path = coalesce(sessions.path, excluded.path), "
                    "channel = CASE WHEN excluded.channel IS NULL OR excluded.channel = "
                    "sessions.channel THEN sessions.channel ELSE NULL END",
                    {**s, "channel": s.get("channel"), "user": self.user})
            if events:
                with self.conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {self.s}.events(session, seq, role, time_ms, time, message_id, "
                        "call_id, flags, text) VALUES (%(session)s, %(seq)s, %(role)s, %(time_ms)s, "
                        "%(time)s, %(message_id)s, %(call_id)s, %(flags)s, %(text)s) "
                        "ON CONFLICT DO NOTHING", events)
            next_ord: dict[str, int] = {}
            for b, v in prepared:
                if b.session not in next_ord:
                    row = self._q("SELECT max(ord) FROM {s}.blocks WHERE session = %s",
                                  (b.session,)).fetchone()
                    next_ord[b.session] = (row[0] + 1) if row[0] is not None else 0
                got = self._q(
                    "INSERT INTO {s}.blocks(session, seq, part, ord, role, kind, tool, text, hash, "
                    "tf_literal, dl_literal, tf_trigram, dl_trigram, tf_cjk, dl_cjk) VALUES "
                    "(%s,%s,%s,%s,%s,%s,%s,%s,%s,hstore(%s::text[], %s::text[]),%s,"
                    "hstore(%s::text[], %s::text[]),%s,hstore(%s::text[], %s::text[]),%s) "
                    "ON CONFLICT (session, seq, part) DO NOTHING RETURNING id",
                    (b.session, b.seq, b.part, next_ord[b.session], b.role, b.kind, b.tool, b.text,
                     b.hash, *v["literal"], *v["trigram"], *v["cjk"])).fetchone()
                if got is None:
                    continue
                next_ord[b.session] += 1
                added += 1
                for layer in LAYERS:
                    keys, _, dl = v[layer]
                    if keys is None:
                        continue
                    deltas[layer].update(keys)
                    stats[layer + ":n"] += 1
                    stats[layer + ":total"] += dl
            for sid, seq, flag in marks:
                self._q("UPDATE {s}.events SET flags = trim(flags || ' ' || %s) WHERE session = %s "
                        "AND seq = %s AND (' ' || flags || ' ') NOT LIKE ('%% ' || %s || ' %%')",
                        (flag, sid, seq, flag))
            if file_row is not None:
                self._q('INSERT INTO {s}.files(path, format, size, mtime_ns, "offset", line_no, '
                        "head_hash, session) VALUES (%(path)s, %(format)s, %(size)s, %(mtime_ns)s, "
                        "%(offset)s, %(line_no)s, %(head_hash)s, %(session)s) ON CONFLICT (path) DO "
                        "UPDATE SET format = excluded.format, size = excluded.size, mtime_ns = "
                        'excluded.mtime_ns, "offset" = excluded."offset", line_no = excluded.line_no, '
                        "head_hash = excluded.head_hash, session = excluded.session", file_row)
            self._apply(deltas, stats)
        return added

    # -- reading --------------------------------------------------------------
    def sessions(self, ids: Sequence[str] | None = None, workspace: str | None = None) -> list[dict]:
        sql = "SELECT id, source, workspace, title, created_ms, updated_ms, path, channel " \
              "FROM {s}.sessions WHERE true"
        args: dict[str, Any] = {}
        if ids is not None:
            sql += " AND id = ANY(%(ids)s)"
            args["ids"] = list(ids)
        if workspace is not None:
            sql += " AND (workspace = %(ws)s OR workspace LIKE %(like)s)"
            args["ws"] = workspace
            args["like"] = "%/" + workspace.strip("/").replace("%", r"\%").replace("_", r"\_")
        return self._dicts(sql + " ORDER BY coalesce(updated_ms, created_ms) DESC NULLS LAST", args)

    def term_shares(self, layer: str, terms: Sequence[str], min_blocks: int) -> dict[str, float] | None:
        """Term -> the share of blocks holding it (exact, from the df table), or None below
        `min_blocks` blocks (see stores.sqlite.history.HistoryStore.term_shares)."""
        if layer not in LAYERS:
            raise StoreError(f"unknown history layer {layer}; valid: {', '.join(LAYERS)}")
        row = self._q("SELECT n FROM {s}.stats WHERE layer = %s", (layer,)).fetchone()
        n = int(row[0]) if row else 0
        if n < min_blocks or not terms:
            return None
        keys = {t: (_query_tokens(layer, fts_quote(t)) or [t])[0] for t in dict.fromkeys(terms)}
        dfs = {t: int(d) for t, d in self._q(
            f"SELECT lexeme, df FROM {{s}}.terms_{layer} WHERE lexeme = ANY(%s)",
            (list(set(keys.values())),))}
        return {t: dfs.get(k, 0) / n for t, k in keys.items()}

    def fts(self, layer: str, match: str, sessions: Sequence[str] | None, limit: int) -> list[tuple[int, float]]:
        """Block ids matching in one of the three layers, best first, as FTS5 reports them
        (bm25 negated: lower is better)."""
        if layer not in LAYERS:
            raise StoreError(f"unknown history layer {layer}; valid: {', '.join(LAYERS)}")
        terms = _query_tokens(layer, match)
        if not terms:
            return []
        dfs = {t: int(d) for t, d in self._q(
            f"SELECT lexeme, df FROM {{s}}.terms_{layer} WHERE lexeme = ANY(%s) AND df > 0",
            (list(set(terms)),))}
        n, total = self._q("SELECT n, total FROM {s}.stats WHERE layer = %s", (layer,)).fetchone()
        params = pg_util.bm25_params(terms, dfs, int(n), int(total), limit)
        if params is None:
            return []
        where, extra = _scope(sessions, "t")
        params.update(extra)
        sql = pg_util.bm25_sql(f"{self.s}.blocks", f"tf_{layer}", f"dl_{layer}", where)
        psycopg, _ = pg_util._psycopg()
        try:
            return [(int(i), -float(s)) for i, s in self.conn.execute(sql, params)]
        except psycopg.Error as e:  # the service degrades to the other layers
            raise LexicalQueryError(f"{layer} layer: {str(e).strip()}") from e

    def neighbours(self, ids: Sequence[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        if not ids:
            return out
        for a, n in self._q("SELECT b.id, n.id FROM {s}.blocks b JOIN {s}.blocks n ON "
                            "n.session = b.session AND n.ord IN (b.ord - 1, b.ord + 1) "
                            "WHERE b.id = ANY(%s)", ([int(i) for i in ids],)):
            out.setdefault(a, []).append(n)
        return out

    def blocks(self, ids: Sequence[int]) -> dict[int, BlockRow]:
        if not ids:
            return {}
        rows = self._q("SELECT id, session, seq, part, ord, role, kind, tool, text FROM {s}.blocks "
                       "WHERE id = ANY(%s)", ([int(i) for i in ids],))
        return {r[0]: BlockRow(*r) for r in rows}

    _EV = "session, seq, role, time_ms, time, message_id, call_id, flags, text"

    def events(self, session: str, seqs: Sequence[int] | None = None, lo: int | None = None,
               hi: int | None = None, offset: int = 0, limit: int = -1) -> list[dict]:
        sql = f"SELECT {self._EV} FROM {{s}}.events WHERE session = %(sid)s"
        args: dict[str, Any] = {"sid": session}
        if seqs is not None:
            sql += " AND seq = ANY(%(seqs)s)"
            args["seqs"] = [int(x) for x in seqs]
        if lo is not None:
            sql += " AND seq >= %(lo)s"
            args["lo"] = lo
        if hi is not None:
            sql += " AND seq <= %(hi)s"
            args["hi"] = hi
        args["limit"] = None if limit is None or limit < 0 else limit
        args["offset"] = max(0, offset)
        return self._dicts(sql + " ORDER BY seq LIMIT %(limit)s OFFSET %(offset)s", args)

    def event_count(self, session: str) -> int:
        return self._q("SELECT count(*) FROM {s}.events WHERE session = %s", (session,)).fetchone()[0]

    def event_chars(self, session: str) -> int:
        """Characters of the session's events (what recalling it whole would cost)."""
        return int(self._q("SELECT coalesce(sum(length(text)), 0) FROM {s}.events WHERE session = %s",
                           (session,)).fetchone()[0])

    def events_before(self, session: str, seq: int) -> int:
        return self._q("SELECT count(*) FROM {s}.events WHERE session = %s AND seq < %s",
                       (session, seq)).fetchone()[0]

    def last_events(self, session: str, n: int) -> list[dict]:
        rows = self._dicts(f"SELECT {self._EV} FROM {{s}}.events WHERE session = %s "
                           "ORDER BY seq DESC LIMIT %s", (session, n))
        return list(reversed(rows))

    def event_seqs_near(self, session: str, seq: int, window: int) -> tuple[int, int]:
        before = self._q("SELECT seq FROM {s}.events WHERE session = %s AND seq < %s ORDER BY seq "
                         "DESC LIMIT 1 OFFSET %s", (session, seq, max(0, window - 1))).fetchone()
        after = self._q("SELECT seq FROM {s}.events WHERE session = %s AND seq > %s ORDER BY seq "
                        "LIMIT 1 OFFSET %s", (session, seq, max(0, window - 1))).fetchone()
        return (before[0] if before else -(2**62)), (after[0] if after else 2**62)

    def latest_summary(self, session: str) -> dict | None:
        rows = self._dicts(f"SELECT {self._EV} FROM {{s}}.events WHERE session = %s AND role = "
                           "'summary' ORDER BY seq DESC LIMIT 1", (session,))
        return rows[0] if rows else None

    def flagged_events(self, session: str, flag: str, limit: int) -> list[dict]:
        return self._dicts(f"SELECT {self._EV} FROM {{s}}.events WHERE session = %s AND "
                           "(' ' || flags || ' ') LIKE %s ORDER BY seq LIMIT %s",
                           (session, f"% {flag} %", limit))

    # -- vectors --------------------------------------------------------------
    def block_count(self, sessions: Sequence[str] | None = None) -> int:
        where, args = _scope(sessions)
        return self._q(f"SELECT count(*) FROM {{s}}.blocks b WHERE true{where}", args).fetchone()[0]

    def embedded_count(self, sessions: Sequence[str] | None = None) -> int:
        where, args = _scope(sessions)
        return self._q(f"SELECT count(*) FROM {{s}}.blocks b WHERE b.has_vec{where}", args).fetchone()[0]

    def unhashed(self, sessions: Sequence[str] | None, limit: int) -> list[tuple[int, str, str | None]]:
        where, args = _scope(sessions)
        rows = self._q(f"SELECT b.id, b.text, p.text FROM {{s}}.blocks b LEFT JOIN {{s}}.blocks p ON "
                       f"p.session = b.session AND p.ord = b.ord - 1 WHERE b.embed_hash IS NULL{where} "
                       "ORDER BY b.id LIMIT %(limit)s", {**args, "limit": limit})
        return [(r[0], r[1], r[2]) for r in rows]

    def set_embed_hashes(self, items: Sequence[tuple[int, str]]) -> None:
        items = sorted(items)
        with self.conn.transaction():
            self._q("UPDATE {s}.blocks b SET embed_hash = x.h, has_vec = EXISTS (SELECT 1 FROM "
                    "{s}.vectors v WHERE v.hash = x.h) FROM unnest(%s::bigint[], %s::text[]) AS "
                    "x(i, h) WHERE b.id = x.i", ([i for i, _ in items], [h for _, h in items]))

    def set_embed_hashes_by_key(self, items: Sequence[tuple[str, int, int, str]]) -> None:
        """Embed hashes by (session, seq, part): a copy from another store, whose ids differ."""
        items = sorted(items)
        for i in range(0, len(items), 20000):
            part = items[i:i + 20000]
            with self.conn.transaction():
                self._q("UPDATE {s}.blocks b SET embed_hash = x.h, has_vec = EXISTS (SELECT 1 FROM "
                        "{s}.vectors v WHERE v.hash = x.h) FROM unnest(%s::text[], %s::bigint[], "
                        "%s::int[], %s::text[]) AS x(s, q, p, h) WHERE b.session = x.s AND b.seq = x.q "
                        "AND b.part = x.p", ([r[0] for r in part], [r[1] for r in part],
                                             [r[2] for r in part], [r[3] for r in part]))

    def clear(self) -> None:
        """Forget every session (a copy with --replace)."""
        with self.conn.transaction():
            self._q("LOCK TABLE {s}.sessions, {s}.events, {s}.blocks, {s}.files IN EXCLUSIVE MODE")
            self._q("TRUNCATE {s}.sessions, {s}.events, {s}.blocks, {s}.files, {s}.terms_literal, "
                    "{s}.terms_trigram, {s}.terms_cjk")
            self._q("UPDATE {s}.stats SET n = 0, total = 0")

    def pending(self, sessions: Sequence[str] | None, limit: int) -> list[tuple[str, str, str | None]]:
        where, args = _scope(sessions)
        rows = self._q(
            f"SELECT DISTINCT ON (b.embed_hash) b.embed_hash, b.text, p.text FROM {{s}}.blocks b "
            f"LEFT JOIN {{s}}.blocks p ON p.session = b.session AND p.ord = b.ord - 1 "
            f"WHERE b.embed_hash IS NOT NULL AND NOT b.has_vec{where} ORDER BY b.embed_hash, b.id "
            "LIMIT %(limit)s", {**args, "limit": limit})
        return [(r[0], r[1], r[2]) for r in rows]

    def block_ids(self, sessions: Sequence[str]) -> np.ndarray:
        where, args = _scope(sessions)
        rows = self._q(f"SELECT b.id FROM {{s}}.blocks b WHERE true{where}", args).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vector_matrix(self, sessions: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]:
        where, args = _scope(sessions)
        return self._rows(f"SELECT b.id, v.vec FROM {{s}}.blocks b JOIN {{s}}.vectors v ON "
                          f"v.hash = b.embed_hash WHERE true{where} ORDER BY b.id", args)

    def vector_search(self, query: np.ndarray, k: int, path_prefix: str | None = None,
                      allowed: set[int] | None = None,
                      keep: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best (block id, cosine) among `keep` and `allowed` (None = every block),
        best first."""
        q = np.asarray(query, dtype=np.float32)
        if self._dim() != len(q) or k <= 0:
            return []
        ids = keep if allowed is None else (
            np.intersect1d(keep, list(allowed)) if keep is not None else list(allowed))
        if ids is None:
            return self._vector_top(q, k, [], {})
        return self._vector_top(q, k, ["t.id = ANY(%(ids)s)"], {"ids": [int(i) for i in ids]})

    def stats(self) -> dict:
        return {t: int(self._q(f"SELECT count(*) FROM {{s}}.{t}").fetchone()[0])
                for t in ("sessions", "events", "blocks", "vectors", "files")}

    def size_bytes(self) -> int:
        return int(self._q("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                           "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                           "AND c.relkind IN ('r', 'm')", (self.s,)).fetchone()[0])
