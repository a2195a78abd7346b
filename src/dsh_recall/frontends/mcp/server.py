"""The MCP server on the official `mcp` SDK (2.x low-level Server): stdio or streamable HTTP.

We use the low-level server rather than the decorator front end so the tool schemas are
exactly the plain JSON schemas in tools.py (no generated `$ref`s), and each answer carries
structured content plus a compact text rendering built by render.py.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from ...core.config import Config
from ...core.errors import RecallError
from .handlers import RecallApp, log

INSTRUCTIONS = (
    "dsh-recall brings back exactly the slice of context you need, offline. "
    "code_search: where something lives in the code (use before reading files). "
    "history_search / history_detail: what was said or decided earlier in this session "
    "(after a compaction, or when details are missing); wider only when the user asks. "
    "object_recall: the part of a big offloaded tool result you need. notes_search: the "
    "user's markdown notes. Answers are bounded; follow next_cursor for more."
)


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("dsh-recall")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "0"


def build_server(app: RecallApp) -> Server:
    """A low-level MCP Server whose tools are app.specs, answered by app.call."""

    def tool_list() -> list[types.Tool]:
        out = []
        for spec in app.specs.values():
            out.append(types.Tool(
                name=spec.name, title=spec.title, description=spec.description,
                input_schema=spec.input_schema, output_schema=spec.output_schema,
                annotations=types.ToolAnnotations(
                    title=spec.title, read_only_hint=spec.read_only,
                    destructive_hint=False, idempotent_hint=spec.read_only,
                    open_world_hint=False),
            ))
        return out

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, args = params.name, dict(params.arguments or {})
        try:
            data, text = await anyio.to_thread.run_sync(app.call, name, args)
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

    return Server("dsh-recall", version=_version(), instructions=INSTRUCTIONS,
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                  get_tool_input_schema=input_schema)


def _quiet_logging() -> None:
    # Library loggers default to stderr already; keep them from getting chatty.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)


def run_stdio(workspace: Path | None = None, cfg: Config | None = None,
              config_file: str | None = None) -> None:
    """Serve over stdin/stdout until the client closes the pipe."""
    _quiet_logging()
    app = RecallApp(workspace, cfg, config_file)
    server = build_server(app)
    log(f"serving {len(app.specs)} tools on stdio for {app.workspace}")

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        app.close()


def run_http(port: int, host: str = "127.0.0.1", workspace: Path | None = None,
             cfg: Config | None = None, config_file: str | None = None) -> None:
    """Serve streamable HTTP at http://host:port/mcp (loopback unless told otherwise)."""
    import uvicorn

    _quiet_logging()
    app = RecallApp(workspace, cfg, config_file)
    server = build_server(app)
    asgi = server.streamable_http_app(host=host)
    log(f"serving {len(app.specs)} tools on http://{host}:{port}/mcp for {app.workspace}")
    try:
        uvicorn.run(asgi, host=host, port=port, log_level="warning")
    finally:
        app.close()
