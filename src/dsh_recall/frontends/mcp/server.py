"""The MCP server on the official `mcp` SDK (2.x low-level Server): stdio or streamable HTTP.

We use the low-level server rather than the decorator front end so the tool schemas are
exactly the plain JSON schemas in tools.py (no generated `$ref`s), and each answer carries
structured content plus a compact text rendering built by render.py.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import socket
import sys
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
from .handlers import RecallApp, log

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


def build_server(app: RecallApp) -> Server:
    """A low-level MCP Server whose tools are app.specs, answered by app.call."""

    def tool_list() -> list[types.Tool]:
        out = []
        for spec in app.specs.values():
            out.append(types.Tool(
                name=spec.name, title=spec.title, description=spec.description,
                input_schema=spec.input_schema, output_schema=spec.output_schema or None,
                annotations=types.ToolAnnotations(
                    title=spec.title, read_only_hint=spec.read_only,
                    destructive_hint=False, idempotent_hint=spec.read_only,
                    open_world_hint=False),
            ))
        return out

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, args = params.name, params.arguments
        # Each MCP session has its own settings: one client's `configure` never reaches another.
        client = app.client_for(_connection_of(ctx))
        try:
            data, text = await anyio.to_thread.run_sync(client.call, name, args)
        except RecallError as e:
            # Tool errors go back as results so the model can read them and correct itself.
            return types.CallToolResult(content=[types.TextContent(text=f"error: {e}")],
                                        is_error=True)
        except Exception as e:  # never let one bad call take the server down
            log(f"tool {name} failed: {type(e).__name__}: {e}")
            return types.CallToolResult(
                content=[types.TextContent(text=f"internal error in {name}: {type(e).__name__}: {e}")],
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
                await self.out.write(json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32700, "message": "Parse error: each line must be one JSON-RPC message"}})
                    + "\n")
                continue
            yield json.dumps(clean(obj), ensure_ascii=False)


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
    server = build_server(app)
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


LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_FILE = "mcp-token"


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def http_token(cfg: Config, host: str, home: Path | None = None) -> tuple[str | None, str | None]:
    """(token HTTP clients must send, a line to show once) for a server bound to `host`.

    The user's `mcp.token` (config or `DSH_RECALL_MCP__TOKEN`) wins. Off loopback a token is
    required: without one set, one is generated, kept 0600 in the recall home and shown once
    (later starts reuse it). On loopback no token is asked unless the user set one.
    """
    if cfg.mcp.token:
        return cfg.mcp.token, None
    if is_loopback(host):
        return None, None
    path = (home or recall_home()) / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token, f"clients must send 'Authorization: Bearer <token>'; the token is in {path}"
    except OSError:
        pass
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, (f"generated an access token (shown once; kept in {path}): {token}\n"
                   "clients must send 'Authorization: Bearer <token>'")


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


class BearerAuth:
    """ASGI wrapper: every HTTP request must carry `Authorization: Bearer <token>`."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token.encode("utf-8")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            got = b""
            for k, v in scope.get("headers") or []:
                if k.lower() == b"authorization":
                    got = v
            want = b"Bearer " + self.token
            if not hmac.compare_digest(got, want):
                body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def build_http_app(app: RecallApp, host: str, port: int) -> Any:
    """The ASGI app: streamable HTTP with Host / Origin checks always on, and a bearer token
    off loopback (or whenever the user set one)."""
    from mcp.server.transport_security import TransportSecuritySettings

    server = build_server(app)
    hosts, origins = allowed_hosts(host, port, app.cfg.mcp.allowed_hosts)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=hosts, allowed_origins=origins)
    asgi = server.streamable_http_app(host=host, transport_security=security)
    token, shown = http_token(app.cfg, host)
    if shown:
        log(shown)
    return BearerAuth(asgi, token) if token else asgi


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
        uvicorn.run(asgi, host=host, port=port, log_level="warning")
    finally:
        app.close()
