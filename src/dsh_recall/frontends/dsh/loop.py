"""The worker's wire: JSON lines over stdio, one answer per request, in order.

    -> {"id": 7, "op": "offload", ...}
    <- {"id": 7, "ok": true, "result": {...}}   or   {"id": 7, "ok": false, "error": "one line"}

The first line written is `{"id": 0, "ok": true, "result": {"ready": true, ...}}`. A line
that is not a JSON object is answered with `id: null`. Stdout belongs to the protocol:
anything else the process prints goes to stderr. The loop ends when stdin closes (dsh
exited). After `idle_s` of quiet the touched sessions are imported into history (no
embedding) and the embedding is handed to a child process at the lowest CPU priority
(idle.py), so a request never waits behind a batch of the model.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from typing import IO, Any

from ...core.clean import clean_json
from ...core.errors import RecallError
from .idle import IdleProcess
from .worker import VERSION, Worker

MAX_LINE_BYTES = 256 << 20  # a tool result can be big; a line past this is refused


def _one_line(e: BaseException) -> str:
    text = str(e).replace("\n", " ").strip()
    return (f"{type(e).__name__}: {text}" if not isinstance(e, RecallError) else text)[:500]


def _reader(inp: IO[bytes], q: queue.Queue[bytes | None]) -> None:
    try:
        while True:
            line = inp.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                # The rest of an over-long line is one refused request, not many.
                while (rest := inp.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
            q.put(line)
    finally:
        q.put(None)


def answer(worker: Worker, line: bytes) -> dict[str, Any]:
    """The answer to one request line (never raises)."""
    if len(line) > MAX_LINE_BYTES:
        return {"id": None, "ok": False, "error": f"request over {MAX_LINE_BYTES} bytes"}
    try:
        req = clean_json(json.loads(line.decode("utf-8", "replace")))
    except ValueError as e:
        return {"id": None, "ok": False, "error": f"not JSON: {_one_line(e)}"}
    except RecursionError:  # 1,000 `[` exhaust json's C parser's depth: answer, go on
        return {"id": None, "ok": False, "error": "not JSON: nested too deeply"}
    if not isinstance(req, dict):
        return {"id": None, "ok": False, "error": "a request is a JSON object"}
    rid = req.get("id")
    try:
        return {"id": rid, "ok": True, "result": worker.handle(req)}
    except Exception as e:  # noqa: BLE001 - one request must never end the worker
        worker.counts["errors"] += 1
        if os.environ.get("DSH_RECALL_DEBUG"):
            import traceback
            traceback.print_exc(file=sys.stderr)
        return {"id": rid, "ok": False, "error": _one_line(e)}


def serve(inp: IO[bytes], out: IO[bytes], worker: Worker, idle_s: float = 0.5) -> None:
    """Answer requests from `inp` on `out` until `inp` closes."""
    q: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_reader, args=(inp, q), daemon=True, name="dsh-recall-stdin").start()

    def send(obj: dict[str, Any]) -> None:
        try:
            data = json.dumps(obj, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError) as e:  # e.g. an id nested too deeply
            data = json.dumps({"id": None, "ok": False, "error": f"unanswerable: {_one_line(e)}"})
        out.write(data.encode("utf-8", "replace") + b"\n")
        out.flush()

    try:  # the user's thresholds: the plugin sends nothing shorter (no round trip)
        floors: dict[str, Any] = worker.floors(None)
    except Exception:  # noqa: BLE001 - a bad config is reported by the first request
        floors = {}
    send({"id": 0, "ok": True, "result": {"ready": True, "version": VERSION, "pid": os.getpid(),
                                          **floors}})
    # Embedding runs in a child process behind every other (idle.py); this thread imports
    # the touched sessions after `idle_s` of quiet and names the jobs to it.
    runner = IdleProcess(worker.config_file)
    try:
        while True:
            try:
                line = q.get(timeout=idle_s if worker.dirty else None)
            except queue.Empty:
                try:
                    worker.hand_off(runner.send)
                except Exception as e:  # noqa: BLE001 - idle work is best effort
                    worker.dirty.clear()
                    print(f"dsh-recall worker: idle work failed: {_one_line(e)}", file=sys.stderr)
                continue
            if line is None:
                break
            if not line.strip():
                continue
            send(answer(worker, line))
    finally:
        runner.close()
        worker.close()


def _watch_parent(interval_s: float = 1.0) -> None:
    """Exit when the parent (dsh) is gone, even if a request is stuck: dsh killed with
    SIGKILL closes our stdin, but a wedged request would keep the process alive."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True, name="dsh-recall-parent").start()


def main(worker: Worker, idle_s: float = 0.5) -> None:
    """Run on this process's stdio; stdout is kept for the protocol only."""
    _watch_parent()
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol
    serve(sys.stdin.buffer, out, worker, idle_s)
