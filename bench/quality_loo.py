"""Leave-one-out validation of ranking settings on the dev sets: the way the project is judged
(on repositories and conversations it never saw).

    python bench/quality_loo.py code [--embedder minilm|fake] [--limit N]
    python bench/quality_loo.py history [--embedder minilm|fake]

`code`: SWE-bench dev (issue text -> gold files, one `search --files` call). Every setting in
GRID_CODE is run on every issue, lexical only and hybrid. For each repository in turn, the
setting with the best macro Acc@5 (then MRR) on the *other* repositories is chosen and scored
on the held-out one; the table gives each fold's choice and score, the mean and the worst
fold, beside the shipped defaults and a plain whole-file BM25 baseline in the same run.

`history`: LoCoMo dev, the same with conversations as folds and turn R@5 as the measure.

A setting that only one fold likes is not chosen for the others: that is the point. Indexes
and vectors come from the same recall homes as bench/code_swebench.py and
bench/history_locomo.py (built on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

TMP = Path(tempfile.gettempdir())

# Candidate settings: the shipped defaults ({}), each rule off, and the values around them.
GRID_CODE: dict[str, dict[str, Any]] = {
    "defaults": {},
    "query_focus off": {"query_focus": False},
    "focus_df_share 1.0": {"focus_df_share": 1.0},
    "focus_df_share 0.1": {"focus_df_share": 0.1},
    "title_weight off": {"title_weight": 0.0},
    "title_weight 0.5": {"title_weight": 0.5},
    "title_weight 2.0": {"title_weight": 2.0},
    "path_boost off": {"path_boost": 1.0},
    "path_boost 2.5": {"path_boost": 2.5},
    "test_transfer off": {"test_transfer": 0.0},
    "test_transfer 1.0": {"test_transfer": 1.0},
    "file_decay 0": {"file_decay": 0.0},
    "file_decay 0.4": {"file_decay": 0.4},
    "symbol_boost off": {"symbol_boost": 1.0},
    "symbol_boost 2.5": {"symbol_boost": 2.5},
    "identifier_boost off": {"identifier_boost": False},
    "test_weight 0.3": {"test_weight": 0.3},
    "rrf_k 30": {"rrf_k": 30},
    "lexical_weight 1.5": {"lexical_weight": 1.5},
    "lexical_weight 0.7": {"lexical_weight": 0.7},
}

GRID_HISTORY: dict[str, dict[str, Any]] = {
    "defaults": {},
    "answer_share off": {"answer_share": 0.0},
    "answer_share 1.0": {"answer_share": 1.0},
    "speaker_boost off": {"speaker_boost": 0.0},
    "speaker_boost 1.0": {"speaker_boost": 1.0},
    "time_boost off": {"time_boost": 0.0},
    "time_boost 1.0": {"time_boost": 1.0},
    "date_boost off": {"date_boost": 0.0},
    "date_boost 2.0": {"date_boost": 2.0},
    "session_boost off": {"session_boost": 0.0},
    "session_boost 0.6": {"session_boost": 0.6},
    "session_turns 1": {"session_turns": 1},
    "fusion rank": {"fusion": "rank"},
    "all rules off": {"answer_share": 0.0, "speaker_boost": 0.0, "time_boost": 0.0,
                      "date_boost": 0.0, "session_boost": 0.0},
}


def macro(per_q: list[dict[str, float]], groups: dict[str, list[int]], names: list[str],
          key: str) -> float:
    vals = [sum(per_q[i][key] for i in groups[g]) / len(groups[g]) for g in names if groups[g]]
    return sum(vals) / len(vals) if vals else 0.0


def loo(runs: dict[str, list[dict[str, float]]], groups: dict[str, list[int]], key: str,
        tie: str) -> list[tuple[str, str, float, float]]:
    """Per held-out group: (group, setting chosen on the others, its held-out `key`, `tie`).
    Ties go to the shipped defaults, then to the grid's order."""
    out = []
    for held in groups:
        train = [g for g in groups if g != held]
        best = max(runs, key=lambda s: (round(macro(runs[s], groups, train, key), 6),
                                        round(macro(runs[s], groups, train, tie), 6),
                                        s == "defaults"))
        out.append((held, best, macro(runs[best], groups, [held], key),
                    macro(runs[best], groups, [held], tie)))
    return out


def report(title: str, runs: dict[str, list[dict[str, float]]], groups: dict[str, list[int]],
           key: str, tie: str, extra: dict[str, list[dict[str, float]]]) -> list[str]:
    names = list(groups)
    every = list(range(len(next(iter(runs.values())))))
    lines = [f"### {title}", "",
             f"| setting | all {key} | all {tie} | " + " | ".join(f"{g} {key}" for g in names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    rows = {**runs, **extra}  # extra rows: shown, never chosen
    for s, per_q in rows.items():
        all_k = sum(per_q[i][key] for i in every) / len(every)
        all_t = sum(per_q[i][tie] for i in every) / len(every)
        lines.append(f"| {s} | {all_k:.3f} | {all_t:.3f} | "
                     + " | ".join(f"{macro(per_q, groups, [g], key):.3f}" for g in names) + " |")
    folds = loo(runs, groups, key, tie)
    lines += ["", f"Leave one out ({key} on the held-out group; the setting chosen on the others):", "",
              f"| held out | chosen on the others | {key} | {tie} | defaults {key} |", "|---|---|---|---|---|"]
    for held, chosen, k, t in folds:
        lines.append(f"| {held} | {chosen} | {k:.3f} | {t:.3f} | "
                     f"{macro(runs['defaults'], groups, [held], key):.3f} |")
    ks = [k for _, _, k, _ in folds]
    d = [macro(runs["defaults"], groups, [g], key) for g in names]
    lines += [f"| **mean / worst** | | **{sum(ks) / len(ks):.3f} / {min(ks):.3f}** | | "
              f"{sum(d) / len(d):.3f} / {min(d):.3f} |", ""]
    return lines


def code(args: argparse.Namespace) -> list[str]:
    import code_swebench as cs

    from dsh_recall.core.config import load_config
    from dsh_recall.services.code import CodeService

    rows = [json.loads(line) for line in open(cs.EVAL / "queries.jsonl")]
    if args.limit:
        rows = rows[: args.limit]
    os.environ["DSH_RECALL_HOME"] = args.home
    home = Path(args.home)
    base = {"embedder": {"name": args.embedder}}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {m: {s: [] for s in GRID_CODE}
                                                           for m in ("lexical", "hybrid")}
    bm25: list[dict[str, float]] = []
    groups: dict[str, list[int]] = {}
    for n, row in enumerate(rows):
        ws = cs.tree(row["tree_tag"])
        svc = CodeService(ws, load_config(workspace=ws, overrides=base), home)
        svc.index(embed=args.embedder != "none")
        groups.setdefault(row["repo"].split("/")[1], []).append(n)
        gold = row["gold_files"]
        for s, over in GRID_CODE.items():
            svc.cfg = load_config(workspace=ws, overrides={**base, **over})
            for m, layers in (("lexical", ("lexical",)), ("hybrid", ("lexical", "vector"))):
                out = svc.search(row["query"], limit=10, files=True, layers=layers)
                runs[m][s].append(cs.metrics([[r["path"] for r in out["results"]]], [gold]))
        bm25.append(cs.metrics([cs.bm25_files(ws, svc, row["query"])], [gold]))
        svc.close()
        print(f"[{n + 1}/{len(rows)}] {row['instance_id']}", file=sys.stderr)
    return ([f"SWE-bench dev, {len(rows)} issues, embedder {args.embedder}, folds = repositories "
             f"({', '.join(f'{g} {len(v)}' for g, v in groups.items())}); load average "
             f"{os.getloadavg()[0]:.1f}", ""]
            + report("hybrid", runs["hybrid"], groups, "Acc@5", "MRR", {"baseline: whole-file BM25": bm25})
            + report("lexical only (what a search gives while vectors are pending)", runs["lexical"],
                     groups, "Acc@5", "MRR", {}))


def history(args: argparse.Namespace) -> list[str]:
    import history_locomo as hl

    home = tempfile.mkdtemp(prefix="locomo-loo-")
    os.environ["DSH_RECALL_HOME"] = home
    from dsh_recall.core.config import load_config
    from dsh_recall.services import history as svc

    def cfg_for(over: dict[str, Any]) -> Any:
        return load_config(overrides={"embedder": {"name": args.embedder}, "history": over})

    files, turns = hl.convert(hl.DATA, Path(home))
    store = svc.open_store()
    svc.import_paths([str(f) for f in files], "generic", cfg_for({}), embed=True, store=store)
    qs = hl.questions(hl.DATA)
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(qs):
        groups.setdefault(q["sample_id"], []).append(i)
    runs: dict[str, list[dict[str, float]]] = {}
    layers = list(hl.LAYERS_ALL)
    for s, over in GRID_HISTORY.items():
        runs[s] = hl.evaluate(svc, store, cfg_for(over), qs, layers)[0]
        print(f"{s}: done", file=sys.stderr)
    # While vectors are pending (or the embedder is late) the words layers answer alone.
    pending = hl.evaluate(svc, store, cfg_for({}), qs, ["literal", "fuzzy"])[0]
    bm25 = [hl.score(r, q["evidence_dia_ids"]) for q, r in zip(qs, hl.bm25_runs(turns, qs))]
    store.close()
    return ([f"LoCoMo dev, {len(qs)} questions (category != 5), embedder {args.embedder}, folds = "
             f"conversations; load average {os.getloadavg()[0]:.1f}", ""]
            + report("merged history search", runs, groups, "R@5", "MRR",
                     {"defaults, vectors pending (literal + fuzzy)": pending, "baseline: plain BM25": bm25}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("set", choices=["code", "history"])
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--home", default=str(TMP / "swebench-recall-home"), help="code: the recall home")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    run: Callable[[argparse.Namespace], list[str]] = code if args.set == "code" else history
    text = "\n".join(run(args))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
