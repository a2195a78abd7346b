"""Helpers for tests that run dsh-recall in real subprocesses."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path


def env_for(home: Path) -> dict[str, str]:
    """The environment of a subprocess: its own recall home and the fake embedder."""
    env = dict(os.environ)
    env["DSH_RECALL_HOME"] = str(home)
    env["DSH_RECALL_EMBEDDER__NAME"] = "fake"
    return env


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dsh_recall", *args]


def kill_9_when(cmd: list[str], env: dict[str, str], db: Path, count_sql: str, threshold: int,
                timeout_s: float = 120) -> bool:
    """Start `cmd` and SIGKILL it once `count_sql` on `db` reaches `threshold`.
    Returns False when the process finished first (the test input is too small)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    killed = False
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            conn = sqlite3.connect(db, timeout=5)
            n = conn.execute(count_sql).fetchone()[0]
            conn.close()
        except sqlite3.Error:
            n = 0
        if n >= threshold:
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.01)
    proc.wait()
    return killed


def gone_within(pid: int, timeout_s: float = 5.0) -> bool:
    """Whether process `pid` ends within `timeout_s`; if not, it is killed (the test fails
    on the False, and leaves nothing behind)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return False
