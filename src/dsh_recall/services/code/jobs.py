"""The code index job as other processes see it: one small JSON file per workspace beside the
index lock (`index-job.json`), replaced atomically, read by `status` and the dashboard."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..vectors import Progress

JOB_FILE = "index-job.json"


class JobFile:
    """The last index job of one workspace. `lock(0)` tells whether an indexer is at work."""

    def __init__(self, folder: Path,
                 lock: Callable[[float | None], AbstractContextManager[bool]]) -> None:
        self.path = folder / JOB_FILE
        self._lock = lock

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def record(self, info: dict[str, Any]) -> None:
        """Replace the job file (atomically: a reader never sees half of it)."""
        tmp = self.path.with_name(f"{JOB_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, self.path)

    def progress(self, job: dict[str, Any], progress: Progress | None) -> Progress:
        """A progress callback that keeps the job file's phase and counts (at most twice a
        second, and at each phase's start and end) and passes them on to `progress`."""
        last: list[Any] = [0.0, ""]

        def cb(phase: str, done: int, total: int) -> None:
            now = time.monotonic()
            if phase != last[1] or now - last[0] >= 0.5 or done == total:
                last[:] = [now, phase]
                job.update(phase=phase, done=done, total=total)
                self.record(job)
            if progress:
                progress(phase, done, total)

        return cb

    def state(self) -> dict[str, Any]:
        """Idle (none known), starting, running (with phase and progress), done (with its
        report), failed or interrupted (killed)."""
        job = self.read() or {"state": "idle"}
        if job.get("state") not in ("starting", "running"):
            return job
        with self._lock(0) as free:
            if not free:
                return {**job, "state": "running"}
        alive = False
        try:
            os.kill(int(job.get("pid") or 0), 0)
            alive = bool(job.get("pid"))
        except (OSError, ValueError):
            pass
        if job["state"] == "starting" and alive:
            return job
        return {**job, "state": "interrupted"}
