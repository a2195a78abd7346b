"""Query cost of this checkout against an earlier release, on the same 100k-chunk workspace
bench/scale.py builds: each release in its own tree, venv and recall home (the indexes are
built by each release's own code), measured by alternating short child processes, old then
new then old ..., so a load that comes and goes hits both alike.

Each child runs the 51 SWE-bench dev issue texts pasted whole and short keyword queries,
with both layers and lexical only (what a search gives while vectors are pending), as a
long-lived process does (each query timed once its terms' score lists exist) and, with
`--first-sight`, the first time each query's terms are seen (every list emptied first).

    python bench/release_query_cost.py --base REV [--copies 20] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import releases  # noqa: E402
import scale  # noqa: E402

CHILD = r'''
import json, os, sys, time
from pathlib import Path
ws, home, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
os.environ.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME="fake",
                  DSH_RECALL_EMBEDDER__DIM="384")
from dsh_recall.core.config import load_config
from dsh_recall.core.process import set_long_lived
from dsh_recall.services.code import CodeService
sets = json.loads(sys.stdin.read())
set_long_lived(True)
svc = CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake", "dim": 384}}), home)
if mode == "index":  # lexical, then random unit vectors as bench/scale.py --random-vectors
    import numpy as np
    from dsh_recall.services.vectors import sync_fingerprint, sync_vector_file
    with svc._index_lock(None):
        svc.index_lexical()
        sync_fingerprint(svc.store, svc.embedder())
        rng = np.random.default_rng(1)
        while batch := svc.store.pending(4096):
            v = rng.normal(size=(len(batch), 384)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            svc.store.put_vectors([(h, x) for (h, _), x in zip(batch, v)])
        sync_vector_file(svc.store)
    svc.index()
    print(json.dumps({"chunks": svc.store.chunk_count()}))
    sys.exit(0)
svc.keep_warm()
out = {}
for layers in (("lexical", "vector"), ("lexical",)):
    for name, qs in sets.items():
        key = "+".join(layers) + " / " + name
        if mode == "first":
            ms = []
            svc.store.impacts.clear()
            for q in qs:
                t0 = time.perf_counter()
                svc.search(q, limit=10, layers=layers)
                ms.append((time.perf_counter() - t0) * 1000)
                svc.store.impacts.wait_idle(600)
        else:
            for q in qs:
                svc.search(q, limit=10, layers=layers)
            svc.store.impacts.wait_idle(600)
            ms = []
            for q in qs:
                t0 = time.perf_counter()
                svc.search(q, limit=10, layers=layers)
                ms.append((time.perf_counter() - t0) * 1000)
        out[key] = ms
svc.close()
print(json.dumps(out))
'''


def child(tree: Path, ws: Path, home: Path, mode: str, sets: dict[str, list[str]]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    p = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", CHILD, str(ws), str(home), mode],
                       input=json.dumps(sets), capture_output=True, text=True, env=env, cwd=tree)
    if p.returncode:
        raise SystemExit(f"child in {tree} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the earlier release (a commit)")
    ap.add_argument("--copies", type=int, default=20, help="copies of the three trees (20 = about 100k chunks)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--first-sight", action="store_true")
    args = ap.parse_args()
    base = subprocess.run(["git", "rev-parse", args.base], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    old = releases.tree_for(base)
    ws = scale.build_workspace(args.copies)
    work = Path(tempfile.gettempdir()) / "dsh-recall-release-cost"
    homes = {"previous": work / f"home-{base[:10]}-{args.copies}", "this": work / f"home-this-{args.copies}"}
    trees = {"previous": old, "this": ROOT}
    issues = [json.loads(line)["query"] for line in open(scale.EVAL / "queries.jsonl")]
    sets = {"pasted issues": issues, "keywords": scale.KEYWORD_QUERIES * 3}
    for k in trees:
        info = child(trees[k], ws, homes[k], "index", sets)
        print(f"{k}: {info['chunks']:,} chunks", flush=True)
    mode = "first" if args.first_sight else "warm"
    runs: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
    for r in range(args.rounds):
        for k in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
            for key, ms in child(trees[k], ws, homes[k], mode, sets).items():
                runs[k].setdefault(key, []).extend(ms)
        print(f"round {r + 1}/{args.rounds}, load average {os.getloadavg()[0]:.1f}", flush=True)
    what = "first sight of each query's terms" if args.first_sight else "score lists in place"
    print(f"\n{base[:10]} (previous) against this checkout, {what}, {args.rounds} rounds of "
          f"alternating processes; load average {os.getloadavg()[0]:.1f} at the end")
    print("| layers / queries | previous p50 / p95 | this p50 / p95 | p50 ratio |")
    print("|---|---|---|---|")
    for key in runs["this"]:
        a, b = sorted(runs["previous"][key]), sorted(runs["this"][key])
        pa, pb = statistics.median(a), statistics.median(b)
        print(f"| {key} | {pa:.1f} / {a[int(0.95 * (len(a) - 1))]:.1f} ms "
              f"| {pb:.1f} / {b[int(0.95 * (len(b) - 1))]:.1f} ms | {pb / pa:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
