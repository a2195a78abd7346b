"""Watch mode: an edit reaches the code and notes indexes without a manual re-index, only the
changed file is re-read, ignored folders wake nothing, and the CLI reports each update."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from dsh_recall.core.config import load_config
from dsh_recall.services.code import CodeService
from dsh_recall.services.indexing import watch as watch_mod
from dsh_recall.services.notes import NotesService

WAIT_S = 30  # generous bound for a busy CI machine; bench/watch.py measures the real latency


def _tree(tmp_path: Path, n: int = 20) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(n):
        (ws / f"mod{i}.py").write_text(f"def function_{i}():\n    return {i}\n")
    (ws / ".git").mkdir()
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "facts.md").write_text("# Facts\n\nThe editor is helix.\n")
    return ws, memory


class Running:
    """A watcher in a thread, its events in a queue."""

    def __init__(self, cfg, ws: Path):
        self.events: queue.Queue = queue.Queue()
        self.watcher = watch_mod.build(cfg, [ws], on_event=self.events.put)
        self.stop = threading.Event()
        ready = threading.Event()
        self.thread = threading.Thread(target=self.watcher.run, args=(self.stop,),
                                       kwargs={"ready": ready.set}, daemon=True)
        self.thread.start()
        assert ready.wait(WAIT_S)
        self.start_events = [self.events.get(timeout=WAIT_S) for _ in self.watcher.targets]

    def next(self, kind: str) -> dict:
        while True:
            e = self.events.get(timeout=WAIT_S)
            if e["kind"] == kind:
                return e

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        self.watcher.close()


def test_an_edit_reaches_the_indexes_and_only_changed_files_are_read(tmp_path):
    ws, memory = _tree(tmp_path)
    cfg = load_config(workspace=ws, overrides={"embedder": {"name": "fake"},
                                               "notes": {"roots": [str(memory)]}})
    run = Running(cfg, ws)
    try:
        kinds = {e["kind"]: e for e in run.start_events}
        assert kinds["code"]["indexed"] == 20 and kinds["notes"]["indexed"] == 1

        # Noise in ignored folders wakes nothing; the next update is the real edit's.
        (ws / ".git" / "index").write_text("binary noise")
        (ws / "__pycache__").mkdir()
        (ws / "__pycache__" / "mod1.cpython-311.pyc").write_bytes(b"\0" * 10)
        (ws / "mod3.py").write_text("def quokka_handler():\n    return 3\n")
        e = run.next("code")
        assert e["reason"] == "1 change", e
        assert (e["indexed"], e["unchanged"], e["deleted"]) == (1, 19, 0)
        svc = CodeService(ws, cfg)
        try:
            top = svc.search("quokka_handler", layers=("lexical",))["results"][0]
            assert top["path"] == "mod3.py" and not top["stale"]
            assert svc.store.pending_count() == 0  # the new chunk was embedded too

            (ws / "mod4.py").unlink()
            e = run.next("code")
            assert (e["indexed"], e["deleted"]) == (0, 1)
            assert "mod4.py" not in svc.store.files()
        finally:
            svc.close()

        (memory / "facts.md").write_text("# Facts\n\nThe editor is kakoune now.\n")
        e = run.next("notes")
        assert e["indexed"] == 1
        ns = NotesService(cfg)
        try:
            hit = ns.search("which editor kakoune", layers=("lexical",))["results"][0]
            assert "kakoune" in hit["text"]
        finally:
            ns.close()
    finally:
        run.close()
    assert not run.thread.is_alive()


def test_cli_watch_prints_one_json_line_per_update(tmp_path):
    ws, _ = _tree(tmp_path, 5)
    env = {**os.environ, "DSH_RECALL_EMBEDDER__NAME": "fake"}
    proc = subprocess.Popen([sys.executable, "-m", "dsh_recall", "watch", "--json",
                             "--no-notes", str(ws)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["reason"] == "start" and first["indexed"] == 5
        line = proc.stderr.readline()
        assert line.startswith("watching code "), line
        (ws / "mod0.py").write_text("def renamed():\n    return 0\n")
        e = json.loads(proc.stdout.readline())
        assert e["kind"] == "code" and e["indexed"] == 1 and e["unchanged"] == 4
    finally:
        proc.terminate()
        proc.wait(WAIT_S)


def test_mcp_server_with_watch_keeps_its_workspace_fresh(tmp_path):
    import asyncio
    import time

    from mcp import ClientSession, StdioServerParameters, stdio_client

    ws, _ = _tree(tmp_path, 5)
    env = {**os.environ, "DSH_RECALL_EMBEDDER__NAME": "fake"}
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "dsh_recall", "mcp", "--watch"], env=env,
                                   cwd=str(ws))

    async def body() -> list[str]:
        with open(tmp_path / "server.stderr", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.call_tool("code_search", {"query": "function_1"})
                    (ws / "mod2.py").write_text("def platypus_route():\n    return 2\n")
                    end = time.monotonic() + WAIT_S
                    while time.monotonic() < end:
                        res = await session.call_tool("code_search",
                                                      {"query": "platypus_route", "limit": 1})
                        paths = [r["path"] for r in res.structured_content["results"]]
                        if paths == ["mod2.py"] and "platypus_route" in \
                                res.structured_content["results"][0]["excerpt"]:
                            return paths
                        await asyncio.sleep(0.2)
                    return paths

    assert asyncio.run(body()) == ["mod2.py"]
