"""`dsh-recall worker`: the long-lived process the dsh native plugin talks to.

JSON lines over stdio (see frontends/dsh/loop.py); started by the plugin, not by hand.
"""

from __future__ import annotations

import click


@click.command()
@click.option("--dsh-home", default=None, type=click.Path(file_okay=False),
              help="Where dsh keeps its sessions (default: $DSH_HOME, else ~/.dsh).")
@click.option("--idle", "idle_s", default=0.5, type=click.FloatRange(0.05, 60),
              help="Seconds of quiet before deferred imports run, and their slice length.")
@click.pass_context
def worker(ctx: click.Context, dsh_home: str | None, idle_s: float) -> None:
    """Serve the dsh plugin (JSON lines on stdin/stdout) until stdin closes."""
    from ..dsh import loop
    from ..dsh.worker import Worker

    root = ctx.find_root()
    cfg_file = root.params.get("config_file") if root.params else None
    loop.main(Worker(dsh_home=dsh_home, config_file=cfg_file), idle_s)
