"""The threads start_beside runs a search's vector layer on (core/workers.py): an
idle one of an earlier search takes the next one's work instead of a new thread, named
VECTOR_THREAD while it works (the CLI and the MCP server look for that name) and
IDLE_THREAD while it waits; a late one leaves the next search a thread of its own."""

from __future__ import annotations

import threading
import time

from dsh_recall.services import hybrid


class Reopens:
    def reopen(self):
        return self

    def close(self):
        pass


def _run(work, deadline_s=5.0):
    notes: list[str] = []
    wait = hybrid.start_beside(Reopens(), work, notes)
    return wait(time.monotonic() + deadline_s), notes


def test_an_idle_worker_takes_the_next_search_under_the_working_name():
    seen: list[tuple[int, str]] = []

    def work(store):
        t = threading.current_thread()
        seen.append((t.ident, t.name))
        return [(1, 0.5)]

    assert _run(work)[0] == [(1, 0.5)]
    time.sleep(0.05)  # the worker files itself idle after handing the answer over
    idle = [t for t in threading.enumerate() if t.name == hybrid.IDLE_THREAD]
    assert idle and not any(t.name == hybrid.VECTOR_THREAD and t.ident == seen[0][0]
                            for t in threading.enumerate())
    assert _run(work)[0] == [(1, 0.5)]
    assert seen[1] == (seen[0][0], hybrid.VECTOR_THREAD)  # the same thread, named as working


def test_a_late_worker_leaves_the_next_search_its_own_thread():
    release = threading.Event()
    idents: list[int | None] = []

    def slow(store):
        idents.append(threading.get_ident())
        release.wait(10)
        return [(2, 0.1)]

    value, notes = _run(slow, deadline_s=0.05)
    assert value is None and "did not answer" in notes[0]
    try:
        assert _run(lambda store: idents.append(threading.get_ident()) or [(3, 0.3)])[0] == [(3, 0.3)]
        assert idents[0] != idents[1]
    finally:
        release.set()


def test_an_error_reaches_the_caller_and_the_worker_serves_on():
    def boom(store):
        raise ValueError("no vectors here")

    value, notes = _run(boom)
    assert value is None and "failed: no vectors here" in notes[0]
    assert _run(lambda store: [(4, 0.4)])[0] == [(4, 0.4)]
