"""Two indexers at once, and a kill -9 mid-index: no error, no corruption, same result."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path

from dsh_recall.core.paths import workspace_dir
from procs import cli, env_for, kill_9_when


def make_tree(root: Path, n: int = 300) -> Path:
    for i in range(n):
        d = root / f"pkg{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        funcs = "\n\n".join(
            f"def handler_{i}_{j}(request):\n    \"\"\"Handle case {i}.{j}.\"\"\"\n"
            f"    value = request.get('k{j}')\n    return value * {j}\n" for j in range(12))
        (d / f"mod{i}.py").write_text(funcs)
    return root


def index_cmd(ws: Path) -> list[str]:
    return cli("index", str(ws), "--wait", "--json")


def snapshot(home: Path, ws: Path) -> tuple:
    db = workspace_dir(ws, home) / "index.sqlite"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    files = sorted(conn.execute("SELECT path, hash FROM files"))
    chunks = sorted(conn.execute(
        "SELECT f.path, c.start_line, c.end_line, c.embed_hash FROM chunks c "
        "JOIN files f ON f.id = c.file_id"))
    fts = conn.execute("SELECT count(*) FROM chunks_fts_docsize").fetchone()[0]  # a row per FTS5 row
    missing = conn.execute("SELECT count(*) FROM chunks c LEFT JOIN vectors v "
                           "ON v.hash = c.embed_hash WHERE v.hash IS NULL").fetchone()[0]
    conn.close()
    return files, chunks, fts, missing


def test_two_indexers_at_once(tmp_path):
    ws = make_tree(tmp_path / "ws", 120)
    home = tmp_path / "home"
    procs = [subprocess.Popen(index_cmd(ws), env=env_for(home), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
    files, chunks, fts, missing = snapshot(home, ws)
    assert len(files) == 120 and fts == len(chunks) and missing == 0


def test_kill_9_mid_index_then_index_again(tmp_path):
    ws = make_tree(tmp_path / "ws", 300)
    ref_home, home = tmp_path / "ref", tmp_path / "home"
    subprocess.run(index_cmd(ws), env=env_for(ref_home), check=True, capture_output=True, timeout=300)
    reference = snapshot(ref_home, ws)

    db = workspace_dir(ws, home) / "index.sqlite"
    killed_mid = kill_9_when(index_cmd(ws), env_for(home), db, "SELECT count(*) FROM files", 20)
    assert killed_mid, "the indexer finished before it could be killed; grow the tree"
    partial = snapshot(home, ws)  # sound after the kill
    assert len(partial[0]) < 300 or partial[3] > 0
    subprocess.run(index_cmd(ws), env=env_for(home), check=True, capture_output=True, timeout=300)
    assert snapshot(home, ws) == reference


def test_index_runs_in_the_background_by_default(tmp_path):
    import json as _json

    ws = make_tree(tmp_path / "ws", 30)
    home = tmp_path / "home"
    out = subprocess.run(cli("index", str(ws), "--json"),
                         env=env_for(home), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    started = _json.loads(out.stdout)
    assert started["background"] is True and started["pid"] > 0
    deadline = time.monotonic() + 120
    status = {}
    while time.monotonic() < deadline:
        st = subprocess.run(cli("status", "--workspace", str(ws), "--json"), env=env_for(home),
                            capture_output=True, text=True)
        status = _json.loads(st.stdout)
        if status["indexed"] and status["pending"] == 0 and status["files"] == 30:
            break
        time.sleep(0.2)
    assert status["files"] == 30 and status["pending"] == 0
