"""Opening a SQLite file we own: WAL, busy timeout, and refusing a foreign database.
Kept free of heavy imports, so the hooks that only touch the object store start fast."""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ...core.errors import StoreError
from ...core.paths import ensure_dir, private_file

# Each connection's page cache (PRAGMA cache_size, KiB), in place of SQLite's default
# 2,000 KiB: about 500 pages, fewer than one search at 98k code chunks reads (its lexical
# rows, the 192 vectors the vector layer rescores, the answer's rows), so each search read
# some again through system calls. At 98k chunks a warm hybrid search went 13.9 -> 12.3 ms
# p50 (bench/query_ab.py, paired). Private memory, bounded, taken only as pages are read. A
# memory map (PRAGMA mmap_size) gained as much, but its pages count in a process's RSS (a
# daemon's peak rose from 161 MB to 1.16 GB at 98k chunks) and an I/O error under it is a
# signal, not an error SQLite can report.
CACHE_KIB = 16_384


def private_db(path: Path) -> None:
    """Make a SQLite file we own private before SQLite opens it: its folder 0700, the file
    created 0600 (SQLite gives its -wal and -shm the database file's mode) and an older
    database, -wal or -shm chmodded to 0600.

    An existing file is never opened here: POSIX drops every lock a process holds on a file
    when it closes any descriptor of it, so opening and closing the database behind the back
    of a connection this process already has (a second store on the same file) would leave
    that connection unlocked, and another process, taking itself for the last user, would
    checkpoint and remove the write-ahead log under it."""
    ensure_dir(path.parent)
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                         0o600))
    except OSError:
        pass  # there already (or sqlite3.connect says what is wrong with the path)
    for suffix in ("", "-wal", "-shm", "-journal"):
        private_file(Path(str(path) + suffix))


def connect(path: Path, application_id: int, kind: str = "dsh-recall database of this kind",
            redo: str = "re-index") -> sqlite3.Connection:
    """Open (creating if needed) a SQLite file we own, in WAL mode; refuse a foreign one.

    `kind` names the database in the refusal; `redo` is what rebuilds it if it is unusable.
    """
    private_db(path)
    try:
        conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        # Ours already: no write lock needed (a search must not queue behind an indexer).
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        foreign = False
        if app != application_id:
            # One write transaction for the check and the claim: two processes creating the
            # same file at once must not see each other's half-made state.
            conn.execute("BEGIN IMMEDIATE")
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            foreign = app != application_id and (app != 0 or tables)
            if app == 0 and not foreign:
                conn.execute(f"PRAGMA application_id = {application_id}")
            conn.execute("ROLLBACK" if foreign else "COMMIT")
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise StoreError(f"{path} stayed locked by another process for 30 s; try again") from e
        raise StoreError(f"{path} is not a usable SQLite database ({e}); move it aside and {redo}") from e
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} is not a usable SQLite database ({e}); move it aside and {redo}") from e
    if foreign:
        conn.close()
        raise StoreError(f"{path} is not a {kind}; refusing to write to it")
    set_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    return conn


def set_wal(conn: sqlite3.Connection, timeout_s: float = 30.0) -> None:
    """Switch to WAL. The switch needs an exclusive lock and SQLite may answer "database is
    locked" at once (without its busy handler) while another process opens the same new
    file, so it is retried here."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


@functools.lru_cache(maxsize=4096)
def parse_symbols(raw: str) -> tuple[str, ...]:
    """A chunk's symbols column (a JSON list); copies of a file repeat it, and ranking reads
    a few hundred rows a search."""
    return tuple(json.loads(raw))


@contextmanager
def scrubbing(conn: sqlite3.Connection, fts_tables: Sequence[str] = ()) -> Iterator[None]:
    """Deletes inside overwrite what they free (PRAGMA secure_delete); at the end the FTS5
    tables' segments are merged (a delete only marks its rows in them) and the WAL is
    checkpointed and truncated, so what was deleted is not left readable in the database's
    files. Returns quietly when a reader keeps the WAL from being truncated now."""
    prev = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
    conn.execute("PRAGMA secure_delete = 1")
    try:
        yield
        for t in fts_tables:
            conn.execute(f"INSERT INTO {t}({t}) VALUES('optimize')")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.execute(f"PRAGMA secure_delete = {prev}")

