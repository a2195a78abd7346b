"""SQLite keeps its POSIX locks per process: closing any descriptor of a database file drops
every lock this process holds on it. Opening a second store on the same file in one process
(the MCP server's services, a bench, the daemon) must therefore never open and close the
file behind SQLite's back, or another process takes the database for unused and loses
what the first connection committed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from dsh_recall.services.objects import ObjectService


def test_a_second_store_on_the_same_file_keeps_the_first_ones_commits_visible(tmp_path):
    db = tmp_path / "objects.sqlite"
    first = ObjectService(path=db)
    code = ("import sys; from pathlib import Path; from dsh_recall.services.objects import "
            "ObjectService; s = ObjectService(path=Path(sys.argv[1])); "
            "print(all(s.search_in(i, 'line').matches for i in sys.argv[2:])); s.close()")

    def other_process_sees(*ids: str) -> str:
        """What another process (a CLI call) finds of these objects."""
        out = subprocess.run([sys.executable, "-c", code, str(db), *ids], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    a = first.put("alpha line\n" * 4000, session="s1", tool="t")
    second = ObjectService(path=db)  # same process, same file
    b = first.put("bravo line\n" * 4000, session="s2", tool="t")
    assert second.search_in(b.id, "line").matches
    second.close()
    c = first.put("charlie line\n" * 4000, session="s3", tool="t")
    assert other_process_sees(a.id, b.id, c.id) == "True"
    d = first.put("delta line\n" * 4000, session="s4", tool="t")
    assert other_process_sees(d.id) == "True"
    # and this process can still open the file afresh
    conn = sqlite3.connect(str(db))
    assert conn.execute("SELECT count(*) FROM objects").fetchone()[0] == 4
    conn.close()
    first.close()
    assert Path(db).stat().st_mode & 0o077 == 0
