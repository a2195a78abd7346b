"""History imports and notes indexing from two processes at once, and after a kill -9."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from procs import cli, env_for, kill_9_when


def write_sessions(folder: Path, sessions: int, turns: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(sessions):
        with open(folder / f"s{s:03d}.jsonl", "w") as f:
            for t in range(turns):
                f.write(json.dumps({"session": f"s{s:03d}", "seq": t, "role": "user" if t % 2 else "assistant",
                                    "text": f"turn {t} of session {s} about widget{s} and gadget{t}",
                                    "workspace": "proj"}) + "\n")
    return folder


def history_snapshot(home: Path) -> tuple:
    conn = sqlite3.connect(home / "history.sqlite")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    out = (
        conn.execute("SELECT count(*) FROM sessions").fetchone()[0],
        sorted(conn.execute("SELECT session, seq FROM events")),
        conn.execute("SELECT count(*) FROM blocks").fetchone()[0],
        conn.execute("SELECT count(*) FROM fts_literal").fetchone()[0],
        conn.execute("SELECT count(*) FROM fts_trigram").fetchone()[0],
    )
    conn.close()
    return out


def test_two_history_imports_at_once(tmp_path):
    src = write_sessions(tmp_path / "t", 40, 30)
    home = tmp_path / "home"
    procs = [subprocess.Popen(cli("history", "import", str(src), "--format", "generic", "--json"),
                              env=env_for(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    sessions, events, blocks, lit, tri = history_snapshot(home)
    assert sessions == 40 and len(events) == 40 * 30 == len(set(events))
    assert blocks == lit == tri


def test_kill_9_mid_import_then_import_again(tmp_path):
    src = write_sessions(tmp_path / "t", 150, 40)
    ref, home = tmp_path / "ref", tmp_path / "home"
    subprocess.run(cli("history", "import", str(src), "--format", "generic"), env=env_for(ref),
                   check=True, capture_output=True, timeout=300)
    reference = history_snapshot(ref)
    killed = kill_9_when(cli("history", "import", str(src), "--format", "generic"), env_for(home),
                         home / "history.sqlite", "SELECT count(*) FROM sessions", 5)
    assert killed, "the import finished before it could be killed; grow the input"
    history_snapshot(home)  # sound after the kill
    subprocess.run(cli("history", "import", str(src), "--format", "generic"), env=env_for(home),
                   check=True, capture_output=True, timeout=300)
    assert history_snapshot(home) == reference


def test_two_notes_indexers_at_once(tmp_path):
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(60):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\n- fact {i}: the deploy key lives in vault {i}\n")
    home = tmp_path / "home"
    procs = [subprocess.Popen(cli("notes", "index", str(root), "--wait", "--json"), env=env_for(home),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    res = subprocess.run(cli("notes", "search", "vault 42", "--root", str(root), "--json"),
                         env=env_for(home), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["path"].endswith("n42.md")
