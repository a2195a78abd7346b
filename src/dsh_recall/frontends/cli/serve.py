"""`dsh-recall serve`: the local dashboard on 127.0.0.1 (report figures, index status per
workspace, a search box over every source)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .common import get_config, handle_errors


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8770, show_default=True,
              help="Port on 127.0.0.1 (0: any free port). There is no --host: the dashboard "
                   "answers as you, unfiltered, so it never leaves loopback.")
@click.option("--workspace", "ws", type=click.Path(file_okay=False),
              help="Default workspace for code search (default: the one around the cwd).")
@click.option("--open", "open_browser", is_flag=True, help="Open it in the default browser.")
@click.option("--sessions", "sessions_dir", type=click.Path(file_okay=False), default=None,
              help="dsh session logs for the before / after block (default: $DSH_HOME/sessions).")
@click.pass_context
@handle_errors
def serve(ctx: click.Context, port: int, ws: str | None, open_browser: bool,
          sessions_dir: str | None) -> None:
    """Open the local dashboard: what recall kept out, index freshness, search everything.

    Prints the dashboard's link, which carries this run's token: only a browser that opened
    it (or a client sending 'Authorization: Bearer <token>') is answered."""
    from ...services.code import find_workspace
    from ..web.server import serve as run

    workspace = Path(ws).resolve() if ws else find_workspace(Path(os.getcwd()))
    cfg = get_config(ctx, workspace)
    root = ctx.find_root()
    run(cfg, workspace, port, open_browser,
        sessions_dir=Path(sessions_dir) if sessions_dir else None,
        config_file=root.params.get("config_file") if root.params else None)
