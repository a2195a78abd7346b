"""Notes recall at scale: a markdown vault of about 10k and 100k passages.

Builds vaults of dated notes (a title and five sections of four LoCoMo turns each, as list
items: 21 passages a note; 20 folders,
a `public.md` in each folder so access levels have something to decide), indexes them
with the fake embedder (query timing is the store's, not the model's), and times, side by
side and interleaved per query:

- `notes search` through the API for an unfiltered channel and for a guest channel (a
  session map; the guest may see public notes only, decided before ranking);
- the same through the CLI, and the CLI of a previous version (`--baseline-rev REV`, a git
  worktree) on the same index;
- `rg -i -l` over the vault with the query's words (no index; the floor to beat).

    python bench/notes_scale.py [--sizes 10000,100000] [--queries 12] [--baseline-rev REV]
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from timing import baseline_src, fmt  # noqa: E402  (bench/timing.py)

LOCOMO = ROOT.parent / "shared" / "eval" / "locomo-dev"
TMP = Path(tempfile.gettempdir()) / "dsh-recall-nscale"
SECTIONS, ITEMS = 5, 4  # a note: a title, then SECTIONS headings of ITEMS list items
PER_NOTE = 1 + SECTIONS * ITEMS  # passages: the notes chunker cuts one per list item


def write_vault(vault: Path, passages: int, seed: int = 5) -> None:
    turns = [t for t in (json.loads(line)["text"] for line in open(LOCOMO / "locomo_dev_turns.jsonl"))
             if t.strip()]
    rnd = random.Random(seed)
    part = vault.with_suffix(".part")
    shutil.rmtree(part, ignore_errors=True)
    for i in range(max(1, passages // PER_NOTE)):
        folder = part / f"area{i % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        name = "public.md" if i < 20 else f"{2020 + i % 6}-{1 + i % 12:02d}-n{i:06d}.md"
        body = [f"# {rnd.choice(turns)[:60]}\n"]
        for s in range(SECTIONS):
            body.append(f"\n## Part {s + 1}\n\n" + "\n".join(f"- {rnd.choice(turns)}" for _ in range(ITEMS)) + "\n")
        (folder / name).write_text("".join(body), encoding="utf-8")
    part.rename(vault)


def queries(n: int) -> list[str]:
    qa = [json.loads(line)["question"] for line in open(LOCOMO / "locomo_dev_qa.jsonl")]
    return random.Random(3).sample(qa, n)


def cli(home: Path, vault: Path, q: str, python: str, src: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME="fake", DSH_RECALL_DAEMON="0",
               PYTHONPATH=str(src))
    t0 = time.perf_counter()
    subprocess.run([python, "-m", "dsh_recall", "notes", "search", q, "--root", str(vault), "--json"],
                   env=env, check=True, capture_output=True, cwd=str(TMP))
    return (time.perf_counter() - t0) * 1000


def rg(vault: Path, q: str) -> float | None:
    if not shutil.which("rg"):
        return None
    from dsh_recall.rank.lexical import query_terms

    args = ["rg", "-i", "-l"] + [a for t in query_terms(q) for a in ("-e", t)] + [str(vault)]
    t0 = time.perf_counter()
    subprocess.run(args, capture_output=True)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="passages per vault")
    ap.add_argument("--queries", type=int, default=12)
    ap.add_argument("--baseline-rev", default="", help="a git revision whose CLI runs beside this one")
    args = ap.parse_args()
    TMP.mkdir(parents=True, exist_ok=True)
    old_src = baseline_src(args.baseline_rev, TMP) if args.baseline_rev else None
    qs = queries(args.queries)
    smap = TMP / "sessions.json"
    smap.write_text(json.dumps({"dm:owner": "me", "dm:guest": "someone"}))
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        vault, home = TMP / f"vault-{size}", TMP / f"home-{size}"
        os.environ["DSH_RECALL_HOME"] = str(home)
        from dsh_recall.core.config import load_config
        from dsh_recall.services.access.channel import Viewer
        from dsh_recall.services.notes import NotesService

        if not vault.exists():
            write_vault(vault, size)
        cfg = load_config(overrides={"embedder": {"name": "fake"}})
        svc = NotesService(cfg, roots=[vault])
        t0 = time.perf_counter()
        rep = svc.index()
        index_s = time.perf_counter() - t0
        guest_cfg = load_config(overrides={"embedder": {"name": "fake"}, "notes": {
            "session_map": str(smap), "owner_ids": ["me"]}})
        guest = NotesService(guest_cfg, roots=[vault])
        for q in qs[:2]:  # warm both
            svc.search(q)
            guest.search(q, viewer=Viewer(guest_cfg, "dm:guest"))
        api, api_guest, now, old, grep = [], [], [], [], []
        for q in qs:
            t0 = time.perf_counter()
            svc.search(q)
            api.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            got = guest.search(q, viewer=Viewer(guest_cfg, "dm:guest"))
            api_guest.append((time.perf_counter() - t0) * 1000)
            assert all(r["level"] == "public" for r in got["results"]), got["results"]
            now.append(cli(home, vault, q, sys.executable, ROOT / "src"))
            if old_src:
                old.append(cli(home, vault, q, sys.executable, old_src))
            g = rg(vault, q)
            if g is not None:
                grep.append(g)
        rows.append((rep["chunks"], rep["files"], index_s, api, api_guest, now, old, grep))
        svc.close()
        guest.close()

    print(f"\nnotes search, {len(qs)} queries, fake embedder, p50 / p95 ms; load average "
          f"{os.getloadavg()[0]:.1f}")
    print("\n| passages (notes) | first index | API | API, guest channel | CLI "
          "| CLI, previous version | rg -i -l (no index) |")
    print("|---|---|---|---|---|---|---|")
    for chunks, files, index_s, api, api_guest, now, old, grep in rows:
        print(f"| {chunks:,} ({files:,}) | {index_s:.0f} s | {fmt(api)} | {fmt(api_guest)} | {fmt(now)} "
              f"| {fmt(old)} | {fmt(grep)} |")


if __name__ == "__main__":
    main()
