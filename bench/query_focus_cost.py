"""What the long-query rules cost at scale: the previous query path (query_focus off,
title_weight 0) and the shipped one, interleaved query by query in one process on an index
bench/scale.py built (run `python bench/scale.py --sizes 100000 --no-embed-bench` first; its
fake vectors are in place), with the 51 SWE-bench dev issue texts pasted whole and short
queries as a control: their code path is the same in both, so their ratio shows the noise
of the machine's load.

    python bench/query_focus_cost.py [--copies 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
EVAL = ROOT.parent / "shared" / "eval" / "swebench-dev"
SHORT = ["flask blueprint registration", "parse_args", "how are fixtures finalized",
         "session redirect handling"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=20, help="bench/scale.py's copies (20 = about 100k chunks)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    base = Path(tempfile.gettempdir()) / "dsh-recall-scale"
    home, ws = base / f"home-{args.copies}", base / f"ws-{args.copies}"
    if not (home.is_dir() and ws.is_dir()):
        print(f"no index at {home}: run bench/scale.py first", file=sys.stderr)
        return 2
    os.environ.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME="fake",
                      DSH_RECALL_EMBEDDER__DIM="384")
    from dsh_recall.core.config import load_config
    from dsh_recall.core.process import set_long_lived
    from dsh_recall.services.code import CodeService

    issues = [json.loads(line)["query"] for line in open(EVAL / "queries.jsonl")]
    over = {"embedder": {"name": "fake", "dim": 384}}
    # One process per call (a CLI search: FTS5 answers) and a long-lived one (the MCP server,
    # the daemon: each term's score list is computed behind the first answer, then summed).
    for lived in (False, True):
        set_long_lived(lived)
        measure(CodeService, load_config, ws, home, over, issues, args.rounds,
                "long-lived process (MCP server, daemon)" if lived else "one-shot process (CLI)")
    return 0


def measure(CodeService, load_config, ws, home, over, issues, rounds, label_run) -> None:  # noqa: N803
    svcs = {name: CodeService(ws, load_config(workspace=ws, overrides={**over, **o}), home)
            for name, o in (("previous", {"query_focus": False, "title_weight": 0.0}),
                            ("shipped", {}))}
    print(f"\n{label_run}: {svcs['shipped'].store.chunk_count():,} chunks; p50 / p95 ms, "
          f"interleaved, {rounds} rounds")
    print(f"{'layers':16} {'queries':14} {'previous':>16} {'shipped':>16} {'p50 ratio':>10} {'load':>5}")
    for layers in (("lexical", "vector"), ("lexical",)):
        for label, qs in (("pasted issues", issues), ("short (control)", SHORT * 6)):
            for q in qs:  # first sight: score lists computed behind, then waited for
                for s in svcs.values():
                    s.search(q, limit=10, layers=layers)
            for s in svcs.values():
                s.store.impacts.wait_idle(600)
            ms: dict[str, list[float]] = {k: [] for k in svcs}
            for r in range(rounds):
                for q in qs:
                    for k in (list(svcs) if r % 2 == 0 else list(svcs)[::-1]):
                        t0 = time.perf_counter()
                        svcs[k].search(q, limit=10, layers=layers)
                        ms[k].append((time.perf_counter() - t0) * 1000)
            p = {k: (statistics.median(v), sorted(v)[int(0.95 * (len(v) - 1))]) for k, v in ms.items()}
            print(f"{'+'.join(layers):16} {label:14} {p['previous'][0]:7.1f} / {p['previous'][1]:6.1f} "
                  f"{p['shipped'][0]:7.1f} / {p['shipped'][1]:6.1f} {p['shipped'][0] / p['previous'][0]:9.2f}x "
                  f"{os.getloadavg()[0]:5.1f}", flush=True)
    for s in svcs.values():
        s.close()


if __name__ == "__main__":
    sys.exit(main())
