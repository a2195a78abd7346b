"""How long a hot call waits for the dsh worker's idle work, beside CPU-bound processes.

    python bench/dsh_idle.py [--baseline-rev 40ed347] [--hogs 2] [--calls 20]
                             [--gap 0.8] [--notes 600] [--embedder minilm]

Starts `dsh-recall worker` (the process the dsh plugin talks to) with the shipped ONNX
embedder and a notes folder of `--notes` generated notes, so that embedding passages keeps
its idle time busy for the whole run; `--hogs` processes (`while 1: pass`) run beside it.
After one `context` request (it opens the notes index: the backlog), it alternates: `--gap`
seconds of quiet (past the worker's 0.5 s idle threshold, so idle work has started), then
a whole-file `read` of a 58 KB Python file or a 60 KB `offload`, timed from the request
line written to the answer line read. Two workers in turn: this tree (idle embedding in a
child process at niceness 19, frontends/dsh/idle.py) and `--baseline-rev` (a git worktree:
the previous release, idle work in slices on the request thread). Printed per worker:
p50 / p95 / max of the hot calls, the calls over the plugin's 1.5 s deadline, and the
passages embedded meanwhile (idle work still progresses).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from timing import baseline_src  # noqa: E402

WORDS = ("deploy cache bucket region flask staging config token retry queue worker index "
         "schema migration rollback latency budget owner review release branch build test "
         "docker image volume network proxy timeout session cookie header route handler").split()


def make_notes(root: Path, n: int, seed: int = 7) -> None:
    rnd = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        paras = ["\n".join(" ".join(rnd.choice(WORDS) for _ in range(14)) for _ in range(6))
                 for _ in range(3)]
        body = "\n\n".join(f"## part {j}\n\n{p}" for j, p in enumerate(paras))
        (root / f"note-{i:04d}.md").write_text(f"# note {i}\n\n{body}\n")


def read_text(path: str, n_chars: int = 58_000) -> str:
    rows, size, i = [], 0, 0
    src = [ln for ln in Path(path).read_text().splitlines()]
    while size < n_chars:
        line = src[i % len(src)]
        rows.append(f"{i + 1}: {line}")
        size += len(rows[-1]) + 1
        i += 1
    return (f"<path>{path}</path>\n<type>file</type>\n<content>\n" + "\n".join(rows)
            + f"\n\n(End of file - total {i} lines)\n</content>")


def pending(env: dict[str, str]) -> int:
    """Notes passages without a vector (the idle work left)."""
    code = ("from dsh_recall.core.config import load_config\n"
            "from dsh_recall.services.notes import NotesService\n"
            "svc = NotesService(load_config())\nprint(svc.store.pending_count())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return int(out.stdout.strip() or -1)


class Wire:
    def __init__(self, env: dict[str, str], cwd: Path):
        cmd = [sys.executable, "-c", "from dsh_recall.frontends.entry import main; main()", "worker"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, cwd=cwd)
        self.n = 0
        ready = json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]
        assert ready["result"]["ready"], ready

    def call(self, op: str, **payload) -> tuple[float, dict]:
        self.n += 1
        line = json.dumps({"id": self.n, "op": op, **payload}).encode() + b"\n"
        t0 = time.perf_counter()
        self.proc.stdin.write(line)  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        out = json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]
        return (time.perf_counter() - t0) * 1000, out

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(30)


def run_mode(mode: str, src: Path, args: argparse.Namespace, source: str) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="dsh-idle-"))
    make_notes(tmp / "notes", args.notes)
    (tmp / "ws").mkdir()
    home = tmp / "recall-home"
    env = {**os.environ, "PYTHONPATH": str(src), "DSH_RECALL_HOME": str(home),
           "DSH_HOME": str(tmp / "dsh-home"), "DSH_RECALL_EMBEDDER__NAME": args.embedder,
           "DSH_RECALL_NOTES__ROOTS": json.dumps([str(tmp / "notes")])}
    w = Wire(env, tmp / "ws")
    text = read_text(source)
    big = "\n".join(f"{i:06d} " + " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(8))
                    for i in range(1200))
    w.call("context", session="s1", cwd=str(tmp / "ws"), message_id="m1",
           message="which bucket did we deploy to?")
    before = pending(env)
    lat: list[float] = []
    for i in range(args.calls):
        time.sleep(args.gap)
        if i % 2 == 0:
            ms, out = w.call("read", session="s1", cwd=str(tmp / "ws"), path=source, text=text)
            assert out.get("ok") and out["result"]["text"], out
        else:
            ms, out = w.call("offload", session="s1", cwd=str(tmp / "ws"), call_id=f"c{i}",
                             tool="bash", blocks=[big + f"\nrun {i}"])
            assert out.get("ok") and out["result"]["ids"][0], out
        lat.append(ms)
        print(f"  {mode}: call {i + 1}: {ms:,.0f} ms", file=sys.stderr, flush=True)
    after = pending(env)
    w.close()
    subprocess.run(["rm", "-rf", str(tmp)], check=False)
    lat_sorted = sorted(lat)
    return {"mode": mode, "p50": statistics.median(lat),
            "p95": lat_sorted[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))],
            "max": max(lat), "late": sum(1 for x in lat if x > 1500),
            "embedded": before - after, "waiting": after}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline-rev", default="40ed347")
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--gap", type=float, default=0.8)
    ap.add_argument("--notes", type=int, default=600)
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    import argparse as _src  # a 100 KB module of the standard library: the file read

    source = _src.__file__
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.hogs)]
    try:
        base = baseline_src(args.baseline_rev, Path(tempfile.gettempdir()))
        rows = [run_mode(f"{args.baseline_rev} (slices on the request thread)", base, args, source),
                run_mode("this tree (child process, nice 19)", HERE.parent / "src", args, source)]
    finally:
        for h in hogs:
            h.kill()
    print(f"\n{args.hogs} CPU hogs, {os.cpu_count()} cores, {args.calls} hot calls after "
          f"{args.gap} s of quiet each, embedder {args.embedder}\n")
    print("| worker | p50 ms | p95 ms | max ms | over 1.5 s | passages embedded meanwhile |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['p50']:,.0f} | {r['p95']:,.0f} | {r['max']:,.0f} | {r['late']} | "
              f"{r['embedded']:,} ({r['waiting']:,} still waiting) |")


if __name__ == "__main__":
    main()
