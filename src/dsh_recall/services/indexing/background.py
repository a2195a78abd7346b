"""The one owner of background work: what fills each kind of backlog, and the threads that do.

A source says what it still owes in its answer's `backlog` (services/base.Backlog): how
many vectors or files wait, the CLI command that fills them for a person, and the `job`
that fills them here. `JOBS` maps each job name to the function that does the work;
`Background` runs them, at most one thread per job and key (the workspace, for the
sources indexed per workspace), behind the user's own work (BACKGROUND_NICE), and stops
them between slices when the process ends.

Long-lived front ends (the MCP server, the dashboard) hand every answer's backlog to
`Background.fill` and, for the items now being filled, put their own words in place of the
hint the source wrote for a person (`say`). The dsh worker runs the same jobs in a child
process at the lowest CPU priority (frontends/dsh/idle.py), so a request never waits for one.
A one-shot CLI never starts one: its process ends with the answer, and its notes say which
command fills the rest.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.config import Config
from ..base import Answer, Backlog

__all__ = ["BACKGROUND_NICE", "JOBS", "Background", "Context", "Job", "say"]

BACKGROUND_NICE = 10


def _log(msg: str) -> None:
    """Diagnostics go to stderr: stdout may belong to a protocol (MCP, the dsh worker)."""
    print(f"dsh-recall: {msg}", file=sys.stderr, flush=True)


@dataclass
class Context:
    """What one run of a job gets: the caller's config and workspace, the process's stop
    flag (set: leave between slices) and where to report progress."""

    cfg: Config
    workspace: Path | None
    stop: threading.Event
    progress: Callable[[str, int, int], None]


@dataclass(frozen=True)
class Job:
    """One kind of background work. `run` works until done or `stop` and returns what to add
    to the job's state (`report`, `embedded`). A backlog restarts a finished job only
    `pause_s` after it finished, and a failed one only if `retry_failed` (an embedder that
    fails on some chunks is not rerun on every search); an explicit start always runs.
    `takes`: the kinds of backlog (Backlog["what"]) a backlog starts it for; others (files
    another process is indexing: that process fills them) are left to whoever said so."""

    name: str
    run: Callable[[Context], dict[str, Any]]
    per_workspace: bool = True
    takes: frozenset[str] = frozenset({"vectors"})
    pause_s: float = 0.0
    retry_failed: bool = True


class Stopped(Exception):
    """Raised from a job's progress callback once the process is stopping: the job leaves
    between batches (each batch is committed whole) instead of running on under a process
    that is finalizing, which made onnxruntime abort it (SIGABRT)."""


def _code_index(ctx: Context) -> dict[str, Any]:
    """Bring a workspace's code index up to date: changed files, then every pending vector."""
    from ..code import CodeService

    assert ctx.workspace is not None
    svc = CodeService(ctx.workspace, ctx.cfg)
    try:
        rep = svc.index(progress=ctx.progress, lock_timeout_s=30)
    finally:
        svc.close()
    return {"report": rep.as_dict()}


def _notes_embed(ctx: Context) -> dict[str, Any]:
    from .. import notes

    return {"embedded": notes.backfill(ctx.cfg, ctx.workspace, ctx.stop)}


def _history_embed(ctx: Context) -> dict[str, Any]:
    from .. import history

    return {"embedded": history.backfill(ctx.cfg, ctx.stop)}


# After a code index job a backlog started, how long before a backlog may start another.
AUTO_INDEX_PAUSE_S = 300.0

JOBS: dict[str, Job] = {job.name: job for job in (
    # A code backlog (chunks without vectors) is filled by the index job `code_index` runs:
    # it embeds them after bringing the files up to date.
    Job("code.embed", _code_index, pause_s=AUTO_INDEX_PAUSE_S, retry_failed=False),
    Job("notes.embed", _notes_embed),
    # One history store per recall home: one job, whatever the workspace.
    Job("history.embed", _history_embed, per_workspace=False),
)}


def _job(name: str) -> Job:
    job = JOBS.get(name)
    if job is None:
        raise KeyError(f"unknown background job '{name}'; jobs: {', '.join(JOBS)}")
    return job


def _lower_priority() -> None:
    """This thread behind the user's own work: on Linux a thread's nice value is its own,
    and the model threads it starts inherit it."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    except (OSError, AttributeError):
        pass


class _Slot:
    """One job for one key: its thread and its state."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.info: dict[str, Any] = {"state": "idle"}
        self.embedded = 0

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def progress(self, phase: str, done: int, total: int) -> None:
        with self.lock:
            self.info.update(phase=phase, done=done, total=total)


class Background:
    """The background jobs of one process. `start` runs a job unless it runs already for
    that key; `fill` starts what an answer's backlog names; `stop` ends them all."""

    def __init__(self, log: Callable[[str], None] | None = None):
        self.log = log or _log
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, str], _Slot] = {}
        self._stop = threading.Event()

    def _key(self, job: Job, workspace: Path | None) -> tuple[str, str]:
        return job.name, str(workspace) if job.per_workspace and workspace is not None else ""

    def _slot(self, name: str, workspace: Path | None) -> _Slot:
        key = self._key(_job(name), workspace)
        with self._lock:
            return self._slots.setdefault(key, _Slot())

    def start(self, name: str, *, cfg: Config, workspace: Path | None = None,
              behind: bool = True) -> bool:
        """Run job `name` for `workspace` on its own thread unless it is running already (or
        the process is stopping); returns whether a new run started. `behind`: the process
        started it itself, so it runs behind the user's own work."""
        job = _job(name)
        slot = self._slot(name, workspace)
        with slot.lock:
            if slot.running() or self._stop.is_set():
                return False
            slot.info = {"state": "running", "started": time.time()}
            stop = self._stop

            def progress(phase: str, done: int, total: int) -> None:
                slot.progress(phase, done, total)
                if stop.is_set():  # a job without a stop flag of its own (code_index) ends here
                    raise Stopped("the process is ending")

            ctx = Context(cfg, workspace, self._stop, progress)
            slot.thread = threading.Thread(target=self._run, args=(job, slot, ctx, behind),
                                           name=f"dsh-recall-{name}", daemon=True)
            slot.thread.start()
            return True

    def _run(self, job: Job, slot: _Slot, ctx: Context, behind: bool) -> None:
        if behind:
            _lower_priority()
        try:
            out = job.run(ctx)
            with slot.lock:
                slot.embedded += int(out.get("embedded") or 0)
                slot.info.update(state="done", finished=time.time(), **out)
        except Stopped:
            with slot.lock:
                slot.info.update(state="stopped", finished=time.time())
        except Exception as e:  # noqa: BLE001 - a job's failure costs its work, never the process
            self.log(f"{job.name} failed: {e}")
            with slot.lock:
                slot.info.update(state="failed", finished=time.time(), error=str(e))

    def fill(self, backlog: Iterable[Backlog], *, cfg: Config,
             workspace: Path | None = None) -> list[Backlog]:
        """Start the job of each backlog item (see Job for when a finished or failed one is
        not restarted); returns the items whose job now runs here."""
        taken: list[Backlog] = []
        for item in backlog:
            job = JOBS.get(item.get("job", ""))
            if job is None or item.get("what") not in job.takes:
                continue
            last = self.snapshot(job.name, workspace)
            finished = time.time() - float(last.get("finished") or 0)
            rest = (last.get("state") == "failed" and not job.retry_failed) or (
                last.get("state") == "done" and finished < job.pause_s)
            if (not rest and self.start(job.name, cfg=cfg, workspace=workspace)) \
                    or self.running(job.name, workspace):
                taken.append(item)
        return taken

    def running(self, name: str, workspace: Path | None = None) -> bool:
        return self._slot(name, workspace).running()

    def snapshot(self, name: str, workspace: Path | None = None) -> dict[str, Any]:
        """The job's state: "idle", "running" (phase, done, total), "done" (report or
        embedded), "failed" (error); `started` / `finished` as Unix times."""
        slot = self._slot(name, workspace)
        with slot.lock:
            return dict(slot.info)

    def embedded(self, name: str, workspace: Path | None = None) -> int:
        """How many the job has embedded in this process so far, over all its runs."""
        slot = self._slot(name, workspace)
        with slot.lock:
            return slot.embedded

    def wait(self, name: str, workspace: Path | None = None, seconds: float = 0.0) -> None:
        """Wait up to `seconds` for the job's current run to end."""
        t = self._slot(name, workspace).thread
        if t is not None and seconds > 0:
            t.join(seconds)

    def status(self) -> dict[str, dict[str, Any]]:
        """Every job this process ran, by "<job>" or "<job> <workspace>"."""
        with self._lock:
            slots = dict(self._slots)
        out = {}
        for (name, key), slot in slots.items():
            with slot.lock:
                out[f"{name} {key}".strip()] = dict(slot.info)
        return out

    def stop(self, wait_s: float = 5.0) -> bool:
        """No new runs; the running ones leave between slices (waited for up to `wait_s`).
        Returns whether every job has ended: if not, one is still inside a batch (perhaps
        in onnxruntime), and the process must leave without finalizing (os._exit), as the
        CLI does after a search (frontends/cli _leave_workers)."""
        self._stop.set()
        with self._lock:
            threads = [s.thread for s in self._slots.values() if s.thread is not None]
        end = time.monotonic() + wait_s
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in threads)


def say(answer: Answer | dict[str, Any], taken: Iterable[Backlog],
        words: Mapping[str, str]) -> None:
    """For each backlog item a front end fills itself, put `words[item["job"]]` in place of
    the hint the source ended a note (or a layer's status) with. An item without a hint, or
    whose hint no note ends with, changes nothing: the source told no one to run anything."""
    for item in taken:
        hint, said = item.get("hint"), words.get(item["job"])
        if not hint or not said:
            continue
        if isinstance(answer.get("notes"), list):
            answer["notes"] = [_swap(n, hint, said) for n in answer["notes"]]
        status = answer.get("layer_status")
        if isinstance(status, dict):
            for k, v in status.items():
                status[k] = _swap(v, hint, said)


def _swap(text: Any, hint: str, said: str) -> Any:
    if isinstance(text, str) and text.endswith(hint):
        return text[: len(text) - len(hint)] + said
    return text
