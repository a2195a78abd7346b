"""History recall on LoCoMo (locomo-dev): literal, fuzzy, semantic, merged vs plain BM25.

Each conversation becomes generic-JSONL sessions (workspace = sample_id, message id =
dia_id, role = speaker; a shared photo's caption is part of the turn's text), imported into
a temporary recall home. Every non-adversarial question (category != 5) is searched with
scope = its conversation and --detail, and scored on the ranked message ids.

Prints every layer alone, the merged ranking before (turn rules off) and after (the
config's defaults), a plain BM25 (bm25s) in the same run, then turn R@5 per conversation
(the held-out check: a rule should help each of them) and per LoCoMo category, with each
turn rule added alone to "before" and removed alone from "after".

    python bench/history_locomo.py [--embedder fake|minilm] [--data DIR] [--limit-questions N] [--no-ablation]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "eval" / "locomo-dev"


def iso_time(when: str | None) -> str | None:
    """LoCoMo's "1:56 pm on 8 May, 2023" as ISO-8601 (UTC), the form real transcripts carry."""
    if not when:
        return None
    try:
        return datetime.strptime(when.strip(), "%I:%M %p on %d %B, %Y").strftime("%Y-%m-%dT%H:%M:00Z")
    except ValueError:
        return when


def convert(data_dir: Path, out_dir: Path) -> tuple[list[Path], dict[str, list[tuple[str, str]]]]:
    """Write one JSONL file per conversation; return files and {sample_id: [(dia_id, text)]}."""
    convs = json.loads((data_dir / "locomo_dev.json").read_text(encoding="utf-8"))
    files, turns = [], {}
    for conv in convs:
        sid, c = conv["sample_id"], conv["conversation"]
        path = out_dir / f"{sid}.jsonl"
        turns[sid] = []
        with path.open("w", encoding="utf-8") as f:
            n = 1
            while f"session_{n}" in c:
                when = c.get(f"session_{n}_date_time")
                for seq, t in enumerate(c[f"session_{n}"]):
                    text = t.get("text", "")
                    if t.get("blip_caption"):
                        text += f" [shares a photo: {t['blip_caption']}]"
                    rec = {"session": f"{sid}-s{n}", "seq": seq, "role": t["speaker"], "text": text,
                           "id": t["dia_id"], "time": iso_time(when), "title": f"{sid} session {n} ({when})", "workspace": sid}
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    turns[sid].append((t["dia_id"], f"{t['speaker']}: {text}"))
                n += 1
        files.append(path)
    return files, turns


def questions(data_dir: Path) -> list[dict]:
    out = []
    for line in (data_dir / "locomo_dev_qa.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if q.get("category") != 5 and q.get("evidence_dia_ids"):
            out.append(q)
    return out


def session_of(dia_id: str) -> str:
    m = re.match(r"D(\d+):", dia_id)
    return m.group(1) if m else dia_id


def score(ranked: list[str], gold: list[str]) -> dict[str, float]:
    gold_set = set(gold)
    r = {f"R@{k}": len(gold_set & set(ranked[:k])) / len(gold_set) for k in (5, 10)}
    gs = {session_of(g) for g in gold}
    r["sR@5"] = len(gs & {session_of(x) for x in ranked[:5]}) / len(gs)
    r["MRR"] = next((1 / (i + 1) for i, x in enumerate(ranked) if x in gold_set), 0.0)
    dcg = sum(1 / math.log2(i + 2) for i, x in enumerate(ranked[:10]) if x in gold_set)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(10, len(gold_set))))
    r["nDCG@10"] = dcg / idcg
    return r


def bm25_runs(turns: dict[str, list[tuple[str, str]]], qs: list[dict]) -> list[list[str]]:
    import bm25s

    indexes = {}
    for sid, items in turns.items():
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize([t for _, t in items], stopwords="en", show_progress=False), show_progress=False)
        indexes[sid] = (retriever, [d for d, _ in items])
    runs = []
    for q in qs:
        retriever, ids = indexes[q["sample_id"]]
        k = min(10, len(ids))
        docs, _ = retriever.retrieve(bm25s.tokenize([q["question"]], stopwords="en", show_progress=False), k=k,
                                     show_progress=False)
        runs.append([ids[int(i)] for i in docs[0]])
    return runs


# LoCoMo's category ids (the upstream data; 5 = adversarial, left out).
CATEGORIES = {4: "single-hop", 1: "multi-hop", 2: "temporal", 3: "open-domain"}
# The turn rules (history config keys, docs/history.md) and the value each takes when on.
RULES = ("answer_share", "speaker_boost", "time_boost", "date_boost", "session_boost",
         "decision_boost")


def groups(qs: list[dict]) -> dict[str, list[int]]:
    """Question indexes per column: all, each conversation (or two halves of them when
    there are more than four), each category."""
    out: dict[str, list[int]] = {"all": list(range(len(qs)))}
    convs = sorted({q["sample_id"] for q in qs})
    if len(convs) <= 4:
        for c in convs:
            out[c] = [i for i, q in enumerate(qs) if q["sample_id"] == c]
    else:  # two held-out halves: every other conversation
        for h, name in ((0, "half-1"), (1, "half-2")):
            keep = set(convs[h::2])
            out[name] = [i for i, q in enumerate(qs) if q["sample_id"] in keep]
    for cat, name in CATEGORIES.items():
        out[name] = [i for i, q in enumerate(qs) if q.get("category") == cat]
    return out


def evaluate(svc, store, cfg, qs: list[dict], layers: list[str]) -> tuple[list[dict[str, float]], float]:
    """Per-question scores of one configuration and its mean seconds per query."""
    out = []
    t0 = time.perf_counter()
    for q in qs:
        ans = svc.search(q["question"], workspace=q["sample_id"], detail=True, limit=10, layers=layers,
                         cfg=cfg, store=store)
        out.append(score([m for h in ans["hits"] for m in h["message_ids"]], q["evidence_dia_ids"]))
    return out, (time.perf_counter() - t0) / max(1, len(qs))


def mean(per_q: list[dict[str, float]], idx: list[int] | None = None, key: str | None = None):
    idx = range(len(per_q)) if idx is None else idx
    n = max(1, len(idx))
    if key:
        return sum(per_q[i][key] for i in idx) / n
    return {k: sum(per_q[i][k] for i in idx) / n for k in per_q[0]} if per_q else {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--embedder", default=None, help="embedder name (default: minilm when shipped, else fake)")
    ap.add_argument("--limit-questions", type=int, default=0)
    ap.add_argument("--store", default="sqlite",
                    help="sqlite (default), pg (a throwaway PostgreSQL) or a postgresql:// URL")
    ap.add_argument("--no-ablation", action="store_true", help="skip the one-rule-at-a-time rows")
    args = ap.parse_args()

    name = args.embedder
    if name is None:
        models = Path(__file__).resolve().parents[1] / "src" / "dsh_recall" / "embedders" / "models"
        name = "minilm" if models.is_dir() and any(models.iterdir()) else "fake"
    home = tempfile.mkdtemp(prefix="locomo-home-")
    os.environ["DSH_RECALL_HOME"] = home
    from dsh_recall.core.config import load_config
    from dsh_recall.services import history as svc

    cfg = load_config(overrides={"embedder": {"name": name}})
    on = {k: getattr(cfg.history, k) for k in RULES}
    off = {k: 0.0 for k in RULES}

    def with_rules(rules: dict) -> object:
        return load_config(overrides={"embedder": {"name": name}, "history": rules})

    files, turns = convert(args.data, Path(home))
    t0 = time.perf_counter()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pg_store

    from dsh_recall.stores import registry

    url = pg_store.resolve(args.store)
    store = registry.history_store(url, Path(home) / "history.sqlite",
                                   namespace=f"bench/locomo-{os.getpid()}") if url else svc.open_store()
    rep = svc.import_paths([str(f) for f in files], "generic", cfg, embed=True, store=store)
    t_import = time.perf_counter() - t0
    qs = questions(args.data)
    if args.limit_questions:
        qs = qs[: args.limit_questions]

    runs: dict[str, tuple[list[dict[str, float]], float]] = {}
    for label, layers in {"literal": ["literal"], "fuzzy": ["fuzzy"], "semantic": ["semantic"]}.items():
        runs[label] = evaluate(svc, store, with_rules(off), qs, layers)
    merged = list(LAYERS_ALL)
    runs["merged, before"] = evaluate(svc, store, with_rules(off), qs, merged)
    runs["merged, after"] = evaluate(svc, store, cfg, qs, merged)
    t0 = time.perf_counter()
    runs["bm25s (baseline)"] = ([score(r, q["evidence_dia_ids"]) for q, r in zip(qs, bm25_runs(turns, qs))],
                                (time.perf_counter() - t0) / max(1, len(qs)))
    ablation: dict[str, list[dict[str, float]]] = {}
    if not args.no_ablation:
        for k in RULES:
            if on[k] > 0:
                ablation[f"before + {k} {on[k]:g}"] = evaluate(svc, store, with_rules({**off, k: on[k]}), qs, merged)[0]
        for k in RULES:
            if on[k] > 0:
                ablation[f"after - {k}"] = evaluate(svc, store, with_rules({**on, k: 0.0}), qs, merged)[0]
        if cfg.history.prf_terms == 0:
            ablation["after + prf_terms 5"] = evaluate(svc, store, with_rules({**on, "prf_terms": 5}), qs, merged)[0]
    store.close()

    print(f"locomo-dev: store {args.store.split('://')[0]}; {len(qs)} questions (category != 5), {rep['index']['events']} turns, "
          f"{rep['index']['sessions']} sessions; embedder: {name} ({rep['semantic']}); import {t_import:.1f}s; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("rules after: " + ", ".join(f"{k} {v:g}" for k, v in on.items()) + "; before: all 0")
    cols = ["R@5", "R@10", "sR@5", "MRR", "nDCG@10"]
    print(f"{'path':22}" + "".join(f"{c:>9}" for c in cols) + f"{'ms/q':>8}")
    for label, (per_q, secs) in runs.items():
        r = mean(per_q)
        print(f"{label:22}" + "".join(f"{r[c]:9.3f}" for c in cols) + f"{secs * 1000:8.1f}")
    g = groups(qs)
    print("\nturn R@5 by conversation (held-out checks) and by LoCoMo category (n = questions)")
    print(f"{'':30}" + "".join(f"{k:>13}" for k in g))
    print(f"{'n':30}" + "".join(f"{len(v):>13}" for v in g.values()))
    table = {"bm25s (baseline)": runs["bm25s (baseline)"][0], "merged, before": runs["merged, before"][0],
             **{k: v for k, v in ablation.items() if k.startswith("before")},
             "merged, after": runs["merged, after"][0], **{k: v for k, v in ablation.items() if not k.startswith("before")}}
    for label, per_q in table.items():
        print(f"{label:30}" + "".join(f"{mean(per_q, idx, 'R@5'):13.3f}" for idx in g.values()))
    print("anchors: seed design merged R@5 0.696; LoCoMo paper (DRAGON) R@5 0.567 / R@10 0.662")
    return 0


LAYERS_ALL = ("literal", "fuzzy", "semantic")


if __name__ == "__main__":
    sys.exit(main())
