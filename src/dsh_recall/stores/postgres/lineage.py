"""The lineage store on PostgreSQL: one repository's commits in one namespace (see
docs/lineage.md). Same calls as stores/sqlite/lineage.py (stores.contracts.LineageStore).

Messages are searched by PostgreSQL's own full-text search (an English tsvector with a GIN
index, ranked by ts_rank): a message search only orders commits for a person, so it need
not score like FTS5 the way the code and history layers do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ...core.errors import StoreError
from ..contracts import CommitRow, HunkRow
from . import migrations
from . import util as pg_util

SCHEMA_VERSION = migrations.latest(migrations.LINEAGE)
_COMMIT_COLS = "hash, parents, author, author_mail, author_time, committer_time, message, files, truncated"
_HUNK_COLS = "path, old_path, old_start, old_lines, new_start, new_lines, added, removed"
_WORD = re.compile(r"\w+")
MAX_TERMS = 32


def _commit(r: Sequence) -> CommitRow:
    return CommitRow(hash=r[0], parents=tuple(r[1].split()), author=r[2], author_mail=r[3],
                     author_time=int(r[4]), committer_time=int(r[5]), message=r[6],
                     files=tuple(f for f in r[7].split("\n") if f), truncated=bool(r[8]))


def _clean(s: str) -> str:
    return s.replace("\x00", "\ufffd")  # PostgreSQL text holds no NUL


class PgLineageStore:
    """One repository's commits in a namespace of a PostgreSQL database."""

    def __init__(self, url: str, namespace: str):
        self.url, self.namespace = url, namespace
        self.conn = pg_util.connect(url)
        self.s = migrations.ensure_namespace(self.conn, namespace, "lineage", migrations.LINEAGE)

    @property
    def path(self) -> str:
        return f"{pg_util.redact(self.url)}#{self.namespace}"

    def close(self) -> None:
        pg_util.release(self.url, self.conn)

    def _q(self, sql: str, params: Any = None) -> Any:
        import psycopg

        try:
            return self.conn.execute(sql.replace("{s}", self.s), params)
        except psycopg.Error as e:
            raise StoreError(f"{pg_util.redact(self.url)}: {str(e).strip()}") from e

    def get_meta(self, key: str) -> str | None:
        row = self._q("SELECT value FROM {s}.meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self._q("INSERT INTO {s}.meta(key, value) VALUES (%s, %s) ON CONFLICT (key) "
                "DO UPDATE SET value = excluded.value", (key, value))

    def known(self, hashes: Sequence[str]) -> set[str]:
        if not hashes:
            return set()
        return {r[0] for r in self._q("SELECT hash FROM {s}.commits WHERE hash = ANY(%s)",
                                      (list(hashes),))}

    def put_commits(self, commits: Sequence[CommitRow], hunks: Sequence[HunkRow]) -> int:
        by_commit: dict[str, list[HunkRow]] = {}
        for h in hunks:
            by_commit.setdefault(h.commit, []).append(h)
        added = 0
        import psycopg

        try:
            with self.conn.transaction():
                for c in commits:
                    row = self._q(
                        f"INSERT INTO {{s}}.commits({_COMMIT_COLS}, tsv) VALUES "
                        "(%s,%s,%s,%s,%s,%s,%s,%s,%s, to_tsvector('english', %s)) "
                        "ON CONFLICT (hash) DO NOTHING RETURNING id",
                        (c.hash, " ".join(c.parents), _clean(c.author), _clean(c.author_mail),
                         c.author_time, c.committer_time, _clean(c.message),
                         _clean("\n".join(c.files)), c.truncated, _clean(c.message))).fetchone()
                    if row is None:
                        continue
                    added += 1
                    rows = [(row[0], _clean(h.path), _clean(h.old_path), h.old_start, h.old_lines,
                             h.new_start, h.new_lines, _clean(h.added), _clean(h.removed))
                            for h in by_commit.get(c.hash, [])]
                    if rows:
                        with self.conn.cursor() as cur:
                            cur.executemany(
                                f"INSERT INTO {self.s}.hunks(commit_id, {_HUNK_COLS}) "
                                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows)
        except psycopg.Error as e:
            raise StoreError(f"{pg_util.redact(self.url)}: {str(e).strip()}") from e
        return added

    def commit(self, hash: str) -> CommitRow | None:
        row = self._q(f"SELECT {_COMMIT_COLS} FROM {{s}}.commits WHERE hash = %s", (hash,)).fetchone()
        return _commit(row) if row else None

    def hunks(self, commit: str, path: str | None = None) -> list[HunkRow]:
        cols = ", ".join("h." + c.strip() for c in _HUNK_COLS.split(","))
        sql = (f"SELECT c.hash, {cols} FROM {{s}}.hunks h JOIN {{s}}.commits c "
               "ON c.id = h.commit_id WHERE c.hash = %s")
        args: list[str] = [commit]
        if path is not None:
            sql += " AND (h.path = %s OR h.old_path = %s)"
            args += [path, path]
        return [HunkRow(*r) for r in self._q(sql + " ORDER BY h.id", args)]

    def commits_touching(self, path: str, limit: int) -> list[CommitRow]:
        cols = ", ".join("c." + c.strip() for c in _COMMIT_COLS.split(","))
        rows = self._q(
            f"SELECT {cols} FROM {{s}}.commits c WHERE c.id IN "
            "(SELECT commit_id FROM {s}.hunks WHERE path = %s) "
            "ORDER BY c.committer_time DESC, c.id LIMIT %s", (path, limit))
        return [_commit(r) for r in rows]

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
        words = list(dict.fromkeys(w for t in terms for w in _WORD.findall(t)))[:MAX_TERMS]
        if not words:
            return []
        q = " || ".join(["plainto_tsquery('english', %s)"] * len(words))
        rows = self._q(
            f"SELECT hash, ts_rank(tsv, x.q) AS s FROM {{s}}.commits CROSS JOIN (SELECT ({q}) AS q) x "
            "WHERE tsv @@ x.q ORDER BY s DESC, committer_time DESC LIMIT %s", [*words, limit])
        return [(r[0], float(r[1])) for r in rows]

    def stats(self) -> dict[str, int]:
        return {t: int(self._q(f"SELECT count(*) FROM {{s}}.{t}").fetchone()[0])
                for t in ("commits", "hunks")}
