"""Daemon threads that run handed-over work, kept a while once idle for the next hand-over.

Thread.start waits until the new thread runs: on a busy 2-core machine about 3 ms of a
hybrid search at 98k chunks, twice the scheduling delay, so a search hands its side work to
an idle thread of an earlier search where there is one. Daemon threads, not an executor:
concurrent.futures joins its workers at interpreter exit, so a CLI would wait for work whose
answer it already dropped (and importing it costs a cold CLI about 8 ms).

A worker is named `busy_name` while it runs work (the CLI and the MCP server look for that
name to leave without finalizing under it) and `idle_name` while it waits.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

__all__ = ["Workers"]


class Workers:
    """At most `keep` idle threads, each kept `idle_s` seconds for the next `run`. Work
    handed to `run` must not raise (wrap it: its caller wants the exception, not this
    thread). Safe across fork: a child has none of its parent's threads and starts its own."""

    def __init__(self, busy_name: str, idle_name: str, idle_s: float, keep: int) -> None:
        self.busy_name, self.idle_name = busy_name, idle_name
        self.idle_s, self.keep = idle_s, keep
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []
        self._pid = os.getpid()

    def run(self, work: Callable[[], None]) -> None:
        """Run `work` in an idle worker, or in a new one when none is idle."""
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            jobs = self._idle.pop() if self._idle else None
        if jobs is None:
            jobs = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(jobs,), name=self.busy_name,
                             daemon=True).start()
        jobs.put(work)

    def _serve(self, jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
        me = threading.current_thread()
        while True:
            try:
                work = jobs.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if jobs in self._idle:  # else handed work just now: take it
                        self._idle.remove(jobs)
                        return
                continue
            me.name = self.busy_name
            work()
            me.name = self.idle_name
            with self._lock:
                if len(self._idle) >= self.keep:
                    return
                self._idle.append(jobs)
