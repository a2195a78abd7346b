"""Agent-shaped calls: what an agent's hooks and tools pay per `dsh-recall` call, cold and warm.

One world (a flask tree from the SWE-bench dev bundle, the LoCoMo dev conversations as
history, this repository's docs/ as notes, CI logs offloaded as objects), then 50 calls as a
hook or a tool makes them (JSON out, a few results): code searches, history searches, notes
searches and object reads, in turn. Each call runs in each arm, alternating call by call so a
load that comes and goes hits every arm alike:

- cold: a fresh process that answers alone (`DSH_RECALL_DAEMON=0`), as before this release;
- warm: the same command with the warm path on (the default): the first call answers alone
  and starts the daemon, later calls are answered by it (the first call is shown apart);
- previous (with `--baseline-src PATH`, e.g. a worktree's src/ of the previous release): a
  cold process of that source on its own recall home, indexed by its own code.

Wall time is the caller's; CPU is the caller's (user + sys) and, for the warm arm, the
daemon's CPU during the call added (from /proc), so the warm figure hides no work.

    python bench/agent_calls.py [--calls 50] [--embedder fake|minilm] [--baseline-src PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RECALL_EVAL_DIR") or ROOT.parent / "shared" / "eval")
sys.path.insert(0, str(ROOT / "bench"))

from timing import pct  # noqa: E402

TMP = Path(tempfile.gettempdir()) / "dsh-recall-agent-calls"
BARE = Path(tempfile.gettempdir()) / "swebench-trees.git"
FLASK = "flask-d8c37f43724cd9fb0870f77877b7c4c7e38a19e0"
CODE_QUERIES = ["url_for with external scheme", "register blueprint", "json provider dumps",
                "session cookie samesite", "before_request teardown", "send_file max age",
                "config from_prefixed_env", "app context push pop", "template filter decorator",
                "test client follow redirects", "MethodView dispatch_request", "static folder route",
                "jsonify mimetype", "cli FlaskGroup load_dotenv", "error handler register"]
NOTES_QUERIES = ["daemon idle exit", "turn the warm path off", "offload threshold objects",
                 "history import generic format", "notes write roots", "score list cache",
                 "channel session map", "rerank deadline", "trust a workspace file", "usage log report"]
TICK = os.sysconf("SC_CLK_TCK")
# The installed console script, as an agent's hook runs it (it imports the package from
# PYTHONPATH first, so every arm runs its own source); else the module.
_SCRIPT = Path(sys.executable).parent / "dsh-recall"
EXE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "dsh_recall"]


def flask_tree() -> Path:
    dest = TMP / "flask"
    if dest.exists():
        return dest
    if not BARE.exists():
        subprocess.run(["git", "clone", "-q", "--bare", str(SHARED / "swebench-dev" / "trees.bundle"),
                        str(BARE)], check=True)
    part = dest.with_suffix(".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(BARE), "archive", FLASK], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(part)], input=archive, check=True)
    part.rename(dest)
    return dest


def locomo_history(out: Path) -> list[str]:
    """The LoCoMo dev turns as generic JSONL (a session per conversation session); returns
    questions to ask of them."""
    turns = [json.loads(x) for x in open(SHARED / "locomo-dev" / "locomo_dev_turns.jsonl")]
    with out.open("w") as f:
        for i, t in enumerate(turns):
            f.write(json.dumps({"session": f"{t['sample_id']}-s{t['session']}", "seq": i,
                                "role": t["speaker"], "id": t["dia_id"] + t["sample_id"],
                                "text": t["text"]}) + "\n")
    qa = [json.loads(x) for x in open(SHARED / "locomo-dev" / "locomo_dev_qa.jsonl")]
    return [q["question"] for q in qa if not q.get("is_adversarial")]


class Arm:
    def __init__(self, name: str, src: Path, home: Path, embedder: str, daemon: str):
        self.name, self.src, self.home = name, src, home
        self.warm = daemon == ""  # a daemon's CPU during the call counts as this call's
        # Bytecode as an installed package has it (compiled once, below): a shell's
        # PYTHONDONTWRITEBYTECODE would have every call compile every module it imports.
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("DSH_") and k != "PYTHONDONTWRITEBYTECODE"}
        self.env.update(DSH_RECALL_HOME=str(home), PYTHONPATH=str(src),
                        DSH_RECALL_EMBEDDER__NAME=embedder)
        if daemon:
            self.env["DSH_RECALL_DAEMON"] = daemon

    def run(self, args: list[str], cwd: Path, check: bool = True) -> tuple[float, float, str]:
        """(wall ms, CPU ms of the call and of any daemon that served it, stdout)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        d0 = daemon_cpu(self.home)
        t0 = time.perf_counter()
        proc = subprocess.run([*EXE, *args], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=600)
        wall = (time.perf_counter() - t0) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
        if self.warm:
            cpu += max(0.0, daemon_cpu(self.home) - d0)
        if check and proc.returncode != 0:
            raise SystemExit(f"{self.name}: {' '.join(args)} failed: {proc.stderr[-800:]}")
        return wall, cpu, proc.stdout


def daemons(home: Path) -> list[int]:
    """Pids of daemons started in the background for `home`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"dsh_recall\0daemon\0" not in cmd:
                continue
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"DSH_RECALL_HOME={home}".encode() in env:
            found.append(int(pid))
    return found


def daemon_cpu(home: Path) -> float:
    total = 0.0
    for pid in daemons(home):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) * 1000 / TICK
        except (OSError, IndexError, ValueError):
            pass
    return total


def stop_daemons(home: Path) -> None:
    for pid in daemons(home):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 30
    while daemons(home) and time.monotonic() < end:
        time.sleep(0.1)


def build(arm: Arm, tree: Path, history: Path, notes: Path, logs: list[Path]) -> list[str]:
    """Index the world under the arm's home; returns the object ids of the offloaded logs."""
    arm.run(["index", "--wait"], tree)
    arm.run(["history", "import", str(history), "--format", "generic"], tree)
    arm.run(["notes", "index", str(notes), "--wait"], tree)
    ids = []
    for log in logs:
        out = arm.run(["object", "put", str(log), "--json", "--session", "bench"], tree)[2]
        obj = json.loads(out)
        if obj.get("offloaded", True) and obj.get("id"):
            ids.append(obj["id"])
    return ids


def calls(n: int, questions: list[str], notes: Path, ids: list[str]) -> list[tuple[str, list[str]]]:
    words = ["error", "failed", "test", "warning", "build", "assert"]
    out: list[tuple[str, list[str]]] = []
    for i in range(n):
        kind = ("code", "history", "notes", "objects")[i % 4]
        k = i // 4
        # Spellings the previous release accepts too (it has no `-n` on history and object
        # search, no `--lines` on object get): every arm answers the same question.
        if kind == "code":
            out.append((kind, ["search", CODE_QUERIES[k % len(CODE_QUERIES)], "--json", "--limit", "5"]))
        elif kind == "history":
            out.append((kind, ["history", "search", questions[k % len(questions)], "--all", "--json",
                               "--limit", "5"]))
        elif kind == "notes":
            out.append((kind, ["notes", "search", NOTES_QUERIES[k % len(NOTES_QUERIES)], "--root", str(notes),
                               "--json", "--limit", "5"]))
        elif ids:
            oid = ids[k % len(ids)]
            out.append((kind, ["object", "search", oid, words[k % len(words)], "--limit", "5"] if k % 2 == 0
                        else ["object", "get", oid, "--start", str(4000 * k), "--count", "3000"]))
    return out


def own_ids(argv: list[str], ids: list[str], theirs: list[str]) -> list[str]:
    """argv with this arm's object ids: a release may name the same log otherwise."""
    swap = dict(zip(ids, theirs))
    return [swap.get(a, a) for a in argv]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--embedder", default="fake", help="fake (default) or a model name, e.g. minilm")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="src/ of the previous release (e.g. a git worktree) for a third arm")
    args = ap.parse_args()
    tree = flask_tree()
    history = TMP / "locomo.jsonl"
    questions = locomo_history(history)
    notes = ROOT / "docs"
    logs = sorted((SHARED / "ci-logs-dev" / "cases").glob("*/fail.log"))[:6]
    # This checkout's source as it is now, copied: an edit during the run would make the
    # daemon exit (it declines once its package's files change), as an upgrade does.
    src = TMP / "src-this"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    arms = [Arm("cold", src, TMP / "home-this", args.embedder, "0"),
            Arm("warm", src, TMP / "home-this", args.embedder, "")]
    if args.baseline_src:
        arms.append(Arm("previous", args.baseline_src.resolve(), TMP / "home-prev", args.embedder, "0"))
    for home in {a.home for a in arms}:
        stop_daemons(home)
        shutil.rmtree(home, ignore_errors=True)
    for tree_src in {a.src for a in arms}:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree_src)], check=True)
    print(f"world: {tree.name[:18]}, {len(questions)} LoCoMo questions, notes {notes}, {len(logs)} CI logs; "
          f"embedder {args.embedder}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    ids = build(arms[0], tree, history, notes, logs)
    arm_ids = {a.name: ids for a in arms}
    if args.baseline_src:
        arm_ids["previous"] = build(arms[2], tree, history, notes, logs)
        if len(arm_ids["previous"]) != len(ids):
            raise SystemExit("the previous release offloaded another set of the logs")
    plan = calls(args.calls, questions, notes, ids)
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    first: dict[str, tuple[float, float]] = {}
    try:
        for i, (kind, argv) in enumerate(plan):
            order = arms if i % 2 == 0 else arms[::-1]
            for arm in order:
                wall, cpu, _ = arm.run(own_ids(argv, ids, arm_ids[arm.name]), tree)
                if arm.name == "warm" and "warm" not in first:
                    first["warm"] = (wall, cpu)  # answered alone; it starts the daemon
                    continue
                got.setdefault((arm.name, kind), []).append((wall, cpu))
    finally:
        for home in {a.home for a in arms}:
            stop_daemons(home)
    kinds = ["code", "history", "notes", "objects"]
    print(f"\n{len(plan)} agent-shaped calls per arm, alternating; ms, p50 / p95 "
          f"(load {os.getloadavg()[0]:.1f} at the end)")
    print("| call | " + " | ".join(f"{a.name} wall | {a.name} CPU" for a in arms) + " |")
    print("|---|" + "---|---|" * len(arms))
    for kind in kinds + ["all"]:
        cells = []
        for a in arms:
            xs = [x for k in (kinds if kind == "all" else [kind]) for x in got.get((a.name, k), [])]
            if not xs:
                cells += ["-", "-"]
                continue
            w, c = [x[0] for x in xs], [x[1] for x in xs]
            cells += [f"{statistics.median(w):.0f} / {pct(w, 0.95):.0f}", f"{statistics.median(c):.0f} / {pct(c, 0.95):.0f}"]
        print(f"| {kind} | " + " | ".join(cells) + " |")
    if "warm" in first:
        print(f"\nwarm arm's first call (answered alone, then started the daemon): "
              f"{first['warm'][0]:.0f} ms wall, {first['warm'][1]:.0f} ms CPU")
    log = next((TMP / "home-this" / "run").glob("*.sock.log"), None)
    served = log.read_text().count(" served ") if log else 0
    print(f"warm arm: {served} of {len(plan) - 1} later calls answered by the daemon (the rest alone, "
          "while it started)")


if __name__ == "__main__":
    main()
