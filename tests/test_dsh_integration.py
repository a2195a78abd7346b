"""The real DeepSeek Harness (dsh) runtime mounts `dsh-recall mcp` through a cordis patch and
the model calls one of our tools.

The model endpoint is a local stand-in speaking Anthropic-Messages-style SSE on /v1/messages:
its first answer is a tool_use of `mcp__recall__code_search`, its second a plain text. The
test checks that the call reached our server (its answer names the file only our index
knows) and that the result landed in the session log on disk.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

harness = pytest.importorskip("deepseek_harness", reason="pip install 'dsh-recall[test]'")

TOOL = "mcp__recall__code_search"
MARKER = "reconcile_ledger_balances"


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _message(blocks: list[dict[str, Any]], stop: str) -> bytes:
    """An Anthropic Messages stream: start, one start/delta/stop per block, delta, stop."""
    ev: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": "msg_standin", "type": "message", "role": "assistant", "model": "stand-in",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}]
    for i, b in enumerate(blocks):
        if b["type"] == "tool_use":
            ev.append({"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
            ev.append({"type": "content_block_delta", "index": i, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(b["input"])}})
        else:
            ev.append({"type": "content_block_start", "index": i,
                       "content_block": {"type": "text", "text": ""}})
            ev.append({"type": "content_block_delta", "index": i,
                       "delta": {"type": "text_delta", "text": b["text"]}})
        ev.append({"type": "content_block_stop", "index": i})
    ev.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
               "usage": {"output_tokens": 5}})
    ev.append({"type": "message_stop"})
    return _sse(ev)


class StandIn(ThreadingHTTPServer):
    """Records every request body; answers tool_use until a tool_result comes back."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        server: StandIn = self.server  # type: ignore[assignment]
        server.requests.append({"path": self.path, "body": body})
        tools = {t.get("name") for t in body.get("tools") or []}
        answered = any(isinstance(m.get("content"), list) and any(
            isinstance(c, dict) and c.get("type") == "tool_result" for c in m["content"])
            for m in body.get("messages") or [])
        if TOOL in tools and not answered:
            payload = _message([{"type": "tool_use", "id": "toolu_recall_1", "name": TOOL,
                                 "input": {"query": "reconcile ledger balances"}}], "tool_use")
        else:
            payload = _message([{"type": "text", "text": "Found it in the ledger module."}],
                               "end_turn")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _read_session_logs(dsh_home: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for f in sorted((dsh_home / "sessions").rglob("session.v4.jsonl*")):
        raw = f.read_bytes()
        if f.suffix == ".zstd":
            import io

            import zstandard
            raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw),
                                                             read_across_frames=True).read()
        for line in raw.decode("utf-8").splitlines():
            if line.strip():
                events.append(json.loads(line))
    return events


@pytest.mark.slow
def test_dsh_calls_our_mcp_tool_and_logs_the_result(tmp_path: Path) -> None:
    try:
        from deepseek_harness_runtime import bundled_runtime_path
        bundled_runtime_path()
    except (ImportError, FileNotFoundError) as e:
        pytest.skip(f"dsh runtime not available: {e}")
    exe = shutil.which("dsh-recall", path=str(Path(sys.executable).parent))
    assert exe, "dsh-recall must be installed in this environment"

    repo = tmp_path / "repo"
    (repo / "ledger").mkdir(parents=True)
    (repo / "ledger" / "books.py").write_text(
        f"def {MARKER}(entries):\n    \"\"\"Match debits against credits.\"\"\"\n"
        "    return sum(e.debit - e.credit for e in entries)\n")
    dsh_home = tmp_path / "dsh-home"
    dsh_home.mkdir()
    recall_home = tmp_path / "recall-home"
    # dsh strips DSH_* variables from an MCP child's environment: pass ours in the patch.
    from dsh_recall.frontends.cli.integrate import dsh_patch
    patch = tmp_path / "cordis.patch.yml"
    # The full tool profile: this test calls code_search (the compact `recall` tool has its
    # own test in test_mcp_compact.py).
    patch.write_text(dsh_patch(command=exe, workspace=repo, tools="full", env={
        "DSH_RECALL_HOME": str(recall_home), "DSH_RECALL_EMBEDDER__NAME": "fake"}))

    standin = StandIn()
    thread = threading.Thread(target=standin.serve_forever, daemon=True)
    thread.start()
    try:
        cfg = harness.DeepSeekHarnessConfig(
            model="stand-in", cwd=str(repo), dsh_home=str(dsh_home), patches=(str(patch),),
            base_url=f"http://127.0.0.1:{standin.server_address[1]}", api_key="sk-dummy",
            env={"DSH_TELEMETRY_MODE": "DISABLED", "DSH_PERMISSION_MODE": "danger-full-access"},
            initialize_timeout_seconds=60, request_timeout_seconds=120)
        with harness.DeepSeekHarness(cfg) as h:
            result = h.run("where do we reconcile the ledger balances?")
    finally:
        standin.shutdown()
        standin.server_close()

    # The stand-in offered our tool to the model, then got its result back.
    assert any(TOOL in {t.get("name") for t in r["body"].get("tools") or []}
               for r in standin.requests), "dsh did not mount our MCP server's tools"
    assert result.final_response == "Found it in the ledger module."
    events = _read_session_logs(dsh_home)
    calls = [e for e in events if e.get("type") == "tool/call" and e["data"].get("name") == TOOL]
    assert calls, "the tool call is not in the session log"
    results = [e for e in events if e.get("type") == "tool/result"
               and e["data"]["message"].get("toolCallId") == calls[0]["data"]["callId"]]
    assert results, "the tool result is not in the session log"
    text = json.dumps(results[0]["data"]["message"]["content"], ensure_ascii=False)
    assert not results[0]["data"]["message"].get("isError"), text
    # Only our server could know this path and symbol: the call really reached it.
    assert "ledger/books.py" in text and MARKER in text
    # It built its index under the recall home we passed through the patch's env.
    assert any(recall_home.rglob("index.sqlite"))
