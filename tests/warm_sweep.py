"""Daemons a test's CLI call started in the background (frontends/warm.py), found and stopped.

A test whose environment leaves the warm path on (one built from scratch, or one that turns
it on) can leave a detached `dsh-recall daemon` behind in its temporary recall home; the
conftest stops every such daemon under the run's temporary folder after each test.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def started_daemons(under: Path) -> list[int]:
    """Pids of self-started daemons (`daemon ... --lock-fd`) whose recall home is `under`."""
    root = os.path.realpath(under)
    found = []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            if b"dsh_recall\0daemon\0" not in cmd or b"--lock-fd\0" not in cmd:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        home = env.get(b"DSH_RECALL_HOME")
        if home and os.path.realpath(os.fsdecode(home)).startswith(root + os.sep):
            found.append(int(pid))
    return found


def stop_daemons(under: Path, timeout_s: float = 30.0) -> list[int]:
    """Stop (SIGTERM, then SIGKILL) every self-started daemon under `under`; their pids."""
    pids = started_daemons(under)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    end = time.monotonic() + timeout_s
    for pid in pids:
        while os.path.exists(f"/proc/{pid}") and _state(pid) not in ("Z", "X"):
            if time.monotonic() > end:
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.05)
    return pids


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "X"
