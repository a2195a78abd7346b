"""Calibration of code answers' `match` (rank/confidence.py): made-up queries against real ones.

For 50 made-up identifiers and unrelated phrases (bench/data/no_match_queries.txt) over
three dev trees (150 searches), and the dev queries (the SWE-bench dev bundle's 51 issues
and bench/data/code_questions.jsonl's 32 questions), in three states of the index:

- full: every chunk has a vector (bench/first_search.py's shared home, built if missing);
- first: the first hybrid search of a fresh tree (vectors pending);
- lexical: `--lexical-only`.

It prints, per state: the share of made-up queries answered strong (the target is none) and
none; of the dev queries whose top hit is in a gold file, the share answered strong (the
target is 90% or more); and the precision of strong (the share of strong answers whose top
hit is in a gold file), per set.

    python bench/confidence.py [--states full,first,lexical] [--limit N] [--fixed-head]

`--fixed-head`: the first search embeds the lexical head's 24 chunks alone, whatever the
machine's speed (as bench/first_search.py --fixed-head), so runs compare the same state.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from code_swebench import tree  # noqa: E402
from first_search import WORK, cases, fresh_home  # noqa: E402

from dsh_recall.core.config import load_config  # noqa: E402
from dsh_recall.services.code import CodeService  # noqa: E402


def made_up() -> list[dict[str, Any]]:
    tags = sorted({c["tag"] for c in cases(["questions"], 0)})
    names = [q for q in (ROOT / "bench" / "data" / "no_match_queries.txt").read_text().splitlines() if q]
    return [{"set": "made-up", "repo": t.split("-")[0], "tag": t, "query": q, "gold": [], "all": False}
            for t in tags for q in names]


def run(state: str, items: list[dict[str, Any]], fixed: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    open_: dict[str, CodeService] = {}
    for c in items:
        ws = tree(c["tag"])
        cfg = load_config(ws, overrides=fixed) if fixed and state == "first" else load_config(ws)
        if state == "first":
            home = fresh_home(c["tag"], ws, str(ROOT / "src"))
            svc = CodeService(ws, cfg, home=home)
        else:
            if c["tag"] not in open_:
                open_[c["tag"]] = CodeService(ws, cfg, home=WORK / ("full-home" if state == "full"
                                                                 else "lexical-home"))
                if state == "full":
                    open_[c["tag"]].index()
            svc = open_[c["tag"]]
        layers = ("lexical",) if state == "lexical" else ("lexical", "vector")
        a = svc.search(c["query"], limit=10, layers=layers)
        top = a["results"][0]["path"] if a["results"] else None
        out.append({**c, "match": a["match"], "top_gold": top in c["gold"]})
        if state == "first":
            svc.close()
            shutil.rmtree(home, ignore_errors=True)
        print(".", end="", file=sys.stderr, flush=True)
    for svc in open_.values():
        svc.close()
    print(file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", default="full,first,lexical")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--fixed-head", action="store_true",
                    help="the first search embeds the head's 24 alone, whatever the machine's speed")
    args = ap.parse_args()
    fixed: dict[str, Any] = {}
    if args.fixed_head:
        from dsh_recall.services import hybrid
        hybrid.fill_what_fits = lambda *a, **k: 0  # type: ignore[assignment]  # no timed fill
        fixed = {"embed_budget_s": 120.0, "search_deadline_s": 300.0}
    WORK.mkdir(parents=True, exist_ok=True)
    items = made_up() + cases(["issues", "questions"], 0)
    if args.limit:
        items = items[: args.limit]
    print("| state | made-up: strong / none | questions: top gold -> strong | issues: top gold -> strong "
          "| precision of strong (questions / issues) |")
    print("|---|---|---|---|---|")
    for state in args.states.split(","):
        rows = run(state, items, fixed)
        nm = [r for r in rows if r["set"] == "made-up"]
        m = Counter(r["match"] for r in nm)
        cells = [f"{m['strong']}/{len(nm)} / {m['none']}/{len(nm)}"]
        prec = []
        for s in ("questions", "issues"):
            part = [r for r in rows if r["set"] == s]
            good = [r for r in part if r["top_gold"]]
            strong = [r for r in part if r["match"] == "strong"]
            cells.append(f"{sum(r['match'] == 'strong' for r in good)}/{len(good)} "
                         f"({sum(r['match'] == 'strong' for r in good) / max(1, len(good)):.0%})")
            prec.append(f"{sum(r['top_gold'] for r in strong) / max(1, len(strong)):.2f}")
        print(f"| {state} | " + " | ".join(cells) + f" | {' / '.join(prec)} |", flush=True)
        (WORK / f"confidence-{state}.json").write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
