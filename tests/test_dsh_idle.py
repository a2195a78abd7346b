"""The dsh worker's idle process, started for real by `dsh-recall worker`: after a quiet
spell the worker hands the embedding to a child at the lowest CPU priority, which fills the
notes vectors while the worker answers, and dies with the worker even on kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from dsh_recall.core.config import load_config
from dsh_recall.frontends.dsh.idle import IDLE_NICE
from dsh_recall.services.notes import NotesService
from dsh_standin import recall_exe


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_worker_hands_embedding_to_a_child_that_dies_with_it(tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(3):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\nThe staging bucket {i} lives in region eu-west-{i}.\n")
    monkeypatch.setenv("DSH_RECALL_NOTES__ROOTS", json.dumps([str(notes)]))
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "DSH_HOME": str(tmp_path / "dsh")}
    proc = subprocess.Popen([recall_exe(), "worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, cwd=ws)
    assert proc.stdin is not None and proc.stdout is not None
    child = None
    try:
        assert json.loads(proc.stdout.readline())["result"]["ready"]
        req = {"id": 1, "op": "context", "session": "s1", "cwd": str(ws), "message_id": "m1",
               "message": "which region is the staging bucket in?"}
        proc.stdin.write(json.dumps(req).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        deadline = time.monotonic() + 30
        niceness = None
        # A child is listed from its fork on; it lowers its priority just before its exec,
        # so the priority is read until it settles (or the deadline passes).
        while niceness != IDLE_NICE and time.monotonic() < deadline:
            time.sleep(0.1)
            kids = _children(proc.pid)
            child = kids[0] if kids else None
            try:
                niceness = os.getpriority(os.PRIO_PROCESS, child) if child else None
            except ProcessLookupError:
                niceness = None
        assert child is not None, "no idle process after the quiet spell"
        assert niceness == IDLE_NICE
        svc = NotesService(load_config())
        try:
            while svc.store.pending_count() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert svc.store.chunk_count() > 0 and svc.store.pending_count() == 0
        finally:
            svc.close()
        # The worker answers meanwhile (the child never holds its thread).
        proc.stdin.write(b'{"id": 2, "op": "hello"}\n')
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        gone = time.monotonic() + 10
        while _alive(child) and time.monotonic() < gone:
            time.sleep(0.1)
        assert not _alive(child), "the idle process outlived its worker"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
