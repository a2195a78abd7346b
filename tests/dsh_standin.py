"""A stand-in for the model endpoint dsh calls, on loopback, scripted per request.

dsh's `deepseek-official` adapter POSTs Anthropic-Messages-style requests to
`/v1/messages` and reads an SSE stream back. `StandIn(brain)` records every request body
and answers with whatever `brain(body)` returns: `say(text)`, `use(tool, input)`, or
`overflow()` (a context-window error, which makes dsh compact), or `{"raw": (content type,
bytes)}` for another wire format. Used by the real-runtime tests (dsh, Claude Code, Codex)
and by bench/dsh_session.py; needs no network.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Reply = dict[str, Any]
Brain = Callable[[dict[str, Any]], Reply]


def say(text: str) -> Reply:
    return {"blocks": [{"type": "text", "text": text}], "stop": "end_turn"}


def use(tool: str, tool_input: dict[str, Any], call_id: str) -> Reply:
    return {"blocks": [{"type": "tool_use", "id": call_id, "name": tool, "input": tool_input}],
            "stop": "tool_use"}


def overflow() -> Reply:
    return {"status": 400, "error": {"type": "invalid_request_error",
                                     "message": "This model's maximum context length is 65536 tokens"}}


def sse(blocks: list[dict[str, Any]], stop: str) -> bytes:
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
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in ev)


class StandIn(ThreadingHTTPServer):
    """Records every request body; answers with `brain(body)`."""

    daemon_threads = True

    def __init__(self, brain: Brain) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.brain = brain
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        server: StandIn = self.server  # type: ignore[assignment]
        with server.lock:
            server.requests.append(body)
            reply = server.brain(body)
        if "raw" in reply:  # another wire format (e.g. OpenAI Responses SSE for Codex)
            content_type, payload = reply["raw"]
            self.send_response(200)
            self.send_header("content-type", content_type)
        elif "error" in reply:
            payload = json.dumps({"type": "error", "error": reply["error"]}).encode()
            self.send_response(reply.get("status", 400))
            self.send_header("content-type", "application/json")
        else:
            payload = sse(reply["blocks"], reply["stop"])
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


# -- reading requests -------------------------------------------------------------------------

def system_text(body: dict[str, Any]) -> str:
    s = body.get("system")
    if isinstance(s, list):
        return "\n".join(b.get("text", "") for b in s if isinstance(b, dict))
    return s if isinstance(s, str) else ""


def blocks(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [c for m in body.get("messages") or [] if isinstance(m.get("content"), list)
            for c in m["content"] if isinstance(c, dict) and c.get("type") == kind]


def result_text(block: dict[str, Any]) -> str:
    c = block.get("content")
    if isinstance(c, str):
        return c
    return "".join(x.get("text", "") for x in c or [] if isinstance(x, dict))


def results(body: dict[str, Any]) -> dict[str, str]:
    """tool_use_id -> the text of its tool_result, as this request carries it."""
    return {b["tool_use_id"]: result_text(b) for b in blocks(body, "tool_result")}


_HARNESS_TEXT = ("Current runtime context", "<system-reminder>", "[dsh-recall]")


def last_user_text(body: dict[str, Any]) -> str:
    """The newest user-typed text (dsh runtime-context snapshots, Claude Code system
    reminders, what the dsh-recall plugin added and tool results skipped)."""
    for m in reversed(body.get("messages") or []):
        if m.get("role") != "user" or not isinstance(m.get("content"), list):
            continue
        texts = [c.get("text", "") for c in m["content"] if isinstance(c, dict)
                 and c.get("type") == "text" and not c.get("text", "").startswith(_HARNESS_TEXT)]
        if texts:
            return texts[-1]
    return ""


def last_is_tool_result(body: dict[str, Any]) -> bool:
    msgs = body.get("messages") or []
    return bool(msgs) and isinstance(msgs[-1].get("content"), list) and any(
        isinstance(c, dict) and c.get("type") == "tool_result" for c in msgs[-1]["content"])


def input_chars(body: dict[str, Any]) -> int:
    """What the model reads: system prompt, tool schemas and messages, as compact JSON
    (dsh's `dsh_session_log` delivery and other envelope fields left out)."""
    return len(json.dumps({k: body.get(k) for k in ("system", "tools", "messages")},
                          ensure_ascii=False, separators=(",", ":")))


# -- running dsh ----------------------------------------------------------------------------

def runtime_available() -> str | None:
    """None when the real dsh runtime can run here, else why not."""
    try:
        import deepseek_harness  # noqa: F401
        from deepseek_harness_runtime import bundled_runtime_path
        bundled_runtime_path()
    except (ImportError, FileNotFoundError) as e:
        return f"dsh runtime not available: {e} (pip install 'dsh-recall[test]')"
    return None


def recall_exe() -> str:
    exe = shutil.which("dsh-recall", path=str(Path(sys.executable).parent))
    assert exe, "dsh-recall must be installed in this environment"
    return exe


@contextmanager
def dsh_session(tmp: Path, brain: Brain, patch_text: str | None, env: dict[str, str] | None = None
                ) -> Iterator[tuple[Any, StandIn, Path]]:
    """A real dsh session in `tmp/repo` (DSH_HOME `tmp/dsh-home`) against a stand-in that
    answers with `brain`, with `patch_text` as the cordis patch (None: stock dsh).
    Yields (session, stand-in, dsh home)."""
    import deepseek_harness as harness

    repo = tmp / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    dsh_home = tmp / "dsh-home"
    dsh_home.mkdir(exist_ok=True)
    patches: tuple[str, ...] = ()
    if patch_text is not None:
        patch = tmp / "cordis.patch.yml"
        patch.write_text(patch_text)
        patches = (str(patch),)
    standin = StandIn(brain)
    thread = threading.Thread(target=standin.serve_forever, daemon=True)
    thread.start()
    try:
        cfg = harness.DeepSeekHarnessConfig(
            model="stand-in", cwd=str(repo), dsh_home=str(dsh_home), patches=patches,
            base_url=standin.url, api_key="sk-dummy",
            env={"DSH_TELEMETRY_MODE": "DISABLED", "DSH_PERMISSION_MODE": "danger-full-access",
                 **(env or {})},
            initialize_timeout_seconds=60, request_timeout_seconds=180)
        with harness.DeepSeekHarness(cfg) as h:
            yield h.start_session(), standin, dsh_home
    finally:
        standin.shutdown()
        standin.server_close()


def session_events(dsh_home: Path) -> list[dict[str, Any]]:
    """Every event of every session log under `dsh_home` (plain or zstd frames)."""
    import io

    import zstandard

    events: list[dict[str, Any]] = []
    for f in sorted((dsh_home / "sessions").rglob("session.v4.jsonl*")):
        raw = f.read_bytes()
        if f.suffix == ".zstd":
            raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True).read()
        events += [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    return events


def with_usage(reply: Reply, input_tokens: int) -> Reply:
    """`reply` (from `say`/`use`) as a raw SSE answer whose usage reports `input_tokens`:
    dsh's compaction reads the provider-reported prompt size, which `sse` fixes at 10.
    Error replies pass through unchanged."""
    if "blocks" not in reply:
        return reply
    payload = sse(reply["blocks"], reply["stop"]).replace(
        b'"usage": {"input_tokens": 10,', f'"usage": {{"input_tokens": {int(input_tokens)},'.encode(), 1)
    return {"raw": ("text/event-stream", payload)}


def listed_chars(tools: list[Any], instructions: str | None, server: str = "recall") -> int:
    """What dsh adds to every request for one MCP server's tool list, in chars: each tool as
    `{name: mcp__<server>__<tool>, description, input_schema}` in compact JSON, plus the
    server's instructions section of the system prompt. `tools` as an MCP client lists
    them (name, description, input_schema). Shared by the tests and bench/mcp_budget.py."""
    chars = sum(len(json.dumps({"name": f"mcp__{server}__{t.name}", "description": t.description,
                                "input_schema": t.input_schema},
                               ensure_ascii=False, separators=(",", ":"))) for t in tools)
    if instructions:
        chars += len(f"### MCP server: {server}\n\n{instructions}")
    return chars
