"""The first search of a fresh tree, against lexical only and a fully embedded index.

What every new user meets on their first query (and the state after an interrupted index
job or a newly added source root): the lexical index is built, almost no chunk has a vector
yet. For each query of the SWE-bench dev bundle (issue text -> the files its fix changed)
and of bench/data/code_questions.jsonl (questions written the way a person asks, over three
of its trees), on a fresh recall home each time:

- first: the default hybrid search, the first one on that tree (vectors pending);
- lexical: the same index, `--lexical-only`;
- full: hybrid once every chunk has a vector (an embedding cache shared across trees).

`--fixed-head` makes the first search independent of the machine's speed: the search
embeds exactly the lexical head's 24 chunks (budget and deadline raised so they always fit)
and nothing of the backlog (no timed fill), so two runs on a loaded machine compare the
same state.

It prints file Acc@1 / Acc@3 / Acc@5 (issues: every gold file in the top k distinct files;
questions: any gold file) per repository, the first search's wall time, and, with
`--baseline-src DIR` (a checkout of the previous release's `src`, e.g. from
`git worktree add /tmp/prev HEAD~1`), the previous release's first search in the same run.

    python bench/first_search.py [--set issues,questions] [--modes first,lexical,full]
                                 [--baseline-src DIR] [--limit N] [--json OUT] [--fixed-head]
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
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval" / "swebench-dev"
TMP = Path(tempfile.gettempdir())
WORK = TMP / "first-search-bench"


def cases(which: list[str], limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if "issues" in which:
        for line in (EVAL / "queries.jsonl").read_text().splitlines():
            d = json.loads(line)
            out.append({"set": "issues", "repo": d["repo"].split("/")[1], "tag": d["tree_tag"],
                        "query": d["query"], "gold": d["gold_files"], "all": True})
    if "questions" in which:
        for line in (ROOT / "bench" / "data" / "code_questions.jsonl").read_text().splitlines():
            d = json.loads(line)
            out.append({"set": "questions", "repo": d["tree_tag"].split("-")[0], "tag": d["tree_tag"],
                        "query": d["query"], "gold": d["gold_files"], "all": False})
    return out[:limit] if limit else out


def fresh_home(tag: str, ws: Path, src: str) -> Path:
    """A new recall home holding a lexical-only index of the tree and nothing else (no
    vectors, no embedding cache): the state of a first search. Copied from a template made
    once per tree and package."""
    from dsh_recall.core.config import load_config
    from dsh_recall.services.code import CodeService

    home = WORK / "templates" / Path(src).parent.name / tag
    if not home.exists():
        part = home.with_suffix(".part")
        shutil.rmtree(part, ignore_errors=True)
        svc = CodeService(ws, load_config(ws), home=part)
        with svc._index_lock(None):
            svc.index_lexical()
        svc.close()
        part.rename(home)
    fresh = Path(tempfile.mkdtemp(dir=WORK))
    shutil.rmtree(fresh)
    shutil.copytree(home, fresh)
    return fresh


def run_arm(src: str, items: list[dict[str, Any]], modes: list[str],
            fixed_head: bool = False) -> list[dict[str, Any]]:
    """In this process, with the package from `src`: each case's ranked files per mode.
    `fixed_head`: the first search embeds the head alone, whatever the machine's speed."""
    sys.path.insert(0, src)  # the arm's own package, imported before code_swebench adds ours
    sys.path.insert(1, str(ROOT / "bench"))

    import dsh_recall
    from dsh_recall.core.config import load_config
    from dsh_recall.services.code import CodeService
    print(f"package: {Path(dsh_recall.__file__).parent}", file=sys.stderr)
    from code_swebench import tree  # the bundle's trees, extracted once

    fixed: dict[str, Any] = {}
    if fixed_head:
        from dsh_recall.services import hybrid
        hybrid.fill_what_fits = lambda *a, **k: 0  # type: ignore[assignment]  # no timed fill
        fixed = {"embed_budget_s": 120.0, "search_deadline_s": 300.0}

    def files_of(answer: dict[str, Any]) -> list[str]:
        return list(dict.fromkeys(r["path"] for r in answer["results"]))

    out: list[dict[str, Any]] = []
    full_home = WORK / "full-home"
    for c in items:
        ws = tree(c["tag"])
        cfg = load_config(ws, overrides=fixed) if fixed else load_config(ws)
        row: dict[str, Any] = {**{k: c[k] for k in ("set", "repo", "query", "gold", "all")}}
        # Issues: files ranked (`--files`, as bench/code_swebench.py); questions: the
        # default answer a person reads, its chunks' files in order.
        kw: dict[str, Any] = {"files": True} if c["set"] == "issues" else {}
        if "first" in modes or "lexical" in modes:
            fresh = fresh_home(c["tag"], ws, src)
            svc = CodeService(ws, cfg, home=fresh)
            if "first" in modes:
                t0 = time.monotonic()
                a = svc.search(c["query"], limit=10, **kw)
                row["first_ms"] = round((time.monotonic() - t0) * 1000)
                row["first"] = files_of(a)
                row["first_pending"] = a.get("pending")
                row["first_match"] = a.get("match")
            if "lexical" in modes:
                row["lexical"] = files_of(svc.search(c["query"], limit=10, layers=("lexical",),
                                                     **kw))
            svc.close()
            shutil.rmtree(fresh, ignore_errors=True)
        if "full" in modes:
            svc = CodeService(ws, cfg, home=full_home)
            svc.index()
            a = svc.search(c["query"], limit=10, **kw)
            row["full"] = files_of(a)
            row["full_match"] = a.get("match")
            row["full_ms"] = a.get("elapsed_ms")
            svc.close()
        out.append(row)
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return out


def hit(ranked: list[str], gold: list[str], k: int, every: bool) -> bool:
    top = ranked[:k]
    return all(g in top for g in gold) if every else any(g in top for g in gold)


def table(rows: list[dict[str, Any]], arms: list[str], title: str) -> str:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["repo"]].append(r)
    lines = [f"\n{title}", "", "| arm | " + " | ".join(f"{g} ({len(v)}) Acc@1 / @3 / @5"
                                                      for g, v in sorted(groups.items()))
             + " | all |", "|---|" + "---|" * (len(groups) + 1)]
    for arm in arms:
        cells = []
        for _, v in sorted(groups.items()) + [("all", rows)]:
            have = [r for r in v if arm in r]
            if not have:
                cells.append("-")
                continue
            accs = [sum(hit(r[arm], r["gold"], k, r["all"]) for r in have) / len(have) for k in (1, 3, 5)]
            cells.append(" / ".join(f"{a:.3f}" for a in accs))
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="issues,questions")
    ap.add_argument("--modes", default="first,lexical,full")
    ap.add_argument("--baseline-src", default="", help="the previous release's src folder")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--json", default="")
    ap.add_argument("--fixed-head", action="store_true",
                    help="the first search embeds the head's 24 alone, whatever the machine's speed")
    ap.add_argument("--arm", nargs=2, help=argparse.SUPPRESS)  # internal: SRC OUT
    args = ap.parse_args()
    items = cases(args.set.split(","), args.limit)
    modes = args.modes.split(",")
    if args.arm:
        Path(args.arm[1]).write_text(json.dumps(run_arm(args.arm[0], items, modes,
                                                        args.fixed_head)))
        return 0
    WORK.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DSH_RECALL_DAEMON": "0"}
    runs: dict[str, list[dict[str, Any]]] = {}
    arms = [("this", str(ROOT / "src"), modes)]
    if args.baseline_src:
        arms.append(("prev", str(Path(args.baseline_src).resolve()), ["first"]))
    for name, src, m in arms:
        out = WORK / f"{name}.json"
        subprocess.run([sys.executable, __file__, "--set", args.set, "--modes", ",".join(m),
                        "--limit", str(args.limit), "--arm", src, str(out)]
                       + (["--fixed-head"] if args.fixed_head else []), check=True, env=env)
        runs[name] = json.loads(out.read_text())
    rows = runs["this"]
    if "prev" in runs:
        for r, p in zip(rows, runs["prev"], strict=True):
            r["previous release: first"] = p["first"]
            r["prev_ms"] = p.get("first_ms")
    shown = [m for m in ("first", "previous release: first", "lexical", "full")
             if any(m in r for r in rows)]
    for s in dict.fromkeys(r["set"] for r in rows):
        part = [r for r in rows if r["set"] == s]
        print(table(part, shown, f"{s}: file accuracy (first = the first hybrid search of a fresh tree)"))
    ms = [r["first_ms"] for r in rows if "first_ms" in r]
    if ms:
        print(f"\nfirst search wall ms: p50 {statistics.median(ms):.0f}, max {max(ms)}"
              + (f"; previous release p50 {statistics.median([r['prev_ms'] for r in rows]):.0f}"
                 if "prev" in runs else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
