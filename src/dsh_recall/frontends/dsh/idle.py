"""The worker's embedding, in a process of its own behind every other.

Embedding history blocks and notes passages with the shipped model is slow under CPU
contention (a batch took over a second beside two busy processes), and a tool result must
never wait for it. Done in slices on the request thread, a result arriving mid-batch waited
for the batch (1.5 s measured); done on a thread of the worker at a lower niceness, it held
the GIL while it waited for the CPU (1.8 s). So it runs in a child process at niceness 19
(`python -m dsh_recall.frontends.dsh.idle`), which runs the background jobs the MCP server
runs (services/indexing/background.py: `history.embed`, `notes.embed`): the request process only
names a job and never waits for it (bench/dsh_idle.py). The two share the recall home, whose
stores take concurrent writers; the child writes only vectors, in short transactions.

    -> {"job": "history.embed"}  |  {"job": "notes.embed", "cwd": "<workspace>" | null}

It exits when its stdin closes (the worker exited) or its parent is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

# Behind every ordinary process: the worker's requests (and whatever else the user runs)
# get the CPU first; under no contention it runs at full speed all the same.
IDLE_NICE = 19
JOBS = ("history.embed", "notes.embed")


def _lowest_priority() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, IDLE_NICE)
    except (OSError, AttributeError):
        pass


class IdleProcess:
    """The worker's side: starts the child on first use and names jobs to it, never
    waiting. A child that cannot start or keeps dying leaves the embedding to later
    searches (MCP, CLI), as before there was a worker."""

    MAX_STARTS = 3

    def __init__(self, config_file: str | None):
        self.config_file = config_file
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def _start(self) -> subprocess.Popen[bytes] | None:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        if self.starts >= self.MAX_STARTS:
            return None
        self.starts += 1
        cmd = [sys.executable, "-m", "dsh_recall.frontends.dsh.idle"]
        if self.config_file:
            cmd += ["--config", str(self.config_file)]
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         preexec_fn=_lowest_priority)
        except OSError as e:
            print(f"dsh-recall worker: no idle process ({e}); embedding waits for a search",
                  file=sys.stderr)
            self.proc = None
        return self.proc

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def send(self, msg: dict[str, Any]) -> bool:
        proc = self._start()
        if proc is None or proc.stdin is None:
            return False
        try:
            proc.stdin.write(json.dumps(msg).encode() + b"\n")
            proc.stdin.flush()
            return True
        except (OSError, ValueError):
            self.proc = None  # it died: the next send starts another
            return False

    def close(self, wait_s: float = 1.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        # It leaves between batches; one still inside a batch is stopped (a batch is one
        # transaction: the kill loses that batch at most).
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)


def _jobs(inp: IO[bytes], config_file: str | None) -> None:
    """Start each job named on `inp` (one run at a time per job and workspace)."""
    from ...core.config import load_config
    from ...services.indexing.background import Background

    bg = Background(log=lambda m: print(f"dsh-recall idle: {m}"[:500], file=sys.stderr))
    try:
        for line in inp:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            job = msg.get("job") if isinstance(msg, dict) else None
            if job not in JOBS:
                continue
            cwd = msg.get("cwd")
            ws = Path(cwd) if job == "notes.embed" and isinstance(cwd, str) and Path(cwd).is_dir() else None
            try:
                cfg = load_config(workspace=ws, config_file=config_file)
                bg.start(job, cfg=cfg, workspace=ws, behind=False)
            except Exception as e:  # noqa: BLE001 - a bad config costs this job only
                print(f"dsh-recall idle: {job}: {type(e).__name__}: {e}"[:500], file=sys.stderr)
    finally:
        bg.stop(wait_s=0.5)


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="dsh-recall-idle")
    ap.add_argument("--config", default=None)
    args = ap.parse_args(argv)
    _lowest_priority()  # already, when the worker started it; also when run by hand
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    _jobs(sys.stdin.buffer, args.config)
    sys.stderr.flush()
    os._exit(0)  # a job still inside onnxruntime must not be finalized (it aborts)


if __name__ == "__main__":
    main()
