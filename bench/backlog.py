"""A search while vectors are still missing: code and notes, this version against a previous one.

A code workspace (this project's source and tests, copied) and a notes vault (10k passages,
bench/notes_scale.py's) are indexed without vectors, as after a first search or
`--lexical-only`. Then CLI searches run in turn for this version and, with `--baseline-rev`,
a previous one (a git worktree), each on its own copy of the same recall home, with the
shipped model unless `--embedder` says otherwise. Prints the first search and the p50 of
the ones after it (wall ms), and how many chunks still wait at the end.

    python bench/backlog.py [--searches 6] [--baseline-rev REV] [--embedder minilm]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from timing import baseline_src  # noqa: E402  (bench/timing.py)

TMP = Path(tempfile.gettempdir()) / "dsh-recall-backlog"
QUERIES = {"code": ["where are vectors embedded within the search budget", "history search fuzzy trigram layer",
                    "notes access level of a hard link", "daemon socket heartbeat"],
           "notes": ["when did Melanie go camping", "adoption agency meeting", "pottery class with the kids",
                     "charity race for mental health"]}


def env_for(home: Path, src: Path, embedder: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME=embedder, DSH_RECALL_DAEMON="0",
               PYTHONPATH=str(src))
    return env


def cli(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "dsh_recall", *args, "--json"], env=env, cwd=str(cwd),
                         capture_output=True, text=True, check=True).stdout
    return (time.perf_counter() - t0) * 1000, json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--searches", type=int, default=6)
    ap.add_argument("--baseline-rev", default="")
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    shutil.rmtree(TMP, ignore_errors=True)
    TMP.mkdir(parents=True)
    srcs = {"this version": ROOT / "src"}
    if args.baseline_rev:
        srcs["previous version"] = baseline_src(args.baseline_rev, TMP.parent / "dsh-recall-backlog-revs")
    ws = TMP / "ws"
    for part in ("src", "tests"):
        shutil.copytree(ROOT / part, ws / part, ignore=shutil.ignore_patterns("__pycache__"))
    from notes_scale import write_vault  # a notes vault of LoCoMo turns

    vault = TMP / "vault"
    write_vault(vault, 10_000)
    rows = []
    for kind in ("code", "notes"):
        base = TMP / f"{kind}-home"
        index = (["index", "--wait", "--lexical-only", str(ws)] if kind == "code"
                 else ["notes", "index", str(vault), "--wait", "--lexical-only"])
        cli(index, env_for(base, ROOT / "src", args.embedder), ws)
        homes = {}
        for name in srcs:
            homes[name] = TMP / f"{kind}-home-{len(homes)}"
            shutil.copytree(base, homes[name])
        times: dict[str, list[float]] = {name: [] for name in srcs}
        left: dict[str, int] = {}
        for i in range(args.searches):
            q = QUERIES[kind][i % len(QUERIES[kind])]
            search = (["search", "--workspace", str(ws), q] if kind == "code"
                      else ["notes", "search", q, "--root", str(vault)])
            for name, src in srcs.items():
                ms, out = cli(search, env_for(homes[name], src, args.embedder), ws)
                times[name].append(ms)
                left[name] = out["pending"]
        for name in srcs:
            xs = times[name]
            rows.append((kind, name, xs[0], statistics.median(xs[1:]) if len(xs) > 1 else None, left[name]))
    print(f"\nCLI search with vectors missing, embedder {args.embedder}, {args.searches} searches each, "
          f"load average {os.getloadavg()[0]:.1f}; wall ms")
    print("\n| index | version | first search | later searches, p50 | still waiting at the end |")
    print("|---|---|---|---|---|")
    for kind, name, first, later, waiting in rows:
        print(f"| {kind} | {name} | {first:.0f} | {later:.0f} | {waiting:,} |")


if __name__ == "__main__":
    main()
