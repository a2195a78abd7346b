"""Watch mode against a polling re-indexer: how soon an edit is searchable, and what an idle
watcher costs.

A copy of this project's own source tree (several copies, for a few hundred files) is
indexed; then, side by side in this one run:

- `dsh-recall watch` (OS file events through watchfiles), as a subprocess;
- the baseline: a subprocess that re-runs the same incremental index every second (what
  keeping an index fresh without file events takes; without either, an edit is searchable
  only after the next `dsh-recall index`).

For each: its CPU while nothing changes (user + system time from /proc over an idle
window, as a share of one core), then `--edits` edits, one per second, each appending a new
function to a different file; the latency is from the write to the first lexical search (a
separate process's connection to the index) that finds the new function, polled every 10 ms.

    python bench/watch.py [--files N (200)] [--edits N] [--idle-s S] [--embedder minilm|fake]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "dsh_recall"
HZ = os.sysconf("SC_CLK_TCK")

POLLER = """
import sys, time
from pathlib import Path
from dsh_recall.core.config import load_config
from dsh_recall.services.code import CodeService
ws = Path(sys.argv[1])
svc = CodeService(ws, load_config(workspace=ws))
svc.index()
print("ready", flush=True)
while True:
    time.sleep(1.0)
    svc.index()
"""


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its reaped children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / HZ


def make_tree(dest: Path, files: int) -> int:
    """Copies of the project's .py files until `files` files are there."""
    sources = sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)
    n = 0
    copy = 0
    while n < files:
        for p in sources:
            if n >= files:
                break
            out = dest / f"copy{copy}" / p.relative_to(SRC)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, out)
            n += 1
        copy += 1
    return n


def measure(name: str, cmd: list[str], ws: Path, env: dict, edits: int, idle_s: float,
            ready_marker: str, tag: str) -> dict:
    from dsh_recall.core.config import load_config
    from dsh_recall.services.code import CodeService

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    try:
        t0 = time.monotonic()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"{name} exited before it was ready")
            if ready_marker in line:
                break
        startup = time.monotonic() - t0
        # Drain its output from here on so a full pipe never blocks it.
        import threading
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        time.sleep(2.0)  # let the start-up settle
        c0, w0 = cpu_s(proc.pid), time.monotonic()
        time.sleep(idle_s)
        idle = (cpu_s(proc.pid) - c0) / (time.monotonic() - w0)
        svc = CodeService(ws, load_config(workspace=ws))
        files = sorted(ws.rglob("*.py"))
        lat: list[float] = []
        c1 = cpu_s(proc.pid)
        try:
            for i in range(edits):
                token = f"bench_{tag}_edit_{i}_marker"
                target = files[(i * 37) % len(files)]
                with open(target, "a") as f:
                    f.write(f"\n\ndef {token}():\n    return {i}\n")
                t = time.monotonic()
                while True:
                    res = svc.search(token, limit=1, layers=("lexical",))["results"]
                    if res and token in res[0]["excerpt"]:
                        break
                    if time.monotonic() - t > 60:
                        raise SystemExit(f"{name}: edit {i} not searchable after 60 s")
                    time.sleep(0.01)
                lat.append(time.monotonic() - t)
                time.sleep(1.0)
        finally:
            svc.close()
        per_edit = (cpu_s(proc.pid) - c1) / edits
    finally:
        proc.terminate()
        proc.wait(20)
    lat.sort()
    return {"name": name, "startup_s": startup, "idle_cpu": idle, "p50": statistics.median(lat),
            "p95": lat[min(len(lat) - 1, int(0.95 * len(lat)))], "max": lat[-1],
            "cpu_per_edit_s": per_edit}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--idle-s", type=float, default=20.0)
    ap.add_argument("--embedder", default="minilm", choices=["minilm", "fake"])
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dshr-bench-watch-"))
    try:
        rows = []
        for name in ("watch", "poll"):
            ws = tmp / f"ws-{name}"
            n = make_tree(ws, args.files)
            # One recall home: the second tree's vectors come from the shared embedding
            # cache, so start-up costs the same for both and the bench stays short.
            env = {**os.environ, "DSH_RECALL_HOME": str(tmp / "home"),
                   "DSH_RECALL_EMBEDDER__NAME": args.embedder}
            os.environ.update({"DSH_RECALL_HOME": env["DSH_RECALL_HOME"],
                               "DSH_RECALL_EMBEDDER__NAME": args.embedder})
            if name == "watch":
                cmd = [sys.executable, "-m", "dsh_recall", "watch", "--no-notes", str(ws)]
                rows.append(measure("dsh-recall watch (file events)", cmd, ws, env, args.edits,
                                    args.idle_s, "watching code", name))
            else:
                cmd = [sys.executable, "-c", POLLER, str(ws)]
                rows.append(measure("baseline: re-index every 1 s", cmd, ws, env, args.edits,
                                    args.idle_s, "ready", name))
        print(f"\n{n} files (copies of src/dsh_recall), embedder {args.embedder}, "
              f"{args.edits} edits, idle window {args.idle_s:.0f} s, {os.cpu_count()} cores\n")
        print("| | edit -> searchable p50 | p95 | max | idle CPU (one core) | CPU per edit |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['name']} | {r['p50'] * 1000:.0f} ms | {r['p95'] * 1000:.0f} ms | "
                  f"{r['max'] * 1000:.0f} ms | {r['idle_cpu'] * 100:.2f}% | "
                  f"{r['cpu_per_edit_s'] * 1000:.0f} ms |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
