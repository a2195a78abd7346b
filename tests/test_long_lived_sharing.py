"""A long-lived process that opens a service per request (the CLI daemon) keeps one vector
index and one score-list cache per index: a request neither maps the vector file anew (each
mapping stayed, pages and all, until the garbage collector freed it) nor reads its score
lists back from the file. A one-shot process shares nothing, and a service that closes lets
go of its mapping at once."""

from __future__ import annotations

import threading
from pathlib import Path

from dsh_recall.core import process
from dsh_recall.core.config import load_config
from dsh_recall.services import vectors
from dsh_recall.services.code import CodeService
from dsh_recall.stores.sqlite import impacts


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(30):
        (ws / f"m{i}.py").write_text(f"def handler_{i}(request):\n    return retry_policy(request, {i})\n")
    return ws


def _service(ws: Path) -> CodeService:
    return CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake"}}))


def test_a_daemon_keeps_one_vector_index_and_one_list_cache_per_index(tmp_path, monkeypatch):
    ws = _workspace(tmp_path)
    svc = _service(ws)
    svc.index()
    vectors.sync_vector_file(svc.store)
    svc.close()

    one = _service(ws)  # a one-shot process: its own, released at close
    one.search("retry policy handler")
    assert not one._vectors.kept and one._vectors._mapped is not None
    one.close()
    assert one._vectors._mapped is None

    monkeypatch.setattr(process, "_LONG_LIVED", True)  # what the daemon sets
    monkeypatch.setattr(vectors, "_INDEXES", {})
    monkeypatch.setattr(impacts, "_SHARED", {})
    threads = threading.active_count()
    seen = []
    for _ in range(4):  # a request each
        s = _service(ws)
        hits = s.search("retry policy handler")["results"]
        assert hits
        seen.append((s._vectors, s.store.impacts))
        s.close()
    assert all(v is seen[0][0] and c is seen[0][1] for v, c in seen)
    assert seen[0][0].kept and seen[0][0]._mapped is not None  # kept past each close
    assert not seen[0][1]._closed
    seen[0][1].wait_idle(30.0)
    assert threading.active_count() <= threads + 1  # one warmer at most, not one per request


def _anon_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_free_heap_pages_go_back_after_a_large_run():
    """What an index run leaves (freed batches the allocator keeps) goes back to the system:
    release_free_memory is glibc's malloc_trim, called after bulk loads and index jobs."""
    import ctypes

    import pytest
    if not hasattr(ctypes.CDLL(None), "malloc_trim") or not Path("/proc/self/status").exists():
        pytest.skip("no glibc malloc_trim or no /proc here: release_free_memory is a no-op")
    keep = [bytes(2048) + i.to_bytes(4, "little") for i in range(100_000)]  # malloc, not pymalloc
    tail = bytes(4096) + b"end"  # allocated last (malloc too): the heap's top stays in use
    del keep
    held = _anon_mb()
    process.release_free_memory()
    assert held - _anon_mb() > 50, (held, _anon_mb())
    assert tail.endswith(b"end")
