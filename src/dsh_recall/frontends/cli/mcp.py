"""`dsh-recall mcp`: serve the recall tools over MCP (stdio by default, or streamable HTTP)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ...services.code import find_workspace
from .common import get_config, handle_errors


@click.command()
@click.option("--workspace", "ws", type=click.Path(file_okay=False),
              help="Workspace root to search (default: the indexed or version-controlled directory enclosing the cwd).")
@click.option("--http", "port", type=int, default=None,
              help="Serve streamable HTTP on this port (at /mcp) instead of stdio.")
@click.option("--host", default=None,
              help="Interface for --http (default: mcp.host from config, 127.0.0.1). Every "
                   "HTTP client sends 'Authorization: Bearer <token>', loopback too: mcp.token, "
                   "else a per-run token shown on stderr (off loopback: one generated once and "
                   "kept in <recall home>/mcp-token).")
@click.option("--channel", default=None,
              help="Access channel key of the session this server answers for (default: "
                   "$DSH_RECALL_CHANNEL); decides which notes, history and objects it shows.")
@click.option("--allow-workspace", "allow", multiple=True, type=click.Path(file_okay=False),
              help="A directory clients may switch their workspace to (repeatable).")
@click.option("--tools", "tools", type=click.Choice(["full", "compact"]), default="full",
              show_default=True,
              help="Tool profile: `full` offers every tool; `compact` one `recall` tool with "
                   "short schemas (about a quarter of the per-request tokens; what "
                   "`integrate dsh patch` mounts).")
@click.option("--watch", is_flag=True,
              help="Keep the workspace's code index and the notes indexes fresh as files "
                   "change (like `dsh-recall watch`, in the server process).")
@click.pass_context
@handle_errors
def mcp(ctx: click.Context, ws: str | None, port: int | None, host: str | None,
        channel: str | None, allow: tuple[str, ...], tools: str, watch: bool) -> None:
    """Run the MCP server. Logs go to stderr; stdout belongs to the protocol."""
    from ..mcp import server  # the SDK is only imported when serving

    workspace = Path(ws).resolve() if ws else find_workspace(Path(os.getcwd()))
    cfg = get_config(ctx, workspace)
    root = ctx.find_root()
    cfg_file = root.params.get("config_file") if root.params else None
    if watch:
        from ...services.indexing import watch as watch_mod
        watch_mod.start_thread(watch_mod.build(cfg, [workspace]), server.log)
    if port is None:
        server.run_stdio(workspace, cfg, cfg_file, channel=channel, allow=allow, tools=tools)
    else:
        server.run_http(port, host or cfg.mcp.host, workspace, cfg, cfg_file,
                        channel=channel, allow=allow, tools=tools)
