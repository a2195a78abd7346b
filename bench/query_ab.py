"""Warm API code search at about 100k chunks, this checkout against an earlier commit of the
same index format, in one run: each arm a long-lived process of its own tree (the earlier
one's src/ from `git archive`), both on one index (built by this checkout, the fake embedder
at 384 dimensions, as bench/scale.py builds it), asked the same query in turn (the order
swapped every query), so a load that comes and goes hits both alike. bench/scale.py's query
set (half keywords, half pasted SWE-bench issues), both layers and lexical only; each
query timed once its terms' score lists exist. Prints p50 / p95 wall and CPU (all the
process's threads) per arm, whether each arm's top 10 (path, lines, score, match, excerpt)
are the same, and `rg -i -l` over the same terms in the same run. For a commit of another
index format (a release before), bench/release_query_cost.py builds an index per tree.

    python bench/query_ab.py --base REV [--copies 20] [--rounds 3] [--home DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import scale  # noqa: E402

from dsh_recall.rank.lexical import query_terms  # noqa: E402

CHILD = r'''
import json, os, sys, time
from pathlib import Path
ws, home = Path(sys.argv[1]), Path(sys.argv[2])
os.environ.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME="fake",
                  DSH_RECALL_EMBEDDER__DIM="384")
from dsh_recall.core.config import load_config
from dsh_recall.services.code import CodeService
svc = CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake", "dim": 384}}), home)
if sys.argv[3] == "index":
    svc.index()
    print(svc.store.chunk_count())
    sys.exit(0)
svc.keep_warm()
for line in sys.stdin:
    req = json.loads(line)
    c0, t0 = time.process_time(), time.perf_counter()
    r = svc.search(req["q"], layers=tuple(req["layers"]))
    ms, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
    if req.get("wait"):
        svc.store.impacts.wait_idle(300)
    top = [(x["path"], x["start_line"], x["end_line"], x["score"], x["match"], x["excerpt"])
           for x in r["results"][:10]]
    print(json.dumps({"ms": ms, "cpu": cpu, "top": top}), flush=True)
'''
LAYERS = {"lexical+vector": ["lexical", "vector"], "lexical": ["lexical"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="an earlier commit reading this index format")
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--home", type=Path, help="a recall home holding this workspace's index already")
    args = ap.parse_args()
    ws = scale.build_workspace(args.copies)
    home = args.home or Path(tempfile.gettempdir()) / "dsh-recall-query-ab" / f"home-{args.copies}"
    base = Path(tempfile.gettempdir()) / "dsh-recall-query-ab" / f"tree-{args.base}"
    if not (base / "src").is_dir():
        base.mkdir(parents=True, exist_ok=True)
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "src"], check=True,
                             capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=tar, check=True)
    env = dict(os.environ)

    def child(src: Path, *extra: str, **kw) -> subprocess.Popen:
        e = dict(env, PYTHONPATH=str(src / "src"))
        return subprocess.Popen([sys.executable, "-c", CHILD, str(ws), str(home), *extra], env=e,
                                text=True, **kw)

    t0 = time.perf_counter()
    chunks = child(ROOT, "index", stdout=subprocess.PIPE).communicate()[0].strip()
    print(f"index: {chunks} chunks ({time.perf_counter() - t0:.0f} s, reused when unchanged)")
    arms = {"before": child(base, "serve", stdin=subprocess.PIPE, stdout=subprocess.PIPE),
            "after": child(ROOT, "serve", stdin=subprocess.PIPE, stdout=subprocess.PIPE)}

    def ask(arm: str, q: str, layers: list[str], wait: bool = False) -> dict:
        p = arms[arm]
        assert p.stdin and p.stdout
        p.stdin.write(json.dumps({"q": q, "layers": layers, "wait": wait}) + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    qs = scale.queries(args.queries)
    for wait in (True, False):  # first sight (the lists follow), then once warm
        for q in qs:
            for layers in LAYERS.values():
                for arm in arms:
                    ask(arm, q, layers, wait)
    ms: dict = {(a, k): [] for a in arms for k in LAYERS}
    cpu: dict = {(a, k): [] for a in arms for k in LAYERS}
    tops: dict = {a: {} for a in arms}
    rg, load = [], [os.getloadavg()[0]]
    for r in range(args.rounds):
        for i, q in enumerate(qs):
            for k, layers in LAYERS.items():
                for arm in (list(arms) if (r + i) % 2 == 0 else list(arms)[::-1]):
                    x = ask(arm, q, layers)
                    ms[(arm, k)].append(x["ms"])
                    cpu[(arm, k)].append(x["cpu"])
                    tops[arm][(k, i)] = x["top"]
            terms = query_terms(q)[:48]
            if shutil.which("rg") and terms:  # as bench/scale.py runs it
                t1 = time.perf_counter()
                subprocess.run(["rg", "-i", "-l", "-F", *[z for t in terms for z in ("-e", t)], str(ws)],
                               stdout=subprocess.DEVNULL)
                rg.append((time.perf_counter() - t1) * 1000)
        load.append(os.getloadavg()[0])
    for p in arms.values():
        assert p.stdin
        p.stdin.close()
        p.wait()
    same = sum(tops["before"][k] == tops["after"][k] for k in tops["before"])
    print(f"{args.rounds} rounds x {len(qs)} queries x 2 layer sets; load average "
          f"{min(load):.1f}-{max(load):.1f}; top 10 identical: {same} of {len(tops['before'])}")
    print(f"| layers | before ({args.base}) p50 / p95 | after p50 / p95 | CPU p50 before / after |")
    print("|---|---|---|---|")
    for k in LAYERS:
        b, a = ms[("before", k)], ms[("after", k)]
        print(f"| {k} | {scale.pct(b, 50):.1f} / {scale.pct(b, 95):.1f} ms | {scale.pct(a, 50):.1f} / "
              f"{scale.pct(a, 95):.1f} ms | {scale.pct(cpu[('before', k)], 50):.1f} / "
              f"{scale.pct(cpu[('after', k)], 50):.1f} ms |")
    if rg:
        print(f"| `rg -i -l`, same terms | {scale.pct(rg, 50):.0f} / {scale.pct(rg, 95):.0f} ms | | |")
        both = ms[("after", "lexical+vector")]
        print(f"rg p50 / API (both layers) p50: {scale.pct(rg, 50) / scale.pct(both, 50):.1f}x")


if __name__ == "__main__":
    main()
