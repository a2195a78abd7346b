"""The rerank stage on top of the engine's answers: CoSQA dev (code) and LoCoMo dev (history).

For each set, side by side in one run: plain BM25, the fused order the engine answers with
(no rerank), the same order after the rerank stage (services/rerank.py, through its HTTP
client) at each `rerank.weight` asked for, and the ceiling: how often a gold item is among
the `top_n` candidates at all (no reranker can do better at that `top_n`). Plus the stage's
latency, end to end (HTTP, JSON, the model).

The reranker: `--url` (and `--api`, `--model`) measures a real server the user runs. Without
one, the bench starts a stand-in on 127.0.0.1 that answers `/v1/rerank` with the shipped
MiniLM bi-encoder's cosines: NOT a cross-encoder (no cross-encoder with weights in a PyPI
package was found, docs/rerank.md), and the same model the vector layer already uses, so its
numbers measure the stage's mechanics, cost and the weight's effect with a weak reranker,
not what a real cross-encoder would add.

    python bench/rerank.py [--sets cosqa,locomo] [--url URL --api rerank|tei --model M]
                           [--top-n 20] [--weights 1,0.5] [--corpus 2000] [--limit-questions N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

EVAL = ROOT.parent / "shared" / "eval"


# -- the stand-in reranker ---------------------------------------------------------------------

def standin_server() -> tuple[ThreadingHTTPServer, str]:
    """A `/v1/rerank` server on 127.0.0.1 scoring with the shipped MiniLM (cosine)."""
    from dsh_recall.core.config import EmbedderConfig
    from dsh_recall.embedders import create

    emb = create(EmbedderConfig(name="minilm"))
    lock = threading.Lock()  # one ONNX run at a time, like a single-worker server

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            docs = body.get("documents") or body.get("texts") or []
            with lock:
                q = emb.embed([body["query"]], query=True)[0]
                d = emb.embed(docs)
            scores = (d @ q).tolist()
            res = sorted(({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                         key=lambda r: -r["relevance_score"])
            raw = json.dumps({"object": "list", "results": res}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


# -- running the stage over a set ----------------------------------------------------------------

def rerank_runs(cfg, runs: list[list], queries: list[str], text_of, weights: list[float]):
    """{weight: reranked runs}, latencies (s) and statuses of the first pass.

    The reranker is asked once per query; later weights reuse its scores (the stage is the
    same, only the blend differs)."""
    from dsh_recall.rerankers import create
    from dsh_recall.services import rerank

    client = create(cfg.rerank)
    memo: dict = {}

    class Once:
        name = "memo"

        def score(self, query, docs, timeout_s):
            key = (query, tuple(docs))
            if key not in memo:
                memo[key] = client.score(query, docs, timeout_s)
            return memo[key]

    out, lat, statuses = {}, [], {}
    for n, w in enumerate(weights):
        c = cfg.model_copy(update={"rerank": cfg.rerank.model_copy(update={"weight": w})})
        got = []
        for run, q in zip(runs, queries):
            t0 = time.perf_counter()
            items, status = rerank.apply(c, "code", q, run, text_of, reranker=Once())
            if n == 0:
                lat.append(time.perf_counter() - t0)
                key = status.split(":")[0].split(" after")[0]
                statuses[key] = statuses.get(key, 0) + 1
            got.append(items)
        out[w] = got
    return out, lat, statuses


def lat_line(lat: list[float], deadline: float) -> str:
    if not lat:
        return "no calls"
    s = sorted(lat)
    p95 = s[min(len(s) - 1, int(0.95 * len(s)))]
    over = sum(1 for x in lat if x > deadline)
    return (f"stage latency p50 {statistics.median(s) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
            f"max {s[-1] * 1000:.0f} ms; {over} of {len(lat)} calls over the default "
            f"{deadline:g} s deadline")


# -- CoSQA ---------------------------------------------------------------------------------------

def cosqa(cfg, args, weights) -> None:
    import bm25s
    from embedders_cosqa import load_set, metrics, rank_of

    from dsh_recall.core.config import EmbedderConfig
    from dsh_recall.core.text import code_tokens
    from dsh_recall.embedders import create
    from dsh_recall.rank.fuse import layer_weights, rrf
    from dsh_recall.rank.lexical import STOPWORDS
    from dsh_recall.rank.query import Query

    all_queries, docs, pos = load_set(args.corpus, EVAL / "cosqa-dev")
    queries = all_queries
    if args.limit_questions:
        queries = queries[: args.limit_questions]
    golds = [pos[q["retrieval_idx"]] for q in queries]

    def toks(t):
        return [w for w in code_tokens(t) if w not in STOPWORDS]

    bm = bm25s.BM25()
    bm.index([toks(x) for x in docs], show_progress=False)
    lex = []
    for q in queries:
        res, _ = bm.retrieve([toks(q["doc"]) or ["_"]], k=100, show_progress=False)
        lex.append([int(x) for x in res[0]])
    emb = create(EmbedderConfig(name="minilm"))
    fp = "".join(c if c.isalnum() else "-" for c in emb.fingerprint)
    cache = Path("/tmp") / f"cosqa-{fp}-{len(docs)}.npz"  # shared with embedders_cosqa.py
    if cache.exists():
        z = np.load(cache)
        dvec = z["d"]
    else:
        dvec = emb.embed(docs)
        qv = emb.embed([q["doc"] for q in all_queries], query=True)
        np.savez(cache, d=dvec, q=qv, rate=0.0)
    qvec = emb.embed([q["doc"] for q in queries], query=True)
    vec = [list(np.argsort(-(dvec @ qv))[:100]) for qv in qvec]
    # The code layer's fusion (rank/fuse.py, engine defaults): RRF k = cfg.rrf_k, weights
    # by query shape. What `search` answers before any per-file rules.
    fused = [[i for i, _, _ in rrf({"lexical": lo, "vector": [int(x) for x in vo]}, k=cfg.rrf_k,
                                   weights=layer_weights(Query.parse(q["doc"]), 1.0, 1.0))]
             for lo, vo, q in zip(lex, vec, queries)]
    rer, lat, statuses = rerank_runs(cfg, fused, [q["doc"] for q in queries], lambda i: docs[i], weights)
    rows = [("BM25 (code tokens)", metrics([rank_of(o, g) for o, g in zip(lex, golds)])),
            ("fused, no rerank", metrics([rank_of(o, g) for o, g in zip(fused, golds)]))]
    for w in weights:
        rows.append((f"rerank, weight {w:g}", metrics([rank_of(o, g) for o, g in zip(rer[w], golds)])))
    ceiling = sum(1 for f, g in zip(fused, golds) if g in f[: cfg.rerank.top_n]) / len(golds)
    print(f"\nCoSQA dev: {len(queries)} queries over {len(docs)} snippets; rerank top_n "
          f"{cfg.rerank.top_n}; statuses {statuses}")
    print("| ranker | MRR | R@1 | R@5 |\n|---|---|---|---|")
    for name, m in rows:
        print(f"| {name} | {m['MRR']:.3f} | {m['R@1']:.3f} | {m['R@5']:.3f} |")
    print(f"ceiling: gold among the top {cfg.rerank.top_n} fused candidates for {ceiling:.3f} of queries")
    print(lat_line(lat, 1.0))


# -- LoCoMo --------------------------------------------------------------------------------------

def locomo(cfg, args, weights) -> None:
    import history_locomo as hl

    from dsh_recall.services import history as svc

    data = EVAL / "locomo-dev"
    home = Path(os.environ["DSH_RECALL_HOME"])
    files, turns = hl.convert(data, home)
    text = {(sid, d): t for sid, items in turns.items() for d, t in items}  # dia ids repeat
    hcfg = cfg.model_copy(update={"embedder": cfg.embedder.model_copy(update={"name": "minilm"})})
    store = svc.open_store()
    t0 = time.perf_counter()
    svc.import_paths([str(f) for f in files], "generic", hcfg, embed=True, store=store)
    t_import = time.perf_counter() - t0
    qs = hl.questions(data)
    if args.limit_questions:
        qs = qs[: args.limit_questions]
    runs = []
    for q in qs:
        ans = svc.search(q["question"], workspace=q["sample_id"], detail=True, limit=20, cfg=hcfg,
                         store=store)
        ranked = list(dict.fromkeys(m for h in ans["hits"] for m in h["message_ids"]))
        runs.append(ranked)
    store.close()
    keyed = [[(q["sample_id"], d) for d in r] for r, q in zip(runs, qs)]
    rer, lat, statuses = rerank_runs(cfg, keyed, [q["question"] for q in qs],
                                     lambda k: text.get(k, ""), weights)
    rer = {w: [[d for _, d in r] for r in rs] for w, rs in rer.items()}
    cats = sorted({q["category"] for q in qs})
    table = [("BM25 (bm25s, turns)", hl.bm25_runs(turns, qs)), ("fused, no rerank", runs)]
    table += [(f"rerank, weight {w:g}", rer[w]) for w in weights]
    print(f"\nLoCoMo dev: {len(qs)} questions (category != 5), import {t_import:.0f} s; rerank "
          f"top_n {cfg.rerank.top_n}; statuses {statuses}")
    names = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
    print("| ranker | R@5 | R@10 | MRR | " + " | ".join(f"R@5 {names.get(c, c)}" for c in cats) + " |")
    print("|---" * (4 + len(cats)) + "|")
    for name, rr in table:
        sc = [hl.score(r, q["evidence_dia_ids"]) for r, q in zip(rr, qs)]
        mean = {k: sum(s[k] for s in sc) / len(sc) for k in ("R@5", "R@10", "MRR")}
        per = []
        for c in cats:
            xs = [s["R@5"] for s, q in zip(sc, qs) if q["category"] == c]
            per.append(f"{sum(xs) / len(xs):.3f}")
        print(f"| {name} | {mean['R@5']:.3f} | {mean['R@10']:.3f} | {mean['MRR']:.3f} | "
              + " | ".join(per) + " |")
    top = cfg.rerank.top_n
    ceiling = sum(len(set(q["evidence_dia_ids"]) & set(r[:top])) / len(set(q["evidence_dia_ids"]))
                  for r, q in zip(runs, qs)) / len(qs)
    print(f"ceiling: share of gold turns among the top {top} fused candidates {ceiling:.3f}")
    print(lat_line(lat, 1.0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="cosqa,locomo")
    ap.add_argument("--url", default=None, help="a real reranker (default: the MiniLM stand-in)")
    ap.add_argument("--api", default="rerank", choices=["rerank", "tei"])
    ap.add_argument("--model", default=None)
    ap.add_argument("--top-n", type=int, default=20)
    ap.add_argument("--weights", default="1,0.5")
    ap.add_argument("--corpus", type=int, default=2000)
    ap.add_argument("--limit-questions", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=30.0,
                    help="the stage's deadline here: generous, to measure quality and latency")
    args = ap.parse_args()
    os.environ["DSH_RECALL_HOME"] = tempfile.mkdtemp(prefix="rerank-bench-")
    from dsh_recall.core.config import load_config

    url = args.url
    if url is None:
        _, url = standin_server()
        print("reranker: stand-in (shipped MiniLM bi-encoder behind /v1/rerank, not a cross-encoder)")
    else:
        print(f"reranker: {url} ({args.api}, model {args.model})")
    cfg = load_config(overrides={"rerank": {"url": url, "api": args.api, "model": args.model,
                                            "top_n": args.top_n, "deadline_s": args.deadline}})
    weights = [float(w) for w in args.weights.split(",")]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores)")
    for name in args.sets.split(","):
        {"cosqa": cosqa, "locomo": locomo}[name](cfg, args, weights)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
