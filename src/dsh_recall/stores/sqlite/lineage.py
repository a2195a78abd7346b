"""The lineage store: one SQLite file per git repository (recall_home()/lineage/<repo>.sqlite).

Tables: commits (message, author, dates, the paths touched), hunks (each commit's diff
against its first parent, no context lines, the added and removed text bounded) and an
FTS5 index over the messages. A batch of commits is written in one transaction. SQL only:
what to index and how to answer `why` lives in services/lineage/.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ...core.errors import StoreError
from ...core.text import fts_quote
from ..contracts import CommitRow, HunkRow
from . import migrations
from .util import connect as sqlite_connect

APPLICATION_ID = 0x44524C47  # "DRLG": marks a dsh-recall lineage store
SCHEMA_VERSION = str(migrations.latest(migrations.LINEAGE))
_COMMIT_COLS = "hash, parents, author, author_mail, author_time, committer_time, message, files, truncated"
_HUNK_COLS = "path, old_path, old_start, old_lines, new_start, new_lines, added, removed"


def _commit(r: Sequence) -> CommitRow:
    return CommitRow(hash=r[0], parents=tuple(r[1].split()), author=r[2], author_mail=r[3],
                     author_time=r[4], committer_time=r[5], message=r[6],
                     files=tuple(f for f in r[7].split("\n") if f), truncated=bool(r[8]))


class SqliteLineageStore:
    """SQL access to one repository's lineage database (stores.contracts.LineageStore)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.conn = sqlite_connect(self.path, APPLICATION_ID, "dsh-recall lineage database",
                                   "re-index (dsh-recall lineage index)")
        if migrations.recorded(self.conn) != migrations.latest(migrations.LINEAGE):
            try:
                with self.conn:
                    self.conn.execute("BEGIN IMMEDIATE")
                    migrations.apply(self.conn, migrations.LINEAGE, migrations.LINEAGE_V1)
            except sqlite3.DatabaseError as e:
                raise StoreError(f"cannot initialise {self.path}: {e}") from e

    def close(self) -> None:
        self.conn.close()

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def known(self, hashes: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for i in range(0, len(hashes), 500):
            part = list(hashes[i:i + 500])
            out.update(r[0] for r in self.conn.execute(
                f"SELECT hash FROM commits WHERE hash IN ({','.join('?' * len(part))})", part))
        return out

    def put_commits(self, commits: Sequence[CommitRow], hunks: Sequence[HunkRow]) -> int:
        """Write commits and their hunks in one transaction; a commit already there is kept
        as it is (with its hunks). Returns how many commits were added."""
        by_commit: dict[str, list[HunkRow]] = {}
        for h in hunks:
            by_commit.setdefault(h.commit, []).append(h)
        added = 0
        try:
            with self.conn:
                self.conn.execute("BEGIN IMMEDIATE")
                for c in commits:
                    cur = self.conn.execute(
                        f"INSERT OR IGNORE INTO commits({_COMMIT_COLS}) VALUES (?,?,?,?,?,?,?,?,?)",
                        (c.hash, " ".join(c.parents), c.author, c.author_mail, c.author_time,
                         c.committer_time, c.message, "\n".join(c.files), int(c.truncated)))
                    if cur.rowcount == 0:
                        continue
                    cid = cur.lastrowid
                    added += 1
                    self.conn.execute("INSERT INTO commits_fts(rowid, message) VALUES (?, ?)",
                                      (cid, c.message))
                    self.conn.executemany(
                        f"INSERT INTO hunks(commit_id, {_HUNK_COLS}) VALUES (?,?,?,?,?,?,?,?,?)",
                        [(cid, h.path, h.old_path, h.old_start, h.old_lines, h.new_start,
                          h.new_lines, h.added, h.removed) for h in by_commit.get(c.hash, [])])
        except sqlite3.Error as e:
            raise StoreError(f"{type(e).__name__}: {e}") from e
        return added

    def commit(self, hash: str) -> CommitRow | None:
        row = self.conn.execute(f"SELECT {_COMMIT_COLS} FROM commits WHERE hash = ?",
                                (hash,)).fetchone()
        return _commit(row) if row else None

    def hunks(self, commit: str, path: str | None = None) -> list[HunkRow]:
        sql = (f"SELECT c.hash, {', '.join('h.' + c.strip() for c in _HUNK_COLS.split(','))} "
               "FROM hunks h JOIN commits c ON c.id = h.commit_id WHERE c.hash = ?")
        args: list[str] = [commit]
        if path is not None:
            sql += " AND (h.path = ? OR h.old_path = ?)"
            args += [path, path]
        return [HunkRow(*r) for r in self.conn.execute(sql + " ORDER BY h.id", args)]

    def commits_touching(self, path: str, limit: int) -> list[CommitRow]:
        """The newest `limit` indexed commits with a hunk in `path`, newest first."""
        cols = ", ".join("c." + c.strip() for c in _COMMIT_COLS.split(","))
        rows = self.conn.execute(
            f"SELECT {cols} FROM commits c WHERE c.id IN (SELECT commit_id FROM hunks WHERE path = ?) "
            "ORDER BY c.committer_time DESC, c.id LIMIT ?", (path, limit))
        return [_commit(r) for r in rows]

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """(hash, score) of commits whose messages hold any of `terms`, best first (FTS5
        bm25, negated so higher is better)."""
        terms = [t for t in terms if t.strip()]
        if not terms:
            return []
        match = " OR ".join(fts_quote(t) for t in terms)
        try:
            rows = self.conn.execute(
                "SELECT c.hash, bm25(commits_fts) AS s FROM commits_fts f JOIN commits c "
                "ON c.id = f.rowid WHERE commits_fts MATCH ? ORDER BY s LIMIT ?", (match, limit))
            return [(r[0], -float(r[1])) for r in rows]
        except sqlite3.OperationalError as e:
            raise StoreError(f"lineage search: {e}") from e

    def stats(self) -> dict[str, int]:
        return {t: int(self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in ("commits", "hunks")}
