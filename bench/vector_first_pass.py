"""The vector layer's first pass over a large vector file: the sign bits (Hamming distance,
then int8 on the nearest share of rows, services/vectors.BITS_*) against the previous
release's exact int8 pass over every row, side by side in one process.

1. Recall on real vectors: the shipped model (MiniLM) embeds real texts (the chunks of the
   SWE-bench dev trees of pytest, flask and requests, LoCoMo's turns, CoSQA's snippets)
   and real queries (SWE-bench issues, LoCoMo questions, CoSQA queries). For each share of
   rows the first pass keeps, recall@10 and @64 of the answer against the exact float
   ranking. A share, not a count, is what carries over from this sample to 1M rows, and
   conservatively: at 1M a query's ten nearest are a far thinner tail (0.001% of the rows
   against 0.05% here), further from the bulk in Hamming distance too.
2. Cost and recall at scale: the vector file of an index bench/scale.py built (1M chunks:
   `python bench/scale.py --sizes 1000000 --random-vectors`), p50 / p95 of a ranking by the
   previous pass and by the shipped one, queries interleaved, and the recall of the shipped
   answer against the previous one.

    python bench/vector_first_pass.py [--copies 204] [--queries 60] [--no-real]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from dsh_recall.core.lazy import np  # noqa: E402
from dsh_recall.stores.sqlite.lexical import unpack_text  # noqa: E402  (chunks.text may be deflated)

EVAL = ROOT.parent / "shared" / "eval"
TMP = Path(tempfile.gettempdir())
SHARES = (1 / 16, 1 / 24, 1 / 32, 1 / 64, 1 / 128, 1 / 256, 1 / 512)


def real_vectors(limit: int, code_home: Path) -> tuple[np.ndarray, np.ndarray]:
    """(corpus, queries) of the shipped model's unit vectors, cached under the temp dir. The
    code texts are the chunks of every SWE-bench dev tree (lexical indexes in `code_home`,
    built on first use), one of each distinct text."""
    cache = TMP / "dsh-recall-first-pass-real.npz"
    if cache.is_file():
        z = np.load(cache)
        return z["corpus"], z["queries"]
    import code_swebench as cs

    from dsh_recall.core.config import load_config
    from dsh_recall.embedders import create
    from dsh_recall.services.code import CodeService

    texts: list[str] = []
    seen: set[str] = set()
    for row in map(json.loads, open(EVAL / "swebench-dev" / "queries.jsonl")):
        if row["tree_tag"] in seen:
            continue
        seen.add(row["tree_tag"])
        ws = cs.tree(row["tree_tag"])
        svc = CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake"}}),
                          code_home)
        svc.index(embed=False)
        texts += [f"{path}\n{unpack_text(text)}" for path, text in svc.store.conn.execute(
            "SELECT f.path, c.text FROM chunks c JOIN files f ON f.id = c.file_id")]
        svc.close()
    texts = list(dict.fromkeys(texts))  # the trees are versions of three projects: one of each text
    queries: list[str] = []
    turns = EVAL / "locomo-dev" / "locomo_dev_turns.jsonl"
    if turns.is_file():
        for line in open(turns):
            t = json.loads(line)
            texts.append(str(t.get("text") or t.get("content") or ""))
        for line in list(open(EVAL / "locomo-dev" / "locomo_dev_qa.jsonl"))[:300]:
            queries.append(str(json.loads(line).get("question", "")))
    cosqa = EVAL / "cosqa-dev" / "cosqa-retrieval-dev-500.json"
    if cosqa.is_file():
        data = json.load(open(cosqa))
        items = data if isinstance(data, list) else data.get("queries", [])
        for q in items[:300]:
            if isinstance(q, dict):
                queries.append(str(q.get("doc") or q.get("query") or ""))
                texts.append(str(q.get("code") or ""))
    for line in open(EVAL / "swebench-dev" / "queries.jsonl"):
        queries.append(json.loads(line)["query"][:2000])
    texts = [t for t in texts if t.strip()][:limit]
    queries = [q for q in queries if q.strip()]
    emb = create(load_config().embedder)
    t0 = time.monotonic()
    corpus = np.asarray(emb.embed(texts), dtype=np.float32)
    qv = np.asarray(emb.embed(queries), dtype=np.float32)
    print(f"embedded {len(texts)} texts and {len(queries)} queries in {time.monotonic() - t0:.0f} s",
          flush=True)
    np.savez(cache, corpus=corpus, queries=qv)
    return corpus, qv


def recall_table(corpus: np.ndarray, queries: np.ndarray) -> None:
    from dsh_recall.rank.vector import int8_scores, nearest_by_bits, top_of
    from dsh_recall.stores.sqlite.vector_file import quantize, sign_bits

    q8, scales = quantize(corpus)
    bits = sign_bits(q8)
    ids = np.arange(len(corpus), dtype=np.int64)
    print(f"\nReal vectors: {len(corpus):,} texts, {len(queries)} queries, {corpus.shape[1]} dims "
          "(recall of the answer against the exact float ranking)")
    print("| first pass | rows kept | recall@10 | recall@64 |")
    print("|---|---|---|---|")
    exact = [top_of(ids, corpus @ q, 64) for q in queries]
    rows: list[tuple[str, int, float, float]] = []
    i8 = [top_of(ids, int8_scores(q8, scales, q), 192) for q in queries]
    rows.append(("int8, every row (previous)", len(corpus), *_recall(exact, i8, corpus, queries)))
    for share in SHARES:
        keep = max(1, int(len(corpus) * share))
        got = []
        for q in queries:
            near = nearest_by_bits(bits, q, keep)
            if near is None:
                print("no SIMD kernels: the sign-bit pass is off")
                return
            got.append(top_of(ids[near], int8_scores(q8[near], scales[near], q), 192))
        rows.append((f"sign bits, 1/{round(1 / share)} of the rows, then int8", keep,
                     *_recall(exact, got, corpus, queries)))
    for label, keep, r10, r64 in rows:
        print(f"| {label} | {keep:,} | {r10:.3f} | {r64:.3f} |")


COPY_NOISE = 0.4  # real_copies: a copy is its source plus noise of this norm (cosine ~0.93)


def real_copies(corpus: np.ndarray, start: int, n: int, rng) -> np.ndarray:
    """Rows start..start+n of a larger real-shaped set: the real sample in turn, each pass
    after the first perturbed (a renamed copy of a tree embeds close to, not onto, its
    source). Unit rows."""
    at = start + np.arange(n)
    v = corpus[at % len(corpus)].copy()
    noise = rng.normal(size=v.shape).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    v += np.where(at >= len(corpus), COPY_NOISE, 0.0).astype(np.float32)[:, None] * noise
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def copies_table(corpus: np.ndarray, queries: np.ndarray, rows: int, n_queries: int) -> None:
    """The shipped pass (sign bits held by word, then int8, then exact rescoring) at `rows`
    real-shaped rows (real_copies), against the exact float ranking."""
    from dsh_recall.rank.vector import int8_scores, nearest_by_bits, top_of
    from dsh_recall.services.vectors import BITS_MIN
    from dsh_recall.stores.sqlite.vector_file import SignPlanes, quantize, sign_bits

    rng = np.random.default_rng(0)
    big = real_copies(corpus, 0, rows, rng)
    q8, scales = quantize(big)
    planes = SignPlanes.of(sign_bits(q8))
    ids = np.arange(rows, dtype=np.int64)
    qs = queries[::max(1, len(queries) // n_queries)][:n_queries]
    exact = [top_of(ids, big @ q, 64) for q in qs]
    print(f"\nReal-shaped vectors at {rows:,} rows ({len(corpus):,} real texts, each pass after the "
          f"first perturbed to cosine about {1 / np.sqrt(1 + COPY_NOISE ** 2):.2f}), {len(qs)} real "
          "queries of every kind; recall against the exact float ranking")
    print("| first pass | rows kept | recall@10 | recall@64 |")
    print("|---|---|---|---|")
    for share in (1 / 64, 1 / 128, 1 / 256):
        keep = max(BITS_MIN, int(rows * share))
        got = []
        for q in qs:
            near = nearest_by_bits(planes, q, keep)
            got.append(top_of(ids[near], int8_scores(q8[near], scales[near], q), 192))
        r10, r64 = _recall(exact, got, big, qs)
        print(f"| sign bits, 1/{round(1 / share)} of the rows, then int8 | {keep:,} | {r10:.3f} | {r64:.3f} |")


def _recall(exact, got, corpus, queries) -> tuple[float, float]:
    """The shipped ranking rescores its candidates exactly: recall of the exact top-k among
    the top 3k candidates (what reaches the float rescoring), rescored."""
    out = []
    for k in (10, 64):
        hits = 0
        for e, g, q in zip(exact, got, queries):
            cand = np.asarray([i for i, _ in g[: 3 * k]], dtype=np.int64)
            best = cand[np.argsort(-(corpus[cand] @ q), kind="stable")[:k]] if len(cand) else cand
            hits += len({i for i, _ in e[:k]} & set(best.tolist()))
        out.append(hits / (k * len(exact)))
    return out[0], out[1]


def scale_table(copies: int, n_queries: int) -> None:
    from dsh_recall.core.config import load_config
    from dsh_recall.rank.vector import int8_scores, top_of
    from dsh_recall.services.code import CodeService
    from dsh_recall.services.vectors import VectorIndex
    from dsh_recall.stores.sqlite.vector_file import bits_path, map_bits

    base = TMP / "dsh-recall-scale"
    home, ws = base / f"home-{copies}", base / f"ws-{copies}"
    if not (home.is_dir() and ws.is_dir()):
        print(f"\nno index at {home}: run bench/scale.py --sizes {copies * 4907} first")
        return
    os.environ["DSH_RECALL_HOME"] = str(home)
    svc = CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake", "dim": 384}}), home)
    store = svc.store
    index = VectorIndex()
    mapped, _, _ = index._current(store)
    if mapped is None:
        print("\nthe index has no vector file")
        return
    rng = np.random.default_rng(0)
    picks = rng.choice(mapped.state.rows, n_queries, replace=False)
    qs = []
    for p in picks:  # a query near a stored vector, as a real query is near its answers
        v = mapped.rows[p].astype(np.float32) * mapped.scales[p]
        v = v + 0.5 * np.linalg.norm(v) / np.sqrt(len(v)) * rng.standard_normal(len(v)).astype(np.float32)
        qs.append(v / np.linalg.norm(v))

    def previous(q: np.ndarray) -> list[tuple[int, float]]:
        # the previous release's pass: int8 over every row, strided scales, argpartition
        approx = int8_scores(mapped.rows, mapped.records["scale"], q)
        part = np.argpartition(-approx, 191)[:192]
        cand = mapped.ids[part]
        c_ids, c_mat = store.vectors_of(cand.tolist())
        return top_of(c_ids, c_mat @ q, 64)

    by_row, by_word = VectorIndex(), VectorIndex()
    for idx in (by_row, by_word):
        idx.rank(store, qs[0], 64)
        idx.rank(store, qs[0], 64)  # the second query holds the sign bits by word
    row_view = by_row._current(store)[0]
    if row_view is not None and row_view._bits is not None:  # the last stop's warm layout
        row_view._bits = np.array(map_bits(bits_path(row_view.path), row_view.state.dim,
                                           row_view.state.rows))

    passes = {"previous": previous, "bits by row": lambda q: by_row.rank(store, q, 64),
              "bits by word (shipped)": lambda q: by_word.rank(store, q, 64)}
    previous(qs[0])
    ms: dict[str, list[float]] = {name: [] for name in passes}
    answers: dict[str, list[list[int]]] = {name: [] for name in passes}
    names = list(passes)
    for n, q in enumerate(qs):
        for name in names[n % len(names):] + names[:n % len(names)]:
            t0 = time.perf_counter()
            res = passes[name](q)
            ms[name].append((time.perf_counter() - t0) * 1000)
            answers[name].append([i for i, _ in res])
    print(f"\nVector file of {mapped.state.rows:,} rows (random unit vectors; queries near stored ones), "
          f"{n_queries} queries interleaved, load average {os.getloadavg()[0]:.1f}")
    print("| vector ranking (64 best, exact float rescoring) | p50 | p95 | same top 10 as previous | same top 64 |")
    print("|---|---|---|---|---|")
    for name in ms:
        v = sorted(ms[name])
        if name == "previous":
            same = ("-", "-")
        else:
            r10 = statistics.mean(len(set(a[:10]) & set(b[:10])) / 10
                                  for a, b in zip(answers["previous"], answers[name]))
            r64 = statistics.mean(len(set(a) & set(b)) / max(1, len(a))
                                  for a, b in zip(answers["previous"], answers[name]))
            same = (f"{r10:.3f}", f"{r64:.3f}")
        print(f"| {name} | {statistics.median(v):.1f} ms | {v[int(0.95 * (len(v) - 1))]:.1f} ms "
              f"| {same[0]} | {same[1]} |")
    svc.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=204, help="bench/scale.py's copies (204 = 1M chunks)")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--real-limit", type=int, default=30000)
    ap.add_argument("--code-home", default=str(TMP / "dsh-recall-first-pass-home"),
                    help="recall home of the SWE-bench trees' lexical indexes (built on first use)")
    ap.add_argument("--no-real", action="store_true", help="skip the real-vector recall tables")
    ap.add_argument("--real-rows", type=int, default=1_000_000,
                    help="the real-shaped table's rows (0: skip it)")
    args = ap.parse_args()
    if not args.no_real:
        real = real_vectors(args.real_limit, Path(args.code_home))
        recall_table(*real)
        if args.real_rows:
            copies_table(*real, args.real_rows, 100)
    scale_table(args.copies, args.queries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
