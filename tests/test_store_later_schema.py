"""An index a later release wrote (a schema number this release does not know) is refused
with a clear error, never read on nor re-numbered down: its layout may hold what this
release cannot read (deflated texts, FTS5 columns computed by that release's functions)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dsh_recall.core.errors import StoreError
from dsh_recall.stores.sqlite import migrations
from dsh_recall.stores.sqlite.chunks import SqliteChunkStore


def test_an_index_of_a_later_release_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    SqliteChunkStore(path).close()
    later = migrations.latest(migrations.CHUNKS) + 1
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(later),))
    with pytest.raises(StoreError, match=r"later dsh-recall .*index --drop"):
        SqliteChunkStore(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == str(later)
