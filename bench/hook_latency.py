"""What a Claude Code prompt waits for: the `UserPromptSubmit` hook, a process per prompt.

A session of 200 LoCoMo turns in Claude Code's transcript format, then prompts with two
new turns each (a user line and an answer), as a running session grows. Each prompt runs
`dsh-recall hook claude-code user-prompt-submit` with the hook's payload on stdin, for this
version and, with `--baseline-rev REV`, a previous one (a git worktree), in turn, each on
its own recall home. Prints the first prompt (the whole transcript to import) and p50 wall
time split by whether the hook added recalled history.

    python bench/hook_latency.py [--prompts 12] [--baseline-rev REV] [--embedder minilm|fake]
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
LOCOMO = ROOT.parent / "shared" / "eval" / "locomo-dev"

from timing import baseline_src  # noqa: E402  (bench/timing.py)

TMP = Path(tempfile.gettempdir()) / "dsh-recall-hook"
PROMPTS = ["what did we decide about the pool size earlier?", "ok, continue with the next step",
           "remember what Caroline said about adoption?", "run the tests again", "thanks",
           "as we discussed before, which camping trip was it?"]


def line(k: int, text: str, cwd: Path) -> str:
    role = "user" if k % 2 == 0 else "assistant"
    return json.dumps({"type": role, "sessionId": "cc1", "uuid": f"u{k}", "cwd": str(cwd),
                       "timestamp": f"2026-11-30T{10 + k // 3600:02d}:{k // 60 % 60:02d}:{k % 60:02d}Z",
                       "message": {"role": role, "content": text}}) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--baseline-rev", default="")
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    turns = [t for t in (json.loads(x)["text"] for x in open(LOCOMO / "locomo_dev_turns.jsonl")) if t.strip()]
    srcs = {"this version": ROOT / "src"}
    if args.baseline_rev:
        srcs["previous version"] = baseline_src(args.baseline_rev, TMP.parent / "dsh-recall-hook-revs")
    shutil.rmtree(TMP, ignore_errors=True)
    for i, name in enumerate(srcs):
        (TMP / str(i)).mkdir(parents=True)
        with (TMP / str(i) / "t.jsonl").open("w") as f:
            f.writelines(line(k, turns[k], TMP) for k in range(200))

    def hook(i: int, src: Path, prompt: str) -> tuple[float, bool]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(DSH_RECALL_HOME=str(TMP / str(i) / "home"), DSH_RECALL_DAEMON="0",
                   DSH_RECALL_EMBEDDER__NAME=args.embedder, PYTHONPATH=str(src))
        payload = json.dumps({"session_id": "cc1", "transcript_path": str(TMP / str(i) / "t.jsonl"),
                              "cwd": str(TMP), "hook_event_name": "UserPromptSubmit", "prompt": prompt})
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "dsh_recall", "hook", "claude-code", "user-prompt-submit"],
                             input=payload, capture_output=True, text=True, env=env, cwd=str(TMP), check=True)
        return (time.perf_counter() - t0) * 1000, bool(out.stdout.strip())

    first = {name: hook(i, src, "hello")[0] for i, (name, src) in enumerate(srcs.items())}
    got: dict[str, list[tuple[float, bool]]] = {name: [] for name in srcs}
    k = 200
    for p in range(args.prompts):
        for i, (name, src) in enumerate(srcs.items()):
            with (TMP / str(i) / "t.jsonl").open("a") as f:
                f.writelines(line(k + j, turns[k + j], TMP) for j in range(2))
            got[name].append(hook(i, src, PROMPTS[p % len(PROMPTS)]))
        k += 2

    def p50(xs: list[float]) -> str:
        return f"{statistics.median(xs):.0f} ({len(xs)})" if xs else "-"

    print(f"\nClaude Code UserPromptSubmit hook, embedder {args.embedder}, {args.prompts} prompts, "
          f"load average {os.getloadavg()[0]:.1f}; ms p50 (prompts)")
    print("\n| version | first prompt (200 turns to import) | no recall added | recall added |")
    print("|---|---|---|---|")
    for name, xs in got.items():
        print(f"| {name} | {first[name]:.0f} | {p50([ms for ms, fired in xs if not fired])} "
              f"| {p50([ms for ms, fired in xs if fired])} |")


if __name__ == "__main__":
    main()
