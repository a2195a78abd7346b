"""The MCP server on the official `mcp` SDK (2.x low-level Server): stdio or streamable HTTP.

We use the low-level server rather than the decorator front end so the tool schemas are
exactly the plain JSON schemas in tools.py (no generated `$ref`s), and each answer carries
structured content plus a compact text rendering built by render.py.
"""

from __future__ import annotations

import gc
import hmac
import logging
import os
import secrets
import socket
import sys
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from ...core.config import Config
from ...core.errors import RecallError
from ...core.paths import recall_home
from ..admission import Pending, authenticated, guard_protocol
from .handlers import RecallApp, log
from .render import one_line

# The instructions of each tool profile are in handlers.INSTRUCTIONS.


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("dsh-recall")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "0"


def _connection_of(ctx: Any) -> Any:
    """The object that lives as long as one MCP session: the SDK makes a ServerSession per
    request, around the connection's state object."""
    sess = getattr(ctx, "session", None)
    return getattr(sess, "_connection", None) or sess


def build_server(app: RecallApp, one_client: bool = False) -> Server:
    """A low-level MCP Server whose tools are app.specs, answered by app.call.

    `one_client`: every request is the same client's (stdio: one peer per process), so what
    `configure` set lasts for the process. Without it a client is one MCP session: a
    handshake-era connection, or a request of a client of the stateless era, which
    carries no session for its settings to live in."""

    def tool_list() -> list[types.Tool]:
        out = []
        for spec in app.specs.values():
            out.append(types.Tool(
                name=spec.name, title=spec.title, description=spec.description,
                input_schema=spec.input_schema, output_schema=spec.output_schema or None,
                annotations=types.ToolAnnotations(
                    title=spec.title, read_only_hint=spec.read_only,
                    destructive_hint=bool(spec.annotations.get("destructive")),
                    idempotent_hint=spec.read_only,
                    open_world_hint=False),
            ))
        return out

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    tracked: weakref.WeakSet[Any] = weakref.WeakSet()

    def drop(conn: Any) -> None:
        app.drop_client(conn)
        gc.collect()  # a closed index's memory-mapped vector file lets go of its fd only then

    def client_of(ctx: Any) -> Any:
        """The session's Client; the first time, freed again when the session ends (the
        client's DELETE, the idle limit, a dropped stream): each holds a warm code index."""
        if one_client:
            return app.default
        conn = _connection_of(ctx)
        client = app.client_for(conn)
        stack = getattr(conn, "exit_stack", None)
        if stack is not None and conn not in tracked:
            tracked.add(conn)

            async def free() -> None:
                await anyio.to_thread.run_sync(drop, conn)

            stack.push_async_callback(free)
        return client

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, args = params.name, params.arguments
        # Each MCP session has its own settings: one client's `configure` never reaches another.
        client = client_of(ctx)
        try:
            data, text = await anyio.to_thread.run_sync(client.call, name, args)
        except RecallError as e:
            # Tool errors go back as results so the model can read them and correct itself:
            # one line, whatever the message quoted (a query, a path, a file's line).
            return types.CallToolResult(content=[types.TextContent(text=f"error: {one_line(e)}")],
                                        is_error=True)
        except Exception as e:  # never let one bad call take the server down
            log(f"tool {name} failed: {type(e).__name__}: {e}")
            return types.CallToolResult(
                content=[types.TextContent(text=f"internal error in {name}: {type(e).__name__}: "
                                                f"{one_line(e)}")],
                is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    structured_content=data)

    def input_schema(name: str) -> dict[str, Any] | None:
        spec = app.specs.get(name)
        return spec.input_schema if spec else None

    return Server("dsh-recall", version=_version(), instructions=app.instructions,
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                  get_tool_input_schema=input_schema)


def _quiet_logging() -> None:
    # Library loggers default to stderr already; keep them from getting chatty.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)


class _LockedWriter:
    """stdout for the stdio transport: each line written and flushed whole under one lock,
    so answers of the SDK and our parse errors never interleave."""

    def __init__(self, f: Any):
        self.f = f
        self.lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self.lock:
            await self.f.write(text)
            await self.f.flush()

    async def flush(self) -> None:
        return None


class _CleanLines:
    """stdin for the stdio transport: every JSON line re-encoded with valid Unicode only
    (a `\\ud800` escape is legal JSON, but no valid text), and a line that is not JSON
    answered with a JSON-RPC parse error instead of silence."""

    def __init__(self, src: Any, out: _LockedWriter):
        self.src, self.out = src, out

    def __aiter__(self) -> Any:
        return self._lines()

    async def _lines(self) -> Any:
        import json

        from ...core.clean import clean_text

        def clean(v: Any) -> Any:
            if isinstance(v, str):
                return clean_text(v)
            if isinstance(v, list):
                return [clean(x) for x in v]
            if isinstance(v, dict):
                return {clean_text(k): clean(x) for k, x in v.items()}
            return v

        async for line in self.src:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                await self._error(None, -32700, "Parse error: each line must be one JSON-RPC message")
                continue
            bad = envelope_error(obj)
            if bad is not None:
                # The SDK drops a malformed envelope unanswered: the client would wait forever.
                msg_id, code, message = bad
                if msg_id is not _NOTIFICATION:
                    await self._error(msg_id, code, message)
                else:
                    log(f"ignored a malformed notification: {message}")
                continue
            yield json.dumps(clean(obj), ensure_ascii=False)

    async def _error(self, msg_id: Any, code: int, message: str) -> None:
        import json

        await self.out.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {
            "code": code, "message": message}}) + "\n")


_NOTIFICATION = object()  # envelope_error's id for a message that must not be answered


def envelope_error(obj: Any) -> tuple[Any, int, str] | None:
    """(id to answer, JSON-RPC code, message) for a message that is no valid JSON-RPC 2.0
    envelope, or None. The id is the message's own when it is a valid one, else null;
    `_NOTIFICATION` when the message is a notification (never answered). Pure."""
    if not isinstance(obj, dict):
        return None, -32600, "Invalid Request: a message is one JSON object (no batches)"
    has_id = "id" in obj
    raw_id = obj.get("id")
    valid_id = isinstance(raw_id, str) or (isinstance(raw_id, int) and not isinstance(raw_id, bool))
    if has_id and not valid_id:
        return None, -32600, "Invalid Request: id must be a string or an integer"
    reply = raw_id if has_id else _NOTIFICATION
    if obj.get("jsonrpc") != "2.0":
        return (raw_id if has_id else None), -32600, 'Invalid Request: "jsonrpc" must be "2.0"'
    if "method" not in obj:
        if has_id and ("result" in obj) != ("error" in obj):
            return None  # a response to a request of ours
        return (raw_id if has_id else None), -32600, (
            'Invalid Request: a request needs "method" (a response, "result" or "error")')
    if not isinstance(obj["method"], str):
        return reply, -32600, 'Invalid Request: "method" must be a string'
    if "params" in obj and not isinstance(obj["params"], dict):
        return reply, -32602, 'Invalid params: "params" must be an object'
    return None


def _stdio_files() -> tuple[Any, Any, Any]:
    """The process's stdin / stdout as async text files, claimed as the SDK claims them
    (fd 0 and 1 diverted while serving, so stray output cannot corrupt the protocol)."""
    from io import TextIOWrapper

    try:
        from mcp.server import stdio as sdk_stdio

        in_buf, restore_in = sdk_stdio._claim_fd(0, sys.stdin, "rb", sdk_stdio._open_stdin_diversion)
        out_buf, restore_out = sdk_stdio._claim_fd(1, sys.stdout, "wb", sdk_stdio._open_stdout_diversion)
        wrap: Any = sdk_stdio._UnownedTextWrapper
    except (ImportError, AttributeError):  # pragma: no cover - an SDK without the claim helper
        in_buf, out_buf = sys.stdin.buffer, sys.stdout.buffer
        restore_in = restore_out = None
        wrap = TextIOWrapper

    def restore() -> None:
        for r in (restore_out, restore_in):
            if r is not None:
                r()

    stdin = anyio.wrap_file(wrap(in_buf, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(wrap(out_buf, encoding="utf-8"))
    return stdin, stdout, restore


def run_stdio(workspace: Path | None = None, cfg: Config | None = None,
              config_file: str | None = None, channel: str | None = None,
              allow: Iterable[str] = (), tools: str = "full") -> None:
    """Serve over stdin/stdout until the client closes the pipe; `tools`: the tool profile
    (full or compact)."""
    _quiet_logging()
    app = RecallApp(workspace, cfg, config_file, channel=channel, allow=allow, tools=tools)
    for n in app.cfg.notices:
        log(n)
    server = build_server(app, one_client=True)
    log(f"serving {len(app.specs)} tools ({app.profile}) on stdio for {app.workspace}")

    async def main() -> None:
        stdin, stdout, restore = _stdio_files()
        out = _LockedWriter(stdout)
        try:
            # type: ignore: the SDK types its streams as anyio files; these wrappers have
            # the methods it calls (async iteration, write, flush).
            async with stdio_server(_CleanLines(stdin, out), out) as (read, write):  # type: ignore[arg-type]
                await server.run(read, write, server.create_initialization_options())
        finally:
            restore()

    try:
        anyio.run(main)
    finally:
        app.close()
        leave_if_busy(app)


def leave_if_busy(app: RecallApp) -> None:
    """After app.close(): if a background job or a search's vector ranking is still running
    (inside onnxruntime, perhaps), leave now without finalizing; finalizing under it made
    onnxruntime abort the process (SIGABRT, "terminate called without an active exception")
    when a client closed while its background index job embedded. Committed SQLite writes
    are durable and an open one rolls back on the next open, as for the CLI's
    _leave_workers."""
    import threading

    hybrid = sys.modules.get("dsh_recall.services.hybrid")
    ranking = hybrid is not None and any(
        t.is_alive() and t.name == hybrid.VECTOR_THREAD for t in threading.enumerate())
    if app.background.stop(0.0) and not ranking:
        return
    log("a background job is still inside a batch: leaving without waiting for it")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_FILE = "mcp-token"


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


HOW_TO_SEND = "clients must send 'Authorization: Bearer <token>'"


def http_token(cfg: Config, host: str, home: Path | None = None) -> tuple[str, str | None]:
    """(token HTTP clients must send, a line to show once) for a server bound to `host`.

    Every HTTP server asks for a token, loopback included: loopback is not the user (another
    uid, a container sharing the network namespace, a sandboxed agent allowed loopback TCP,
    a model with an HTTP fetch tool all reach 127.0.0.1). The user's `mcp.token` (config or
    `DSH_RECALL_MCP__TOKEN`) wins. Without one, a loopback server makes a fresh token per
    run and shows it on stderr; off loopback one is generated, kept 0600 in the recall home
    and shown once (later starts reuse it).
    """
    if cfg.mcp.token:
        return cfg.mcp.token, None
    if is_loopback(host):
        token = secrets.token_urlsafe(32)
        return token, (f"this run's access token (set mcp.token or DSH_RECALL_MCP__TOKEN for a "
                       f"lasting one): {token}\n{HOW_TO_SEND}")
    path = (home or recall_home()) / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token, f"{HOW_TO_SEND}; the token is in {path}"
    except OSError:
        pass
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, (f"generated an access token (shown once; kept in {path}): {token}\n"
                   f"{HOW_TO_SEND}")


def allowed_hosts(host: str, port: int, extra: Iterable[str]) -> tuple[list[str], list[str]]:
    """Host and Origin header values the server accepts: loopback, the bound address, this
    machine's names and addresses when bound to all interfaces, and the user's extras."""
    names = set(LOOPBACK) | {host}
    if host in ("0.0.0.0", "::", ""):
        try:
            hn = socket.gethostname()
            names |= {hn, socket.getfqdn()}
            names |= set(socket.gethostbyname_ex(hn)[2])
        except OSError:
            pass
    hosts: list[str] = []
    origins: list[str] = []
    for n in sorted(names | set(extra)):
        if not n or n in ("0.0.0.0", "::"):
            continue
        h = f"[{n}]" if ":" in n and not n.startswith("[") else n
        if ":" in n and not h.startswith("["):
            hosts.append(n)  # host:port written by the user
            origins.append(f"http://{n}")
            continue
        hosts += [h, f"{h}:*"]
        origins += [f"http://{h}", f"http://{h}:*", f"https://{h}", f"https://{h}:*"]
    return hosts, origins


UNAUTHORIZED = (b'{"error": "unauthorized: this MCP server asks every client, loopback too, for '
                b"'Authorization: Bearer <token>': mcp.token, else the token it printed on "
                b'stderr when it started"}')


class BearerAuth:
    """ASGI wrapper: every HTTP request must carry `Authorization: Bearer <token>`. A
    connection whose request carried it leaves `pending` (admission.py): only connections
    that never showed the token are timed out and bounded."""

    def __init__(self, app: Any, token: str, pending: Pending | None = None):
        self.app = app
        self.token = token.encode("utf-8")
        self.pending = pending

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            got = b""
            for k, v in scope.get("headers") or []:
                if k.lower() == b"authorization":
                    got = v
            want = b"Bearer " + self.token
            if not hmac.compare_digest(got, want):
                body = UNAUTHORIZED
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            authenticated(self.pending, scope)
        await self.app(scope, receive, send)


# An MCP session nobody used for this long is closed (the client re-initializes on its 404).
SESSION_IDLE_S = 600.0
FDS_PER_SESSION = 8  # a warm code index (SQLite, its WAL, the vector file) and the socket


def max_sessions() -> int:
    """How many MCP sessions may be open at once: what the open-file limit leaves, at most
    64 (each session holds its own warm code index)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 16
    except (ImportError, OSError, ValueError):  # no resource module (Windows)
        soft = 1024
    return max(2, min(64, (soft - 64) // FDS_PER_SESSION))


class SessionLimit:
    """ASGI wrapper: the SDK's terse 503 at the session limit, said so a person can act."""

    def __init__(self, app: Any, limit: int, idle_s: float):
        self.app = app
        self.body = (f'{{"jsonrpc": "2.0", "id": null, "error": {{"code": -32603, "message": '
                     f'"this MCP server has {limit} sessions open, its limit: close one (an MCP '
                     f'client closes its session on exit) or wait; a session unused for '
                     f'{int(idle_s)} s is closed"}}}}').encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        refused = False

        async def watch(msg: Any) -> None:
            nonlocal refused
            if msg["type"] == "http.response.start" and msg.get("status") == 503:
                refused = True
                await send({"type": "http.response.start", "status": 503, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(self.body)).encode())]})
                await send({"type": "http.response.body", "body": self.body})
                return
            if not refused:
                await send(msg)

        await self.app(scope, receive, watch)


def build_http_app(app: RecallApp, host: str, port: int, *, idle_s: float = SESSION_IDLE_S,
                   limit: int | None = None) -> Any:
    """The ASGI app: streamable HTTP with Host / Origin checks always on, a bearer token
    for every client (loopback too), and a bounded number of sessions, each closed (and
    its Client freed) when its client leaves or after `idle_s` unused."""
    from mcp.server.transport_security import TransportSecuritySettings

    server = build_server(app)
    hosts, origins = allowed_hosts(host, port, app.cfg.mcp.allowed_hosts)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=hosts, allowed_origins=origins)
    limit = limit or max_sessions()
    asgi = server.streamable_http_app(host=host, transport_security=security,
                                      session_idle_timeout=idle_s, max_sessions=limit)
    token, shown = http_token(app.cfg, host)
    if shown:
        log(shown)
    return BearerAuth(SessionLimit(asgi, limit, idle_s), token, Pending())


def run_http(port: int, host: str = "127.0.0.1", workspace: Path | None = None,
             cfg: Config | None = None, config_file: str | None = None,
             channel: str | None = None, allow: Iterable[str] = (), tools: str = "full") -> None:
    """Serve streamable HTTP at http://host:port/mcp (loopback unless told otherwise)."""
    import uvicorn

    _quiet_logging()
    app = RecallApp(workspace, cfg, config_file, channel=channel, allow=allow, tools=tools)
    for n in app.cfg.notices:
        log(n)
    asgi = build_http_app(app, host, port)
    log(f"serving {len(app.specs)} tools ({app.profile}) on http://{host}:{port}/mcp for {app.workspace}")
    try:
        # Connections that never show the token are timed out and bounded (admission.py).
        uvicorn.run(asgi, host=host, port=port, log_level="warning",
                    http=guard_protocol(asgi.pending))
    finally:
        app.close()
        leave_if_busy(app)
