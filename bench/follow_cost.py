"""What the fusion's "follow the layer that found something" costs at 100k chunks.

services/hybrid.rank reads the lexical layer's best hit (one chunk's text and the query
terms' document frequencies, rank/confidence.py's coverage) when a plain-words question meets
a vector layer whose best cosine is under confidence.NONE_COSINE. On bench/release_query_cost.py's
98k-chunk index (random vectors: every best cosine is about 0.2, so the check runs on every
plain-words question, the worst case) the 32 questions of bench/data/code_questions.jsonl
run in one long-lived process, with the check and without it, alternating query by query,
each timed after a warm-up pass.

    python bench/release_query_cost.py --base REV   # builds the index once
    python bench/follow_cost.py [--rounds 3]
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
TMP = Path(tempfile.gettempdir())
WS = TMP / "dsh-recall-scale" / "ws-20"
HOME = TMP / "dsh-recall-release-cost" / "home-this-20"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not (WS.is_dir() and HOME.is_dir()):
        print(f"no 100k index at {HOME}: run bench/release_query_cost.py first", file=sys.stderr)
        return 2
    os.environ.update(DSH_RECALL_HOME=str(HOME), DSH_RECALL_EMBEDDER__NAME="fake",
                      DSH_RECALL_EMBEDDER__DIM="384")
    from dsh_recall.core.config import load_config
    from dsh_recall.core.process import set_long_lived
    from dsh_recall.services.code import CodeService, vector_layer

    set_long_lived(True)
    qs = [json.loads(line)["query"] for line in
          (ROOT / "bench" / "data" / "code_questions.jsonl").read_text().splitlines()]
    svc = CodeService(WS, load_config(workspace=WS, overrides={"embedder": {"name": "fake", "dim": 384}}),
                      HOME).keep_warm()
    shipped = vector_layer.word_answer
    calls = 0
    spent: list[float] = []  # the check's own time, each call

    def counting(*a, **k):
        inner = shipped(*a, **k)

        def answers(item: int) -> bool:
            nonlocal calls
            calls += 1
            t0 = time.perf_counter()
            try:
                return inner(item)
            finally:
                spent.append((time.perf_counter() - t0) * 1000)
        return answers

    arms = {"with the check": counting, "without": lambda *a, **k: None}
    for q in qs:  # warm-up: score lists, caches, the model
        svc.search(q, limit=10)
    svc.store.impacts.wait_idle(600)
    ms: dict[str, list[float]] = {k: [] for k in arms}
    for _ in range(args.rounds):
        for q in qs:
            for name, fn in arms.items():
                vector_layer.word_answer = fn  # type: ignore[assignment]
                t0 = time.perf_counter()
                svc.search(q, limit=10)
                ms[name].append((time.perf_counter() - t0) * 1000)
    vector_layer.word_answer = shipped  # type: ignore[assignment]
    chunks = svc.store.chunk_count()
    svc.close()
    base = statistics.median(ms["without"])
    print(f"{chunks:,} chunks, {len(qs)} plain-words questions x "
          f"{args.rounds} rounds, load average {os.getloadavg()[0]:.1f}; the check ran {calls} times, "
          f"its own time p50 {statistics.median(spent):.2f} ms, max {max(spent):.2f} ms")
    print("| arm | p50 | p95 | p50 ratio |")
    print("|---|---|---|---|")
    for name, v in ms.items():
        v = sorted(v)
        print(f"| {name} | {statistics.median(v):.1f} ms | {v[int(len(v) * 0.95) - 1]:.1f} ms | "
              f"{statistics.median(v) / base:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
