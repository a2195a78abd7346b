"""History recall on LoCoMo (locomo-dev): literal, fuzzy, semantic, merged vs plain BM25.

Each conversation becomes generic-JSONL sessions (workspace = sample_id, message id =
dia_id, role = speaker; a shared photo's caption is part of the turn's text), imported into
a temporary recall home. Every non-adversarial question (category != 5) is searched with
scope = its conversation and --detail, and scored on the ranked message ids.

    python bench/history_locomo.py [--embedder fake|minilm] [--data DIR] [--limit-questions N]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--embedder", default=None, help="embedder name (default: minilm when shipped, else fake)")
    ap.add_argument("--limit-questions", type=int, default=0)
    ap.add_argument("--store", default="sqlite",
                    help="sqlite (default), pg (a throwaway PostgreSQL) or a postgresql:// URL")
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

    configs = {"literal": ["literal"], "fuzzy": ["fuzzy"], "semantic": ["semantic"],
               "merged": ["literal", "fuzzy", "semantic"]}
    rows: dict[str, dict[str, float]] = {}
    timings = {}
    for label, layers in configs.items():
        acc: dict[str, float] = {}
        t0 = time.perf_counter()
        for q in qs:
            ans = svc.search(q["question"], workspace=q["sample_id"], detail=True, limit=10, layers=layers,
                             cfg=cfg, store=store)
            ranked = [m for h in ans["hits"] for m in h["message_ids"]]
            for k, v in score(ranked, q["evidence_dia_ids"]).items():
                acc[k] = acc.get(k, 0.0) + v
        timings[label] = (time.perf_counter() - t0) / max(1, len(qs))
        rows[label] = {k: v / len(qs) for k, v in acc.items()}
    t0 = time.perf_counter()
    acc = {}
    for q, ranked in zip(qs, bm25_runs(turns, qs)):
        for k, v in score(ranked, q["evidence_dia_ids"]).items():
            acc[k] = acc.get(k, 0.0) + v
    timings["bm25s"] = (time.perf_counter() - t0) / max(1, len(qs))
    rows["bm25s (baseline)"] = {k: v / len(qs) for k, v in acc.items()}

    store.close()
    print(f"locomo-dev: store {args.store.split('://')[0]}; {len(qs)} questions (category != 5), {rep['index']['events']} turns, "
          f"{rep['index']['sessions']} sessions; embedder: {name} ({rep['semantic']}); import {t_import:.1f}s")
    cols = ["R@5", "R@10", "sR@5", "MRR", "nDCG@10"]
    print(f"{'path':18}" + "".join(f"{c:>9}" for c in cols) + f"{'ms/q':>8}")
    for label, r in rows.items():
        print(f"{label:18}" + "".join(f"{r[c]:9.3f}" for c in cols) + f"{timings[label.split()[0]] * 1000:8.1f}")
    print("anchors: seed design merged R@5 0.696; LoCoMo paper (DRAGON) R@5 0.567 / R@10 0.662")
    return 0


if __name__ == "__main__":
    sys.exit(main())
