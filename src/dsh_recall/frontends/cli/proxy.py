"""`dsh-recall proxy -- COMMAND ARGS...`: wrap another stdio MCP server for any MCP client.

The proxy starts COMMAND as an MCP server, lists its tools (plus one `recall` tool of its
own) and forwards every call. Big text blocks of a result are offloaded to the object store
and come back as head + note + tail; images and other blocks, `structured_content` and
`is_error` pass through unchanged. The MCP side logs to stderr only: stdout is the protocol.

The proxy answers for one access channel (`--channel`, else `$DSH_RECALL_CHANNEL`), resolved
once when it starts, as `dsh-recall mcp` does: its `recall` tool reads only objects that
channel may see (another channel's id is answered as an unknown one), and it offloads only
what that channel could recall.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import click

from ...core.config import ObjectsConfig, ScrubConfig
from ...core.errors import RecallError
from ...services.access.channel import Viewer, channel_key_from_env
from ...services.objects import ObjectService
from .common import get_config

RECALL_TOOL = "recall"
RECALL_DESCRIPTION = (
    "Get back an offloaded tool result (the note left in an output names its id). "
    "With only id: its first 8,000 chars. With start and count: that code-point range "
    "(at most 24,000 per call). With query: up to 20 matching lines with line numbers and "
    "offsets (literal first, then fuzzy); an offset feeds straight back into start."
)
RECALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "Object id, 8 hex chars."},
        "start": {"type": "integer", "minimum": 0, "description": "First code point."},
        "count": {"type": "integer", "minimum": 1, "maximum": 24000},
        "query": {"type": "string", "description": "Words to look for in the object."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20},
    },
    "required": ["id"],
}


def recall_answer(service: ObjectService, args: dict[str, Any], viewer: Viewer) -> str:
    """The recall tool's text answer (a range, or matching lines as `line:@offset: text`),
    of an object `viewer` may see (any other id: the unknown-id error)."""
    obj_id = str(args.get("id", ""))
    query = args.get("query")
    if query:
        res = service.search_in(obj_id, str(query), int(args.get("limit") or 20), viewer=viewer)
        if not res.matches:
            return f"no line of {res.id} matches {query!r}"
        return "\n".join(f"{m.line}:@{m.offset}: {m.text}" for m in res.matches)
    start = args.get("start")
    count = args.get("count")
    got = service.get(obj_id, None if start is None else int(start),
                      None if count is None else int(count), viewer=viewer)
    end = got.start + len(got.text)
    return f"{got.text}\n[{got.id}: chars {got.start}-{end} of {got.total}]"


async def serve_proxy(argv: list[str], cfg: ObjectsConfig, session: str | None = None,
                      viewer: Viewer | None = None, scrub: ScrubConfig | None = None) -> None:
    """Run the proxy on this process's stdio until the client goes away. `viewer`: the
    channel it answers for (None: the user, unfiltered)."""
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.server import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError

    service = ObjectService(cfg, scrub=scrub)  # the user's [scrub] keep list holds here too
    viewer = viewer or Viewer.user()
    channel = viewer.key
    # A pointer the client could not follow would only lose it the output: a channel that
    # may not see its own objects (no key while a session map is configured) keeps them inline.
    offload = viewer.can_see(channel)
    if not offload:
        print("dsh-recall proxy: this channel could not recall what it offloads "
              f"({viewer.channel.reason}); results pass through whole. Start the proxy with "
              "--channel KEY (or $DSH_RECALL_CHANNEL) of a key the session map knows.",
              file=sys.stderr)
    session = session or f"proxy-{uuid.uuid4().hex[:12]}"
    # The wrapped server is ours to run: it gets our whole environment, not the SDK's subset.
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    recall_tool = types.Tool(name=RECALL_TOOL, description=RECALL_DESCRIPTION,
                             input_schema=RECALL_SCHEMA)

    def text_result(text: str, error: bool = False) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    is_error=error)

    async with Client(params) as child:
        names: set[str] = set()

        async def list_tools(ctx: Any, p: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            cursor = p.cursor if p else None
            page = await child.list_tools(cursor=cursor)
            tools = [t for t in page.tools if t.name != RECALL_TOOL]
            names.update(t.name for t in tools)
            if cursor is None:
                tools.append(recall_tool)
            return types.ListToolsResult(tools=tools, next_cursor=page.next_cursor)

        async def call_tool(ctx: Any, p: types.CallToolRequestParams) -> types.CallToolResult:
            args = dict(p.arguments or {})
            if p.name == RECALL_TOOL:
                try:
                    return text_result(recall_answer(service, args, viewer))
                except RecallError as e:
                    return text_result(str(e), error=True)
            try:
                res = await child.call_tool(p.name, args)
            except MCPError as e:
                return text_result(f"{p.name} failed: {e}", error=True)
            content = []
            for block in res.content:
                if isinstance(block, types.TextContent) and offload:
                    try:
                        put = service.put(block.text, session=session, tool=p.name,
                                          channel=channel)
                    except RecallError as e:  # the store is broken: pass the result as is
                        print(f"dsh-recall proxy: {e}", file=sys.stderr)
                        put = None
                    if put is not None and put.offloaded:
                        block = types.TextContent(type="text", text=put.inline,
                                                  annotations=block.annotations)
                content.append(block)
            return types.CallToolResult(content=content, structured_content=res.structured_content,
                                        is_error=res.is_error)

        server = Server("dsh-recall-proxy", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    service.close()


@click.command("proxy", context_settings={"ignore_unknown_options": True,
                                          "allow_interspersed_args": False})
@click.option("--session", default=None,
              help="Session name for offloaded results (default: one per proxy run).")
@click.option("--channel", default=None, metavar="KEY",
              help="Access channel the proxy answers for (default: $DSH_RECALL_CHANNEL; "
                   "none: the user, unless a session map is configured).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.pass_context
def proxy(ctx: click.Context, session: str | None, channel: str | None,
          command: tuple[str, ...]) -> None:
    """Wrap the stdio MCP server COMMAND: forward its tools, offload big results, add recall.

    Example: dsh-recall proxy -- npx -y @modelcontextprotocol/server-filesystem /repo
    """
    import anyio

    try:
        # As `dsh-recall mcp` does: the user's config with this folder's, resolved once.
        cfg = get_config(ctx, workspace=Path.cwd())
    except RecallError as e:
        click.echo(f"dsh-recall: {e}", err=True)
        sys.exit(1)
    viewer = Viewer(cfg, channel or channel_key_from_env())
    anyio.run(serve_proxy, list(command), cfg.objects, session, viewer, cfg.scrub)
