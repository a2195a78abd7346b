"""Notes recall on the qmd eval docs: Hit@1 / Hit@3 for BM25 only, vector only and hybrid.

    .venv/bin/python bench/notes_qmd.py [--data ../shared/eval/qmd-docs] [--embedder minilm]

Indexes the six markdown docs with the real default embedder into a throw-away recall home,
then runs both query sets through the same notes service three ways. A hit counts distinct
files: Hit@3 = the expected doc is among the first three files ranked. qmd's own floor for
its hybrid search is overall Hit@3 >= 0.60.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "eval" / "qmd-docs"
MODES = [("BM25 only", ("lexical",)), ("vector only", ("vector",)), ("hybrid", ("lexical", "vector"))]
SETS = ["eval_queries.json", "eval-deep-research.jsonl"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--misses", action="store_true", help="List the hybrid misses.")
    args = ap.parse_args()
    docs = args.data / "eval-docs"
    if not docs.is_dir():
        print(f"no eval docs at {docs}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as home:
        os.environ["DSH_RECALL_HOME"] = home
        from dsh_recall.core.config import load_config
        from dsh_recall.services.notes import NotesService

        cfg = load_config(overrides={"embedder": {"name": args.embedder}})
        svc = NotesService(cfg, roots=[docs])
        t0 = time.monotonic()
        rep = svc.index()
        print(f"indexed {rep['files']} docs, {rep['chunks']} chunks, {rep['embedded']} embedded "
              f"with {args.embedder} in {time.monotonic() - t0:.1f} s")
        print(f"{'set':<26} {'n':>3}  " + "  ".join(f"{m:>19}" for m, _ in MODES))
        print(f"{'':<26} {'':>3}  " + "  ".join(f"{'Hit@1':>9} {'Hit@3':>9}" for _ in MODES))
        for name in SETS:
            path = args.data / name
            if not path.exists():
                continue
            row, misses = [], []
            for _, layers in MODES:
                r = svc.evaluate(path, layers=layers)
                row.append(f"{r['hit@1']:>9.3f} {r['hit@3']:>9.3f}")
                if layers == ("lexical", "vector"):
                    misses = [m for m in r["misses"] if not m["rank"] or m["rank"] > 3]
                n = r["cases"]
            print(f"{name:<26} {n:>3}  " + "  ".join(row))
            if args.misses:
                for m in misses:
                    print(f"    hybrid miss: {m['query']!r} (rank {m['rank']}, top {m['top']})")
        svc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
