"""A first index read by worker processes is the index one process builds, chunk for chunk,
through the service and through the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dsh_recall.core.config import load_config
from dsh_recall.services.code import CodeService
from dsh_recall.services.code import prepare as code_prepare
from procs import cli, env_for
from test_code_concurrency import make_tree as concurrency_tree


def make_tree(root: Path) -> Path:
    """test_code_concurrency's tree of handlers, plus a prose file, a file that does not
    parse (with invalid UTF-8) and a binary one."""
    concurrency_tree(root, 24)
    (root / "notes.md").write_text("# Notes\n\nThe retry budget of each handler.\n")
    (root / "bad.py").write_bytes(b"def broken(:\n    \xff\xfe lone bytes\n")
    (root / "blob.bin").write_bytes(bytes(range(256)) * 40)
    return root


def _rows(svc: CodeService) -> list[tuple]:
    return svc.store.conn.execute(
        "SELECT c.id, f.path, c.start_line, c.end_line, c.symbols, c.text, c.embed_hash, x.body, "
        "x.symbols, x.path FROM chunks c JOIN files f ON f.id = c.file_id "
        "JOIN chunks_fts x ON x.rowid = c.id ORDER BY c.id").fetchall()


def _index(ws: Path, home: Path, workers: int) -> tuple[CodeService, object]:
    cfg = load_config(workspace=ws, overrides={"embedder": {"name": "fake"}, "index_workers": workers})
    svc = CodeService(ws, cfg, home)
    with svc._index_lock(None):
        rep = svc.index_lexical()
    return svc, rep


def test_workers_build_the_same_index_as_one_process(tmp_path):
    ws = make_tree(tmp_path / "ws")
    one, rep1 = _index(ws, tmp_path / "home1", 1)
    two, rep2 = _index(ws, tmp_path / "home2", 2)
    assert rep1.chunks == rep2.chunks > 24
    assert rep1.skipped == rep2.skipped and rep1.skipped  # the binary file, said the same way
    assert _rows(one) == _rows(two)
    # An edit then goes through the same path: only that file is read again.
    (ws / "pkg0" / "mod0.py").write_text("def replaced_handler():\n    return 1\n")
    with two._index_lock(None):
        again = two.index_lexical()
    assert again.indexed == 1 and again.unchanged == rep2.indexed - 1
    assert two.search("replaced_handler", layers=("lexical",))["results"][0]["path"] == "pkg0/mod0.py"


def test_worker_count_follows_the_setting_and_the_size():
    assert code_prepare.worker_count(10_000, 1) == 1
    assert code_prepare.worker_count(10_000, 3) == 3
    assert code_prepare.worker_count(code_prepare.PARALLEL_MIN_FILES - 1, 0) == 1
    assert 1 <= code_prepare.worker_count(10_000, 0) <= 4


def test_cli_index_with_workers(tmp_path):
    ws = make_tree(tmp_path / "ws")
    env = env_for(tmp_path / "home")
    env["DSH_RECALL_INDEX_WORKERS"] = "2"
    proc = subprocess.run(cli("index", "--wait", "--lexical-only", "--json"), cwd=ws, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["chunks"] > 24 and data["indexed"] == 26


def test_mcp_server_indexes_with_workers(tmp_path):
    """`dsh-recall mcp` speaks on stdout; the index workers it starts share that stream, and
    the session must stay intact through a first search that starts them."""
    import asyncio

    from test_mcp_server import _session_run, make_world

    world = make_world(tmp_path, sources=False, many_files=40)
    world["env"]["DSH_RECALL_INDEX_WORKERS"] = "2"

    async def body(session):
        first = await session.call_tool("code_search", {"query": "request_handler_7"})
        again = await session.call_tool("status", {})
        return first, again

    first, again = asyncio.run(_session_run(world, body))
    assert not first.is_error, first.content
    assert first.structured_content["results"][0]["path"] == "pkg/mod7.py"
    assert not again.is_error


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie its new parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_workers_end_when_the_indexer_is_killed(tmp_path):
    import os
    import signal
    import time

    import pytest

    if not os.path.exists("/proc/self/task"):
        pytest.skip("needs /proc to find the worker processes (run on Linux)")
    ws = concurrency_tree(tmp_path / "ws", 600)
    env = env_for(tmp_path / "home")
    env["DSH_RECALL_INDEX_WORKERS"] = "2"
    proc = subprocess.Popen(cli("index", str(ws), "--wait", "--lexical-only", "--json"), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:
            # the pool's workers (and multiprocessing's resource tracker) are its children
            workers = [c for c in _children(proc.pid)
                       if b"spawn_main" in open(f"/proc/{c}/cmdline", "rb").read()]
            if len(workers) >= 2:
                break
            time.sleep(0.02)
        if proc.poll() is not None:
            pytest.skip("the index finished before its workers could be seen")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(_gone(w) for w in workers):
            time.sleep(0.1)
        assert all(_gone(w) for w in workers), workers
    finally:
        if proc.poll() is None:
            proc.kill()
