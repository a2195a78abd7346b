"""Does the auto-recall block hold the turn that answers the question? LoCoMo (locomo-dev).

    python bench/recall_block.py [--embedder minilm|fake] [--data DIR]

When the history gate fires on a question about the past, its block quotes turns found by a
history search. This compares, per question (non-adversarial LoCoMo questions, each within
its own conversation), what that search is given:

- previous release: the gate's terms (the question's segments that occur in the
  conversation), coarse answer (events, each shown as one snippet);
- now: the question itself, one hit per event, the best 3;

A block "holds" an evidence turn when a snippet it shows is that turn's text (a piece of
20+ chars of the snippet occurs in the turn); "reaches" counts an evidence turn anywhere in
a quoted event's message ids (what one history_detail call away would bring).
- baseline: plain BM25 (bm25s) over the conversation's turns, top 3, the same run.

Prints the share of questions whose block holds an evidence turn, per conversation (the
held-out check: none of these conversations tuned anything here) and in all, and the mean
block size in chars.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from history_locomo import DATA, bm25_runs, convert, questions  # noqa: E402

K = 3
KEYS = ("old", "new", "old_reach", "new_reach", "bm25", "old_chars", "new_chars")


def shown(hits: list[dict], gold_texts: list[str]) -> bool:
    """Whether a snippet of `hits` is the text of one of the gold turns."""
    for h in hits:
        for piece in (h.get("snippet") or "").replace("…", "\n").split("\n"):
            piece = piece.strip()
            if len(piece) >= 20 and any(piece in t for t in gold_texts):
                return True
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    if not (args.data / "locomo_dev.json").is_file():
        sys.exit(f"no LoCoMo data under {args.data} (--data DIR)")
    home = tempfile.mkdtemp(prefix="recall-block-")
    os.environ["DSH_RECALL_HOME"] = home
    from dsh_recall.core.config import load_config
    from dsh_recall.policy.gate import referring_segments, vocabulary
    from dsh_recall.services import history as svc

    cfg = load_config(overrides={"embedder": {"name": args.embedder}})
    files, turns = convert(args.data, Path(home))
    store = svc.open_store()
    svc.import_paths([str(f) for f in files], "generic", cfg, embed=True, store=store)
    qs = questions(args.data)
    vocab = {sid: vocabulary([t for _, t in ts]) for sid, ts in turns.items()}
    bm25 = bm25_runs(turns, qs)

    rows: dict[str, dict[str, list[float]]] = {}
    for q, ranked in zip(qs, bm25):
        sid, gold = q["sample_id"], set(q["evidence_dia_ids"])
        texts = [t for d, t in turns[sid] if d in gold]
        r = rows.setdefault(sid, {k: [] for k in KEYS})
        terms = [s for s in referring_segments(q["question"]) if s in vocab[sid]]
        old = svc.search(" ".join(terms), workspace=sid, cfg=cfg, store=store) if terms else {"hits": []}
        old_ids = {m for h in old["hits"] for m in h.get("message_ids") or []}
        r["old_reach"].append(float(bool(old_ids & gold)))
        r["old"].append(float(shown(old["hits"], texts)))
        r["old_chars"].append(sum(len(h.get("snippet") or "") for h in old["hits"]))
        new = svc.search(q["question"], workspace=sid, cfg=cfg, store=store, detail=True, limit=K)
        new_ids = {m for h in new["hits"][:K] for m in h.get("message_ids") or []}
        r["new_reach"].append(float(bool(new_ids & gold)))
        r["new"].append(float(shown(new["hits"][:K], texts)))
        r["new_chars"].append(sum(len(h.get("snippet") or "") for h in new["hits"][:K]))
        r["bm25"].append(float(bool(set(ranked[:K]) & gold)))

    def mean(xs: list[float]) -> float:
        return sum(xs) / max(1, len(xs))

    print(f"\nLoCoMo dev, {len(qs)} questions, embedder {args.embedder}: the block holds "
          "(reaches) an evidence turn\n")
    print("| conversation | questions | previous release (gate terms, events) | now (the question, best 3) "
          f"| plain BM25 top {K} |")
    print("|---|---|---|---|---|")
    every: dict[str, list[float]] = {k: [] for k in KEYS}
    for sid in sorted(rows):
        r = rows[sid]
        for k in every:
            every[k] += r[k]
    for sid, r in [*sorted(rows.items()), ("all", every)]:
        print(f"| {sid} | {len(r['new'])} | {mean(r['old']):.3f} ({mean(r['old_reach']):.3f}) "
              f"| {mean(r['new']):.3f} ({mean(r['new_reach']):.3f}) | {mean(r['bm25']):.3f} |")
    print(f"\nmean quoted chars per block: previous release {mean(every['old_chars']):,.0f}, "
          f"now {mean(every['new_chars']):,.0f}")
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
