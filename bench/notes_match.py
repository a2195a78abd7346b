"""How sure notes answers say they are (`match`), on the qmd eval docs and on queries the
notes cannot answer.

    .venv/bin/python bench/notes_match.py [--data ../shared/eval/qmd-docs] [--embedder minilm] [--list]

Indexes the six markdown docs with the real default embedder into a throw-away recall home,
then asks both qmd query sets and the made-up and unrelated queries below, hybrid and
lexical only. For the real queries it counts those whose expected doc comes first and how
many of those the answer calls strong (the goal: 90% or more); for the others how many it
calls strong (the goal: none), weak and none. The made-up queries were written before the
rule was (docs/notes.md#how-sure-an-answer-is): identifiers and names the docs never use,
mixed with words they do, and phrases about other subjects.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "eval" / "qmd-docs"
SETS = ["eval_queries.json", "eval-deep-research.jsonl"]
UNANSWERABLE = [
    # made-up identifiers and names, some beside words the docs use
    "flurbozite_handler retry budget", "XyzzyQuux configuration", "kubernetes zorblatt operator",
    "what does snarfleMode do", "grombulator v3 migration", "the Krelvin protocol timeout",
    "parse_quantum_flux_capacitor", "Project Nimbusfrost retrospective",
    "blorptastic error code E4471", "how to configure the wibblewobble cache",
    # other subjects
    "chocolate cake recipe", "best hiking trails in Patagonia", "how to change a bicycle tire",
    "medieval French poetry", "tomato plant watering schedule",
    "guitar chord progressions for blues", "train schedule from Lyon to Turin",
    "knitting a wool scarf pattern", "volcano eruption history of Iceland",
    "symptoms of vitamin D deficiency", "rules of cricket lbw", "what is the capital of Mongolia",
    "how to bake sourdough bread", "the plot of Moby Dick", "feeding schedule for a puppy",
]
MODES = [("hybrid", ("lexical", "vector")), ("lexical only", ("lexical",))]


def load(data: Path) -> list[tuple[str, str]]:
    """(query, expected doc) of both qmd sets."""
    out: list[tuple[str, str]] = []
    for name in SETS:
        path = data / name
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        items = json.loads(text) if name.endswith(".json") else [
            json.loads(ln) for ln in text.splitlines() if ln.strip()]
        out += [(it["query"], it.get("expectedDoc") or it["expected_doc"]) for it in items]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--list", action="store_true", help="List every answer that misses a goal.")
    args = ap.parse_args()
    docs = args.data / "eval-docs"
    if not docs.is_dir():
        print(f"no eval docs at {docs}", file=sys.stderr)
        return 1
    real = load(args.data)
    with tempfile.TemporaryDirectory() as home:
        os.environ["DSH_RECALL_HOME"] = home
        from dsh_recall.core.config import load_config
        from dsh_recall.services.notes import NotesService

        cfg = load_config(overrides={"embedder": {"name": args.embedder}})
        svc = NotesService(cfg, roots=[docs])
        rep = svc.index()
        print(f"indexed {rep['files']} docs, {rep['chunks']} chunks with {args.embedder}; "
              f"{len(real)} real queries, {len(UNANSWERABLE)} made-up or unrelated")
        print(f"{'mode':<13} {'right doc first':>15} {'of them strong':>15}   "
              f"{'made-up strong':>14} {'weak':>5} {'none':>5}")
        for label, layers in MODES:
            first, strong, misses = 0, 0, []
            real_ev: list[float] = []  # the evidence of each right first passage
            for query, want in real:
                d = svc.search(query, layers=layers, limit=10, explain=True)
                if d["results"] and want in d["results"][0]["path"]:
                    first += 1
                    strong += d["match"] == "strong"
                    real_ev.append(d["results"][0]["evidence"])
                    if d["match"] != "strong":
                        misses.append(f"real, {d['match']}: {query!r}")
            said = {"strong": 0, "weak": 0, "none": 0}
            made_ev: list[tuple[float, str]] = []  # each one's best passage, names or not
            for query in UNANSWERABLE:
                d = svc.search(query, layers=layers, limit=10, explain=True)
                said[d["match"]] += 1
                made_ev.append((max((r["evidence"] for r in d["results"]), default=0.0), query))
                if d["match"] == "strong":
                    misses.append(f"made-up, strong: {query!r} -> {d['results'][0]['path']}")
            n = len(UNANSWERABLE)
            print(f"{label:<13} {first:>9} of {len(real):<3}  {strong / max(first, 1):>14.1%}   "
                  f"{said['strong'] / n:>14.1%} {said['weak']:>5} {said['none']:>5}")
            real_ev.sort()
            made_ev.sort(reverse=True)
            print(f"{'':<13} evidence (1 = strong): right first passages lowest "
                  f"{real_ev[0] if real_ev else 0:.2f}, 10th percentile "
                  f"{real_ev[len(real_ev) // 10] if real_ev else 0:.2f}; made-up best "
                  + ", ".join(f"{e:.2f} ({q!r})" for e, q in made_ev[:3]))
            if args.list:
                for m in misses:
                    print(f"    {m}")
        svc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
