"""The bulk load of a first index (stores/sqlite/bulk.py, stores/postgres/bulk.py): it
answers exactly as an index built file by file, on both backends, and a load killed
midway is never taken for a complete index: the next run starts again and ends whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.services.code import CodeService, indexing
from pg_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

WORDS = ["session", "retry", "adapter", "fixture", "cookie", "parse", "config", "token", "cache",
         "request", "handler", "stream", "buffer", "plugin", "report", "marker", "encode"]
QUERIES = ["retry adapter", "parse_config_7", "cookie token cache", "stream buffer handler",
           "where is the marker encoded", "plugin report 12"]
FILES = 36


def make_tree(root: Path) -> Path:
    for i in range(FILES):
        a, b, c = WORDS[i % 17], WORDS[(i * 5 + 3) % 17], WORDS[(i * 7 + 1) % 17]
        funcs = "\n\n".join(
            f"def {a}_{b}_{i}_{j}({c}):\n    \"\"\"{a} the {b} of a {c}, step {j}.\"\"\"\n"
            f"    {c} = {c}.{b}({j})\n    return {a}_{c}({c}, {i})\n" for j in range(3))
        sub = "docs" if i % 9 == 0 else "pkg"
        ext = "md" if sub == "docs" else "py"
        p = root / sub / f"{a}_{i}.{ext}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# {a} {b}\n\n{funcs}\n" if ext == "md" else f"class Parse_config_{i}:\n"
                     f"    pass\n\n\n{funcs}\n")
    return root


def service(ws: Path, home: Path, store: str | None = None) -> CodeService:
    over: dict = {"embedder": {"name": "fake"}, "index_workers": 1}
    if store:
        over["store"] = store
    return CodeService(ws, load_config(workspace=ws, overrides=over), home=home)


def answers(svc: CodeService, **kw) -> list:
    return [[(r["path"], r["start_line"], r["end_line"], round(r["score"], 9))
             for r in svc.search(q, **kw)["results"]] for q in QUERIES]


def build(ws: Path, home: Path, bulk: bool, monkeypatch, store: str | None = None) -> CodeService:
    monkeypatch.setattr(indexing, "BULK_MIN_FILES", 1 if bulk else 10**9)
    monkeypatch.setattr(indexing, "BULK_BATCH_CHUNKS", 4)  # many batches on a small tree
    svc = service(ws, home, store)
    began: list[bool] = []
    real = svc.store.bulk_begin

    def spy() -> bool:
        began.append(real())
        return began[-1]

    monkeypatch.setattr(svc.store, "bulk_begin", spy)
    rep = svc.index()
    assert rep.files == FILES and rep.pending == 0 and not svc.store.bulk_interrupted()
    assert any(began) == bulk
    return svc


def compare(bulk: CodeService, plain: CodeService) -> None:
    assert bulk.store.chunk_count() == plain.store.chunk_count()
    terms = ["retry", "adapter", "parse_config_7", "cookie", "step", "pkg"]
    assert bulk.store.doc_freqs(terms) == plain.store.doc_freqs(terms)
    assert answers(bulk, layers=("lexical",)) == answers(plain, layers=("lexical",))
    assert answers(bulk) == answers(plain)
    assert answers(bulk, path="docs") == answers(plain, path="docs")


def test_a_bulk_loaded_index_answers_as_one_built_file_by_file(tmp_path, monkeypatch):
    ws = make_tree(tmp_path / "repo")
    plain = build(ws, tmp_path / "home-plain", False, monkeypatch)
    bulk = build(ws, tmp_path / "home-bulk", True, monkeypatch)
    try:
        compare(bulk, plain)
        names = {r[0] for r in bulk.store.conn.execute("SELECT name FROM sqlite_master")}
        assert {"chunks_file", "chunks_embed", "chunks_vec_seq"} <= names  # whole after the load
        # Incremental from there on: an edit and a deletion, the same on both.
        (ws / "pkg" / "session_0.py").write_text("def thermostat_heat():\n    return 'warm'\n")
        (ws / "pkg" / "retry_1.py").unlink()
        for svc in (plain, bulk):
            rep = svc.index()
            assert (rep.indexed, rep.deleted) == (1, 1)
        compare(bulk, plain)
    finally:
        plain.close()
        bulk.close()


def test_a_bulk_load_on_postgres_answers_as_sqlite_does(tmp_path, pg_url, monkeypatch):
    ws = make_tree(tmp_path / "repo")
    lite = build(ws, tmp_path / "home-lite", False, monkeypatch)
    pg = build(ws, tmp_path / "home-pg", True, monkeypatch, pg_url)
    try:
        compare(pg, lite)
        (ws / "pkg" / "session_0.py").write_text("def thermostat_heat():\n    return 'warm'\n")
        for svc in (lite, pg):
            assert svc.index().indexed == 1
        compare(pg, lite)
    finally:
        lite.close()
        pg.close()


KILLER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from dsh_recall.core.config import load_config
    from dsh_recall.services.indexing import filesync
    from dsh_recall.services.code import CodeService, indexing

    ws, home, store = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] or None
    indexing.BULK_MIN_FILES, indexing.BULK_BATCH_CHUNKS = 1, 4
    real, seen = filesync.write_batch, []

    def write_batch(store, batch):
        real(store, batch)
        seen.append(1)
        if len(seen) == 2:  # two batches committed, the load far from done
            os.kill(os.getpid(), signal.SIGKILL)

    filesync.write_batch = write_batch
    over = {"embedder": {"name": "fake"}, "index_workers": 1}
    if store:
        over["store"] = store
    CodeService(ws, load_config(workspace=ws, overrides=over), home=home).index()
""")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_load_killed_midway_is_started_again(tmp_path, monkeypatch, backend, request):
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else ""
    ws = make_tree(tmp_path / "repo")
    home = tmp_path / "home"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), DSH_RECALL_HOME=str(home))
    proc = subprocess.run([sys.executable, "-c", KILLER, str(ws), str(home), url], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    svc = service(ws, home, url or None)
    try:
        # What the killed load left is marked partial: never served as a complete index.
        assert svc.store.bulk_interrupted()
        assert 0 < svc.store.file_count() < FILES
        with svc._index_lock(None):  # as if its indexer still ran: a search says partial
            ans = svc.search("retry adapter")
        assert any("first index is loading or was stopped" in n for n in ans["notes"])
        # The next indexer (here a search's cold start) empties it and indexes it whole.
        ans = svc.search("retry adapter")
        assert any("stopped before it ended" in n for n in ans["notes"])
        assert svc.store.file_count() == FILES and not svc.store.bulk_interrupted()
        assert svc.index().pending == 0
        plain = build(ws, tmp_path / "home-plain", False, monkeypatch)
        try:
            compare(svc, plain)
        finally:
            plain.close()
        assert "first index" not in json.dumps(svc.search("retry adapter")["notes"])
    finally:
        svc.close()


def test_a_search_during_a_load_answers_and_says_partial(tmp_path, monkeypatch):
    ws = make_tree(tmp_path / "repo")
    plain = build(ws, tmp_path / "home-plain", False, monkeypatch)
    loader = service(ws, tmp_path / "home")
    reader = service(ws, tmp_path / "home")  # another process's store on the same file
    try:
        assert loader.store.bulk_begin()
        rows = [(f, plain.store.chunks_by_id(plain.store.chunk_ids_for_paths([p]))) for p, f in
                sorted(plain.store.files().items())[:5]]
        assert rows and not reader.store.bulk_begin()  # one load at a time, and only on empty
        from dsh_recall.core.types import Chunk
        from dsh_recall.stores.contracts import IndexedChunk

        loader.store.replace_files([(f, [IndexedChunk(Chunk(r.path, r.start_line, r.end_line, r.text,
                                                            r.language, r.symbols), r.text, "", "",
                                                      r.text, r.embed_hash) for r in cs.values()])
                                    for f, cs in rows])
        assert reader.store.bulk_interrupted() and not loader.store.bulk_interrupted()
        assert reader.store.pending(10) and reader.store.lexical('"step"', 5)
        loader.store.bulk_end()
        assert not reader.store.bulk_interrupted() and reader.store.file_count() == 5
    finally:
        for svc in (plain, loader, reader):
            svc.close()
