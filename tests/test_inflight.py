"""Closing a service waits for a search a late caller left running (core.process.InFlight):
search_all returns at its deadline while a slow source's thread still searches, and a store
closed under that thread would crash the process instead of failing a call."""

from __future__ import annotations

import threading
import time

from dsh_recall.core.config import load_config
from dsh_recall.core.process import InFlight
from dsh_recall.services.code import CodeService


def test_inflight_waits_for_running_calls():
    busy = InFlight()
    entered, release = threading.Event(), threading.Event()

    def call() -> None:
        with busy:
            entered.set()
            release.wait(5)

    th = threading.Thread(target=call)
    th.start()
    entered.wait(5)
    assert busy.wait_idle(0.05) is False  # still running
    release.set()
    assert busy.wait_idle(5) is True
    th.join()


def test_close_waits_for_a_search_still_running(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def ledger_pool():\n    return 'ledger pool'\n")
    svc = CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake"}}))
    svc.index()
    slow = svc._rank
    started = threading.Event()

    def slow_rank(*a, **kw):
        started.set()
        time.sleep(0.5)  # a search that outlives its caller's deadline
        return slow(*a, **kw)

    monkeypatch.setattr(svc, "_rank", slow_rank)
    out: list = []
    th = threading.Thread(target=lambda: out.append(svc.search("ledger pool", layers=("lexical",))))
    th.start()
    started.wait(5)
    svc.close()  # waits: the search still finishes with its store open
    th.join(5)
    assert out and out[0]["results"][0]["path"] == "a.py"
