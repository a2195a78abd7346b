"""History recall at scale: months of sessions in one history database.

Builds generic-JSONL histories of about 10k and 100k blocks (sessions of 100 messages:
LoCoMo turns as the user and assistant lines, 40-line slices of this project's own source
as tool output), imports them without embedding (a user who imported a long history and
has not embedded it yet), and times, side by side and interleaved per query:

- `history search --all` through the API and the CLI with the default layers, while the
  semantic layer is gated behind the backlog (the rate of the last fill is remembered);
- the same CLI of a previous version (`--baseline-rev REV`, a git worktree; before 722fab0
  a version spent its embedding budget on every such search);
- `rg -i -c` over the JSONL with the query's words (no index; the floor to beat);
- then, once every block has a vector, the API and CLI again with the semantic layer on
  (and the previous version's CLI).

The fake embedder keeps the build short (query timing is the store's, not the model's);
`--embedder minilm` uses the shipped model.

    python bench/history_scale.py [--sizes 10000,100000] [--queries 12] [--baseline-rev REV]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from timing import baseline_src, fmt  # noqa: E402  (bench/timing.py)

LOCOMO = ROOT.parent / "shared" / "eval" / "locomo-dev"
TMP = Path(tempfile.gettempdir()) / "dsh-recall-hscale"
PER_SESSION = 100


def corpus_parts() -> tuple[list[str], list[str]]:
    turns = [json.loads(line)["text"] for line in open(LOCOMO / "locomo_dev_turns.jsonl")]
    code: list[str] = []
    for p in sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py")):
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
        code += ["\n".join(lines[i:i + 40]) for i in range(0, len(lines), 40)]
    return [t for t in turns if t.strip()], code


def write_history(path: Path, blocks: int, seed: int = 7) -> None:
    turns, code = corpus_parts()
    rnd = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for s in range(max(1, blocks // PER_SESSION)):
            for k in range(PER_SESSION):
                r = rnd.random()
                if r < 0.4:
                    role, text = "user", rnd.choice(turns)
                elif r < 0.75:
                    role, text = "assistant", " ".join(rnd.choice(turns) for _ in range(3))
                else:
                    role, text = "tool", rnd.choice(code)
                out.write(json.dumps({"session": f"s{s:05d}", "seq": k, "role": role, "text": text,
                                      "time": 1.7e9 + s * 86400 + k * 60,
                                      "workspace": f"proj{s % 7}"}) + "\n")


def queries(n: int) -> list[str]:
    qa = [json.loads(line)["question"] for line in open(LOCOMO / "locomo_dev_qa.jsonl")]
    rnd = random.Random(3)
    picked = rnd.sample(qa, n - n // 3)
    # And a third in an agent's words: identifiers from the tool output.
    picked += ["SemanticLayer fill budget", "sqlite3 OperationalError database is locked",
               "embed_pending vectors", "file_lock flock", "cap_query clean_text",
               "IndexJob running thread", "token budget cursor"][: n // 3]
    return picked


def cli(home: Path, embedder: str, q: str, python: str, src: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME=embedder, DSH_RECALL_DAEMON="0",
               PYTHONPATH=str(src))
    t0 = time.perf_counter()
    subprocess.run([python, "-m", "dsh_recall", "history", "search", q, "--all", "--json"],
                   env=env, check=True, capture_output=True, cwd=str(TMP))
    return (time.perf_counter() - t0) * 1000


def rg(path: Path, q: str) -> float | None:
    if not shutil.which("rg"):
        return None
    from dsh_recall.rank.history_query import terms

    args = ["rg", "-i", "-c"] + [a for t in terms(q) for a in ("-e", t)] + [str(path)]
    t0 = time.perf_counter()
    subprocess.run(args, capture_output=True)
    return (time.perf_counter() - t0) * 1000


def drop_vectors(home: Path) -> None:
    """Forget vectors but keep embed hashes (clear_vectors drops both)."""
    import sqlite3

    conn = sqlite3.connect(home / "history.sqlite", isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM vectors")
    conn.execute("UPDATE blocks SET vec_seq = NULL WHERE vec_seq IS NOT NULL")
    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vec_epoch'")
    conn.execute("COMMIT")
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=12)
    ap.add_argument("--embedder", default="fake")
    ap.add_argument("--baseline-rev", default="", help="a git revision whose CLI runs beside this one")
    ap.add_argument("--reuse", action="store_true", help="keep histories built by an earlier run")
    args = ap.parse_args()
    TMP.mkdir(parents=True, exist_ok=True)
    old_src = baseline_src(args.baseline_rev, TMP) if args.baseline_rev else None
    qs = queries(args.queries)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        home, data = TMP / f"home-{size}", TMP / f"history-{size}.jsonl"
        os.environ["DSH_RECALL_HOME"] = str(home)
        from dsh_recall.core.config import load_config
        from dsh_recall.services import history

        quiet = load_config(overrides={"embedder": {"name": args.embedder}, "embed_budget_s": 0})
        cfg = load_config(overrides={"embedder": {"name": args.embedder}})
        if not (args.reuse and data.exists() and home.exists()):
            shutil.rmtree(home, ignore_errors=True)
            write_history(data, size)
            t0 = time.perf_counter()
            rep = history.import_paths([str(data)], fmt="generic", cfg=quiet)
            print(f"{size}: imported {rep['blocks']} blocks in {time.perf_counter() - t0:.1f} s", flush=True)
        store = history.open_store()
        store.clear_vectors()  # the backlog state: every block hashed, none embedded yet
        store.set_meta("embed_rate", "")
        history.SemanticLayer(store, cfg).hash_blocks(None)
        store.close()
        api, now, old, grep = [], [], [], []
        for q in qs:
            t0 = time.perf_counter()
            history.search(q, all_sessions=True, cfg=cfg)
            api.append((time.perf_counter() - t0) * 1000)
            now.append(cli(home, args.embedder, q, sys.executable, ROOT / "src"))
            if old_src:
                old.append(cli(home, args.embedder, q, sys.executable, old_src))
                drop_vectors(home)  # what the old version embedded: gone, the backlog stays
            g = rg(data, q)
            if g is not None:
                grep.append(g)
        store = history.open_store()
        blocks = store.block_count(None)
        store.close()
        t0 = time.perf_counter()
        embedded = history.backfill(cfg, threading.Event())
        fill_s = time.perf_counter() - t0
        api_on, cli_on, old_on = [], [], []
        for q in qs:
            t0 = time.perf_counter()
            ans = history.search(q, all_sessions=True, cfg=cfg)
            api_on.append((time.perf_counter() - t0) * 1000)
            assert ans["layer_status"].get("semantic") in ("ok", "no match"), ans["layer_status"]
            cli_on.append(cli(home, args.embedder, q, sys.executable, ROOT / "src"))
            if old_src:
                old_on.append(cli(home, args.embedder, q, sys.executable, old_src))
        rows.append((blocks, api, now, old, grep, embedded, fill_s, api_on, cli_on, old_on))

    print(f"\nHistory search --all, {len(qs)} queries, embedder {args.embedder}, p50 / p95 ms")
    print("\n| blocks | gated: API | gated: CLI | gated: CLI, previous version | rg -i -c (no index) "
          "| embed all (background) | all embedded: API | all embedded: CLI "
          "| all embedded: CLI, previous version |")
    print("|---|---|---|---|---|---|---|---|---|")
    for blocks, api, now, old, grep, embedded, fill_s, api_on, cli_on, old_on in rows:
        print(f"| {blocks:,} | {fmt(api)} | {fmt(now)} | {fmt(old)} | {fmt(grep)} "
              f"| {embedded:,} in {fill_s:.0f} s | {fmt(api_on)} | {fmt(cli_on)} | {fmt(old_on)} |")


if __name__ == "__main__":
    main()
