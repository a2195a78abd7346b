"""Several indexers writing one PostgreSQL namespace at once (other machines, simulated by
processes): no chunk lost or duplicated, no deadlock, counters exact, and a reader never
sees half of a file."""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np

from dsh_recall.core.text import index_text
from dsh_recall.core.types import Chunk
from dsh_recall.stores.contracts import FileRow, IndexedChunk
from pg_fixture import pg_namespace, pg_server, pg_url  # noqa: F401  (fixtures)

PATHS = [f"pkg/mod{i:02d}.py" for i in range(12)]
ROUNDS = 25


def _chunks(path: str, writer: int, rnd: int) -> list[IndexedChunk]:
    n = 2 + (writer + rnd) % 4  # versions differ in size, so a half file shows
    out = []
    for k in range(n):
        text = f"def f{k}(): return 'w{writer}r{rnd}' shared common word{k} {path}"
        c = Chunk(path, 1 + 5 * k, 4 + 5 * k, text, "python", (f"f{k}",))
        out.append(IndexedChunk(c, index_text(text), index_text(f"f{k}"), index_text(path),
                                text, f"e-{writer}-{rnd}-{k}-{path}"))
    return out


def _writer(url: str, ns: str, writer: int, errors) -> None:
    from dsh_recall.stores.postgres.chunks import PgChunkStore

    try:
        store = PgChunkStore(url, ns)
        rng = np.random.default_rng(writer)
        for rnd in range(ROUNDS):
            for p in (PATHS if writer % 2 else reversed(PATHS)):
                chunks = _chunks(p, writer, rnd)
                store.replace_file(FileRow(p, "/x/" + p, "", f"w{writer}r{rnd}", 1, 1, 10), chunks)
            if rnd % 5 == 4:
                store.delete_files(PATHS[writer::4])
            pend = store.pending(64)
            if pend:
                v = rng.normal(size=(len(pend), 8)).astype(np.float32)
                store.put_vectors([(h, x / np.linalg.norm(x)) for (h, _), x in zip(pend, v)])
        store.close()
    except BaseException as e:  # reported to the parent: a deadlock or a constraint error
        errors.put(f"writer {writer}: {type(e).__name__}: {e}")


def _check_whole_files(store) -> int:
    """Every file's chunks come from one write (one writer, one round, all its chunks)."""
    ids = store.chunk_ids_for_paths(PATHS)
    rows = store.chunks_by_id(ids)
    by_path: dict[str, list] = {}
    for r in rows.values():
        by_path.setdefault(r.path, []).append(r)
    for path, rs in by_path.items():
        tags = {r.text.split("'")[1] for r in rs}
        assert len(tags) == 1, f"{path} mixes writes {tags}"
        w, rnd = (int(x) for x in tags.pop()[1:].split("r"))
        assert len(rs) == 2 + (w + rnd) % 4, f"{path}: {len(rs)} chunks of write w{w}r{rnd}"
        assert sorted(r.start_line for r in rs) == [1 + 5 * k for k in range(len(rs))]
    return len(by_path)


def test_concurrent_writers_on_postgres(pg_url, pg_namespace):
    from dsh_recall.stores.postgres.chunks import PgChunkStore

    ctx = mp.get_context("fork")
    errors = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(pg_url, pg_namespace, w, errors)) for w in range(4)]
    for p in procs:
        p.start()
    reader = PgChunkStore(pg_url, pg_namespace)
    checks = 0
    try:
        deadline = time.monotonic() + 300
        while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
            _check_whole_files(reader)  # a reader mid-flight
            checks += 1
        for p in procs:
            p.join(timeout=max(1.0, deadline - time.monotonic()))
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
        errs = []
        while not errors.empty():
            errs.append(errors.get())
        assert errs == []
        assert checks > 0
        # The end state: whole files only, one file row per path, counters exact.
        kept = _check_whole_files(reader)
        files = reader.files()
        assert kept == len(files) and set(files) <= set(PATHS)
        s = reader.s
        n, total = reader.conn.execute(f"SELECT n, total FROM {s}.stats").fetchone()
        assert (n, total) == reader.conn.execute(
            f"SELECT count(*), coalesce(sum(dl), 0) FROM {s}.chunks").fetchone()
        orphans = reader.conn.execute(f"SELECT count(*) FROM {s}.chunks c WHERE NOT EXISTS "
                                      f"(SELECT 1 FROM {s}.files f WHERE f.id = c.file_id)").fetchone()[0]
        assert orphans == 0
        recount = dict(reader.conn.execute(
            f"SELECT k, count(*) FROM {s}.chunks c CROSS JOIN LATERAL skeys(c.terms) k "
            "GROUP BY k").fetchall())
        stored = dict(reader.conn.execute(f"SELECT lexeme, df FROM {s}.terms WHERE df <> 0").fetchall())
        assert stored == recount
        # Vectors: a chunk flagged as having one has it; pending ones are findable.
        bad = reader.conn.execute(f"SELECT count(*) FROM {s}.chunks c WHERE c.has_vec AND NOT EXISTS "
                                  f"(SELECT 1 FROM {s}.vectors v WHERE v.hash = c.embed_hash)").fetchone()[0]
        assert bad == 0
        assert reader.lexical('"shared"', 1000) and len(reader.lexical('"shared"', 1000)) == n
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        reader.close()


def _history_writer(url: str, ns: str, writer: int, errors) -> None:
    from dsh_recall.core.text import index_text as it
    from dsh_recall.rank import history_query as hq
    from dsh_recall.stores.postgres.history import PgHistoryStore
    from dsh_recall.stores.sqlite.history import BlockIn

    try:
        store = PgHistoryStore(url, ns)
        for rnd in range(15):
            for sid in ("shared-1", "shared-2", f"own-{writer}"):
                seqs = range(rnd * 2, rnd * 2 + 3)  # overlaps the previous round and other writers
                text = {q: f"turn {q} of {sid} about ledger migration {q % 5}" for q in seqs}
                store.write_batch(
                    [{"id": sid, "source": "generic", "workspace": "/w", "title": sid, "created_ms": 1,
                      "updated_ms": rnd, "path": f"/t/{sid}", "channel": None}],
                    [{"session": sid, "seq": q, "role": "user", "time_ms": q, "time": None,
                      "message_id": f"{sid}-{q}", "call_id": None, "flags": "", "text": text[q]} for q in seqs],
                    [BlockIn(sid, q, 0, "user", "text", None, text[q], f"h{q}", it(text[q]), text[q],
                             hq.cjk_body(text[q])) for q in seqs], [], None)
        store.close()
    except BaseException as e:
        errors.put(f"history writer {writer}: {type(e).__name__}: {e}")


def test_concurrent_history_imports_on_postgres(pg_url, pg_namespace):
    from dsh_recall.stores.postgres.history import PgHistoryStore

    ctx = mp.get_context("fork")
    errors = ctx.Queue()
    procs = [ctx.Process(target=_history_writer, args=(pg_url, pg_namespace, w, errors)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    errs = []
    while not errors.empty():
        errs.append(errors.get())
    assert errs == [] and all(p.exitcode == 0 for p in procs)
    store = PgHistoryStore(pg_url, pg_namespace)
    try:
        s = store.s
        for sid in ("shared-1", "shared-2", "own-0", "own-1", "own-2"):
            rows = store.conn.execute(f"SELECT seq, ord FROM {s}.blocks WHERE session = %s ORDER BY ord",
                                      (sid,)).fetchall()
            assert [q for q, _ in rows] == list(range(31)), sid  # every turn once, none lost
            assert [o for _, o in rows] == list(range(31)), sid  # neighbours stay neighbours
            assert store.event_count(sid) == 31
        for layer in ("literal", "trigram", "cjk"):
            n, _ = store.conn.execute(f"SELECT n, total FROM {s}.stats WHERE layer = %s", (layer,)).fetchone()
            assert n == store.conn.execute(f"SELECT count(tf_{layer}) FROM {s}.blocks").fetchone()[0]
            recount = dict(store.conn.execute(
                f"SELECT k, count(*) FROM {s}.blocks b CROSS JOIN LATERAL skeys(b.tf_{layer}) k "
                "GROUP BY k").fetchall())
            stored = dict(store.conn.execute(f"SELECT lexeme, df FROM {s}.terms_{layer} WHERE df <> 0").fetchall())
            assert stored == recount, layer
    finally:
        store.close()
