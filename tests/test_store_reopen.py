"""A chunk store's copies for worker threads (stores/sqlite/terms.py reopen): a closed copy is
kept for the next reopen, with its connection (parsed schema, page cache), and ends with
the store; a copy follows the store's flags as they stand when it is handed out."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from dsh_recall.stores import registry
from dsh_recall.stores.sqlite.chunks import SqliteChunkStore
from dsh_recall.stores.sqlite.terms import SPARE_COPIES


def test_a_closed_copy_serves_the_next_reopen_and_ends_with_the_store(tmp_path):
    s = SqliteChunkStore(tmp_path / "x.sqlite")
    a = registry.reopen(s)
    conn = a.conn
    assert a is not s and a.conn is not s.conn
    a.close()
    b = registry.reopen(s)
    assert b is a and b.conn is conn  # the same connection, still open
    assert b.conn.execute("SELECT count(*) FROM chunks").fetchone() == (0,)
    # copies in use at once are distinct; at most SPARE_COPIES are kept
    more = [registry.reopen(s) for _ in range(SPARE_COPIES + 1)]
    assert len({id(x) for x in [b, *more]}) == SPARE_COPIES + 2
    for x in [b, *more]:
        x.close()
    assert len(s._spares) == SPARE_COPIES
    kept = [x.conn for x in s._spares]
    s.close()
    for c in kept:
        with pytest.raises(sqlite3.ProgrammingError):
            c.execute("SELECT 1")


def test_a_copy_closed_after_its_store_closes_its_connection(tmp_path):
    s = SqliteChunkStore(tmp_path / "x.sqlite")
    a = registry.reopen(s)
    s.close()
    a.close()  # the store is gone: nothing to keep it for
    with pytest.raises(sqlite3.ProgrammingError):
        a.conn.execute("SELECT 1")


def test_a_kept_copy_takes_the_store_flags_of_now(tmp_path):
    s = SqliteChunkStore(tmp_path / "x.sqlite")
    try:
        a = registry.reopen(s)
        a.close()
        s.use_impacts, s.warm_behind = False, True
        b = registry.reopen(s)
        assert b is a and (b.use_impacts, b.warm_behind) == (False, True)
        assert b.impacts is s.impacts
        done: list[int] = []
        t = threading.Thread(target=lambda: done.append(b.conn.execute("SELECT 1").fetchone()[0]))
        t.start()
        t.join()  # a copy serves whichever worker thread takes it
        assert done == [1]
        b.close()
    finally:
        s.close()


def test_stores_keep_a_bounded_page_cache_and_see_each_others_writes(tmp_path):
    from dsh_recall.stores.sqlite.history import HistoryStore
    from dsh_recall.stores.sqlite.util import CACHE_KIB

    s = SqliteChunkStore(tmp_path / "x.sqlite")
    copy = registry.reopen(s)
    h = HistoryStore(tmp_path / "h.sqlite")
    try:
        for conn in (s.conn, copy.conn, h.conn):
            assert conn.execute("PRAGMA cache_size").fetchone() == (-CACHE_KIB,)
        assert 2_000 < CACHE_KIB <= 65_536  # above SQLite's default, bounded per connection
        s.set_meta("probe", "written by one connection")
        assert copy.get_meta("probe") == "written by one connection"
    finally:
        copy.close()
        s.close()
        h.close()
