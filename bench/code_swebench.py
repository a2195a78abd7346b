"""Code recall on SWE-bench dev: issue text -> the files its fix changed.

Prints file Acc@1/5/10 and MRR for lexical only, vector only, hybrid, and a plain whole-file
BM25 baseline (bm25s) side by side; then the file-ranking rules of docs/code-ranking.md added
one at a time (hybrid and lexical), on all issues and on each half of the set (pytest's
issues; requests' and flask's); first and incremental index time; warm query p50/p95 with
every rule off and on; embedding throughput; and ripgrep over the same terms for scale.

    python bench/code_swebench.py [--limit N] [--embedder minilm|fake] [--modes lexical,hybrid]

Trees come from ../shared/eval/swebench-dev/trees.bundle, extracted once under /tmp.
Vectors are cached across trees by content hash (the recall home's embed cache), as they
would be for a user switching branches.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import pg_store  # noqa: E402

from dsh_recall.core.config import load_config  # noqa: E402
from dsh_recall.rank.lexical import query_terms  # noqa: E402
from dsh_recall.services.code import CodeService  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval" / "swebench-dev"
TMP = Path(tempfile.gettempdir())
BARE = TMP / "swebench-trees.git"
TREES = TMP / "swebench-trees"


def tree(tag: str) -> Path:
    if not BARE.exists():
        subprocess.run(["git", "clone", "-q", "--bare", str(EVAL / "trees.bundle"), str(BARE)], check=True)
    dest = TREES / tag
    if not dest.exists():
        part = dest.with_suffix(".part")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        archive = subprocess.run(["git", "--git-dir", str(BARE), "archive", tag], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(part)], input=archive, check=True)
        part.rename(dest)
    return dest


def metrics(ranked: list[list[str]], gold: list[list[str]]) -> dict[str, float]:
    out = {}
    for k in (1, 5, 10):
        out[f"Acc@{k}"] = sum(all(g in r[:k] for g in gs) for r, gs in zip(ranked, gold)) / len(gold)
    rr = []
    for r, gs in zip(ranked, gold):
        ranks = [r.index(g) + 1 for g in gs if g in r]
        rr.append(1 / min(ranks) if ranks else 0.0)
    out["MRR"] = sum(rr) / len(rr)
    return out


def bm25_files(ws: Path, svc: CodeService, query: str, k: int = 10) -> list[str]:
    import bm25s

    files = svc.store.files()
    paths = sorted(files)
    corpus = []
    for p in paths:
        try:
            corpus.append(Path(files[p].abs_path).read_text(errors="replace"))
        except OSError:
            corpus.append("")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    res, _ = retriever.retrieve(bm25s.tokenize([query], stopwords="en", show_progress=False),
                                k=min(k, len(paths)), show_progress=False)
    return [paths[i] for i in res[0]]


# The file-ranking rules (docs/code-ranking.md), each a config key, added one at a time: the
# first row has them all off (the ranking before them), the last is the default.
RULES_OFF = {"long_query_words": 0, "config_weight": 1.0, "file_decay": 0.0, "test_transfer": 0.0,
             "path_boost": 1.0, "query_focus": False, "title_weight": 0.0}
LADDER = [
    ("before: none of the rules below", {}),
    ("+ a long paste never asks for tests / docs (long_query_words)", {"long_query_words": None}),
    ("+ build / config files 0.5x (config_weight)", {"config_weight": None}),
    ("+ per-file evidence, 3 chunks, decay 0.2 (file_decay, file_chunks)", {"file_decay": None}),
    ("+ a test passes evidence to the file it tests (test_transfer)", {"test_transfer": None}),
    ("+ a path the query writes 1.5x (path_boost)", {"path_boost": None}),
    ("+ a long query's title and prose before its version listings (query_focus)", {"query_focus": None}),
    ("+ the title alone when no vector layer answers (title_weight) = default", {"title_weight": None}),
]


def ladder_overrides(step: int, base: dict) -> dict:
    """Overrides for ladder row `step`: rules of later rows off; None = the default value."""
    off = dict(RULES_OFF)
    for _, keys in LADDER[1:step + 1]:
        for k in keys:
            off.pop(k, None)
    return {**off, **base}


def half(instance_id: str) -> str:
    return "pytest" if instance_id.startswith("pytest-dev") else "requests+flask"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--modes", default="lexical,vector,hybrid,bm25")
    ap.add_argument("--home", default=str(TMP / "swebench-recall-home"))
    ap.add_argument("--out", default="")
    ap.add_argument("--report-embedding", action="store_true",
                    help="print embedding throughput (only meaningful with a cold embed cache)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for the engine, e.g. --set vector_weight=0.5")
    ap.add_argument("--no-ladder", action="store_true", help="skip the rule-by-rule rows")
    ap.add_argument("--store", default="sqlite",
                    help="sqlite (default), pg (a throwaway PostgreSQL) or a postgresql:// URL")
    args = ap.parse_args()
    modes = args.modes.split(",")
    overrides = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    store_url = pg_store.resolve(args.store)
    if store_url:
        overrides["store"] = store_url
    rows = [json.loads(line) for line in open(EVAL / "queries.jsonl")]
    if args.limit:
        rows = rows[: args.limit]
    os.environ["DSH_RECALL_HOME"] = args.home
    home = Path(args.home)
    ranked: dict[str, list[list[str]]] = {m: [] for m in modes}
    gold: list[list[str]] = []
    index_s, lex_s, incr_s, embed_rates, query_ms, rg_ms = [], [], [], [], [], []
    ladder_modes = [] if args.no_ladder else [m for m in ("hybrid", "lexical") if m in modes]
    ladder: dict[tuple[str, int], list[list[str]]] = {
        (m, i): [] for m in ladder_modes for i in range(len(LADDER))}
    before_ms: list[float] = []
    halves: list[str] = []
    chunks_total = 0
    for n, row in enumerate(rows, 1):
        ws = tree(row["tree_tag"])
        cfg = load_config(workspace=ws, overrides={"embedder": {"name": args.embedder}, **overrides})
        svc = CodeService(ws, cfg, home)
        fresh = svc.store.get_meta("last_index") is None
        t0 = time.monotonic()
        rep_l = svc.index(embed=False)
        t1 = time.monotonic()
        need_vec = any(m in modes for m in ("vector", "hybrid"))
        pending = svc.store.pending_count()
        if need_vec:
            done = svc.embed_pending().given
            t2 = time.monotonic()
            if pending and done:
                embed_rates.append(pending / max(1e-6, t2 - t1))
        else:
            t2 = t1
        if fresh:
            lex_s.append(t1 - t0)
            index_s.append(t2 - t0)
            chunks_total += rep_l.chunks
            # incremental: edit one file, re-index
            victim = next(p for p in sorted(svc.store.files()) if p.endswith(".py"))
            vp = ws / victim
            original = vp.read_bytes()
            vp.write_bytes(original + b"\n# bench edit\n")
            t3 = time.monotonic()
            svc.index(embed=need_vec)
            incr_s.append(time.monotonic() - t3)
            vp.write_bytes(original)
            svc.index(embed=need_vec)
        gold.append(row["gold_files"])
        halves.append(half(row["instance_id"]))
        for m in ladder_modes:
            layers = ("lexical", "vector") if m == "hybrid" else ("lexical",)
            for i in range(len(LADDER)):
                svc.cfg = load_config(workspace=ws, overrides={
                    "embedder": {"name": args.embedder}, **ladder_overrides(i, overrides)})
                if m == "hybrid" and i == 0:
                    svc.search(row["query"], limit=10, files=True, layers=layers)  # warm
                q0 = time.monotonic()
                out = svc.search(row["query"], limit=10, files=True, layers=layers)
                if m == "hybrid" and i == 0:
                    before_ms.append((time.monotonic() - q0) * 1000)
                ladder[(m, i)].append([r["path"] for r in out["results"]])
        svc.cfg = cfg
        for m in modes:
            if m == "bm25":
                ranked[m].append(bm25_files(ws, svc, row["query"]))
                continue
            layers = {"lexical": ("lexical",), "vector": ("vector",), "hybrid": ("lexical", "vector")}[m]
            svc.search(row["query"], limit=10, files=True, layers=layers)  # warm
            q0 = time.monotonic()
            out = svc.search(row["query"], limit=10, files=True, layers=layers)
            if m == "hybrid" or (m == "lexical" and "hybrid" not in modes):
                query_ms.append((time.monotonic() - q0) * 1000)
            ranked[m].append([r["path"] for r in out["results"]])
        rg = shutil.which("rg")
        if rg:
            terms = query_terms(row["query"])[:24]
            cmd = [rg, "-l", "-i", "-F"] + sum((["-e", t] for t in terms), []) + [str(ws)]
            r0 = time.monotonic()
            subprocess.run(cmd, capture_output=True)
            rg_ms.append((time.monotonic() - r0) * 1000)
        svc.close()
        print(f"[{n}/{len(rows)}] {row['instance_id']}: " + "  ".join(
            f"{m}={'hit' if all(g in ranked[m][-1][:5] for g in row['gold_files']) else '-'}"
            for m in modes), file=sys.stderr)

    lines = [f"SWE-bench dev, {len(rows)} issues, embedder {args.embedder}, store {args.store.split('://')[0]}: "
             "file-level, one search call",
             "", "| ranker | Acc@1 | Acc@5 | Acc@10 | MRR |", "|---|---|---|---|---|"]
    names = {"lexical": "lexical only (FTS5 BM25, code tokens)", "vector": "vector only",
             "hybrid": "hybrid (RRF)", "bm25": "baseline: whole-file BM25 (bm25s)"}
    for m in modes:
        s = metrics(ranked[m], gold)
        lines.append(f"| {names[m]} | {s['Acc@1']:.3f} | {s['Acc@5']:.3f} | {s['Acc@10']:.3f} | {s['MRR']:.3f} |")
    lines.append("")
    if ladder_modes:
        names_h = sorted(set(halves))
        lines += ["Rules added one at a time (docs/code-ranking.md); halves by repository:", "",
                  "| ranker | rule | Acc@1 | Acc@5 | Acc@10 | MRR | "
                  + " | ".join(f"{h} Acc@5 | {h} MRR" for h in names_h) + " |",
                  "|---|---|---|---|---|---|" + "---|---|" * len(names_h)]
        for m in ladder_modes:
            for i, (label, _) in enumerate(LADDER):
                r = ladder[(m, i)]
                s = metrics(r, gold)
                cells = []
                for h in names_h:
                    idx = [j for j, x in enumerate(halves) if x == h]
                    sh = metrics([r[j] for j in idx], [gold[j] for j in idx])
                    cells.append(f"{sh['Acc@5']:.3f} | {sh['MRR']:.3f}")
                lines.append(f"| {m} | {label} | {s['Acc@1']:.3f} | {s['Acc@5']:.3f} | "
                             f"{s['Acc@10']:.3f} | {s['MRR']:.3f} | " + " | ".join(cells) + " |")
        if "bm25" in modes:
            s = metrics(ranked["bm25"], gold)
            cells = []
            for h in names_h:
                idx = [j for j, x in enumerate(halves) if x == h]
                sh = metrics([ranked["bm25"][j] for j in idx], [gold[j] for j in idx])
                cells.append(f"{sh['Acc@5']:.3f} | {sh['MRR']:.3f}")
            lines.append(f"| baseline | whole-file BM25 (bm25s), same run | {s['Acc@1']:.3f} | "
                         f"{s['Acc@5']:.3f} | {s['Acc@10']:.3f} | {s['MRR']:.3f} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    if index_s:
        lines.append(f"first index (lexical): median {statistics.median(lex_s):.2f} s per tree; "
                     f"with vectors (cache warm across trees): median {statistics.median(index_s):.2f} s; "
                     f"{chunks_total / len(index_s):.0f} chunks per tree on average")
        lines.append(f"incremental index (one file edited): median {statistics.median(incr_s) * 1000:.0f} ms")
    if embed_rates and args.report_embedding:
        lines.append(f"embedding throughput: median {statistics.median(embed_rates):.1f} chunks/s")
    if query_ms:
        lines.append(f"warm query: p50 {pct(query_ms, .5):.0f} ms, p95 {pct(query_ms, .95):.0f} ms"
                     + (f" (rules off, same run: p50 {pct(before_ms, .5):.0f} ms, "
                        f"p95 {pct(before_ms, .95):.0f} ms)" if before_ms else "")
                     + f"; load average {os.getloadavg()[0]:.1f}")
    if rg_ms:
        lines.append(f"ripgrep -l over the same terms (for scale): p50 {pct(rg_ms, .5):.0f} ms, "
                     f"p95 {pct(rg_ms, .95):.0f} ms (finds files, does not rank them)")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
