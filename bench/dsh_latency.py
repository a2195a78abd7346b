"""What the native plugin adds to each tool call's wall time, and to the first request.

    python bench/dsh_latency.py [--runs 3] [--calls 24] [--worker-hang]

Runs the real dsh runtime offline against the loopback stand-in (tests/dsh_standin.py) with
the same script in two arms, plain dsh (no patch) and the full integration (`integrate dsh
patch`): one user turn of `--calls` bash calls whose outputs cycle through sizes from 200
bytes to 120 KB (small results, results over the offload threshold, results dsh itself cuts),
then a final answer. The stand-in stamps each request's arrival; the gap between two
requests is the tool call plus everything dsh (and the plugin) does around it. Printed:
per-call gaps, p50 / p90 of full minus plain at the same call, and the first request's
delay after `run()` starts. `--worker-hang` adds an arm whose worker never answers (a
script that reads its stdin and says nothing): the first request's delay and the warning.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from dsh_recall.frontends.cli.integrate import dsh_patch  # noqa: E402
from dsh_standin import dsh_session, recall_exe, runtime_available, say, use  # noqa: E402

SIZES = [200, 1_500, 6_000, 200, 30_000, 800, 120_000, 3_000]


def _script(tmp: Path) -> Path:
    p = tmp / "emit.py"
    p.write_text("import sys\nn = int(sys.argv[1])\nline = 'x' * 79 + '\\n'\n"
                 "sys.stdout.write((line * (n // 80 + 1))[:n])\n")
    return p


def run_arm(arm: str, calls: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"dshr-lat-{arm}-"))
    home = tmp / "recall-home"
    emit = _script(tmp)
    stamps: list[float] = []

    def brain(body):
        stamps.append(time.monotonic())
        i = len(stamps) - 1
        if i < calls:
            n = SIZES[i % len(SIZES)]
            return use("bash", {"description": f"emit {n}", "command": f"{sys.executable} {emit} {n}"},
                       f"call_{i}")
        return say("done")

    env = {"DSH_RECALL_HOME": str(home), "DSH_RECALL_EMBEDDER__NAME": "fake"}
    patch = None
    if arm != "plain":
        patch = dsh_patch(command=recall_exe(), env=env)
        if arm == "hang":
            silent = tmp / "silent.py"
            silent.write_text("import sys\nsys.stdin.read()\n")
            patch = patch.replace(f'command: {json.dumps(recall_exe())}\n        args: ["worker"]',
                                  f'command: {json.dumps(sys.executable)}\n        args: [{json.dumps(str(silent))}]')
    with dsh_session(tmp, brain, patch) as (session, _standin, _home):
        t0 = time.monotonic()
        session.run("emit the outputs")
    status = home / "dsh" / "plugin-status.json"
    return {"first_ms": (stamps[0] - t0) * 1000,
            "gaps_ms": [(b - a) * 1000 for a, b in zip(stamps, stamps[1:])],
            "status": json.loads(status.read_text()) if status.exists() else None}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=24)
    ap.add_argument("--worker-hang", action="store_true")
    args = ap.parse_args()
    why = runtime_available()
    if why:
        sys.exit(why)
    arms = ["plain", "full"] + (["hang"] if args.worker_hang else [])
    runs: dict[str, list[dict]] = {a: [] for a in arms}
    for _r in range(args.runs):
        for arm in arms:  # interleaved, so machine load falls on every arm alike
            runs[arm].append(run_arm(arm, args.calls))
    load = os.getloadavg()[0]
    print(f"\n{args.runs} runs x {args.calls} bash calls (sizes {', '.join(f'{s:,}' for s in SIZES)} bytes, "
          f"cycling); load average {load:.1f}\n")
    first = {a: statistics.median(x["first_ms"] for x in runs[a]) for a in arms}
    added: list[float] = []
    by_size: dict[int, list[float]] = {}
    for rp, rf in zip(runs["plain"], runs["full"]):
        for i, (gp, gf) in enumerate(zip(rp["gaps_ms"], rf["gaps_ms"])):
            added.append(gf - gp)
            by_size.setdefault(SIZES[i % len(SIZES)], []).append(gf - gp)
    plain_gaps = [g for x in runs["plain"] for g in x["gaps_ms"]]
    full_gaps = [g for x in runs["full"] for g in x["gaps_ms"]]
    print("| per tool call (ms) | plain dsh | full | added (full - plain, same call) |")
    print("|---|---|---|---|")
    print(f"| p50 | {pct(plain_gaps, .5):.0f} | {pct(full_gaps, .5):.0f} | {pct(added, .5):+.0f} |")
    print(f"| p90 | {pct(plain_gaps, .9):.0f} | {pct(full_gaps, .9):.0f} | {pct(added, .9):+.0f} |")
    print("\n| output bytes | added p50 (ms) | added p90 (ms) |")
    print("|---|---|---|")
    for size in sorted(by_size):
        print(f"| {size:,} | {pct(by_size[size], .5):+.0f} | {pct(by_size[size], .9):+.0f} |")
    print("\n| first request after run() (ms, median) | " + " | ".join(arms) + " |")
    print("|---|" + "---|" * len(arms))
    print("| delay | " + " | ".join(f"{first[a]:.0f}" for a in arms) + " |")
    for a in arms:
        print(f"  {a}: first-request delay over plain {first[a] - first['plain']:+.0f} ms")
    if args.worker_hang:
        st = runs["hang"][-1]["status"] or {}
        print(f"\nhung worker: plugin status {st.get('state')!r}: {st.get('reason')!r}; "
              f"warnings: {[w.get('message') for w in st.get('warnings') or []]}")


if __name__ == "__main__":
    main()
